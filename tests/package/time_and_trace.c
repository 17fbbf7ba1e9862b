/* tests/package/time_and_trace.c: a C program built with plain gcc against
 * the installed libclocksync-dev (pkg-config clocksync) by
 * tests/package_install_test.sh. Reads global time from a running
 * clocksyncd, checks the bound holds it, and writes a small trace.
 *   time_and_trace SHM_PATH TRACE_DIR */
#include <clocksync/clocksync.h>
#include <clocksync/clocksync_trace.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s SHM_PATH TRACE_DIR\n", argv[0]);
    return 2;
  }
  clocksync_handle* clock = NULL;
  if (clocksync_open(argv[1], &clock) < 0) {
    fprintf(stderr, "clocksync_open: %s\n", clocksync_open_error());
    return 1;
  }
  clocksync_time t;
  int rc = clocksync_now(clock, &t);
  if (rc < 0) {
    fprintf(stderr, "clocksync_now: %s\n", clocksync_strerror(rc));
    return 1;
  }
  if (!(t.earliest_ns <= t.global_ns && t.global_ns <= t.latest_ns)) {
    fprintf(stderr, "bad interval %lld %lld %lld\n", (long long)t.earliest_ns,
            (long long)t.global_ns, (long long)t.latest_ns);
    return 1;
  }
  printf("libclocksync %s: global %lld ns, bound %lld ns, state %u\n",
         clocksync_version(), (long long)t.global_ns,
         (long long)(t.latest_ns - t.global_ns),
         t.status & CLOCKSYNC_STATUS_STATE_MASK);

  cs_trace_options options;
  cs_trace_options_init(&options);
  options.trace_dir = argv[2];
  options.name = "c_program";
  options.shm_path = argv[1];
  if (cs_trace_init(&options) < 0) {
    fprintf(stderr, "cs_trace_init: %s\n", cs_trace_last_error());
    return 1;
  }
  int32_t compute = cs_trace_region_def("compute");
  for (int i = 0; i < 100; ++i) {
    cs_trace_enter((uint32_t)compute);
    cs_trace_leave((uint32_t)compute);
  }
  cs_trace_send(0, 7, 4096, CS_TRACE_COMM_WORLD);
  cs_trace_recv(0, 7, 4096, CS_TRACE_COMM_WORLD);
  if (cs_trace_finalize() < 0) {
    fprintf(stderr, "cs_trace_finalize: %s\n", cs_trace_last_error());
    return 1;
  }
  clocksync_close(clock);
  return 0;
}
