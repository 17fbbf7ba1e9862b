// clocksyncd/request_validation.h: the checks every request of the
// Clocksync service passes before it reaches the node: numeric fields in
// range (no overflow from any client), sizes capped, node ids and
// addresses well-formed (limits in proto/limits.h and
// proto/clocksync.proto). Each returns OK or INVALID_ARGUMENT saying
// "field: reason, got value". Shared by the service and its fuzzer.
//
// Thread safety: pure functions.
#ifndef CLOCKSYNC_CLOCKSYNCD_REQUEST_VALIDATION_H_
#define CLOCKSYNC_CLOCKSYNCD_REQUEST_VALIDATION_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/clocksync.pb.h"

namespace clocksync {

absl::Status ValidateWatchRequest(const WatchStatusRequest& request);
absl::Status ValidateTopologyRequest(const GetTopologyRequest& request);
absl::Status ValidateNodeAddress(absl::string_view field, const NodeAddress& node);
absl::Status ValidateJoinRequest(const JoinRequest& request);
absl::Status ValidateHeartbeatRequest(const HeartbeatRequest& request);
absl::Status ValidateLeaveRequest(const LeaveRequest& request);
absl::Status ValidateCandidates(
    absl::string_view field,
    const google::protobuf::RepeatedPtrField<MasterCandidate>& candidates);
absl::Status ValidatePeerRequest(const PeerRequest& request);
absl::Status ValidateHandoverRequest(const HandoverRequest& request);

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_REQUEST_VALIDATION_H_
