// membership/mastership.cc: the standby-master part of Membership
// (membership.h): candidates and their ranking, terms, the takeover
// decision, promotion, demotion and handover. Pure logic, as the rest of
// Membership; docs/MEMBERSHIP.md, "Terms, takeover and handover", has the
// rules and why they keep one master per connected side.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "membership/membership.h"

namespace clocksync {

bool CandidateBefore(const Candidate& a, const Candidate& b) {
  if (a.priority != b.priority) return a.priority < b.priority;
  return a.ref.node_id < b.ref.node_id;
}

std::vector<Candidate> NormalizeCandidates(std::vector<Candidate> candidates) {
  std::vector<Candidate> out;
  std::sort(candidates.begin(), candidates.end(), CandidateBefore);
  for (Candidate& c : candidates) {
    if (c.ref.node_id.empty() || c.priority < 1 ||
        c.priority > kMaxMasterPriority) {
      continue;
    }
    const bool seen = std::any_of(out.begin(), out.end(), [&](const Candidate& o) {
      return o.ref.node_id == c.ref.node_id;
    });
    if (seen) continue;
    out.push_back(std::move(c));
    if (out.size() == kMaxCandidates) break;
  }
  return out;
}

bool MasterOutranks(uint64_t term_a, const std::string& id_a, uint64_t term_b,
                    const std::string& id_b) {
  if (term_a != term_b) return term_a > term_b;
  return id_a < id_b;
}

const char* MastershipDecisionName(MastershipDecision::Kind kind) {
  switch (kind) {
    case MastershipDecision::Kind::kNone:
      return "none";
    case MastershipDecision::Kind::kWait:
      return "wait";
    case MastershipDecision::Kind::kPromote:
      return "promote";
    case MastershipDecision::Kind::kDemote:
      return "demote";
    case MastershipDecision::Kind::kRejoin:
      return "rejoin";
  }
  return "unknown";
}

std::optional<NodeRef> Membership::master() const {
  if (state_ == MembershipState::kMaster) return config_.self;
  if (state_ == MembershipState::kAttached && !ancestors_.empty()) {
    return ancestors_.front();
  }
  return last_master_;
}

std::vector<Candidate> Membership::SubtreeCandidates() const {
  std::vector<Candidate> all;
  if (is_candidate()) all.push_back({config_.self, config_.master_priority});
  for (const auto& [id, child] : children_) {
    all.insert(all.end(), child.candidates.begin(), child.candidates.end());
  }
  return NormalizeCandidates(std::move(all));
}

std::vector<Candidate> Membership::TreeCandidates() const {
  if (state_ == MembershipState::kMaster) return SubtreeCandidates();
  return tree_candidates_;
}

int64_t Membership::LastMasterContactNs(int64_t now_ns) const {
  if (state_ == MembershipState::kMaster) return now_ns;
  return master_contact_ns_;
}

int64_t Membership::MasterlessSinceNs(int64_t now_ns) const {
  switch (state_) {
    case MembershipState::kMaster:
    case MembershipState::kLeft:
      return -1;
    case MembershipState::kAttached:
      if (HasLease(now_ns)) return -1;
      return std::max(lease_expiry_ns_, attached_at_ns_);
    case MembershipState::kDetached:
      return masterless_since_ns_;
  }
  return -1;
}

bool Membership::TakeoverDue(int64_t now_ns) const {
  if (!is_candidate() || MasterlessSinceNs(now_ns) < 0) return false;
  // Never under a master yet (new): nothing to continue from.
  if (master_contact_ns_ == 0 && promotions_ == 0) return false;
  return now_ns - master_contact_ns_ >= config_.takeover_after_ns;
}

bool Membership::ShouldPollPeers(int64_t now_ns) const {
  if (state_ == MembershipState::kMaster) return true;
  return is_candidate() && MasterlessSinceNs(now_ns) >= 0 &&
         state_ != MembershipState::kLeft;
}

void Membership::NoteKnownPeer(const NodeRef& ref) {
  if (ref.node_id.empty() || ref.node_id == config_.self.node_id ||
      ref.grpc_address.empty()) {
    return;
  }
  known_peers_[ref.node_id] = {++known_peer_seq_, ref};
  if (known_peers_.size() <= kMaxKnownPeers) return;
  auto oldest = known_peers_.begin();
  for (auto it = known_peers_.begin(); it != known_peers_.end(); ++it) {
    if (it->second.first < oldest->second.first) oldest = it;
  }
  known_peers_.erase(oldest);
}

std::vector<NodeRef> Membership::MastershipPeers() const {
  std::vector<std::pair<uint64_t, NodeRef>> known;
  for (const auto& [id, entry] : known_peers_) known.push_back(entry);
  std::sort(known.begin(), known.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<NodeRef> out;
  for (auto& [seq, ref] : known) out.push_back(std::move(ref));
  for (const NodeRef& seed : config_.seeds) {
    if (seed.grpc_address == config_.self.grpc_address) continue;
    const bool dup = std::any_of(out.begin(), out.end(), [&](const NodeRef& r) {
      return r.grpc_address == seed.grpc_address;
    });
    if (!dup) out.push_back(seed);
  }
  return out;
}

PeerView Membership::SelfView(int64_t now_ns, bool synchronized) const {
  PeerView v;
  v.ref = config_.self;
  v.is_master = state_ == MembershipState::kMaster;
  v.has_master = v.is_master || HasLease(now_ns);
  v.term = term_;
  if (const std::optional<NodeRef> m = master()) v.master = *m;
  v.priority = config_.master_priority;
  v.eligible = is_candidate() && synchronized && !v.is_master &&
               state_ != MembershipState::kLeft;
  for (const NodeRef& ref : MastershipPeers()) {
    if (!ref.node_id.empty()) v.known_peers.push_back(ref);
  }
  return v;
}

void Membership::NotePeer(const PeerView& view) {
  NoteKnownPeer(view.ref);
  NoteKnownPeer(view.master);
  for (const NodeRef& ref : view.known_peers) NoteKnownPeer(ref);
  highest_term_ = std::max(highest_term_, view.term);
}

// Term, candidates and master contact from an attachment (join acceptance
// or heartbeat reply).
void Membership::AdoptMastership(const Attachment& attachment,
                                 int64_t request_sent_ns) {
  if (attachment.term > 0) term_ = attachment.term;
  highest_term_ = std::max(highest_term_, term_);
  tree_candidates_ = NormalizeCandidates(attachment.candidates);
  if (!attachment.ancestors.empty()) {
    last_master_ = attachment.ancestors.front();
    NoteKnownPeer(attachment.ancestors.front());
  }
  for (const Candidate& c : tree_candidates_) NoteKnownPeer(c.ref);
  if (attachment.lease_remaining_ns > 0) {
    // The master granted the lease this one descends from no earlier than
    // its end minus a full lease.
    master_contact_ns_ = std::max(
        master_contact_ns_, request_sent_ns + attachment.lease_remaining_ns -
                                config_.lease_ns);
  }
}

MastershipDecision Membership::DecideMastership(
    int64_t now_ns, bool synchronized, const std::vector<PeerView>& peers) const {
  MastershipDecision d;
  const std::string& self_id = config_.self.node_id;
  auto fresh = [&](const PeerView& p) {
    return p.answered && now_ns - p.asked_ns <= config_.peer_answer_valid_ns;
  };
  auto live_master_elsewhere = [&](const PeerView& p) {
    return fresh(p) && (p.is_master || p.has_master) &&
           !p.master.node_id.empty() && p.master.node_id != self_id;
  };
  if (state_ == MembershipState::kMaster) {
    const PeerView* best = nullptr;
    for (const PeerView& p : peers) {
      if (!live_master_elsewhere(p) ||
          !MasterOutranks(p.term, p.master.node_id, term_, self_id)) {
        continue;
      }
      if (best == nullptr ||
          MasterOutranks(p.term, p.master.node_id, best->term,
                         best->master.node_id)) {
        best = &p;
      }
    }
    if (best != nullptr) {
      d.kind = MastershipDecision::Kind::kDemote;
      d.master = best->master;
      d.term = best->term;
      d.why = absl::StrCat(best->master.node_id, " is master under term ",
                           best->term, " (", best->ref.node_id,
                           " says so), which outranks term ", term_, " of ",
                           self_id);
    }
    return d;
  }
  if (!TakeoverDue(now_ns)) return d;
  const int64_t since = MasterlessSinceNs(now_ns);
  for (const PeerView& p : peers) {
    if (p.asked_ns >= since && live_master_elsewhere(p)) {
      d.kind = MastershipDecision::Kind::kRejoin;
      d.master = p.master;
      d.term = p.term;
      d.why = absl::StrCat(p.master.node_id, " is master under term ", p.term,
                           " (", p.ref.node_id.empty() ? p.ref.grpc_address
                                                       : p.ref.node_id,
                           " says so)");
      return d;
    }
  }
  d.kind = MastershipDecision::Kind::kWait;
  if (!synchronized) {
    d.why = "no synchronized mapping to continue global time from";
    return d;
  }
  const Candidate me{config_.self, config_.master_priority};
  for (const PeerView& p : peers) {
    if (p.asked_ns < since) {
      d.why = absl::StrCat(p.ref.node_id.empty() ? p.ref.grpc_address
                                                 : p.ref.node_id,
                           " not asked yet since the master was lost");
      return d;
    }
    if (fresh(p) && p.eligible && p.ref.node_id != self_id &&
        CandidateBefore(Candidate{p.ref, p.priority}, me)) {
      d.why = absl::StrCat("a better candidate, ", p.ref.node_id,
                           " (priority ", p.priority, "), is alive");
      return d;
    }
  }
  d.kind = MastershipDecision::Kind::kPromote;
  d.term = highest_term_ + 1;
  const std::optional<NodeRef> old = master();
  d.why = absl::StrCat(
      "no master for ", (now_ns - master_contact_ns_) / 1'000'000,
      " ms (last sign of ", old ? old->node_id : std::string("none"),
      "), no live master or better candidate among ", peers.size(),
      " peers asked");
  return d;
}

std::optional<NodeRef> Membership::Promote(uint64_t term, int64_t now_ns) {
  std::optional<NodeRef> old_parent;
  if (state_ == MembershipState::kAttached) old_parent = parent_;
  state_ = MembershipState::kMaster;
  parent_.reset();
  ancestors_.clear();
  former_parent_.reset();
  successor_.reset();
  missed_probes_ = 0;
  lease_expiry_ns_ = 0;
  term_ = term;
  highest_term_ = std::max(highest_term_, term);
  last_master_ = config_.self;
  master_contact_ns_ = now_ns;
  ++promotions_;
  return old_parent;
}

LeavePlan Membership::Demote(const NodeRef& winner, int64_t now_ns) {
  LeavePlan plan;
  if (state_ != MembershipState::kMaster) return plan;
  plan.successor = winner;
  for (const auto& [id, child] : children_) {
    if (id != winner.node_id) plan.children.push_back(child.ref);
  }
  children_.clear();
  state_ = MembershipState::kDetached;
  detach_cause_ = DetachCause::kDemoted;
  detached_since_ns_ = now_ns;
  masterless_since_ns_ = now_ns;
  master_contact_ns_ = now_ns;
  former_parent_.reset();
  successor_ = winner;
  lease_expiry_ns_ = 0;
  // Its grants (granted_until_ns_) still run: RejoinAllowedAtNs() waits
  // them out, as for any node that detaches with children.
  return plan;
}

void Membership::OnMasterFound(const NodeRef& master, int64_t now_ns) {
  if (master.node_id == config_.self.node_id) return;
  if (state_ == MembershipState::kAttached && !HasLease(now_ns)) {
    Detach(DetachCause::kLost, now_ns);
  }
  if (state_ == MembershipState::kDetached) successor_ = master;
}

absl::Status Membership::AcceptHandover(const std::string& from_id,
                                        uint64_t term, bool synchronized,
                                        int64_t now_ns) {
  const std::string& self_id = config_.self.node_id;
  if (!is_candidate()) {
    return absl::FailedPreconditionError(
        absl::StrCat(self_id, " is not a master candidate (master_priority 0)"));
  }
  if (state_ == MembershipState::kMaster || state_ == MembershipState::kLeft) {
    return absl::FailedPreconditionError(absl::StrCat(
        self_id, " is ", MembershipStateName(state_), ", cannot take over"));
  }
  if (!synchronized) {
    return absl::FailedPreconditionError(
        absl::StrCat(self_id, " has no synchronized mapping to continue from"));
  }
  const std::optional<NodeRef> m = master();
  if (!m || m->node_id != from_id) {
    return absl::FailedPreconditionError(
        absl::StrCat(self_id, " follows ", m ? m->node_id : std::string("no master"),
                     ", not ", from_id));
  }
  if (term <= highest_term_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "term ", term, " is not above ", highest_term_, ", the highest ",
        self_id, " has seen"));
  }
  Promote(term, now_ns);
  return absl::OkStatus();
}

std::optional<Candidate> Membership::HandoverCandidate(
    const std::set<std::string>& tried) const {
  for (const Candidate& c : SubtreeCandidates()) {
    if (c.ref.node_id == config_.self.node_id || tried.count(c.ref.node_id)) {
      continue;
    }
    return c;
  }
  return std::nullopt;
}

LeavePlan Membership::HandOver(const NodeRef& new_master) {
  LeavePlan plan = Leave();
  plan.parent.reset();
  plan.successor = new_master;
  plan.children.erase(
      std::remove_if(plan.children.begin(), plan.children.end(),
                     [&](const NodeRef& c) { return c.node_id == new_master.node_id; }),
      plan.children.end());
  return plan;
}

}  // namespace clocksync
