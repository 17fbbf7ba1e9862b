// clocksyncd/membership_wire.cc: the membership types (membership.h) to and
// from their messages in proto/clocksync.proto (membership_wire.h).

#include "clocksyncd/membership_wire.h"

#include <algorithm>
#include <utility>

namespace clocksync {
namespace {

JoinRejectReason ToProto(RejectReason reason) {
  switch (reason) {
    case RejectReason::kWouldFormCycle:
      return JOIN_REJECT_REASON_WOULD_FORM_CYCLE;
    case RejectReason::kNotAttached:
      return JOIN_REJECT_REASON_NOT_ATTACHED;
    case RejectReason::kFull:
      return JOIN_REJECT_REASON_FULL;
    case RejectReason::kInvalid:
      return JOIN_REJECT_REASON_INVALID;
    case RejectReason::kTooDeep:
      return JOIN_REJECT_REASON_TOO_DEEP;
    case RejectReason::kNone:
      break;
  }
  return JOIN_REJECT_REASON_UNSPECIFIED;
}

RejectReason FromProto(JoinRejectReason reason) {
  switch (reason) {
    case JOIN_REJECT_REASON_WOULD_FORM_CYCLE:
      return RejectReason::kWouldFormCycle;
    case JOIN_REJECT_REASON_NOT_ATTACHED:
      return RejectReason::kNotAttached;
    case JOIN_REJECT_REASON_FULL:
      return RejectReason::kFull;
    case JOIN_REJECT_REASON_INVALID:
      return RejectReason::kInvalid;
    case JOIN_REJECT_REASON_TOO_DEEP:
      return RejectReason::kTooDeep;
    default:
      break;
  }
  return RejectReason::kNone;
}


}  // namespace

NodeAddress ToProto(const NodeRef& ref) {
  NodeAddress a;
  a.set_node_id(ref.node_id);
  a.set_probe_address(ref.probe_address);
  a.set_grpc_address(ref.grpc_address);
  return a;
}

NodeRef FromProto(const NodeAddress& a) {
  return NodeRef{a.node_id(), a.probe_address(), a.grpc_address()};
}

JoinRequestInfo FromProto(const JoinRequest& r) {
  JoinRequestInfo info;
  info.newcomer = FromProto(r.node());
  info.subtree_size = std::max<int64_t>(1, r.subtree_size());
  info.free_slot_depth = r.free_slot_depth();
  info.pinned = r.pinned();
  info.avoid_ids.assign(r.avoid_ids().begin(), r.avoid_ids().end());
  info.max_depth = r.has_max_depth() ? r.max_depth() : -1;
  info.master_priority = static_cast<int>(
      std::min<uint32_t>(r.master_priority(), kMaxMasterPriority));
  info.candidates = CandidatesFromProto(r.candidates());
  return info;
}

JoinRequest ToProto(const JoinRequestInfo& info) {
  JoinRequest r;
  *r.mutable_node() = ToProto(info.newcomer);
  r.set_subtree_size(info.subtree_size);
  r.set_free_slot_depth(info.free_slot_depth);
  r.set_pinned(info.pinned);
  for (const std::string& id : info.avoid_ids) r.add_avoid_ids(id);
  if (info.max_depth >= 0) r.set_max_depth(info.max_depth);
  r.set_master_priority(static_cast<uint32_t>(std::max(0, info.master_priority)));
  for (const Candidate& c : info.candidates) *r.add_candidates() = ToProto(c);
  return r;
}

JoinResponse::Accepted ToProto(const Attachment& a) {
  JoinResponse::Accepted p;
  p.set_depth(a.depth);
  for (const NodeRef& ref : a.ancestors) *p.add_ancestors() = ToProto(ref);
  p.set_lease_remaining_ns(a.lease_remaining_ns);
  p.set_landing_depth(a.landing_depth);
  p.set_term(a.term);
  for (const Candidate& c : a.candidates) *p.add_candidates() = ToProto(c);
  return p;
}

Attachment FromProto(const JoinResponse::Accepted& p) {
  Attachment a;
  a.depth = p.depth();
  for (const NodeAddress& ref : p.ancestors()) a.ancestors.push_back(FromProto(ref));
  a.lease_remaining_ns = p.lease_remaining_ns();
  a.landing_depth = p.landing_depth();
  a.term = p.term();
  a.candidates = CandidatesFromProto(p.candidates());
  return a;
}

MasterCandidate ToProto(const Candidate& c) {
  MasterCandidate p;
  *p.mutable_node() = ToProto(c.ref);
  p.set_priority(static_cast<uint32_t>(std::max(0, c.priority)));
  return p;
}

std::vector<Candidate> CandidatesFromProto(
    const google::protobuf::RepeatedPtrField<MasterCandidate>& candidates) {
  std::vector<Candidate> out;
  for (const MasterCandidate& c : candidates) {
    if (c.priority() < 1 || c.priority() > kMaxMasterPriority) continue;
    out.push_back({FromProto(c.node()), static_cast<int>(c.priority())});
  }
  return NormalizeCandidates(std::move(out));
}

PeerInfo ToProto(const PeerView& v) {
  PeerInfo p;
  *p.mutable_node() = ToProto(v.ref);
  p.set_is_master(v.is_master);
  p.set_has_master(v.has_master);
  p.set_term(v.term);
  if (!v.master.node_id.empty()) *p.mutable_master_node() = ToProto(v.master);
  p.set_priority(static_cast<uint32_t>(std::max(0, v.priority)));
  p.set_eligible(v.eligible);
  for (const NodeRef& ref : v.known_peers) {
    if (p.known_peers_size() >= static_cast<int>(kMaxKnownPeers)) break;
    *p.add_known_peers() = ToProto(ref);
  }
  return p;
}

PeerView FromProto(const PeerInfo& p) {
  PeerView v;
  v.ref = FromProto(p.node());
  v.is_master = p.is_master();
  v.has_master = p.has_master();
  v.term = p.term();
  if (p.has_master_node()) v.master = FromProto(p.master_node());
  v.priority = static_cast<int>(std::min<uint32_t>(p.priority(), kMaxMasterPriority));
  v.eligible = p.eligible();
  for (const NodeAddress& a : p.known_peers()) v.known_peers.push_back(FromProto(a));
  return v;
}

JoinResponse ToProto(const JoinDecision& d) {
  JoinResponse r;
  switch (d.kind) {
    case JoinDecision::Kind::kAccepted:
      *r.mutable_accepted() = ToProto(d.attachment);
      break;
    case JoinDecision::Kind::kRedirect:
      *r.mutable_redirect_to() = ToProto(d.redirect_to);
      for (const NodeRef& ref : d.alternatives) *r.add_alternatives() = ToProto(ref);
      r.set_redirect_has_room(d.redirect_has_room);
      break;
    case JoinDecision::Kind::kRejected:
      r.mutable_rejected()->set_reason(ToProto(d.reason));
      r.mutable_rejected()->set_detail(d.detail);
      break;
  }
  return r;
}

JoinDecision FromProto(const JoinResponse& r) {
  JoinDecision d;
  switch (r.outcome_case()) {
    case JoinResponse::kAccepted:
      d.kind = JoinDecision::Kind::kAccepted;
      d.attachment = FromProto(r.accepted());
      break;
    case JoinResponse::kRedirectTo:
      d.kind = JoinDecision::Kind::kRedirect;
      d.redirect_to = FromProto(r.redirect_to());
      for (const NodeAddress& a : r.alternatives()) d.alternatives.push_back(FromProto(a));
      d.redirect_has_room = r.redirect_has_room();
      break;
    default:
      d.kind = JoinDecision::Kind::kRejected;
      d.reason = FromProto(r.rejected().reason());
      d.detail = r.rejected().detail();
      break;
  }
  return d;
}

}  // namespace clocksync
