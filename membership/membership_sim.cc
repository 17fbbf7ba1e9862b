// membership/membership_sim.cc: the membership simulator and its invariant
// checks (membership_sim.h).

#include "membership/membership_sim.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace clocksync {
namespace {

constexpr int64_t kRackRttNs = 30'000;
constexpr int64_t kPodRttNs = 100'000;
constexpr int64_t kCrossPodRttNs = 400'000;

std::string Ids(const std::vector<NodeRef>& chain) {
  std::vector<std::string> ids;
  for (const NodeRef& r : chain) ids.push_back(r.node_id);
  return absl::StrJoin(ids, ",");
}

}  // namespace

MembershipSim::MembershipSim(const MembershipSimOptions& options)
    : options_(options),
      rng_(options.seed),
      topology_rng_(options.seed ^ 0x9e3779b97f4a7c15ULL) {
  master_id_ = NewId();
  MembershipConfig config = BaseConfig(master_id_);
  config.master = true;
  Node node(config);
  node.pod = 0;
  node.rack = 0;
  node.synced = true;
  nodes_.emplace(master_id_, std::move(node));
  by_address_[RefOf(master_id_).grpc_address] = master_id_;
}

std::string MembershipSim::IdAt(int index) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "n%05d", index);
  return buf;
}

std::string MembershipSim::NewId() { return IdAt(next_index_++); }

void MembershipSim::Isolate(const std::string& id, int64_t until_ns) {
  isolated_until_ns_[id] = until_ns;
}

bool MembershipSim::Reachable(const std::string& from,
                              const std::string& to) const {
  if (!alive(to)) return false;
  if (now_ns_ < partition_until_ns_ &&
      (partition_side_.count(from) > 0) != (partition_side_.count(to) > 0)) {
    return false;
  }
  for (const std::string* id : {&from, &to}) {
    auto it = isolated_until_ns_.find(*id);
    if (it != isolated_until_ns_.end() && now_ns_ < it->second) return false;
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
  const std::string id = NewId();
  MembershipConfig config = BaseConfig(id);
  // Seeds as an operator gives them (--join=HOST:PORT): address only.
  if (seed_ids.empty()) {
    config.seeds.push_back(NodeRef{"", "", RefOf(master_id_).grpc_address});
  }
  for (const std::string& s : seed_ids) {
    config.seeds.push_back(NodeRef{"", "", RefOf(s).grpc_address});
  }
  Node node(config);
  std::uniform_int_distribution<int> pod(0, options_.pods - 1);
  std::uniform_int_distribution<int> rack(0, options_.racks_per_pod - 1);
  node.pod = pod(topology_rng_);
  node.rack = rack(topology_rng_);
  node.next_join_ns = now_ns_;
  nodes_.emplace(id, std::move(node));
  by_address_[RefOf(id).grpc_address] = id;
  return id;
}

std::string MembershipSim::AddPinnedNode(const std::string& parent_id) {
  const std::string id = NewId();
  MembershipConfig config = BaseConfig(id);
  config.pinned_parent = RefOf(parent_id);
  Node node(config);
  node.next_join_ns = now_ns_;
  nodes_.emplace(id, std::move(node));
  by_address_[RefOf(id).grpc_address] = id;
  return id;
}

void MembershipSim::Kill(const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    auto it = nodes_.find(id);
    if (it != nodes_.end()) it->second.alive = false;
  }
}

void MembershipSim::Leave(const std::string& id) {
  Node& n = nodes_.at(id);
  if (!n.alive) return;
  const LeavePlan plan = n.m.Leave();
  if (plan.parent) {
    Message m;
    m.type = Message::Type::kLeave;
    m.from = id;
    m.to = Resolve(*plan.parent);
    Send(std::move(m));
  }
  for (const NodeRef& child : plan.children) {
    Message m;
    m.type = Message::Type::kParentLeft;
    m.from = id;
    m.to = Resolve(child);
    m.successor = plan.successor;
    Send(std::move(m));
  }
  // Gone: from now on messages to it fail like those to a dead node.
  n.alive = false;
}

bool MembershipSim::alive(const std::string& id) const {
  auto it = nodes_.find(id);
  return it != nodes_.end() && it->second.alive;
}

