// membership/membership_sim_mastership.cc: the standby-master part of the
// membership simulator (membership_sim.h): candidates, peer polls, the
// verdicts of Membership::DecideMastership carried out, handovers,
// restarts, two-sided partitions, and the masters-per-side bookkeeping
// that CheckSafety holds to master_resolution_ns().

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "membership/membership_sim.h"

namespace clocksync {

std::string MembershipSim::AddCandidate(
    int priority, const std::vector<std::string>& seed_ids) {
  const std::string id = AddNode(seed_ids);
  Node& n = nodes_[IndexOrDie(id)];
  MembershipConfig config = n.m.config();
  config.master_priority = priority;
  n.m = Membership(config);
  n.priority = priority;
  return id;
}

void MembershipSim::Partition(const std::set<std::string>& side,
                              int64_t until_ns) {
  for (Node& n : nodes_) n.partition_side = side.count(n.id) > 0;
  partition_until_ns_ = until_ns;
}

void MembershipSim::Restart(const std::string& id) {
  const Idx i = IndexOrDie(id);
  Node& n = nodes_[i];
  if (n.alive) return;
  MarkChanged(i);
  MembershipConfig config = BaseConfig(id);
  config.master_priority = n.priority;
  // As an operator would list them: the first master, then the candidates.
  config.seeds.push_back(NodeRef{"", "", RefOf(master_id_).grpc_address});
  for (const Node& node : nodes_) {
    if (node.id != id && node.alive && node.priority > 0) {
      config.seeds.push_back(NodeRef{"", "", RefOf(node.id).grpc_address});
    }
  }
  n.m = Membership(config);
  n.m.AssumeGrantedUntil(now_ns_ + options_.lease_ns);
  n.alive = true;
  n.synced = false;
  n.walk.reset();
  n.views.clear();
  n.handing_over = false;
  n.handover_tried.clear();
  n.next_join_ns = now_ns_;
  n.reported_size = 0;
  n.reported_free = -1;
}

void MembershipSim::HandOverAndLeave(const std::string& id) {
  const Idx i = IndexOrDie(id);
  Node& n = nodes_[i];
  if (!n.alive || n.handing_over) return;
  if (!n.m.is_master()) {
    Leave(id);
    return;
  }
  n.handing_over = true;
  SendHandover(i);
}

// Asks the next untried candidate; without one, leaves plainly.
void MembershipSim::SendHandover(Idx i) {
  Node& n = nodes_[i];
  const std::optional<Candidate> next = n.m.HandoverCandidate(n.handover_tried);
  if (!next) {
    n.handing_over = false;
    Leave(n.id);
    return;
  }
  n.handover_tried.insert(next->ref.node_id);
  Message m;
  m.type = Message::Type::kHandover;
  m.from = i;
  m.to = Resolve(next->ref);
  m.sent_ns = now_ns_;
  m.term = n.m.highest_term() + 1;
  Send(std::move(m));
}

std::vector<std::string> MembershipSim::LiveMasters() const {
  std::vector<std::string> out;
  for (const Idx i : LiveMasterIndices()) out.push_back(nodes_[i].id);
  return out;
}

std::vector<MembershipSim::Idx> MembershipSim::LiveMasterIndices() const {
  std::vector<Idx> out;
  for (Idx i = 0; i < static_cast<Idx>(nodes_.size()); ++i) {
    if (nodes_[i].alive && nodes_[i].m.is_master()) out.push_back(i);
  }
  return out;
}

std::string MembershipSim::CurrentMaster() const {
  const std::vector<std::string> masters = LiveMasters();
  return masters.size() == 1 ? masters.front() : std::string();
}

int64_t MembershipSim::master_resolution_ns() const {
  const int64_t delay_ns =
      options_.interleave ? options_.max_delay_ticks * options_.tick_ns : 0;
  return 2 * (options_.peer_poll_interval_ns + 2 * delay_ns) +
         5 * options_.tick_ns;
}

void MembershipSim::TrackMasters() {
  const std::vector<Idx> masters = LiveMasterIndices();
  std::map<std::pair<Idx, Idx>, int64_t> together;
  for (size_t i = 0; i < masters.size(); ++i) {
    for (size_t j = i + 1; j < masters.size(); ++j) {
      const Idx a = masters[i];
      const Idx b = masters[j];
      if (!ReachableAt(a, b) || !ReachableAt(b, a)) continue;
      auto it = masters_together_.find({a, b});
      const int64_t since = it == masters_together_.end() ? now_ns_ : it->second;
      together[{a, b}] = since;
      stats_.max_masters_together_ns =
          std::max(stats_.max_masters_together_ns, now_ns_ - since);
    }
  }
  masters_together_ = std::move(together);
}

std::string MembershipSim::CheckCandidateLists() const {
  std::vector<Candidate> live;
  for (const Node& n : nodes_) {
    if (n.alive && n.m.is_candidate()) {
      live.push_back({RefOf(n.id), n.m.master_priority()});
    }
  }
  live = NormalizeCandidates(std::move(live));
  auto ids = [](const std::vector<Candidate>& list) {
    std::vector<std::string> out;
    for (const Candidate& c : list) {
      out.push_back(absl::StrCat(c.ref.node_id, "/", c.priority));
    }
    return out;
  };
  auto same = [](const std::vector<Candidate>& a, const std::vector<Candidate>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const Candidate& x, const Candidate& y) {
                        return x.priority == y.priority &&
                               x.ref.node_id == y.ref.node_id;
                      });
  };
  for (const Node& n : nodes_) {
    if (!n.alive) continue;
    const std::vector<Candidate> listed = n.m.TreeCandidates();
    if (!same(listed, live)) {
      return absl::StrCat(n.id, " lists candidates ",
                          absl::StrJoin(ids(listed), ","), ", live are ",
                          absl::StrJoin(ids(live), ","));
    }
  }
  return "";
}

