/*
 * lttng/bench_tp.c: the probes and tracepoint definitions of the
 * clocksync_bench provider (bench_tp.h), linked into lttng/event_benchmark.
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "lttng/bench_tp.h"
