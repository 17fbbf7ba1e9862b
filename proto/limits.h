// proto/limits.h: the limits of the Clocksync API's requests (stated in
// proto/clocksync.proto too) and the rule for node ids, shared by the
// service that enforces them and the clients that check before asking.
#ifndef CLOCKSYNC_PROTO_LIMITS_H_
#define CLOCKSYNC_PROTO_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace clocksync {

inline constexpr uint32_t kMinWatchIntervalMs = 50;
inline constexpr uint32_t kMaxWatchIntervalMs = 60'000;
inline constexpr uint32_t kDefaultTopologyMaxNodes = 1000;
inline constexpr uint32_t kMaxTopologyMaxNodes = 100'000;
inline constexpr uint32_t kDefaultTopologyMaxDepth = 32;
inline constexpr uint32_t kMaxTopologyMaxDepth = 255;
inline constexpr int kMaxTopologyPathLength = 256;
inline constexpr size_t kMaxNodeIdBytes = 64;
inline constexpr size_t kMaxLeaveReasonBytes = 256;
inline constexpr int kMaxAvoidIds = 256;
// Candidates in a join, heartbeat or acceptance; peers a PeerInfo lists.
inline constexpr int kMaxWireCandidates = 8;
inline constexpr int kMaxWireKnownPeers = 32;
inline constexpr uint32_t kMaxWireMasterPriority = 255;
// A heartbeat's round trip above this (60 s) is not a measurement.
inline constexpr int64_t kMaxReportedRttNs = 60'000'000'000;
// Largest message a topology answer may be (about 300 bytes per node).
inline constexpr int kMaxTopologyMessageBytes = 64 << 20;

// A node id: 1..64 bytes of [A-Za-z0-9._-]. OK or INVALID_ARGUMENT with
// "field: reason".
absl::Status ValidateNodeId(absl::string_view field, absl::string_view node_id);

}  // namespace clocksync

#endif  // CLOCKSYNC_PROTO_LIMITS_H_
