/*
 * examples/lttng_ping_pong_tp.c: the probes of the clocksync_pingpong
 * tracepoint provider (lttng_ping_pong_tp.h), and the tracepoint
 * definitions, linked into examples/lttng_ping_pong.
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "examples/lttng_ping_pong_tp.h"
