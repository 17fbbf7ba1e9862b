// clocksyncd/membership_agent_mastership.cc: the standby-master part of
// MembershipAgent (membership_agent.h): the start-up check of a returning
// master, the peer polls and their verdicts (takeover, demotion, a master
// found), the Peer and Handover RPCs of other nodes, and the handover of a
// master that leaves. The rules are Membership's (membership/
// mastership.cc); this file carries the messages and says in the log who
// took over, when and why.

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "clocksyncd/membership_agent.h"
#include "clocksyncd/rpc_auth.h"
#include "probe/raw_clock.h"
#include "spdlog/spdlog.h"

namespace clocksync {
namespace {

std::chrono::system_clock::time_point DeadlineIn(int64_t ns) {
  return std::chrono::system_clock::now() + std::chrono::nanoseconds(ns);
}

// Peers are kept by id; a seed known only by its address by "@address".
std::string PeerKey(const NodeRef& ref) {
  return ref.node_id.empty() ? "@" + ref.grpc_address : ref.node_id;
}

std::string Name(const NodeRef& ref) {
  return ref.node_id.empty() ? "seed " + ref.grpc_address : ref.node_id;
}

}  // namespace

absl::StatusOr<PeerInfo> MembershipAgent::CallPeer(const NodeRef& target,
                                                   const PeerInfo& self,
                                                   int64_t timeout_ns) {
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(timeout_ns));
  PeerRequest request;
  *request.mutable_from() = self;
  if (const std::optional<probe::ProbeKeys> key = ProbeKey()) {
    SignRpc(*key, "Peer", request, &context);
  }
  PeerResponse response;
  const std::shared_ptr<Clocksync::Stub> stub = StubFor(target.grpc_address);
  const grpc::Status status = stub->Peer(&context, request, &response);
  NoteCallStatus(target.grpc_address, stub.get(), status);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("Peer at ", Name(target), ": ",
                                     status.error_message()));
  }
  return response.peer();
}

