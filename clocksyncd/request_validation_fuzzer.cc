// clocksyncd/request_validation_fuzzer.cc: hostile gRPC requests as the
// service sees them. The first byte picks the request type, the rest is
// parsed as its protobuf and validated (request_validation.h); a Join or
// Heartbeat the validators accept is then handed to a Membership (as the
// daemon's agent would), which must stay consistent: no overflow (UBSan
// and ASan builds), a subtree size within [1, kMaxSubtreeSize], at most
// kMaxCandidates candidates; a Peer the validators accept is noted and
// decided on (the known peers stay bounded); a Handover is offered to a
// candidate, which refuses or takes over.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "clocksyncd/membership_agent.h"
#include "clocksyncd/request_validation.h"
#include "membership/membership.h"
#include "proto/clocksync.pb.h"

namespace {

clocksync::Membership& Node() {
  static clocksync::Membership* m = [] {
    clocksync::MembershipConfig config;
    config.self = {"m", "127.0.0.1:3190", "127.0.0.1:3191"};
    config.master = true;
    config.max_children = 3;
    return new clocksync::Membership(config);
  }();
  return *m;
}

clocksync::Membership& Candidate() {
  static clocksync::Membership* m = [] {
    clocksync::MembershipConfig config;
    config.self = {"c", "127.0.0.1:3290", "127.0.0.1:3291"};
    config.seeds = {{"", "", "127.0.0.1:3191"}};
    config.master_priority = 1;
    return new clocksync::Membership(config);
  }();
  return *m;
}

void CheckNode(int64_t now_ns) {
  const int64_t size = Node().SubtreeSize();
  if (size < 1 || size > clocksync::Membership::kMaxSubtreeSize ||
      Node().FreeSlotDepth(now_ns) < 0 ||
      Node().TreeCandidates().size() > clocksync::kMaxCandidates ||
      Node().MastershipPeers().size() > clocksync::kMaxKnownPeers) {
    std::fprintf(stderr, "membership inconsistent: subtree %lld\n", static_cast<long long>(size));
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static int64_t now_ns = 1'000'000'000;
  now_ns += 1'000'000;
  const uint8_t kind = data[0] % 7;
  ++data;
  --size;
  switch (kind) {
    case 0: {
      clocksync::JoinRequest r;
      if (!r.ParseFromArray(data, static_cast<int>(size))) return 0;
      if (clocksync::ValidateJoinRequest(r).ok()) {
        (void)Node().HandleJoin(clocksync::FromProto(r), now_ns);
        CheckNode(now_ns);
      }
      break;
    }
    case 1: {
      clocksync::HeartbeatRequest r;
      if (!r.ParseFromArray(data, static_cast<int>(size))) return 0;
      if (clocksync::ValidateHeartbeatRequest(r).ok()) {
        const std::vector<clocksync::Candidate> candidates =
            clocksync::CandidatesFromProto(r.candidates());
        (void)Node().OnChildHeard(r.node_id(), r.subtree_size(), r.rtt_ns(), now_ns,
                                  r.free_slot_depth(), &candidates);
        CheckNode(now_ns);
      }
      break;
    }
    case 2: {
      clocksync::LeaveRequest r;
      if (!r.ParseFromArray(data, static_cast<int>(size))) return 0;
      if (clocksync::ValidateLeaveRequest(r).ok()) (void)Node().HandleLeave(r.node_id());
      break;
    }
    case 3: {
      clocksync::WatchStatusRequest r;
      if (r.ParseFromArray(data, static_cast<int>(size))) {
        (void)clocksync::ValidateWatchRequest(r);
      }
      break;
    }
    case 4: {
      clocksync::GetTopologyRequest r;
      if (r.ParseFromArray(data, static_cast<int>(size))) {
        (void)clocksync::ValidateTopologyRequest(r);
      }
      break;
    }
    case 5: {
      clocksync::PeerRequest r;
      if (!r.ParseFromArray(data, static_cast<int>(size))) return 0;
      if (clocksync::ValidatePeerRequest(r).ok()) {
        clocksync::PeerView view = clocksync::FromProto(r.from());
        Node().NotePeer(view);
        view.answered = true;
        view.asked_ns = now_ns;
        (void)Node().DecideMastership(now_ns, true, {view});
        CheckNode(now_ns);
      }
      break;
    }
    case 6: {
      clocksync::HandoverRequest r;
      if (!r.ParseFromArray(data, static_cast<int>(size))) return 0;
      if (clocksync::ValidateHandoverRequest(r).ok()) {
        (void)Candidate().AcceptHandover(r.node_id(), r.term(), true, now_ns);
      }
      break;
    }
  }
  return 0;
}
