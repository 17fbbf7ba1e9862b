// clocksyncd/request_validation.cc: range and size checks of the requests
// the Clocksync service takes (request_validation.h).

#include "clocksyncd/request_validation.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "membership/membership.h"
#include "probe/address.h"
#include "proto/limits.h"

namespace clocksync {

absl::Status ValidateWatchRequest(const WatchStatusRequest& request) {
  if (request.interval_ms() < kMinWatchIntervalMs ||
      request.interval_ms() > kMaxWatchIntervalMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("interval_ms: must be ", kMinWatchIntervalMs, "..",
                     kMaxWatchIntervalMs, ", got ", request.interval_ms()));
  }
  return absl::OkStatus();
}

absl::Status ValidateTopologyRequest(const GetTopologyRequest& request) {
  if (request.max_nodes() > kMaxTopologyMaxNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_nodes: at most ", kMaxTopologyMaxNodes, ", got ",
                     request.max_nodes()));
  }
  if (request.has_max_depth() && request.max_depth() > kMaxTopologyMaxDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_depth: at most ", kMaxTopologyMaxDepth, ", got ",
                     request.max_depth()));
  }
  if (request.path_node_ids_size() > kMaxTopologyPathLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("path_node_ids: at most ", kMaxTopologyPathLength,
                     " entries, got ", request.path_node_ids_size()));
  }
  for (int i = 0; i < request.path_node_ids_size(); ++i) {
    absl::Status id = ValidateNodeId(absl::StrCat("path_node_ids[", i, "]"),
                                     request.path_node_ids(i));
    if (!id.ok()) return id;
  }
  return absl::OkStatus();
}

// A NodeAddress of another node: id, probe address, gRPC address.
absl::Status ValidateNodeAddress(absl::string_view field,
                                 const NodeAddress& node) {
  absl::Status status =
      ValidateNodeId(absl::StrCat(field, ".node_id"), node.node_id());
  if (status.ok()) {
    status = probe::ValidateHostPort(absl::StrCat(field, ".probe_address"),
                              node.probe_address());
  }
  if (status.ok()) {
    status = probe::ValidateGrpcAddress(absl::StrCat(field, ".grpc_address"),
                                 node.grpc_address());
  }
  return status;
}

absl::Status ValidateJoinRequest(const JoinRequest& request) {
  if (!request.has_node()) {
    return absl::InvalidArgumentError("node: required");
  }
  absl::Status status = ValidateNodeAddress("node", request.node());
  if (!status.ok()) return status;
  if (request.subtree_size() < 0 ||
      request.subtree_size() > Membership::kMaxSubtreeSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("subtree_size: must be 0..", Membership::kMaxSubtreeSize,
                     ", got ", request.subtree_size()));
  }
  if (request.free_slot_depth() < 0 ||
      request.free_slot_depth() > Membership::kNoFreeSlot) {
    return absl::InvalidArgumentError(
        absl::StrCat("free_slot_depth: must be 0..", Membership::kNoFreeSlot,
                     ", got ", request.free_slot_depth()));
  }
  if (request.avoid_ids_size() > kMaxAvoidIds) {
    return absl::InvalidArgumentError(
        absl::StrCat("avoid_ids: at most ", kMaxAvoidIds, " entries, got ",
                     request.avoid_ids_size()));
  }
  for (int i = 0; i < request.avoid_ids_size(); ++i) {
    status = ValidateNodeId(absl::StrCat("avoid_ids[", i, "]"),
                            request.avoid_ids(i));
    if (!status.ok()) return status;
  }
  if (request.master_priority() > kMaxWireMasterPriority) {
    return absl::InvalidArgumentError(
        absl::StrCat("master_priority: must be 0..", kMaxWireMasterPriority,
                     ", got ", request.master_priority()));
  }
  status = ValidateCandidates("candidates", request.candidates());
  if (!status.ok()) return status;
  if (request.has_max_depth() &&
      (request.max_depth() < 1 ||
       request.max_depth() > static_cast<int32_t>(kMaxTopologyMaxDepth))) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_depth: must be 1..", kMaxTopologyMaxDepth,
                     " when set, got ", request.max_depth()));
  }
  return absl::OkStatus();
}

