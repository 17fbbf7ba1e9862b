// clocksyncd/membership_agent.cc: MembershipAgent: see membership_agent.h.

#include "clocksyncd/membership_agent.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "clocksyncd/rpc_auth.h"
#include "probe/requester.h"
#include "probe/raw_clock.h"
#include "spdlog/spdlog.h"

namespace clocksync {
namespace {

std::string Describe(const NodeRef& ref) {
  if (!ref.node_id.empty()) return ref.node_id;
  return "seed " + ref.grpc_address;
}

std::chrono::system_clock::time_point DeadlineIn(int64_t ns) {
  return std::chrono::system_clock::now() + std::chrono::nanoseconds(ns);
}

absl::Status FromGrpc(const grpc::Status& status, const std::string& what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

}  // namespace

std::string ValidateMembershipAgentOptions(const MembershipAgentOptions& o,
                                           const MembershipConfig& config) {
  if (o.heartbeat_interval_ns < 10'000'000) {
    return "heartbeat_interval: must be at least 10ms";
  }
  if (config.lease_ns < 4 * o.heartbeat_interval_ns) {
    return "lease: must be at least 4 heartbeat intervals (the lease is "
           "renewed by heartbeats, one interval later at each level)";
  }
  if (o.rpc_timeout_ns <= 0) return "rpc_timeout: must be positive";
  if (o.heartbeat_failures_for_loss < 1) {
    return "heartbeat_failures_for_loss: must be at least 1";
  }
  if (o.child_timeout_ns < 2 * o.heartbeat_interval_ns) {
    return "child_timeout: must be at least 2 heartbeat intervals";
  }
  if (o.parent_loss) {
    const std::string invalid = ValidateParentLossOptions(*o.parent_loss);
    if (!invalid.empty()) return invalid;
  }
  return ValidateMembershipConfig(config);
}

// One channel per gRPC address, created on first use and kept (gRPC
// reconnects by itself), except after a call on it ran out of time: a TCP
// connection whose packets were dropped (a cut between racks, a host gone)
// still counts as ready, and after the network heals its retransmissions
// back off for seconds more, long enough for a demoted master to take over
// again. A timed-out call's channel is forgotten; the next call opens a new
// connection, and calls in flight keep the old one until they end.
class MembershipAgent::Channels {
 public:
  std::shared_ptr<Clocksync::Stub> Stub(const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<Clocksync::Stub>& stub = stubs_[address];
    if (stub == nullptr) {
      grpc::ChannelArguments args;
      // Fail fast and retry soon: a dead parent must be noticed quickly.
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
      // A channel of its own, never one shared with a forgotten channel.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      stub = Clocksync::NewStub(grpc::CreateCustomChannel(
          address, grpc::InsecureChannelCredentials(), args));
    }
    return stub;
  }

  // True when the channel `used` was forgotten for this status.
  bool Forget(const std::string& address, const Clocksync::Stub* used,
              const grpc::Status& status) {
    if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) return false;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = stubs_.find(address);
    // Another call may have replaced it already.
    if (it == stubs_.end() || it->second.get() != used) return false;
    stubs_.erase(it);
    return true;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Clocksync::Stub>> stubs_;
};

std::shared_ptr<Clocksync::Stub> MembershipAgent::StubFor(
    const std::string& grpc_address) {
  return channels_->Stub(grpc_address);
}

void MembershipAgent::NoteCallStatus(const std::string& grpc_address,
                                     const Clocksync::Stub* used,
                                     const grpc::Status& status) {
  if (channels_->Forget(grpc_address, used, status)) {
    spdlog::debug("{}: a call to {} ran out of time; the next one opens a new "
                  "connection", self_.node_id, grpc_address);
  }
}

MembershipAgent::MembershipAgent(MembershipConfig config,
                                 MembershipAgentOptions options)
    : self_(config.self),
      options_(options),
      channels_(std::make_unique<Channels>()),
      membership_(std::move(config)),
      probe_key_(options.probe_key) {
  retry_ns_ = options_.retry_min_ns;
  if (options_.parent_loss) {
    parent_loss_ = std::make_unique<ParentLossDetector>(*options_.parent_loss);
  }
}

MembershipAgent::~MembershipAgent() { Stop(); }