// Polls (masters always, candidates while without a master), then the
// verdict on the latest answers.
void MembershipSim::MastershipWork(Idx i) {
  Node& n = nodes_[i];
  if (!n.alive || n.handing_over) return;
  Membership& m = n.m;
  if (!m.ShouldPollPeers(now_ns_)) return;
  // A verdict needs news: a round's answers, or its failures.
  const bool poll = now_ns_ >= n.next_poll_ns;
  if (!poll && !n.views_changed) return;
  const std::vector<NodeRef> peers = m.MastershipPeers();
  if (poll) {
    n.next_poll_ns = now_ns_ + options_.peer_poll_interval_ns;
    const auto self = std::make_shared<const PeerView>(m.SelfView(now_ns_, n.synced));
    for (const NodeRef& peer : peers) {
      Message msg;
      msg.type = Message::Type::kPeer;
      msg.from = i;
      msg.to = Resolve(peer);
      if (msg.to < 0 || msg.to == i) continue;
      msg.sent_ns = now_ns_;
      msg.view = self;
      ++stats_.peer_polls;
      Send(std::move(msg));
    }
  }
  std::vector<PeerView> views;
  for (const NodeRef& peer : peers) {
    const Idx other = Resolve(peer);
    if (other < 0 || other == i) continue;
    auto it = n.views.find(other);
    if (it != n.views.end()) {
      views.push_back(it->second);
    } else {
      PeerView unasked;
      unasked.ref = peer;
      views.push_back(unasked);
    }
  }
  n.views_changed = false;
  CarryOut(i, m.DecideMastership(now_ns_, n.synced, views));
}

void MembershipSim::CarryOut(Idx i, const MastershipDecision& decision) {
  Node& n = nodes_[i];
  switch (decision.kind) {
    case MastershipDecision::Kind::kNone:
    case MastershipDecision::Kind::kWait:
      return;
    default:
      MarkChanged(i);
      break;
  }
  switch (decision.kind) {
    case MastershipDecision::Kind::kNone:
    case MastershipDecision::Kind::kWait:
      return;
    case MastershipDecision::Kind::kPromote: {
      const std::optional<NodeRef> old = n.m.Promote(decision.term, now_ns_);
      ++stats_.promotions;
      n.walk.reset();
      if (old) {
        Message leave;
        leave.type = Message::Type::kLeave;
        leave.from = i;
        leave.to = Resolve(*old);
        Send(std::move(leave));
      }
      return;
    }
    case MastershipDecision::Kind::kDemote: {
      const LeavePlan plan = n.m.Demote(decision.master, now_ns_);
      ++stats_.demotions;
      n.walk.reset();
      n.next_join_ns = now_ns_;
      for (const NodeRef& child : plan.children) {
        Message m;
        m.type = Message::Type::kParentLeft;
        m.from = i;
        m.to = Resolve(child);
        m.successor = plan.successor;
        Send(std::move(m));
      }
      return;
    }
    case MastershipDecision::Kind::kRejoin:
      ++stats_.rejoin_verdicts;
      n.m.OnMasterFound(decision.master, now_ns_);
      if (!n.walk) n.next_join_ns = now_ns_;
      return;
  }
}

