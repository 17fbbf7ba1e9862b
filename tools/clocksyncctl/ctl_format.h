// tools/clocksyncctl/ctl_format.h: what clocksyncctl prints and the exit code it
// returns, apart from the RPCs (so both are unit-tested without a server).
//
// Text follows `chronyc tracking`: one "Label           : value" line per
// item, what an operator checks first (synchronized? within the bound?)
// first. JSON is the proto3 JSON mapping of the messages (field names as in
// proto/clocksync.proto; 64-bit integers are strings, as that mapping
// wants, so they survive JavaScript-style parsers exactly).
//
// Example:
//   const ctl::Health health = ctl::CheckHealth(status, max_error_ns);
//   std::cout << ctl::FormatStatusText(status, max_error_ns);
//   return health.exit_code;
//
// Thread safety: pure functions.
#ifndef CLOCKSYNC_TOOLS_CLOCKSYNCCTL_CTL_FORMAT_H_
#define CLOCKSYNC_TOOLS_CLOCKSYNCCTL_CTL_FORMAT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "proto/clocksync.pb.h"

namespace clocksync::ctl {

// clocksyncctl's exit codes.
enum ExitCode : int {
  kExitOk = 0,
  // status, wait: not synchronized, or the bound exceeds --max_error_ns.
  kExitUnhealthy = 1,
  // Bad command line (or a request the node refused as invalid).
  kExitUsage = 2,
  // The node did not answer (or answered with an error).
  kExitUnreachable = 3,
};

// True when the node has a valid estimate fed by recent samples: state
// SYNCED or RECOVERING. UNSYNCED (no estimate yet) and HOLDOVER (no answers
// from the parent; the bound only grows) are not.
bool IsSynchronized(const NodeStatus& status);

// The verdict of `clocksyncctl status` and `wait`.
struct Health {
  ExitCode exit_code;
  // One line, e.g. "synchronized, error bound 2.137 us <= 1.000 ms" or
  // "not synchronized: holdover (no answers from the parent)".
  std::string reason;
};
// OK when synchronized and error_bound_ns <= max_error_ns.
Health CheckHealth(const NodeStatus& status, int64_t max_error_ns);

// An RPC that failed: exit code and a message naming the target and the
// RPC ("cannot reach clocksyncd at 127.0.0.1:3191 (GetStatus): UNAVAILABLE:
// ..."). INVALID_ARGUMENT is a usage error; anything else means the node is
// not usable: unreachable.
struct RpcFailure {
  ExitCode exit_code;
  std::string message;
};
RpcFailure DescribeRpcFailure(const grpc::Status& status,
                              absl::string_view target, absl::string_view rpc);

// Durations for people: "0 ns", "845 ns", "2.137 us", "12.500 ms",
// "3.250 s", with a '-' when negative.
std::string FormatDurationNs(int64_t duration_ns);
// Whole-second durations: "42s", "3m 04s", "1h 02m 03s", "2d 01h 02m 03s".
std::string FormatUptimeNs(int64_t uptime_ns);
// A signed offset in seconds with every nanosecond: "+1.234567890 s".
std::string FormatOffsetNs(int64_t offset_ns);
// "SYNCED" -> "synchronized", etc.; the state as operators read it.
std::string DescribeState(SyncState state);

// `status`: chronyc-tracking-like lines, ending in a newline.
std::string FormatStatusText(const NodeStatus& status, int64_t max_error_ns);
// `status --json`: {"synchronized": bool, "healthy": bool, "reason": "...",
// "max_error_ns": "N", "status": {NodeStatus}} on one line.
std::string FormatStatusJson(const NodeStatus& status, int64_t max_error_ns);

// `watch`: one line per update, stamped with the time it arrived in `zone`.
std::string FormatWatchLine(const NodeStatus& status, absl::Time received,
                            absl::TimeZone zone);
// `watch --json`: the NodeStatus on one line (one JSON object per line).
std::string FormatWatchJson(const NodeStatus& status);

// `tree`: one line per node, indented below its parent, columns aligned;
// unreachable nodes say why.
std::string FormatTreeText(const Topology& topology);
// `tree --json`: {"nodes":[TopologyNode...],"truncated":bool}, each node
// once, on one line.
std::string FormatTreeJson(const Topology& topology);

// `sources`: the parent and the ancestors up to the master, nearest first,
// and the number of children.
std::string FormatSourcesText(const NodeStatus& status);
// `sources --json`: {"node_id","depth","parent","ancestors":[NodeAddress...
// master first, as in NodeStatus],
// "children_count"} on one line.
std::string FormatSourcesJson(const NodeStatus& status);

}  // namespace clocksync::ctl

#endif  // CLOCKSYNC_TOOLS_CLOCKSYNCCTL_CTL_FORMAT_H_