void MembershipAgent::Start() {
  // A master with seeds may be returning to a tree that has another master.
  ResolveStartupRole();
  const int64_t now = probe::RawNowNs();
  {
    std::lock_guard<std::mutex> lock(mu_);
    is_master_.store(membership_.is_master());
    last_account_ns_ = now;
    if (!membership_.is_master()) {
      // A previous run under this id may have granted leases still running
      // in what was its subtree: wait them out before joining
      // (docs/MEMBERSHIP.md, "Limits").
      membership_.AssumeGrantedUntil(now + membership_.config().lease_ns);
    }
  }
  thread_ = std::thread([this] { Loop(); });
  peer_thread_ = std::thread([this] { PeerLoop(); });
}

void MembershipAgent::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  peer_wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (peer_thread_.joinable()) peer_thread_.join();
}

bool MembershipAgent::Sleep(int64_t ns) {
  std::unique_lock<std::mutex> lock(mu_);
  wake_.wait_for(lock, std::chrono::nanoseconds(ns), [this] { return stop_; });
  return !stop_;
}

void MembershipAgent::Loop() {
  // Ticks often enough for heartbeats and loss detection; the work of a
  // tick is mostly comparisons.
  const int64_t tick_ns = std::min<int64_t>(options_.heartbeat_interval_ns / 2,
                                            50'000'000);
  while (Sleep(tick_ns)) {
    Tick(probe::RawNowNs());
  }
}

void MembershipAgent::Tick(int64_t now) {
  enum class Action { kNone, kJoin, kHeartbeat, kMoveUp };
  Action action = Action::kNone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (leaving_) return;
    AccountMasterlessLocked(now);
    const std::vector<std::string> expired =
        membership_.ExpireChildren(now, options_.child_timeout_ns);
    for (const std::string& id : expired) {
      spdlog::warn("{}: child {} silent for {} ms, dropped", self_.node_id, id,
                   options_.child_timeout_ns / 1'000'000);
    }
    switch (membership_.state()) {
      case MembershipState::kMaster:
      case MembershipState::kLeft:
        return;
      case MembershipState::kDetached:
        if (now >= membership_.RejoinAllowedAtNs() && now >= next_join_ns_) {
          action = Action::kJoin;
        }
        break;
      case MembershipState::kAttached: {
        if (parent_loss_) {
          if (const std::optional<std::string> why = parent_loss_->Check(now)) {
            // Never an answer since attaching: the probes themselves are
            // refused (a different --probe_key_file, a firewall), not lost.
            LoseParentLocked(
                now, absl::StrCat(*why, parent_loss_->AnsweredSinceReset()
                                            ? ""
                                            : " (none since attaching: the same "
                                              "--probe_key_file on both sides? "
                                              "UDP reachable?)"));
            return;
          }
        }
        if (membership_.ParentStale(now)) {
          LoseParentLocked(now, "its lease has been expired too long (the "
                                "parent is cut off from the master)");
          return;
        }
        if (now >= next_heartbeat_ns_) {
          action = Action::kHeartbeat;
        } else if (membership_.ShouldMoveUp(now)) {
          action = Action::kMoveUp;
        }
        break;
      }
    }
  }
  switch (action) {
    case Action::kJoin:
      RunJoinWalk(now, /*move_up=*/false);
      break;
    case Action::kHeartbeat:
      SendHeartbeat(now);
      break;
    case Action::kMoveUp:
      RunJoinWalk(now, /*move_up=*/true);
      break;
    case Action::kNone:
      break;
  }
}

void MembershipAgent::LoseParentLocked(int64_t now, const std::string& why) {
  const std::optional<NodeRef> parent = membership_.parent();
  membership_.OnParentLost(now);
  ++parent_losses_;
  heartbeat_failures_ = 0;
  next_join_ns_ = 0;
  retry_ns_ = options_.retry_min_ns;
  spdlog::warn("{}: lost parent {}: {}; holding over, rejoining {}",
               self_.node_id, parent ? parent->node_id : "?", why,
               membership_.RejoinAllowedAtNs() > now
                   ? absl::StrCat("in ", (membership_.RejoinAllowedAtNs() - now) /
                                             1'000'000,
                                  " ms (leases granted below must run out)")
                   : std::string("now"));
}