absl::Status ValidateHeartbeatRequest(const HeartbeatRequest& request) {
  absl::Status status = ValidateNodeId("node_id", request.node_id());
  if (status.ok() && (request.subtree_size() < 1 ||
                      request.subtree_size() > Membership::kMaxSubtreeSize)) {
    status = absl::InvalidArgumentError(
        absl::StrCat("subtree_size: must be 1..", Membership::kMaxSubtreeSize,
                     ", got ", request.subtree_size()));
  }
  if (status.ok() && (request.free_slot_depth() < 0 ||
                      request.free_slot_depth() > Membership::kNoFreeSlot)) {
    status = absl::InvalidArgumentError(
        absl::StrCat("free_slot_depth: must be 0..", Membership::kNoFreeSlot,
                     ", got ", request.free_slot_depth()));
  }
  if (status.ok() &&
      (request.rtt_ns() < -1 || request.rtt_ns() > kMaxReportedRttNs)) {
    status = absl::InvalidArgumentError(
        absl::StrCat("rtt_ns: must be -1 (unknown) ..", kMaxReportedRttNs,
                     ", got ", request.rtt_ns()));
  }
  if (status.ok()) status = ValidateCandidates("candidates", request.candidates());
  return status;
}

absl::Status ValidateCandidates(
    absl::string_view field,
    const google::protobuf::RepeatedPtrField<MasterCandidate>& candidates) {
  if (candidates.size() > kMaxWireCandidates) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": at most ", kMaxWireCandidates, " entries, got ",
                     candidates.size()));
  }
  for (int i = 0; i < candidates.size(); ++i) {
    const MasterCandidate& c = candidates.Get(i);
    absl::Status status =
        ValidateNodeAddress(absl::StrCat(field, "[", i, "].node"), c.node());
    if (status.ok() && (c.priority() < 1 || c.priority() > kMaxWireMasterPriority)) {
      status = absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "].priority: must be 1..",
                       kMaxWireMasterPriority, ", got ", c.priority()));
    }
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status ValidatePeerRequest(const PeerRequest& request) {
  if (!request.has_from()) return absl::InvalidArgumentError("from: required");
  const PeerInfo& p = request.from();
  absl::Status status = ValidateNodeAddress("from.node", p.node());
  if (status.ok() && p.has_master_node()) {
    status = ValidateNodeAddress("from.master_node", p.master_node());
  }
  if (status.ok() && p.priority() > kMaxWireMasterPriority) {
    status = absl::InvalidArgumentError(
        absl::StrCat("from.priority: must be 0..", kMaxWireMasterPriority,
                     ", got ", p.priority()));
  }
  if (status.ok() && p.known_peers_size() > kMaxWireKnownPeers) {
    status = absl::InvalidArgumentError(
        absl::StrCat("from.known_peers: at most ", kMaxWireKnownPeers,
                     " entries, got ", p.known_peers_size()));
  }
  for (int i = 0; status.ok() && i < p.known_peers_size(); ++i) {
    status = ValidateNodeAddress(absl::StrCat("from.known_peers[", i, "]"),
                                 p.known_peers(i));
  }
  return status;
}

absl::Status ValidateHandoverRequest(const HandoverRequest& request) {
  absl::Status status = ValidateNodeId("node_id", request.node_id());
  if (status.ok() && request.term() < 1) {
    status = absl::InvalidArgumentError(
        absl::StrCat("term: must be at least 1, got ", request.term()));
  }
  return status;
}

absl::Status ValidateLeaveRequest(const LeaveRequest& request) {
  absl::Status status = ValidateNodeId("node_id", request.node_id());
  if (status.ok() && request.reason().size() > kMaxLeaveReasonBytes) {
    status = absl::InvalidArgumentError(
        absl::StrCat("reason: at most ", kMaxLeaveReasonBytes, " bytes, got ",
                     request.reason().size()));
  }
  if (status.ok() && request.has_successor()) {
    status = ValidateNodeAddress("successor", request.successor());
  }
  return status;
}

}  // namespace clocksync
