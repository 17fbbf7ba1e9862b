// membership/membership_sim.cc: the membership simulator (membership_sim.h):
// nodes by dense index, the network, message delivery and the ticks; the
// invariant checks are in membership_sim_checks.cc.

#include "membership/membership_sim.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace clocksync {
namespace {

constexpr int64_t kRackRttNs = 30'000;
constexpr int64_t kPodRttNs = 100'000;
constexpr int64_t kCrossPodRttNs = 400'000;

}  // namespace

MembershipSim::MembershipSim(const MembershipSimOptions& options)
    : options_(options),
      rng_(options.seed),
      topology_rng_(options.seed ^ 0x9e3779b97f4a7c15ULL) {
  master_id_ = IdAt(0);
  MembershipConfig config = BaseConfig(master_id_);
  config.master = true;
  Node& node = nodes_[NewNode(config)];
  node.pod = 0;
  node.rack = 0;
  node.synced = true;
}

std::string MembershipSim::IdAt(int index) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "n%05d", index);
  return buf;
}

MembershipSim::Idx MembershipSim::IndexOf(const std::string& id) const {
  // "n" and at least five digits, no other leading zeros than IdAt's.
  if (id.size() < 6 || id.size() > 10 || id[0] != 'n') return -1;
  int64_t index = 0;
  for (size_t k = 1; k < id.size(); ++k) {
    if (id[k] < '0' || id[k] > '9') return -1;
    index = index * 10 + (id[k] - '0');
  }
  if (index >= static_cast<int64_t>(nodes_.size())) return -1;
  if (id.size() > 6 && id[1] == '0') return -1;
  return static_cast<Idx>(index);
}

MembershipSim::Idx MembershipSim::IndexOrDie(const std::string& id) const {
  const Idx i = IndexOf(id);
  if (i < 0) {
    std::fprintf(stderr, "MembershipSim: unknown node id '%s'\n", id.c_str());
    std::abort();
  }
  return i;
}

MembershipSim::Idx MembershipSim::NewNode(const MembershipConfig& config) {
  const Idx i = static_cast<Idx>(nodes_.size());
  nodes_.emplace_back(IdAt(i), config);
  by_address_[RefOf(nodes_.back().id).grpc_address] = i;
  checked_parent_.push_back(-1);
  checked_children_.emplace_back();
  checked_lease_view_.emplace_back();
  MarkChanged(i);
  return i;
}

void MembershipSim::MarkChanged(Idx i) {
  if (i < 0) return;
  Node& n = nodes_[i];
  if (n.changed) return;
  n.changed = true;
  changed_.push_back(i);
}

void MembershipSim::Isolate(const std::string& id, int64_t until_ns) {
  nodes_[IndexOrDie(id)].isolated_until_ns = until_ns;
}

bool MembershipSim::Reachable(const std::string& from,
                              const std::string& to) const {
  return ReachableAt(IndexOf(from), IndexOf(to));
}

bool MembershipSim::ReachableAt(Idx from, Idx to) const {
  if (!AliveAt(to)) return false;
  const bool from_side = from >= 0 && nodes_[from].partition_side;
  if (now_ns_ < partition_until_ns_ && from_side != nodes_[to].partition_side) {
    return false;
  }
  for (const Idx i : {from, to}) {
    if (i >= 0 && now_ns_ < nodes_[i].isolated_until_ns) return false;
  }
  return true;
}

NodeRef MembershipSim::RefOf(const std::string& id) const {
  return NodeRef{id, id + ":3190", id + ":3191"};
}

MembershipConfig MembershipSim::BaseConfig(const std::string& id) const {
  MembershipConfig config;
  config.self = RefOf(id);
  config.max_children = options_.max_children;
  config.lease_ns = options_.lease_ns;
  config.lease_margin_ns = options_.lease_margin_ns;
  config.missed_probes_for_loss = options_.missed_heartbeats_for_loss;
  config.abandon_parent_after_ns = options_.abandon_parent_after_ns;
  config.suspect_child_after_ns = options_.suspect_child_after_ns;
  config.move_up_min_gain = options_.move_up_min_gain;
  config.move_cooldown_ns = options_.move_cooldown_ns;
  config.takeover_after_ns = options_.takeover_after_ns;
  config.peer_answer_valid_ns = options_.peer_answer_valid_ns;
  return config;
}

