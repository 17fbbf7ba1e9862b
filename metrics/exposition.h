// metrics/exposition.h: a node's status in the Prometheus text exposition
// format (version 0.0.4), the one definition of clocksync's metrics: what
// `clocksyncctl metrics` prints and what `clocksyncd --metrics_listen`
// serves on GET /metrics.
//
// Every sample is labelled node="<node_id>", so the outputs of several
// nodes (or one `clocksyncctl metrics --tree`) merge without clashes.
// Quantities kept in ns are published in seconds, Prometheus' base unit,
// written exactly (12.3456789, not 12.345678900000001); drift is a ratio.
// Families (docs/CLOCKSYNCCTL.md, "Metrics for Prometheus"): gauges
// clocksync_up (0: unreachable, its other metrics absent),
// clocksync_synchronized, clocksync_holdover, clocksync_state{state},
// clocksync_depth, clocksync_error_bound_seconds,
// clocksync_offset_to_parent_seconds, clocksync_drift_ratio,
// clocksync_min_round_trip_seconds, clocksync_samples_in_window,
// clocksync_hull_vertices{hull}, clocksync_children,
// clocksync_last_answer_age_seconds, clocksync_uptime_seconds,
// clocksync_info{role,parent,version}; counters
// clocksync_probes_total{result}, clocksync_inconsistencies_total,
// clocksync_joins_total, clocksync_parent_losses_total,
// clocksync_probe_drops_total{socket,reason}.
//
// Example:
//   std::string text = metrics::FormatNodeMetrics(status);
//   // served with Content-Type metrics::kExpositionContentType
//
// Thread safety: pure functions.
#ifndef CLOCKSYNC_METRICS_EXPOSITION_H_
#define CLOCKSYNC_METRICS_EXPOSITION_H_

#include <string>

#include "proto/clocksync.pb.h"

namespace clocksync::metrics {

// The Content-Type of the text format, for an HTTP response.
inline constexpr char kExpositionContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

// The nodes of `topology` (one for `clocksyncctl metrics`, a subtree with
// --tree), each once (the first listing wins): HELP and TYPE of every
// family, then its samples. An unreachable node has clocksync_up 0 only.
std::string FormatMetrics(const Topology& topology);

// One reachable node: FormatMetrics of a topology holding only `status`.
std::string FormatNodeMetrics(const NodeStatus& status);

}  // namespace clocksync::metrics

#endif  // CLOCKSYNC_METRICS_EXPOSITION_H_