void MembershipAgent::SetProbeTargetLocked(const NodeRef& parent, int64_t now) {
  if (!target_.parent || target_.parent->probe_address != parent.probe_address) {
    ++target_.generation;
  }
  target_.parent = parent;
  if (parent_loss_) parent_loss_->Reset(now);
}

absl::StatusOr<JoinResponse> MembershipAgent::CallJoin(
    const NodeRef& target, const JoinRequestInfo& request) {
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(options_.rpc_timeout_ns));
  JoinResponse response;
  const JoinRequest wire = ToProto(request);
  if (const std::optional<probe::ProbeKeys> key = ProbeKey()) {
    SignRpc(*key, "Join", wire, &context);
  }
  const std::shared_ptr<Clocksync::Stub> stub = StubFor(target.grpc_address);
  const grpc::Status status = stub->Join(&context, wire, &response);
  NoteCallStatus(target.grpc_address, stub.get(), status);
  if (!status.ok()) {
    return FromGrpc(status, absl::StrCat("Join at ", Describe(target), " (",
                                         target.grpc_address, ")"));
  }
  return response;
}

absl::Status MembershipAgent::CallLeave(const NodeRef& target,
                                        const std::string& reason,
                                        const std::optional<NodeRef>& successor) {
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(options_.rpc_timeout_ns));
  LeaveRequest request;
  request.set_node_id(self_.node_id);
  request.set_reason(reason);
  if (successor) *request.mutable_successor() = ToProto(*successor);
  LeaveResponse response;
  if (const std::optional<probe::ProbeKeys> key = ProbeKey()) {
    SignRpc(*key, "Leave", request, &context);
  }
  const std::shared_ptr<Clocksync::Stub> stub = StubFor(target.grpc_address);
  const grpc::Status status = stub->Leave(&context, request, &response);
  NoteCallStatus(target.grpc_address, stub.get(), status);
  return FromGrpc(status, absl::StrCat("Leave at ", Describe(target)));
}

int64_t MembershipAgent::MeasureRttNs(const NodeRef& ref) {
  if (ref.probe_address.empty()) return -1;
  auto cached = rtt_cache_ns_.find(ref.node_id);
  if (cached != rtt_cache_ns_.end()) return cached->second;
  probe::ProbeRequester::Options options;
  options.parent_address = ref.probe_address;
  options.node_id = options_.probe_sender_id;
  options.expiry_ns = 50'000'000;
  options.key = ProbeKey();
  absl::StatusOr<std::unique_ptr<probe::ProbeRequester>> requester =
      probe::ProbeRequester::Create(options);
  int64_t best = -1;
  if (requester.ok()) {
    // Three exchanges, one at a time; the shortest round trip (minus the
    // other side's turnaround) is the least disturbed by queuing.
    for (int i = 0; i < 3; ++i) {
      if (!(*requester)->SendProbe().ok()) break;
      const absl::StatusOr<int> got =
          (*requester)->Poll(30, [&](const probe::ProbeResult& r) {
            const int64_t rtt = (r.sample.t4_ns - r.sample.t1_ns) -
                                (r.sample.t3_ns - r.sample.t2_ns);
            if (best < 0 || rtt < best) best = std::max<int64_t>(rtt, 0);
          });
      if (!got.ok()) break;
    }
  }
  rtt_cache_ns_[ref.node_id] = best;
  return best;
}