std::string MembershipSim::AddNode(const std::vector<std::string>& seed_ids) {
  const std::string id = IdAt(static_cast<int>(nodes_.size()));
  MembershipConfig config = BaseConfig(id);
  // Seeds as an operator gives them (--join=HOST:PORT): address only.
  if (seed_ids.empty()) {
    config.seeds.push_back(NodeRef{"", "", RefOf(master_id_).grpc_address});
  }
  for (const std::string& s : seed_ids) {
    config.seeds.push_back(NodeRef{"", "", RefOf(s).grpc_address});
  }
  Node& node = nodes_[NewNode(config)];
  std::uniform_int_distribution<int> pod(0, options_.pods - 1);
  std::uniform_int_distribution<int> rack(0, options_.racks_per_pod - 1);
  node.pod = pod(topology_rng_);
  node.rack = rack(topology_rng_);
  node.next_join_ns = now_ns_;
  return id;
}

std::string MembershipSim::AddPinnedNode(const std::string& parent_id) {
  const std::string id = IdAt(static_cast<int>(nodes_.size()));
  MembershipConfig config = BaseConfig(id);
  config.pinned_parent = RefOf(parent_id);
  Node& node = nodes_[NewNode(config)];
  node.next_join_ns = now_ns_;
  return id;
}

void MembershipSim::Kill(const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    const Idx i = IndexOf(id);
    if (i < 0) continue;
    nodes_[i].alive = false;
    MarkChanged(i);
  }
}

void MembershipSim::Leave(const std::string& id) {
  const Idx i = IndexOrDie(id);
  Node& n = nodes_[i];
  if (!n.alive) return;
  const LeavePlan plan = n.m.Leave();
  if (plan.parent) {
    Message m;
    m.type = Message::Type::kLeave;
    m.from = i;
    m.to = Resolve(*plan.parent);
    Send(std::move(m));
  }
  for (const NodeRef& child : plan.children) {
    Message m;
    m.type = Message::Type::kParentLeft;
    m.from = i;
    m.to = Resolve(child);
    m.successor = plan.successor;
    Send(std::move(m));
  }
  // Gone: from now on messages to it fail like those to a dead node.
  n.alive = false;
  MarkChanged(i);
}

bool MembershipSim::alive(const std::string& id) const {
  return AliveAt(IndexOf(id));
}

bool MembershipSim::AliveAt(Idx i) const { return i >= 0 && nodes_[i].alive; }

const Membership& MembershipSim::node(const std::string& id) const {
  return nodes_[IndexOrDie(id)].m;
}

Membership& MembershipSim::mutable_node(const std::string& id) {
  const Idx i = IndexOrDie(id);
  MarkChanged(i);
  return nodes_[i].m;
}

std::vector<std::string> MembershipSim::LiveIds() const {
  std::vector<std::string> ids;
  for (const Node& n : nodes_) {
    if (n.alive) ids.push_back(n.id);
  }
  return ids;
}

size_t MembershipSim::live_count() const {
  size_t count = 0;
  for (const Node& n : nodes_) count += n.alive;
  return count;
}

std::pair<int, int> MembershipSim::LocationOf(const std::string& id) const {
  const Node& n = nodes_[IndexOrDie(id)];
  return {n.pod, n.rack};
}

int64_t MembershipSim::Rtt(const std::string& a, const std::string& b) const {
  return RttAt(IndexOrDie(a), IndexOrDie(b));
}

int64_t MembershipSim::RttAt(Idx a, Idx b) const {
  if (a == b) return 0;
  const Node& x = nodes_[a];
  const Node& y = nodes_[b];
  if (x.pod != y.pod) return kCrossPodRttNs;
  if (x.rack != y.rack) return kPodRttNs;
  return kRackRttNs;
}

MembershipSim::Idx MembershipSim::Resolve(const NodeRef& ref) const {
  if (!ref.node_id.empty()) {
    const Idx i = IndexOf(ref.node_id);
    if (i >= 0) return i;
  }
  auto it = by_address_.find(ref.grpc_address);
  return it == by_address_.end() ? -1 : it->second;
}

MembershipSim::Idx MembershipSim::ParentOf(Idx i) const {
  const Node& n = nodes_[i];
  if (!n.alive || n.m.state() != MembershipState::kAttached || !n.m.parent()) {
    return -1;
  }
  return IndexOf(n.m.parent()->node_id);
}

