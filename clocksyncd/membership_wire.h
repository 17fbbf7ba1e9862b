// clocksyncd/membership_wire.h: the membership types of membership/
// (NodeRef, JoinRequestInfo, JoinDecision, Attachment, Candidate, PeerView)
// to and from their messages in proto/clocksync.proto. What comes from the
// wire is taken as it is (the service validated it): only candidate
// priorities out of range are dropped and the lists ranked again.
//
// Thread safety: pure functions.
#ifndef CLOCKSYNC_CLOCKSYNCD_MEMBERSHIP_WIRE_H_
#define CLOCKSYNC_CLOCKSYNCD_MEMBERSHIP_WIRE_H_

#include <vector>

#include "membership/membership.h"
#include "proto/clocksync.pb.h"

namespace clocksync {

NodeAddress ToProto(const NodeRef& ref);
NodeRef FromProto(const NodeAddress& address);
JoinRequestInfo FromProto(const JoinRequest& request);
JoinRequest ToProto(const JoinRequestInfo& request);
JoinResponse ToProto(const JoinDecision& decision);
JoinDecision FromProto(const JoinResponse& response);
JoinResponse::Accepted ToProto(const Attachment& attachment);
Attachment FromProto(const JoinResponse::Accepted& accepted);
MasterCandidate ToProto(const Candidate& candidate);
PeerInfo ToProto(const PeerView& view);
PeerView FromProto(const PeerInfo& info);
// Candidates from the wire (priorities out of range dropped, ranked).
std::vector<Candidate> CandidatesFromProto(
    const google::protobuf::RepeatedPtrField<MasterCandidate>& candidates);

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_MEMBERSHIP_WIRE_H_
