/*
 * examples/lttng_ping_pong_tp.h: the LTTng-UST tracepoint provider
 * "clocksync_pingpong" of examples/lttng_ping_pong: one event per message
 * sent and one per message received, each with the message's id (unique
 * in a run: ping sends even ids, pong odd ones) and the process's own
 * reading of global time (clocksync_now, ns; 0 without a daemon), which
 * tests compare with LTTng's timestamp of the same event.
 *
 * Compiled once with LTTNG_UST_TRACEPOINT_CREATE_PROBES and
 * LTTNG_UST_TRACEPOINT_DEFINE (lttng_ping_pong_tp.c); included plainly by
 * the program.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER clocksync_pingpong

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "examples/lttng_ping_pong_tp.h"

#if !defined(CLOCKSYNC_EXAMPLES_LTTNG_PING_PONG_TP_H_) || \
    defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define CLOCKSYNC_EXAMPLES_LTTNG_PING_PONG_TP_H_

#include <lttng/tracepoint.h>
#include <stdint.h>

/* A message is about to be written to the peer. */
LTTNG_UST_TRACEPOINT_EVENT(
    clocksync_pingpong, send,
    LTTNG_UST_TP_ARGS(uint64_t, msg_id, int64_t, clocksync_ns),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, msg_id, msg_id)
        lttng_ust_field_integer(int64_t, clocksync_ns, clocksync_ns)))

/* A message has been read from the peer. */
LTTNG_UST_TRACEPOINT_EVENT(
    clocksync_pingpong, recv,
    LTTNG_UST_TP_ARGS(uint64_t, msg_id, int64_t, clocksync_ns),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, msg_id, msg_id)
        lttng_ust_field_integer(int64_t, clocksync_ns, clocksync_ns)))

#endif /* CLOCKSYNC_EXAMPLES_LTTNG_PING_PONG_TP_H_ */

#include <lttng/tracepoint-event.h>