void MembershipAgent::RunJoinWalk(int64_t now, bool move_up) {
  std::optional<JoinWalk> walk;
  {
    std::lock_guard<std::mutex> lock(mu_);
    walk.emplace(move_up ? membership_.StartMoveUp(now)
                         : membership_.StartJoin(now));
  }
  rtt_cache_ns_.clear();
  std::vector<std::string> trail;
  while (const NodeRef* target = walk->target()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_ || leaving_) return;
    }
    const NodeRef asked = *target;
    const JoinRequestInfo request = walk->request();
    const int64_t sent = probe::RawNowNs();
    absl::StatusOr<JoinResponse> response = CallJoin(asked, request);
    if (!response.ok()) {
      trail.push_back(absl::StrCat(Describe(asked), ": ",
                                   response.status().message()));
      walk->OnFailed();
      continue;
    }
    const JoinDecision decision = FromProto(*response);
    if (decision.kind == JoinDecision::Kind::kRedirect) {
      trail.push_back(absl::StrCat(Describe(asked), " redirected to ",
                                   decision.redirect_to.node_id));
      if (options_.measure_rtt && decision.alternatives.size() > 1) {
        walk->OnRedirect(decision,
                         [this](const NodeRef& ref) { return MeasureRttNs(ref); });
      } else {
        walk->OnRedirect(decision);
      }
      continue;
    }
    if (decision.kind == JoinDecision::Kind::kRejected) {
      trail.push_back(absl::StrCat(Describe(asked), " refused: ",
                                   RejectReasonName(decision.reason), " ",
                                   decision.detail));
      walk->OnFailed();
      continue;
    }
    // Accepted.
    std::optional<NodeRef> tell_left;
    std::optional<NodeRef> old_parent;
    absl::Status adopted;
    NodeRef parent;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (move_up) {
        absl::StatusOr<NodeRef> old = membership_.OnMovedUp(decision.attachment, sent);
        adopted = old.status();
        if (old.ok()) old_parent = *old;
      } else {
        adopted = membership_.OnAttached(decision.attachment, sent);
      }
      if (adopted.ok()) {
        parent = *membership_.parent();
        SetProbeTargetLocked(parent, probe::RawNowNs());
        ++joins_;
        heartbeat_failures_ = 0;
        next_heartbeat_ns_ = 0;
        retry_ns_ = options_.retry_min_ns;
        tell_left = std::move(left_parent_);
        left_parent_.reset();
      }
    }
    if (!adopted.ok()) {
      // A stale acceptance (we moved on meanwhile): undo it.
      spdlog::warn("{}: acceptance by {} not taken: {}", self_.node_id,
                   Describe(asked), std::string(adopted.message()));
      const absl::Status undone = CallLeave(asked, "acceptance not taken", {});
      if (!undone.ok()) spdlog::debug("{}", std::string(undone.message()));
      walk->OnFailed();
      continue;
    }
    spdlog::info("{}: {} {} (depth {}, after {} join messages{})",
                 self_.node_id, move_up ? "moved up to" : "attached to",
                 parent.node_id, decision.attachment.depth, walk->hops() + 1,
                 trail.empty() ? "" : absl::StrCat(": ", absl::StrJoin(trail, "; ")));
    if (old_parent) {
      const absl::Status left = CallLeave(*old_parent, "moved up", {});
      if (!left.ok()) spdlog::debug("{}", std::string(left.message()));
    }
    if (tell_left && tell_left->node_id != parent.node_id) {
      // The parent that left waits for its children to re-attach.
      const absl::Status told = CallLeave(*tell_left, "re-attached", {});
      if (!told.ok()) spdlog::debug("{}", std::string(told.message()));
    }
    return;
  }
  if (move_up) return;  // Stays where it is; the cooldown paces retries.
  std::lock_guard<std::mutex> lock(mu_);
  next_join_ns_ = probe::RawNowNs() + retry_ns_;
  spdlog::warn("{}: no node accepted us ({} join messages{}); retrying in {} ms",
               self_.node_id, walk->hops(),
               trail.empty() ? "" : absl::StrCat(": ", absl::StrJoin(trail, "; ")),
               retry_ns_ / 1'000'000);
  retry_ns_ = std::min(2 * retry_ns_, options_.retry_max_ns);
}