void MembershipSim::DeliverMastership(const Message& msg, bool to_alive) {
  switch (msg.type) {
    case Message::Type::kPeer: {
      if (!to_alive) {
        Message fail = msg;
        fail.type = Message::Type::kPeerFailed;
        std::swap(fail.from, fail.to);
        Send(std::move(fail));
        return;
      }
      Node& n = nodes_[msg.to];
      n.m.NotePeer(*msg.view);
      Message reply;
      reply.type = Message::Type::kPeerReply;
      reply.from = msg.to;
      reply.to = msg.from;
      reply.sent_ns = msg.sent_ns;
      reply.view = std::make_shared<const PeerView>(n.m.SelfView(now_ns_, n.synced));
      Send(std::move(reply));
      // A master polled by a master that outranks it meets the higher
      // term here.
      if (n.m.is_master() && !n.handing_over) {
        PeerView caller = *msg.view;
        caller.answered = true;
        caller.asked_ns = now_ns_;
        const MastershipDecision d =
            n.m.DecideMastership(now_ns_, n.synced, {caller});
        if (d.kind == MastershipDecision::Kind::kDemote) CarryOut(msg.to, d);
      }
      return;
    }
    case Message::Type::kPeerReply:
    case Message::Type::kPeerFailed: {
      if (!to_alive) return;
      Node& n = nodes_[msg.to];
      PeerView view;
      if (msg.type == Message::Type::kPeerReply) {
        view = *msg.view;
        view.answered = true;
        n.m.NotePeer(view);
      } else {
        auto it = n.views.find(msg.from);
        if (it != n.views.end()) view = it->second;
        view.ref = RefOf(IdOf(msg.from));
        view.answered = false;
      }
      view.asked_ns = msg.sent_ns;
      n.views[msg.from] = std::move(view);
      n.views_changed = true;
      return;
    }
    case Message::Type::kHandover: {
      if (!to_alive) {
        Message fail = msg;
        fail.type = Message::Type::kHandoverFailed;
        std::swap(fail.from, fail.to);
        Send(std::move(fail));
        return;
      }
      Node& n = nodes_[msg.to];
      Message reply;
      reply.type = Message::Type::kHandoverReply;
      reply.from = msg.to;
      reply.to = msg.from;
      reply.sent_ns = msg.sent_ns;
      reply.ok = n.m.AcceptHandover(IdOf(msg.from), msg.term, n.synced, now_ns_).ok();
      if (reply.ok) {
        ++stats_.handovers;
        n.walk.reset();
      } else {
        ++stats_.handover_refusals;
      }
      Send(std::move(reply));
      return;
    }
    case Message::Type::kHandoverReply:
    case Message::Type::kHandoverFailed: {
      if (!to_alive) return;
      Node& n = nodes_[msg.to];
      if (!n.handing_over) return;
      if (msg.type == Message::Type::kHandoverFailed || !msg.ok) {
        SendHandover(msg.to);
        return;
      }
      const LeavePlan plan = n.m.HandOver(RefOf(IdOf(msg.from)));
      for (const NodeRef& child : plan.children) {
        Message m;
        m.type = Message::Type::kParentLeft;
        m.from = msg.to;
        m.to = Resolve(child);
        m.successor = plan.successor;
        Send(std::move(m));
      }
      n.handing_over = false;
      n.alive = false;  // Gone, as after Leave().
      return;
    }
    default:
      return;
  }
}

}  // namespace clocksync