void MembershipSim::Send(Message message) {
  int64_t delay_ns = 0;
  if (options_.interleave) {
    std::uniform_int_distribution<int> ticks(1, options_.max_delay_ticks);
    delay_ns = ticks(rng_) * options_.tick_ns;
  }
  message.deliver_at_ns = now_ns_ + delay_ns;
  const int64_t at = message.deliver_at_ns;
  pending_[at].push_back(std::move(message));
}

void MembershipSim::SendJoin(Idx i) {
  Node& n = nodes_[i];
  const NodeRef* target = n.walk->target();
  Message m;
  m.type = Message::Type::kJoin;
  m.from = i;
  m.to = Resolve(*target);
  m.sent_ns = now_ns_;
  m.walk_id = n.walk_id;
  m.join = n.walk->request();
  ++stats_.join_requests;
  Send(std::move(m));
}

// After an answer: ask the walk's next target, or give up for a while.
void MembershipSim::ContinueWalk(Idx i) {
  Node& n = nodes_[i];
  stats_.max_walk_hops =
      std::max<uint64_t>(stats_.max_walk_hops, n.walk->hops());
  if (n.walk->target() != nullptr) {
    SendJoin(i);
    return;
  }
  const bool move = n.walk_is_move;
  n.walk.reset();
  if (move) return;  // The node stays where it is.
  ++stats_.walks_exhausted;
  n.next_join_ns = now_ns_ + options_.join_retry_ns;
}

void MembershipSim::NodeWork(Idx i) {
  Node& n = nodes_[i];
  if (!n.alive) return;
  Membership& m = n.m;
  if (!m.ExpireChildren(now_ns_, options_.child_timeout_ns).empty()) {
    MarkChanged(i);
  }
  if (m.state() == MembershipState::kAttached && m.ParentStale(now_ns_)) {
    ++stats_.abandoned;
    m.OnParentLost(now_ns_);
    MarkChanged(i);
  }
  // A move walk of a node that has since lost its parent is abandoned.
  if (n.walk && n.walk_is_move && m.state() != MembershipState::kAttached) {
    n.walk.reset();
  }
  if (!n.walk && m.ShouldMoveUp(now_ns_)) {
    ++stats_.move_attempts;
    n.walk.emplace(m.StartMoveUp(now_ns_));
    n.walk_is_move = true;
    n.walk_id = ++next_walk_id_;
    ContinueWalk(i);
  }
  const int32_t free_slot_depth = m.FreeSlotDepth(now_ns_);
  const bool size_changed = options_.early_heartbeat_on_size_change &&
                            (m.SubtreeSize() != n.reported_size ||
                             free_slot_depth != n.reported_free);
  if (m.state() == MembershipState::kAttached &&
      (now_ns_ >= n.next_heartbeat_ns || size_changed)) {
    n.next_heartbeat_ns = now_ns_ + options_.heartbeat_interval_ns;
    Message hb;
    hb.type = Message::Type::kHeartbeat;
    hb.from = i;
    hb.to = Resolve(*m.parent());
    hb.sent_ns = now_ns_;
    hb.subtree_size = m.SubtreeSize();
    n.reported_size = hb.subtree_size;
    hb.free_slot_depth = free_slot_depth;
    n.reported_free = hb.free_slot_depth;
    hb.rtt_ns = options_.children_report_rtt
                    ? (hb.to < 0 ? 0 : RttAt(i, hb.to))
                    : -1;
    hb.candidates = m.SubtreeCandidates();
    Send(std::move(hb));
  }
  if (m.state() == MembershipState::kDetached && !n.walk &&
      now_ns_ >= n.next_join_ns && now_ns_ >= m.RejoinAllowedAtNs()) {
    n.walk.emplace(m.StartJoin(now_ns_));
    n.walk_is_move = false;
    n.walk_id = ++next_walk_id_;
    ContinueWalk(i);
  }
  MastershipWork(i);
}

void MembershipSim::CheckNoCycleFrom(Idx i) {
  bool cycle = false;
  const std::vector<Idx> path = PathUp(i, &cycle);
  if (cycle) {
    violations_.push_back(absl::StrCat("cycle formed when ", nodes_[i].id,
                                       " attached: ",
                                       PathString(path, " -> ")));
  }
}