const Membership& MembershipSim::node(const std::string& id) const {
  return nodes_.at(id).m;
}

std::vector<std::string> MembershipSim::LiveIds() const {
  std::vector<std::string> ids;
  for (const auto& [id, n] : nodes_) {
    if (n.alive) ids.push_back(id);
  }
  return ids;
}

size_t MembershipSim::live_count() const { return LiveIds().size(); }

std::pair<int, int> MembershipSim::LocationOf(const std::string& id) const {
  const Node& n = nodes_.at(id);
  return {n.pod, n.rack};
}

int64_t MembershipSim::Rtt(const std::string& a, const std::string& b) const {
  if (a == b) return 0;
  const Node& x = nodes_.at(a);
  const Node& y = nodes_.at(b);
  if (x.pod != y.pod) return kCrossPodRttNs;
  if (x.rack != y.rack) return kPodRttNs;
  return kRackRttNs;
}

std::string MembershipSim::Resolve(const NodeRef& ref) const {
  if (!ref.node_id.empty() && nodes_.count(ref.node_id) > 0) {
    return ref.node_id;
  }
  auto it = by_address_.find(ref.grpc_address);
  return it == by_address_.end() ? std::string() : it->second;
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

void MembershipSim::SendJoin(const std::string& id) {
  Node& n = nodes_.at(id);
  const NodeRef* target = n.walk->target();
  Message m;
  m.type = Message::Type::kJoin;
  m.from = id;
  m.to = Resolve(*target);
  m.sent_ns = now_ns_;
  m.walk_id = n.walk_id;
  m.join = n.walk->request();
  ++stats_.join_requests;
  Send(std::move(m));
}

// After an answer: ask the walk's next target, or give up for a while.
void MembershipSim::ContinueWalk(const std::string& id) {
  Node& n = nodes_.at(id);
  stats_.max_walk_hops =
      std::max<uint64_t>(stats_.max_walk_hops, n.walk->hops());
  if (n.walk->target() != nullptr) {
    SendJoin(id);
    return;
  }
  const bool move = n.walk_is_move;
  n.walk.reset();
  if (move) return;  // The node stays where it is.
  ++stats_.walks_exhausted;
  n.next_join_ns = now_ns_ + options_.join_retry_ns;
}

void MembershipSim::NodeWork(const std::string& id) {
  Node& n = nodes_.at(id);
  if (!n.alive) return;
  Membership& m = n.m;
  m.ExpireChildren(now_ns_, options_.child_timeout_ns);
  if (m.state() == MembershipState::kAttached && m.ParentStale(now_ns_)) {
    ++stats_.abandoned;
    m.OnParentLost(now_ns_);
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
    ContinueWalk(id);
  }
  const bool size_changed = options_.early_heartbeat_on_size_change &&
                            (m.SubtreeSize() != n.reported_size ||
                             m.FreeSlotDepth(now_ns_) != n.reported_free);
  if (m.state() == MembershipState::kAttached &&
      (now_ns_ >= n.next_heartbeat_ns || size_changed)) {
    n.next_heartbeat_ns = now_ns_ + options_.heartbeat_interval_ns;
    Message hb;
    hb.type = Message::Type::kHeartbeat;
    hb.from = id;
    hb.to = Resolve(*m.parent());
    hb.sent_ns = now_ns_;
    hb.subtree_size = m.SubtreeSize();
    n.reported_size = hb.subtree_size;
    hb.free_slot_depth = m.FreeSlotDepth(now_ns_);
    n.reported_free = hb.free_slot_depth;
    hb.rtt_ns = options_.children_report_rtt ? Rtt(id, hb.to) : -1;
    hb.candidates = m.SubtreeCandidates();
    Send(std::move(hb));
  }
  if (m.state() == MembershipState::kDetached && !n.walk &&
      now_ns_ >= n.next_join_ns && now_ns_ >= m.RejoinAllowedAtNs()) {
    n.walk.emplace(m.StartJoin(now_ns_));
    n.walk_is_move = false;
    n.walk_id = ++next_walk_id_;
    ContinueWalk(id);
  }
  MastershipWork(id);
}

void MembershipSim::CheckNoCycleFrom(const std::string& id) {
  bool cycle = false;
  const std::vector<std::string> path = PathUp(id, &cycle);
  if (cycle) {
    violations_.push_back(absl::StrCat(
        "cycle formed when ", id, " attached: ", absl::StrJoin(path, " -> ")));
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
  const bool to_alive = local ? alive(msg.to) : Reachable(msg.from, msg.to);
  // A reply cut off by a partition ends the RPC with an error (its
  // deadline) on the caller's side.
  if (!to_alive && alive(msg.to) &&
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
      reply.decision = nodes_.at(msg.to).m.HandleJoin(msg.join, now_ns_);
      Send(std::move(reply));
      return;
    }
    case Message::Type::kJoinReply:
    case Message::Type::kJoinFailed: {
      if (!to_alive) return;
      Node& n = nodes_.at(msg.to);
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
          const std::string self = msg.to;
          n.walk->OnRedirect(msg.decision, [&](const NodeRef& r) {
            const std::string other = Resolve(r);
            if (other.empty()) return int64_t{-1};
            // A measurement: the model round trip with ±10 % noise.
            std::uniform_real_distribution<double> noise(0.9, 1.1);
            return static_cast<int64_t>(Rtt(self, other) * noise(rng_));
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
      Membership& parent = nodes_.at(msg.to).m;
      Message reply;
      reply.type = Message::Type::kHeartbeatReply;
      reply.from = msg.to;
      reply.to = msg.from;
      reply.sent_ns = msg.sent_ns;
      parent.OnChildHeard(msg.from, msg.subtree_size, msg.rtt_ns, now_ns_,
                          msg.free_slot_depth, &msg.candidates);
      reply.attachment = parent.AttachmentForChild(msg.from, now_ns_);
      Send(std::move(reply));
      return;
    }
    case Message::Type::kHeartbeatReply: {
      if (!to_alive) return;
      Membership& child = nodes_.at(msg.to).m;
      if (child.state() != MembershipState::kAttached ||
          child.parent()->node_id != msg.from) {
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
      Membership& child = nodes_.at(msg.to).m;
      if (child.state() != MembershipState::kAttached ||
          child.parent()->node_id != msg.from) {
        return;
      }
      if (child.OnParentProbe(false, now_ns_)) ++stats_.parents_lost;
      return;
    }
    case Message::Type::kLeave: {
      if (to_alive) nodes_.at(msg.to).m.HandleLeave(msg.from);
      return;
    }
    case Message::Type::kParentLeft: {
      if (!to_alive) return;
      Membership& child = nodes_.at(msg.to).m;
      if (child.state() != MembershipState::kAttached ||
          child.parent()->node_id != msg.from) {
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
  std::vector<std::string> ids = LiveIds();
  if (options_.interleave) std::shuffle(ids.begin(), ids.end(), rng_);
  for (const std::string& id : ids) NodeWork(id);
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

std::vector<std::string> MembershipSim::PathUp(const std::string& id,
                                               bool* cycle) const {
  std::vector<std::string> path;
  std::set<std::string> seen;
  *cycle = false;
  std::string cur = id;
  for (;;) {
    path.push_back(cur);
    if (!seen.insert(cur).second) {
      *cycle = true;
      return path;
    }
    auto it = nodes_.find(cur);
    if (it == nodes_.end() || !it->second.alive) return path;
    const Membership& m = it->second.m;
    if (m.state() != MembershipState::kAttached || !m.parent()) return path;
    cur = m.parent()->node_id;
  }
}

std::vector<std::string> MembershipSim::RealChildren(
    const std::string& id) const {
  std::vector<std::string> out;
  for (const auto& [cid, n] : nodes_) {
    if (n.alive && n.m.state() == MembershipState::kAttached &&
        n.m.parent()->node_id == id) {
      out.push_back(cid);
    }
  }
  return out;
}

std::string MembershipSim::CheckSafety() const {
  if (!violations_.empty()) return violations_.front();
  // At most one master per connected side, but for the time two masters
  // that meet need to settle it (TrackMasters keeps the pairs).
  for (const auto& [pair, since_ns] : masters_together_) {
    if (now_ns_ - since_ns > master_resolution_ns()) {
      return absl::StrCat("masters ", pair.first, " (term ",
                          nodes_.at(pair.first).m.term(), ") and ", pair.second,
                          " (term ", nodes_.at(pair.second).m.term(),
                          ") have reached each other for ",
                          (now_ns_ - since_ns) / 1'000'000, " ms");
    }
  }
  // No cycle through the real parent pointers. One pass: each node is
  // walked once (1: on the current walk, 2: known to end).
  std::map<std::string, int> mark;
  for (const auto& [id, n] : nodes_) {
    if (!n.alive || mark[id] == 2) continue;
    std::vector<std::string> walked;
    std::string cur = id;
    for (;;) {
      int& state = mark[cur];
      if (state == 2) break;
      if (state == 1) {
        bool cycle = false;
        return absl::StrCat("cycle: ",
                            absl::StrJoin(PathUp(cur, &cycle), " -> "));
      }
      state = 1;
      walked.push_back(cur);
      auto it = nodes_.find(cur);
      if (it == nodes_.end() || !it->second.alive ||
          it->second.m.state() != MembershipState::kAttached ||
          !it->second.m.parent()) {
        break;
      }
      cur = it->second.m.parent()->node_id;
    }
    for (const std::string& w : walked) mark[w] = 2;
  }
  for (const auto& [id, n] : nodes_) {
    if (!n.alive) continue;
    const Membership& m = n.m;
    // Local consistency of the view.
    std::set<std::string> chain_ids;
    for (const NodeRef& a : m.ancestors()) {
      if (a.node_id == id) {
        return absl::StrCat(id, " is in its own chain ", Ids(m.ancestors()));
      }
      if (!chain_ids.insert(a.node_id).second) {
        return absl::StrCat(id, "'s chain repeats ", a.node_id);
      }
    }
    if (m.state() == MembershipState::kAttached &&
        (!m.parent() || m.ancestors().empty() ||
         m.ancestors().back().node_id != m.parent()->node_id)) {
      return absl::StrCat(id, "'s chain does not end at its parent");
    }
    // Capacity: dynamic newcomers only while below max_children.
    int pinned_children = 0;
    for (const auto& [cid, c] : m.children()) {
      pinned_children += c.pinned || (m.is_master() && c.master_priority > 0);
    }
    if (static_cast<int>(m.children().size()) >
        options_.max_children + pinned_children) {
      return absl::StrCat(id, " has ", m.children().size(), " children, max ",
                          options_.max_children);
    }
    // Leases flow down: whoever holds one has a parent that is dead, the
    // master, a holder of a lease at least as long, or detached with grants
    // outstanding at least as long (it may not attach before they expire).
    if (m.state() == MembershipState::kAttached && m.HasLease(now_ns_)) {
      const std::string& pid = m.parent()->node_id;
      if (!alive(pid)) continue;
      const Membership& p = nodes_.at(pid).m;
      const int64_t mine = m.lease_expiry_ns();
      switch (p.state()) {
        case MembershipState::kMaster:
          break;
        case MembershipState::kAttached:
          if (!p.HasLease(now_ns_) || p.lease_expiry_ns() < mine) {
            return absl::StrCat(id, " holds a lease to ", mine,
                                " ns but its "
                                "parent ",
                                pid, " only to ", p.lease_expiry_ns(), " ns");
          }
          break;
        case MembershipState::kDetached:
          if (p.granted_until_ns() < mine) {
            return absl::StrCat(id, " holds a lease to ", mine,
                                " ns that its detached parent ", pid,
                                " never granted");
          }
          break;
        case MembershipState::kLeft:
          break;
      }
    }
  }
  return "";
}

std::string MembershipSim::CheckConverged() const {
  if (!violations_.empty()) return violations_.front();
  const std::vector<std::string> masters = LiveMasters();
  if (masters.size() != 1) {
    return absl::StrCat(masters.size(), " live masters: ",
                        absl::StrJoin(masters, ","));
  }
  const std::string& root = masters.front();
  const std::string lists = CheckCandidateLists();
  if (!lists.empty()) return lists;
  for (const auto& [id, n] : nodes_) {
    if (!n.alive) continue;
    const Membership& m = n.m;
    if (m.state() != MembershipState::kMaster &&
        !(m.state() == MembershipState::kAttached && m.HasLease(now_ns_))) {
      return absl::StrCat("not attached: ", Describe(id));
    }
    bool cycle = false;
    std::vector<std::string> path = PathUp(id, &cycle);
    if (cycle || path.back() != root || !alive(path.back())) {
      return absl::StrCat(
          id, " does not reach the master: ", absl::StrJoin(path, " -> "));
    }
    std::reverse(path.begin(), path.end());
    path.pop_back();  // Root first, without self: what the chain must be.
    std::vector<std::string> chain;
    for (const NodeRef& a : m.ancestors()) chain.push_back(a.node_id);
    if (chain != path) {
      return absl::StrCat(id, "'s chain ", absl::StrJoin(chain, ","),
                          " is not its path ", absl::StrJoin(path, ","));
    }
    if (m.WantsToMoveUp()) {
      return absl::StrCat(id, " at depth ", m.depth(),
                          " wants to move up to depth ", m.landing_depth());
    }
    std::vector<std::string> listed;
    for (const auto& [cid, c] : m.children()) listed.push_back(cid);
    const std::vector<std::string> real = RealChildren(id);
    if (listed != real) {
      return absl::StrCat(id, " lists children ", absl::StrJoin(listed, ","),
                          " but has ", absl::StrJoin(real, ","));
    }
  }
  // Subtree sizes, bottom-up over the real tree.
  std::map<std::string, int64_t> size;
  std::vector<std::string> order = LiveIds();
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return nodes_.at(a).m.depth() > nodes_.at(b).m.depth();
  });
  for (const std::string& id : order) {
    size[id] += 1;
    const Membership& m = nodes_.at(id).m;
    if (m.SubtreeSize() != size[id]) {
      return absl::StrCat(id, " counts a subtree of ", m.SubtreeSize(),
                          ", real ", size[id]);
    }
    if (m.parent()) size[m.parent()->node_id] += size[id];
  }
  return "";
}

std::string MembershipSim::Describe(const std::string& id) const {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return id + ": unknown";
  const Node& n = it->second;
  const Membership& m = n.m;
  std::vector<std::string> kids;
  for (const auto& [cid, c] : m.children()) kids.push_back(cid);
  std::vector<std::string> candidates;
  for (const NodeRef& r : m.RejoinCandidates()) {
    candidates.push_back(r.node_id.empty() ? "@" + r.grpc_address : r.node_id);
  }
  return absl::StrCat(
      id, n.alive ? "" : " (dead)", ": ", MembershipStateName(m.state()),
      " term=", m.term(), " prio=", m.master_priority(),
      " parent=", m.parent() ? m.parent()->node_id : "-",
      " chain=", Ids(m.ancestors()), " children=", absl::StrJoin(kids, ","),
      " lease_to=", m.lease_expiry_ns(), " granted_to=", m.granted_until_ns(),
      " now=", now_ns_, " walk=",
      n.walk ? (n.walk->target() ? n.walk->target()->node_id : "exhausted")
             : "none",
      n.walk_is_move ? "(move)" : "",
      " candidates=", absl::StrJoin(candidates, ","));
}

int MembershipSim::MaxDepth() const {
  int max_depth = 0;
  for (const auto& [d, count] : DepthHistogram())
    max_depth = std::max(max_depth, d);
  return max_depth;
}

std::map<int, int> MembershipSim::DepthHistogram() const {
  std::map<int, int> histogram;
  for (const auto& [id, n] : nodes_) {
    if (!n.alive) continue;
    bool cycle = false;
    const std::vector<std::string> path = PathUp(id, &cycle);
    if (cycle || !alive(path.back()) ||
        nodes_.at(path.back()).m.state() != MembershipState::kMaster) {
      continue;
    }
    ++histogram[static_cast<int>(path.size()) - 1];
  }
  return histogram;
}

double MembershipSim::MeanParentRttNs() const {
  double sum = 0;
  int count = 0;
  for (const auto& [id, n] : nodes_) {
    if (!n.alive || n.m.state() != MembershipState::kAttached) continue;
    const std::string& pid = n.m.parent()->node_id;
    if (!alive(pid)) continue;
    sum += static_cast<double>(Rtt(id, pid));
    ++count;
  }
  return count == 0 ? 0 : sum / count;
}

}  // namespace clocksync