void MembershipAgent::SendHeartbeat(int64_t now) {
  HeartbeatRequest request;
  NodeRef parent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (membership_.state() != MembershipState::kAttached || !membership_.parent()) {
      return;
    }
    parent = *membership_.parent();
    request.set_node_id(self_.node_id);
    request.set_subtree_size(membership_.SubtreeSize());
    request.set_free_slot_depth(
        std::min(membership_.FreeSlotDepth(now), Membership::kNoFreeSlot));
    request.set_rtt_ns(parent_rtt_ns_.load());
    for (const Candidate& c : membership_.SubtreeCandidates()) {
      *request.add_candidates() = ToProto(c);
    }
    next_heartbeat_ns_ = now + options_.heartbeat_interval_ns;
  }
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(options_.rpc_timeout_ns));
  HeartbeatResponse response;
  if (const std::optional<probe::ProbeKeys> key = ProbeKey()) {
    SignRpc(*key, "Heartbeat", request, &context);
  }
  const int64_t sent = probe::RawNowNs();
  const std::shared_ptr<Clocksync::Stub> stub = StubFor(parent.grpc_address);
  const grpc::Status status = stub->Heartbeat(&context, request, &response);
  NoteCallStatus(parent.grpc_address, stub.get(), status);
  std::lock_guard<std::mutex> lock(mu_);
  if (membership_.state() != MembershipState::kAttached ||
      !membership_.parent() || membership_.parent()->node_id != parent.node_id) {
    return;  // Moved on meanwhile.
  }
  const int64_t done = probe::RawNowNs();
  if (status.ok()) {
    heartbeat_failures_ = 0;
    if (parent_loss_) parent_loss_->OnHeartbeatAnswered(done);
    if (!membership_.OnParentInfo(FromProto(response.attachment()), sent) &&
        membership_.state() == MembershipState::kDetached) {
      ++parent_losses_;
      spdlog::error("{}: parent {} sent a chain through this node; detached",
                    self_.node_id, parent.node_id);
    }
    return;
  }
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    membership_.OnDisowned(done);
    ++parent_losses_;
    next_join_ns_ = 0;
    spdlog::warn("{}: parent {} no longer knows this node ({}); rejoining",
                 self_.node_id, parent.node_id, status.error_message());
    return;
  }
  if (++heartbeat_failures_ >= options_.heartbeat_failures_for_loss) {
    LoseParentLocked(done, absl::StrCat(heartbeat_failures_,
                                        " heartbeats failed, last: ",
                                        status.error_message()));
  }
}

JoinResponse MembershipAgent::HandleJoin(const JoinRequest& request) {
  const int64_t now = probe::RawNowNs();
  std::lock_guard<std::mutex> lock(mu_);
  const JoinRequestInfo info = FromProto(request);
  const JoinDecision decision = membership_.HandleJoin(info, now);
  if (decision.kind == JoinDecision::Kind::kAccepted) {
    spdlog::info("{}: accepted child {} (subtree {}; now {} children)",
                 self_.node_id, info.newcomer.node_id, info.subtree_size,
                 membership_.children().size());
  }
  return ToProto(decision);
}

absl::Status MembershipAgent::HandleLeave(const LeaveRequest& request) {
  const int64_t now = probe::RawNowNs();
  std::lock_guard<std::mutex> lock(mu_);
  const std::optional<NodeRef>& parent = membership_.parent();
  if (parent && parent->node_id == request.node_id()) {
    std::optional<NodeRef> successor;
    if (request.has_successor()) successor = FromProto(request.successor());
    left_parent_ = *parent;
    membership_.OnParentLeft(successor, now);
    next_join_ns_ = 0;
    spdlog::info("{}: parent {} leaves ({}); rejoining at {}", self_.node_id,
                 request.node_id(), request.reason(),
                 successor ? successor->node_id : "the seeds");
    wake_.notify_all();
    return absl::OkStatus();
  }
  leaving_children_.erase(request.node_id());
  if (membership_.HandleLeave(request.node_id())) {
    spdlog::info("{}: child {} left ({})", self_.node_id, request.node_id(),
                 request.reason());
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat(request.node_id(),
                                          " is neither a child nor the parent of ",
                                          self_.node_id));
}

absl::StatusOr<HeartbeatResponse> MembershipAgent::HandleHeartbeat(
    const HeartbeatRequest& request) {
  const int64_t now = probe::RawNowNs();
  std::lock_guard<std::mutex> lock(mu_);
  if ((leaving_ && leaving_children_.count(request.node_id()) > 0) ||
      handed_over_children_.count(request.node_id()) > 0) {
    // Its Leave (with the successor) is on the way: a failed heartbeat, not
    // "you are not my child", which would send it back to us.
    return absl::UnavailableError(
        absl::StrCat(self_.node_id, " is leaving; wait for its Leave"));
  }
  const std::vector<Candidate> candidates =
      CandidatesFromProto(request.candidates());
  if (!membership_.OnChildHeard(request.node_id(), request.subtree_size(),
                                request.rtt_ns(), now,
                                request.free_slot_depth(), &candidates)) {
    return absl::NotFoundError(
        absl::StrCat(request.node_id(), " is not a child of ", self_.node_id));
  }
  std::optional<Attachment> attachment =
      membership_.AttachmentForChild(request.node_id(), now);
  if (!attachment) {
    return absl::NotFoundError(
        absl::StrCat(request.node_id(), " is not a child of ", self_.node_id));
  }
  HeartbeatResponse response;
  *response.mutable_attachment() = ToProto(*attachment);
  return response;
}