void MembershipSim::Deliver(const Message& msg) {
  ++stats_.messages;
  // A failure is the sender's own RPC error: it arrives whatever the
  // network does.
  const bool local = msg.type == Message::Type::kJoinFailed ||
                     msg.type == Message::Type::kHeartbeatFailed ||
                     msg.type == Message::Type::kPeerFailed ||
                     msg.type == Message::Type::kHandoverFailed;
  const bool to_alive = local ? AliveAt(msg.to) : ReachableAt(msg.from, msg.to);
  if (to_alive) MarkChanged(msg.to);
  // A reply cut off by a partition ends the RPC with an error (its
  // deadline) on the caller's side.
  if (!to_alive && AliveAt(msg.to) &&
      (msg.type == Message::Type::kJoinReply ||
       msg.type == Message::Type::kHeartbeatReply ||
       msg.type == Message::Type::kPeerReply ||
       msg.type == Message::Type::kHandoverReply)) {
    Message failed = msg;
    failed.type = msg.type == Message::Type::kJoinReply
                      ? Message::Type::kJoinFailed
                  : msg.type == Message::Type::kHeartbeatReply
                      ? Message::Type::kHeartbeatFailed
                  : msg.type == Message::Type::kPeerReply
                      ? Message::Type::kPeerFailed
                      : Message::Type::kHandoverFailed;
    Deliver(failed);
    return;
  }
  switch (msg.type) {
    case Message::Type::kJoin: {
      if (!to_alive) {
        Message fail = msg;
        fail.type = Message::Type::kJoinFailed;
        std::swap(fail.from, fail.to);
        Send(std::move(fail));
        return;
      }
      Message reply;
      reply.type = Message::Type::kJoinReply;
      reply.from = msg.to;
      reply.to = msg.from;
      reply.sent_ns = msg.sent_ns;
      reply.walk_id = msg.walk_id;
      reply.decision = nodes_[msg.to].m.HandleJoin(msg.join, now_ns_);
      Send(std::move(reply));
      return;
    }
    case Message::Type::kJoinReply:
    case Message::Type::kJoinFailed: {
      if (!to_alive) return;
      Node& n = nodes_[msg.to];
      const bool accepted = msg.type == Message::Type::kJoinReply &&
                            msg.decision.kind == JoinDecision::Kind::kAccepted;
      auto undo = [&] {
        Message leave;
        leave.type = Message::Type::kLeave;
        leave.from = msg.to;
        leave.to = msg.from;
        Send(std::move(leave));
      };
      if (!n.walk || n.walk_id != msg.walk_id) {
        if (accepted) {
          ++stats_.stale_accepts;
          undo();
        }
        return;
      }
      if (msg.type == Message::Type::kJoinFailed) {
        ++stats_.join_unreachable;
        n.walk->OnFailed();
      } else if (accepted && n.walk_is_move) {
        const int from_depth = static_cast<int>(n.m.depth());
        absl::StatusOr<NodeRef> old =
            n.m.OnMovedUp(msg.decision.attachment, msg.sent_ns);
        if (old.ok()) {
          ++stats_.moves;
          stats_.move_levels_gained += from_depth - n.m.depth();
          n.walk.reset();
          Message leave;
          leave.type = Message::Type::kLeave;
          leave.from = msg.to;
          leave.to = Resolve(*old);
          Send(std::move(leave));
          n.next_heartbeat_ns = now_ns_;
          CheckNoCycleFrom(msg.to);
          return;
        }
        ++stats_.attach_refused;
        undo();
        n.walk->OnFailed();
      } else if (accepted) {
        const absl::Status status =
            n.m.OnAttached(msg.decision.attachment, msg.sent_ns);
        if (status.ok()) {
          ++stats_.accepted;
          n.synced = true;
          n.walk.reset();
          std::uniform_int_distribution<int64_t> phase(
              0, options_.interleave ? options_.heartbeat_interval_ns - 1 : 0);
          n.next_heartbeat_ns =
              now_ns_ + options_.heartbeat_interval_ns - phase(rng_);
          CheckNoCycleFrom(msg.to);
          return;
        }
        ++stats_.attach_refused;
        undo();
        n.walk->OnFailed();
      } else if (msg.decision.kind == JoinDecision::Kind::kRedirect) {
        ++stats_.redirects;
        if (options_.choice == MembershipSimOptions::Choice::kNewcomerRtt) {
          const Idx self = msg.to;
          n.walk->OnRedirect(msg.decision, [&](const NodeRef& r) {
            const Idx other = Resolve(r);
            if (other < 0) return int64_t{-1};
            // A measurement: the model round trip with ±10 % noise.
            std::uniform_real_distribution<double> noise(0.9, 1.1);
            return static_cast<int64_t>(RttAt(self, other) * noise(rng_));
          });
        } else {
          n.walk->OnRedirect(msg.decision);
        }
      } else {
        ++stats_.rejected[RejectReasonName(msg.decision.reason)];
        n.walk->OnFailed();
      }
      ContinueWalk(msg.to);
      return;
    }
    case Message::Type::kHeartbeat: {
      if (!to_alive) {
        Message fail = msg;
        fail.type = Message::Type::kHeartbeatFailed;
        std::swap(fail.from, fail.to);
        Send(std::move(fail));
        return;
      }
      Membership& parent = nodes_[msg.to].m;
      Message reply;
      reply.type = Message::Type::kHeartbeatReply;
      reply.from = msg.to;
      reply.to = msg.from;
      reply.sent_ns = msg.sent_ns;
      parent.OnChildHeard(IdOf(msg.from), msg.subtree_size, msg.rtt_ns, now_ns_,
                          msg.free_slot_depth, &msg.candidates);
      reply.attachment = parent.AttachmentForChild(IdOf(msg.from), now_ns_);
      Send(std::move(reply));
      return;
    }
    case Message::Type::kHeartbeatReply: {
      if (!to_alive) return;
      Membership& child = nodes_[msg.to].m;
      if (child.state() != MembershipState::kAttached ||
          child.parent()->node_id != IdOf(msg.from)) {
        return;  // Answer from a former parent.
      }
      child.OnParentProbe(true, now_ns_);
      if (msg.attachment) {
        child.OnParentInfo(*msg.attachment, msg.sent_ns);
      } else {
        ++stats_.disowned;
        child.OnDisowned(now_ns_);
      }
      return;
    }
    case Message::Type::kHeartbeatFailed: {
      if (!to_alive) return;
      Membership& child = nodes_[msg.to].m;
      if (child.state() != MembershipState::kAttached ||
          child.parent()->node_id != IdOf(msg.from)) {
        return;
      }
      if (child.OnParentProbe(false, now_ns_)) ++stats_.parents_lost;
      return;
    }
    case Message::Type::kLeave: {
      if (to_alive) nodes_[msg.to].m.HandleLeave(IdOf(msg.from));
      return;
    }
    case Message::Type::kParentLeft: {
      if (!to_alive) return;
      Membership& child = nodes_[msg.to].m;
      if (child.state() != MembershipState::kAttached ||
          child.parent()->node_id != IdOf(msg.from)) {
        return;
      }
      ++stats_.parents_left;
      child.OnParentLeft(msg.successor, now_ns_);
      return;
    }
    default:
      DeliverMastership(msg, to_alive);
      return;
  }
}

