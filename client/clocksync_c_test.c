/*
 * client/clocksync_c_test.c: compiled as C11, so it proves that
 * client/clocksync.h and shm/shm_layout.h are valid C. It writes a
 * segment the way a C writer would (plain struct, __atomic stores following
 * the seqlock protocol of shm_layout.h, temporary name + rename) and drives
 * the C API against it: open errors, clocksync_at/now, staleness, options,
 * strerror; on x86-64 also a TSC section and clocksync_now through it,
 * unless the options disable the TSC.
 */
#define _GNU_SOURCE

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "client/clocksync.h"

/* The C view of the layout agrees with the C++ static_asserts. */
_Static_assert(sizeof(clocksync_shm_header) == 64, "header size");
_Static_assert(sizeof(clocksync_shm_mapping) == 64, "mapping size");
_Static_assert(_Alignof(clocksync_shm_mapping) == 64, "mapping alignment");
_Static_assert(sizeof(clocksync_shm_tsc) == 64, "TSC section size");
_Static_assert(sizeof(clocksync_shm) == 192, "segment size");
_Static_assert(offsetof(clocksync_shm, tsc) == 128, "TSC section offset");
_Static_assert(offsetof(clocksync_shm, mapping) == 64, "mapping offset");
_Static_assert(offsetof(clocksync_shm_mapping, rate_adj_q64) == 24,
               "rate offset");
_Static_assert(offsetof(clocksync_shm_mapping, bound_growth_q36) == 40,
               "growth offset");
