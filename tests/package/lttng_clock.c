/*
 * tests/package/lttng_clock.c: the clock LTTng-UST stamps events with in
 * this process (with LTTNG_UST_CLOCK_PLUGIN naming the installed
 * libclocksync-lttng.so, the plugin's), printed beside CLOCK_REALTIME:
 * "<clock value> <realtime ns>". tests/package_install_test.sh builds it
 * with plain gcc against Debian's liblttng-ust-dev.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <lttng/ust-clock.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

int main(void) {
  lttng_ust_clock_read64_function read64;
  if (lttng_ust_trace_clock_get_read64_cb(&read64) != 0) return 1;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  printf("%llu %lld\n", (unsigned long long)read64(),
         (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
  return 0;
}
