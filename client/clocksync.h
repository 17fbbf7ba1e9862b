/*
 * client/clocksync.h: the C API of the clocksync client library.
 *
 * Maps clocksyncd's shared-memory segment read-only and turns host
 * CLOCK_MONOTONIC_RAW readings into cluster-global time with an error bound:
 *
 *   clocksync_handle* h;
 *   int rc = clocksync_open(NULL, &h);          // NULL: the default path
 *   if (rc < 0) {
 *     fprintf(stderr, "%s\n", clocksync_open_error());  // names the path
 *     return 1;
 *   }
 *   clocksync_time t;
 *   rc = clocksync_now(h, &t);   // 0, or CLOCKSYNC_ESTALE / ENOTSYNCED / ...
 *   clocksync_close(h);
 *
 * A handle may be used by many threads at once (clocksync_now and
 * clocksync_at are thread-safe; clocksync_close must come after the last
 * use). clocksync_now costs one vDSO clock read, one seqlocked read of a
 * 64-byte cache line and a few arithmetic operations: no system call, no
 * allocation, no lock. Where the daemon publishes a TSC mapping (x86-64
 * with an invariant TSC it has checked; shm/shm_layout.h) the clock read
 * is one rdtsc and a second seqlocked line instead, and the bound includes
 * that mapping's error (clocksync_options.disable_tsc or CLOCKSYNC_TSC=off:
 * never).
 *
 * All functions return 0 or a negative CLOCKSYNC_E* code
 * (client/clocksync_errors.h, shared with the tracer's C API; described by
 * clocksync_strerror). For CLOCKSYNC_ESTALE and CLOCKSYNC_ENOTSYNCED the
 * out-struct is still filled (see the codes), for every other error it is
 * left untouched.
 *
 * The C++ API (client/clock.h) offers the same with absl::Status errors.
 */
#ifndef CLOCKSYNC_CLIENT_CLOCKSYNC_H_
#define CLOCKSYNC_CLIENT_CLOCKSYNC_H_

#include <stdint.h>

#include "client/clocksync_errors.h"
#include "shm/shm_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One reading of global time. */
typedef struct clocksync_time {
  /* Estimate of global time, in ns. */
  int64_t global_ns;
  /* Global time is at least this, in ns (global_ns - error bound). */
  int64_t earliest_ns;
  /* Global time is at most this, in ns (global_ns + error bound). */
  int64_t latest_ns;
  /* clocksync_state in bits 0..7 and CLOCKSYNC_STATUS_* flags. */
  uint32_t status;
  /* Zero. */
  uint32_t reserved;
} clocksync_time;

/* Tuning of a handle; fill with clocksync_options_init first. */
typedef struct clocksync_options {
  /* A mapping updated longer ago than this is stale, in ns (default 5 s). */
  int64_t stale_limit_ns;
  /* Extra bound growth applied to a stale mapping, per ns since its update,
   * in ppb (default 10000 = 10 ppm, a free-running crystal's wander). */
  double stale_growth_ppb;
  /* Least time between two looks at the path for a restarted daemon, in ns
   * (default 100 ms). Only stale, closed or unsynced mappings cause a look. */
  int64_t recheck_interval_ns;
  /* Seqlock read attempts before CLOCKSYNC_EBUSY (default 1000). */
  int32_t max_read_attempts;
  /* Nonzero: clocksync_now always reads clock_gettime, never the TSC
   * (default 0: the TSC where the daemon publishes a TSC mapping; the
   * environment variable CLOCKSYNC_TSC=off does the same for every
   * handle). */
  int32_t disable_tsc;
} clocksync_options;

/* Opaque handle to one mapped segment. */
typedef struct clocksync_handle clocksync_handle;

/* Fills *options with the defaults. */
void clocksync_options_init(clocksync_options* options);

/*
 * Maps the segment at `path` (NULL: CLOCKSYNC_DEFAULT_SHM_PATH) with default
 * options. On success stores a new handle in *out and returns 0; on failure
 * returns a negative code and clocksync_open_error() explains it.
 */
int clocksync_open(const char* path, clocksync_handle** out);

/* As clocksync_open, with options (NULL: defaults). */
int clocksync_open_with_options(const char* path,
                                const clocksync_options* options,
                                clocksync_handle** out);

/* Unmaps the segment and frees the handle. NULL is allowed. */
void clocksync_close(clocksync_handle* handle);

/* Global time now. */
int clocksync_now(const clocksync_handle* handle, clocksync_time* out);

/* Global time at a host CLOCK_MONOTONIC_RAW reading `raw_ns` (e.g. one from
 * clocksync_raw_now_ns taken earlier). Staleness is judged by how far raw_ns
 * lies after the mapping's last update. */
int clocksync_at(const clocksync_handle* handle, int64_t raw_ns,
                 clocksync_time* out);

/* Host CLOCK_MONOTONIC_RAW now, in ns. */
int64_t clocksync_raw_now_ns(void);

/* The message of the last failed clocksync_open* on the calling thread,
 * naming the path and the cause; "" if none failed. Valid until the next
 * clocksync_open* on this thread. */
const char* clocksync_open_error(void);

/* The library's version, "MAJOR.MINOR.PATCH" (CLOCKSYNC_VERSION when it was
 * built). */
const char* clocksync_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CLOCKSYNC_CLIENT_CLOCKSYNC_H_ */
