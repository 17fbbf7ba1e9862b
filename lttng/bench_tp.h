/*
 * lttng/bench_tp.h: the LTTng-UST tracepoint provider "clocksync_bench" of
 * lttng/event_benchmark: one event with one integer, the smallest event
 * worth timing (the clock read is then the largest part of its cost that
 * differs between clocks).
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER clocksync_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "lttng/bench_tp.h"

#if !defined(CLOCKSYNC_LTTNG_BENCH_TP_H_) || \
    defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define CLOCKSYNC_LTTNG_BENCH_TP_H_

#include <lttng/tracepoint.h>
#include <stdint.h>

/* One benchmark event: its index in the round. */
LTTNG_UST_TRACEPOINT_EVENT(
    clocksync_bench, event,
    LTTNG_UST_TP_ARGS(uint64_t, index),
    LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint64_t, index, index)))

#endif /* CLOCKSYNC_LTTNG_BENCH_TP_H_ */

#include <lttng/tracepoint-event.h>