std::vector<NodeAddress> MembershipAgent::Children() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeAddress> out;
  for (const auto& [id, child] : membership_.children()) out.push_back(ToProto(child.ref));
  return out;
}

MembershipAgent::ProbeTarget MembershipAgent::probe_target() const {
  std::lock_guard<std::mutex> lock(mu_);
  return target_;
}

void MembershipAgent::OnProbeSent(int64_t now_ns) {
  if (parent_loss_) parent_loss_->OnProbeSent(now_ns);
}

void MembershipAgent::OnProbeAnswered(int64_t now_ns) {
  if (parent_loss_) parent_loss_->OnProbeAnswered(now_ns);
}

void MembershipAgent::SetParentRoundTripNs(int64_t rtt_ns) {
  parent_rtt_ns_.store(rtt_ns);
}

void MembershipAgent::SetProbeKey(const std::optional<probe::ProbeKeys>& key) {
  std::lock_guard<std::mutex> lock(key_mu_);
  probe_key_ = key;
}

std::optional<probe::ProbeKeys> MembershipAgent::ProbeKey() const {
  std::lock_guard<std::mutex> lock(key_mu_);
  return probe_key_;
}

MembershipAgent::Snapshot MembershipAgent::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  Snapshot s;
  s.state = membership_.state();
  s.depth = membership_.depth();
  s.parent = membership_.parent();
  s.ancestors = membership_.ancestors();
  s.children = static_cast<uint32_t>(membership_.children().size());
  s.subtree_size = membership_.SubtreeSize();
  s.joins = joins_;
  s.parent_losses = parent_losses_;
  s.term = membership_.term();
  s.master = membership_.master();
  s.candidates = membership_.TreeCandidates();
  s.master_priority = membership_.master_priority();
  s.takeovers = membership_.promotions();
  s.masterless_ns = masterless_ns_;
  s.has_master = membership_.MasterlessSinceNs(probe::RawNowNs()) < 0 &&
                 membership_.state() != MembershipState::kLeft;
  return s;
}

void MembershipAgent::LeaveAndStop(int64_t grace_ns) {
  LeavePlan plan;
  // A master hands mastership to its best candidate first: the children
  // then move to it with no holdover.
  const bool handed_over = HandOverMastership(&plan);
  {
    std::lock_guard<std::mutex> lock(mu_);
    leaving_ = true;
    if (!handed_over) plan = membership_.Leave();
    is_master_.store(false);
    for (const NodeRef& child : plan.children) leaving_children_.insert(child.node_id);
  }
  for (const NodeRef& child : plan.children) {
    const absl::Status told = CallLeave(child, "parent leaving", plan.successor);
    if (!told.ok()) {
      spdlog::warn("{}: could not tell child {}: {}", self_.node_id,
                   child.node_id, std::string(told.message()));
      std::lock_guard<std::mutex> lock(mu_);
      leaving_children_.erase(child.node_id);
    }
  }
  // Keep answering the children's probes until they have re-attached.
  const int64_t deadline = probe::RawNowNs() + grace_ns;
  while (probe::RawNowNs() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (leaving_children_.empty() || stop_) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!leaving_children_.empty()) {
      spdlog::warn("{}: leaving before {} re-attached", self_.node_id,
                   absl::StrJoin(leaving_children_, ", "));
    }
  }
  if (plan.parent) {
    const absl::Status told = CallLeave(*plan.parent, "shutting down", {});
    if (!told.ok()) {
      spdlog::warn("{}: could not tell parent {}: {}", self_.node_id,
                   plan.parent->node_id, std::string(told.message()));
    }
  }
  spdlog::info("{}: left the tree", self_.node_id);
  Stop();
}

}  // namespace clocksync