void MembershipSim::Tick() {
  now_ns_ += options_.tick_ns;
  std::vector<Idx> live;
  live.reserve(nodes_.size());
  for (Idx i = 0; i < static_cast<Idx>(nodes_.size()); ++i) {
    if (nodes_[i].alive) live.push_back(i);
  }
  if (options_.interleave) std::shuffle(live.begin(), live.end(), rng_);
  for (const Idx i : live) NodeWork(i);
  // Deliver everything due, including (in order mode) what the deliveries
  // themselves send; in interleaved mode new messages are due later.
  for (;;) {
    if (pending_.empty() || pending_.begin()->first > now_ns_) break;
    std::vector<Message> due = std::move(pending_.begin()->second);
    pending_.erase(pending_.begin());
    if (options_.interleave) {
      std::shuffle(due.begin(), due.end(), rng_);
    }
    // In order mode a bucket is already in the order of sending.
    for (const Message& m : due) Deliver(m);
  }
  TrackMasters();
}

size_t MembershipSim::pending_messages() const {
  size_t n = 0;
  for (const auto& [at, bucket] : pending_) n += bucket.size();
  return n;
}

bool MembershipSim::Settle(int max_ticks) {
  for (int i = 0; i < max_ticks; ++i) {
    Tick();
    if (CheckConverged().empty()) return true;
  }
  return false;
}

}  // namespace clocksync