_Static_assert(offsetof(clocksync_shm_mapping, generation) == 56,
               "generation offset");

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#define CHECK_EQ_I64(a, b)                                              \
  do {                                                                  \
    long long a_ = (long long)(a), b_ = (long long)(b);                 \
    if (a_ != b_) {                                                     \
      fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld vs %lld)\n", \
              __FILE__, __LINE__, #a, #b, a_, b_);                      \
      ++failures;                                                       \
    }                                                                   \
  } while (0)

static const int64_t kSecondNs = 1000000000;

/* Writes a segment at `path`: created at a temporary name, renamed over the
 * path. With tsc_error_ns > 0, also a TSC section that maps every TSC value
 * to raw time tsc_raw_ns with that error. Returns 0 on success. */
static int write_segment(const char* path, int64_t anchor_raw_ns,
                         int64_t anchor_global_ns, int64_t bound_ns,
                         int64_t update_raw_ns, int64_t tsc_raw_ns,
                         int64_t tsc_error_ns) {
  char temp[4096 + 16];
  if (snprintf(temp, sizeof(temp), "%s.XXXXXX", path) >= (int)sizeof(temp)) {
    return -1;
  }
  int fd = mkstemp(temp);
  if (fd < 0) return -1;
  if (ftruncate(fd, sizeof(clocksync_shm)) != 0) return -1;
  clocksync_shm* shm = mmap(NULL, sizeof(clocksync_shm), PROT_READ | PROT_WRITE,
                            MAP_SHARED, fd, 0);
  close(fd);
  if (shm == MAP_FAILED) return -1;
  memset(shm, 0, sizeof(*shm));
  shm->header.magic = CLOCKSYNC_SHM_MAGIC;
  shm->header.layout_version = CLOCKSYNC_SHM_LAYOUT_VERSION;
  shm->header.segment_size = sizeof(clocksync_shm);
  shm->header.mapping_offset = offsetof(clocksync_shm, mapping);
  shm->header.writer_pid = (int32_t)getpid();

  /* The seqlock write protocol, in C. */
  clocksync_shm_mapping* m = &shm->mapping;
  uint64_t seq = __atomic_load_n(&m->seq, __ATOMIC_RELAXED);
  __atomic_store_n(&m->seq, seq + 1, __ATOMIC_RELAXED);
  __atomic_store_n(&m->anchor_raw_ns, anchor_raw_ns, __ATOMIC_RELEASE);
  __atomic_store_n(&m->anchor_global_ns, anchor_global_ns, __ATOMIC_RELEASE);
  __atomic_store_n(&m->rate_adj_q64, (int64_t)0, __ATOMIC_RELEASE);
  __atomic_store_n(&m->bound_at_anchor_ns, bound_ns, __ATOMIC_RELEASE);
  __atomic_store_n(&m->bound_growth_q36, (uint32_t)0, __ATOMIC_RELEASE);
  __atomic_store_n(&m->status, (uint16_t)CLOCKSYNC_STATE_SYNCED,
                   __ATOMIC_RELEASE);
  __atomic_store_n(&m->depth, (uint16_t)1, __ATOMIC_RELEASE);
  __atomic_store_n(&m->update_raw_ns, update_raw_ns, __ATOMIC_RELEASE);
  __atomic_store_n(&m->generation, (uint64_t)1, __ATOMIC_RELEASE);
  __atomic_store_n(&m->seq, seq + 2, __ATOMIC_RELEASE);
  if (tsc_error_ns > 0) {
    /* Rate 0 and every tick valid: any TSC reads as tsc_raw_ns. */
    clocksync_shm_tsc* tsc = &shm->tsc;
    seq = __atomic_load_n(&tsc->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&tsc->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&tsc->anchor_tsc, (uint64_t)0, __ATOMIC_RELEASE);
    __atomic_store_n(&tsc->anchor_raw_ns, tsc_raw_ns, __ATOMIC_RELEASE);
    __atomic_store_n(&tsc->raw_ns_per_tick_q32, (uint64_t)0, __ATOMIC_RELEASE);
    __atomic_store_n(&tsc->max_ticks, ~(uint64_t)0, __ATOMIC_RELEASE);
    __atomic_store_n(&tsc->error_ns, tsc_error_ns, __ATOMIC_RELEASE);
    __atomic_store_n(&tsc->generation, (uint64_t)1, __ATOMIC_RELEASE);
    __atomic_store_n(&tsc->seq, seq + 2, __ATOMIC_RELEASE);
  }
  munmap(shm, sizeof(clocksync_shm));
  return rename(temp, path);
}

int main(void) {
  const char* dir = getenv("TEST_TMPDIR");
  if (dir == NULL) dir = "/tmp";
  char missing[4096], path[4096];
  snprintf(missing, sizeof(missing), "%s/c_absent.shm", dir);
  snprintf(path, sizeof(path), "%s/c_segment.shm", dir);

  /* No daemon: a clear code and a message naming the path. */
  clocksync_handle* handle = NULL;
  CHECK_EQ_I64(clocksync_open(missing, &handle), CLOCKSYNC_ENODAEMON);
  CHECK(handle == NULL);
  CHECK(strstr(clocksync_open_error(), missing) != NULL);
  CHECK(strstr(clocksync_strerror(CLOCKSYNC_ENODAEMON), "daemon") != NULL);
  CHECK(strcmp(clocksync_strerror(12345), "unknown error") == 0);
  CHECK(strcmp(clocksync_strerror(CLOCKSYNC_OK), "success") == 0);
  CHECK_EQ_I64(clocksync_open(missing, NULL), CLOCKSYNC_EINVAL);
  {
    /* "MAJOR.MINOR.PATCH", from the file VERSION. */
    unsigned major = 0, minor = 0, patch = 0;
    char rest = 0;
    CHECK(sscanf(clocksync_version(), "%u.%u.%u%c", &major, &minor, &patch,
                 &rest) == 3);
  }

  const int64_t now_ns = clocksync_raw_now_ns();
  const int64_t anchor_global_ns = 1000 * kSecondNs;
  CHECK(write_segment(path, now_ns, anchor_global_ns, 500, now_ns, 0, 0) ==
        0);

  CHECK_EQ_I64(clocksync_open(path, &handle), CLOCKSYNC_OK);
  CHECK(handle != NULL);
  CHECK(strcmp(clocksync_open_error(), "") == 0);
  if (handle == NULL) return 1;

  clocksync_time t;
  CHECK_EQ_I64(clocksync_at(handle, now_ns + 1000, &t), CLOCKSYNC_OK);
  CHECK_EQ_I64(t.global_ns, anchor_global_ns + 1000);
  /* earliest rounds down, latest up: [global - 500, global + 501]. */
  CHECK_EQ_I64(t.earliest_ns, anchor_global_ns + 1000 - 500);
  CHECK_EQ_I64(t.latest_ns, anchor_global_ns + 1000 + 501);
  CHECK_EQ_I64(t.status, CLOCKSYNC_STATE_SYNCED);

  CHECK_EQ_I64(clocksync_now(handle, &t), CLOCKSYNC_OK);
  CHECK(t.global_ns >= anchor_global_ns);
  CHECK(t.global_ns < anchor_global_ns + 5 * kSecondNs);
  CHECK(t.earliest_ns < t.global_ns && t.global_ns < t.latest_ns);

  /* 6 s after the update: stale (default limit 5 s), still filled. */
  memset(&t, 0, sizeof(t));
  CHECK_EQ_I64(clocksync_at(handle, now_ns + 6 * kSecondNs, &t),
               CLOCKSYNC_ESTALE);
  CHECK((t.status & CLOCKSYNC_STATUS_STALE) != 0);
  CHECK_EQ_I64(t.global_ns, anchor_global_ns + 6 * kSecondNs);
  CHECK(t.latest_ns - t.global_ns >= 501 + 60000);

  CHECK_EQ_I64(clocksync_now(NULL, &t), CLOCKSYNC_EINVAL);
  CHECK_EQ_I64(clocksync_at(handle, 0, NULL), CLOCKSYNC_EINVAL);
  clocksync_close(handle);
  clocksync_close(NULL);

  /* Options: a longer staleness limit accepts the same reading. */
  clocksync_options options;
  clocksync_options_init(&options);
  CHECK_EQ_I64(options.stale_limit_ns, 5 * kSecondNs);
  CHECK_EQ_I64(options.max_read_attempts, 1000);
  options.stale_limit_ns = 10 * kSecondNs;
  CHECK_EQ_I64(clocksync_open_with_options(path, &options, &handle),
               CLOCKSYNC_OK);
  if (handle != NULL) {
    CHECK_EQ_I64(clocksync_at(handle, now_ns + 6 * kSecondNs, &t),
                 CLOCKSYNC_OK);
    clocksync_close(handle);
  }
  options.max_read_attempts = 0;
  CHECK_EQ_I64(clocksync_open_with_options(path, &options, &handle),
               CLOCKSYNC_EINVAL);
  CHECK(strstr(clocksync_open_error(), "max_read_attempts") != NULL);
  options.max_read_attempts = 1000;
  CHECK_EQ_I64(options.disable_tsc, 0);

#if defined(__x86_64__)
  /* A TSC section: clocksync_now reads raw now_ns + 2 s through it (error 7
   * ns in the bound); with disable_tsc, clock_gettime (about now_ns). */
  CHECK(write_segment(path, now_ns, anchor_global_ns, 500, now_ns,
                      now_ns + 2 * kSecondNs, 7) == 0);
  CHECK_EQ_I64(clocksync_open(path, &handle), CLOCKSYNC_OK);
  if (handle != NULL) {
    CHECK_EQ_I64(clocksync_now(handle, &t), CLOCKSYNC_OK);
    CHECK_EQ_I64(t.global_ns, anchor_global_ns + 2 * kSecondNs);
    CHECK_EQ_I64(t.latest_ns - t.global_ns, 500 + 7 + 1);
    CHECK_EQ_I64(t.global_ns - t.earliest_ns, 500 + 7);
    clocksync_close(handle);
  }
  options.disable_tsc = 1;
  CHECK_EQ_I64(clocksync_open_with_options(path, &options, &handle),
               CLOCKSYNC_OK);
  if (handle != NULL) {
    CHECK_EQ_I64(clocksync_now(handle, &t), CLOCKSYNC_OK);
    CHECK(t.global_ns < anchor_global_ns + kSecondNs);
    CHECK_EQ_I64(t.latest_ns - t.global_ns, 500 + 1);
    clocksync_close(handle);
  }
#endif

  if (failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("clocksync_c_test: all checks passed\n");
  return 0;
}