void MembershipAgent::ResolveStartupRole() {
  MembershipConfig config;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!membership_.is_master() || membership_.config().seeds.empty()) return;
    config = membership_.config();
  }
  // Tell the seeds nothing that could make them yield: not master yet.
  PeerView asking;
  asking.ref = self_;
  asking.priority = config.master_priority;
  const PeerInfo self = ToProto(asking);
  const int64_t deadline = probe::RawNowNs() + options_.startup_check_ns;
  uint64_t highest = 0;
  std::optional<PeerView> live;
  std::string said_by;
  for (const NodeRef& seed : config.seeds) {
    const int64_t left = deadline - probe::RawNowNs();
    if (left <= 0) break;
    const absl::StatusOr<PeerInfo> answer =
        CallPeer(seed, self, std::min(left, options_.rpc_timeout_ns));
    if (!answer.ok()) continue;
    const PeerView v = FromProto(*answer);
    highest = std::max(highest, v.term);
    // Nodes still holding a lease from this id's previous run do not count.
    if ((v.is_master || v.has_master) && !v.master.node_id.empty() &&
        v.master.node_id != self_.node_id &&
        (!live || MasterOutranks(v.term, v.master.node_id, live->term,
                                 live->master.node_id))) {
      live = v;
      said_by = Name(seed);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (live) {
    config.master = false;
    membership_ = Membership(config);
    membership_.NotePeer(*live);
    spdlog::warn("{}: {} is master under term {} ({} says so): joining the "
                 "tree as a node instead of starting as its master",
                 self_.node_id, live->master.node_id, live->term, said_by);
  } else if (highest >= config.initial_term) {
    config.initial_term = highest + 1;
    membership_ = Membership(config);
    spdlog::info("{}: no live master among the seeds; master under term {} "
                 "(above term {} seen)", self_.node_id, config.initial_term,
                 highest);
  }
}

void MembershipAgent::SetSynchronized(bool synchronized) {
  std::lock_guard<std::mutex> lock(mu_);
  synchronized_ = synchronized;
}

void MembershipAgent::AccountMasterlessLocked(int64_t now) {
  // Counted from the first master this node knew (a start is not a loss).
  if (membership_.LastMasterContactNs(now) > 0 &&
      membership_.MasterlessSinceNs(now) >= 0) {
    masterless_ns_ += std::max<int64_t>(0, now - last_account_ns_);
  }
  last_account_ns_ = now;
}

std::vector<PeerView> MembershipAgent::PeerViewsLocked() const {
  std::vector<PeerView> views;
  for (const NodeRef& peer : membership_.MastershipPeers()) {
    auto it = peer_views_.find(PeerKey(peer));
    if (it != peer_views_.end()) {
      views.push_back(it->second);
    } else {
      PeerView unasked;
      unasked.ref = peer;
      views.push_back(unasked);
    }
  }
  return views;
}

void MembershipAgent::PeerLoop() {
  for (;;) {
    std::vector<PendingLeave> leaves;
    {
      std::unique_lock<std::mutex> lock(mu_);
      peer_wake_.wait_for(lock, std::chrono::nanoseconds(options_.peer_poll_interval_ns),
                          [this] { return stop_ || !pending_leaves_.empty(); });
      if (stop_) return;
      leaves.swap(pending_leaves_);
    }
    for (const PendingLeave& leave : leaves) {
      const absl::Status told = CallLeave(leave.target, leave.reason, leave.successor);
      if (!told.ok()) {
        spdlog::warn("{}: could not tell {}: {}", self_.node_id,
                     Name(leave.target), std::string(told.message()));
        std::lock_guard<std::mutex> lock(mu_);
        handed_over_children_.erase(leave.target.node_id);
      }
    }
    PollPeers(probe::RawNowNs());
  }
}

// One round: every peer asked at once (each call bounded by its deadline),
// the answers kept, then the verdict.
void MembershipAgent::PollPeers(int64_t now) {
  std::vector<NodeRef> peers;
  PeerInfo self;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (leaving_ || !membership_.ShouldPollPeers(now)) return;
    peers = membership_.MastershipPeers();
    self = ToProto(membership_.SelfView(now, synchronized_));
  }
  struct Call {
    NodeRef peer;
    std::shared_ptr<Clocksync::Stub> stub;  // Keeps the channel until the end.
    grpc::ClientContext context;
    PeerRequest request;
    PeerResponse response;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::mutex done_mu;
  std::condition_variable done_cv;
  size_t done = 0;
  const std::optional<probe::ProbeKeys> key = ProbeKey();
  const int64_t asked = probe::RawNowNs();
  for (const NodeRef& peer : peers) {
    auto call = std::make_unique<Call>();
    call->peer = peer;
    call->context.set_deadline(DeadlineIn(options_.peer_rpc_timeout_ns));
    *call->request.mutable_from() = self;
    if (key) SignRpc(*key, "Peer", call->request, &call->context);
    call->stub = StubFor(peer.grpc_address);
    Call* c = call.get();
    calls.push_back(std::move(call));
    c->stub->async()
        ->Peer(&c->context, &c->request, &c->response,
               [c, &done_mu, &done_cv, &done](grpc::Status status) {
                 c->status = std::move(status);
                 std::lock_guard<std::mutex> lock(done_mu);
                 ++done;
                 done_cv.notify_all();
               });
  }
  {
    // Every call ends by its deadline, so every callback runs.
    std::unique_lock<std::mutex> lock(done_mu);
    done_cv.wait(lock, [&] { return done == calls.size(); });
  }
  for (const std::unique_ptr<Call>& call : calls) {
    NoteCallStatus(call->peer.grpc_address, call->stub.get(), call->status);
  }
  std::unique_lock<std::mutex> lock(mu_);
  for (const std::unique_ptr<Call>& call : calls) {
    PeerView& view = peer_views_[PeerKey(call->peer)];
    if (call->status.ok()) {
      view = FromProto(call->response.peer());
      view.answered = true;
      membership_.NotePeer(view);
    } else {
      if (view.ref.grpc_address.empty()) view.ref = call->peer;
      view.answered = false;
    }
    view.asked_ns = asked;
  }
  const int64_t decided = probe::RawNowNs();
  CarryOutLocked(membership_.DecideMastership(decided, synchronized_, PeerViewsLocked()),
                 decided);
}

void MembershipAgent::CarryOutLocked(const MastershipDecision& d, int64_t now) {
  switch (d.kind) {
    case MastershipDecision::Kind::kNone:
      last_wait_why_.clear();
      return;
    case MastershipDecision::Kind::kWait:
      if (d.why != last_wait_why_) {
        spdlog::info("{}: without a master for {} ms; not taking over: {}",
                     self_.node_id,
                     (now - membership_.LastMasterContactNs(now)) / 1'000'000, d.why);
        last_wait_why_ = d.why;
      }
      return;
    case MastershipDecision::Kind::kPromote: {
      const std::optional<NodeRef> old_parent = membership_.Promote(d.term, now);
      is_master_.store(true);
      last_wait_why_.clear();
      spdlog::warn("{}: took over as master under term {}: {}; continuing "
                   "global time from its synchronized mapping",
                   self_.node_id, d.term, d.why);
      if (old_parent) {
        pending_leaves_.push_back({*old_parent, "taking over as master", std::nullopt});
      }
      peer_wake_.notify_all();
      return;
    }
    case MastershipDecision::Kind::kDemote: {
      const LeavePlan plan = membership_.Demote(d.master, now);
      is_master_.store(false);
      next_join_ns_ = 0;
      spdlog::warn("{}: no longer master: {}; handing {} children to it and "
                   "joining it as a node", self_.node_id, d.why,
                   plan.children.size());
      for (const NodeRef& child : plan.children) {
        handed_over_children_.insert(child.node_id);
        pending_leaves_.push_back({child, "parent demoted", plan.successor});
      }
      peer_wake_.notify_all();
      wake_.notify_all();
      return;
    }
    case MastershipDecision::Kind::kRejoin: {
      const std::optional<NodeRef> before =
          membership_.RejoinCandidates().empty()
              ? std::nullopt
              : std::optional<NodeRef>(membership_.RejoinCandidates().front());
      membership_.OnMasterFound(d.master, now);
      if (!before || before->node_id != d.master.node_id) {
        spdlog::info("{}: {}: joining it", self_.node_id, d.why);
        next_join_ns_ = 0;
        wake_.notify_all();
      }
      return;
    }
  }
}

absl::StatusOr<PeerResponse> MembershipAgent::HandlePeer(const PeerRequest& request) {
  const int64_t now = probe::RawNowNs();
  std::lock_guard<std::mutex> lock(mu_);
  PeerView caller = FromProto(request.from());
  membership_.NotePeer(caller);
  PeerResponse response;
  *response.mutable_peer() = ToProto(membership_.SelfView(now, synchronized_));
  if (membership_.is_master() && !leaving_) {
    // A master polled by one that outranks it meets the higher term here.
    caller.answered = true;
    caller.asked_ns = now;
    const MastershipDecision d = membership_.DecideMastership(now, synchronized_, {caller});
    if (d.kind == MastershipDecision::Kind::kDemote) CarryOutLocked(d, now);
  }
  return response;
}

absl::Status MembershipAgent::HandleHandover(const HandoverRequest& request) {
  const int64_t now = probe::RawNowNs();
  std::lock_guard<std::mutex> lock(mu_);
  if (leaving_) {
    return absl::FailedPreconditionError(absl::StrCat(self_.node_id, " is leaving"));
  }
  const absl::Status accepted = membership_.AcceptHandover(
      request.node_id(), request.term(), synchronized_, now);
  if (!accepted.ok()) {
    spdlog::warn("{}: refused the handover from {}: {}", self_.node_id,
                 request.node_id(), std::string(accepted.message()));
    return accepted;
  }
  is_master_.store(true);
  spdlog::warn("{}: took over as master under term {}: {} hands over (it is "
               "leaving); continuing global time from its synchronized mapping",
               self_.node_id, request.term(), request.node_id());
  return absl::OkStatus();
}

bool MembershipAgent::HandOverMastership(LeavePlan* plan) {
  std::set<std::string> tried;
  for (;;) {
    std::optional<Candidate> next;
    uint64_t term = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!membership_.is_master()) return false;
      next = membership_.HandoverCandidate(tried);
      term = membership_.highest_term() + 1;
    }
    if (!next) {
      spdlog::warn("{}: leaving as master with no candidate taking over{}",
                   self_.node_id, tried.empty() ? " (none known)" : "");
      return false;
    }
    tried.insert(next->ref.node_id);
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(options_.rpc_timeout_ns));
    HandoverRequest request;
    request.set_node_id(self_.node_id);
    request.set_term(term);
    if (const std::optional<probe::ProbeKeys> key = ProbeKey()) {
      SignRpc(*key, "Handover", request, &context);
    }
    HandoverResponse response;
    const std::shared_ptr<Clocksync::Stub> stub = StubFor(next->ref.grpc_address);
    const grpc::Status status = stub->Handover(&context, request, &response);
    NoteCallStatus(next->ref.grpc_address, stub.get(), status);
    if (!status.ok()) {
      spdlog::warn("{}: handover to {} failed: {}", self_.node_id,
                   next->ref.node_id, status.error_message());
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    *plan = membership_.HandOver(next->ref);
    is_master_.store(false);
    spdlog::warn("{}: handed mastership to {} under term {}; its children "
                 "follow it", self_.node_id, next->ref.node_id, term);
    return true;
  }
}

}  // namespace clocksync
