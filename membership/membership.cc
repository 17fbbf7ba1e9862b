// membership/membership.cc: tree membership and placement (membership.h,
// docs/MEMBERSHIP.md).

#include "membership/membership.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace clocksync {
namespace {

bool ContainsId(const std::vector<NodeRef>& chain, const std::string& id) {
  for (const NodeRef& ref : chain) {
    if (ref.node_id == id) return true;
  }
  return false;
}

}  // namespace

const char* RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kNone:
      return "none";
    case RejectReason::kWouldFormCycle:
      return "would_form_cycle";
    case RejectReason::kNotAttached:
      return "not_attached";
    case RejectReason::kFull:
      return "full";
    case RejectReason::kInvalid:
      return "invalid";
    case RejectReason::kTooDeep:
      return "too_deep";
  }
  return "unknown";
}

const char* MembershipStateName(MembershipState state) {
  switch (state) {
    case MembershipState::kMaster:
      return "master";
    case MembershipState::kDetached:
      return "detached";
    case MembershipState::kAttached:
      return "attached";
    case MembershipState::kLeft:
      return "left";
  }
  return "unknown";
}

std::string ValidateMembershipConfig(const MembershipConfig& config) {
  if (config.self.node_id.empty()) return "node_id: must not be empty";
  if (config.max_children < 1) return "max_children: must be at least 1";
  if (config.lease_ns <= 0) return "lease_ns: must be positive";
  if (config.lease_margin_ns < 0) return "lease_margin_ns: must be >= 0";
  if (config.missed_probes_for_loss < 1) {
    return "missed_probes_for_loss: must be at least 1";
  }
  if (config.abandon_parent_after_ns < 0) {
    return "abandon_parent_after_ns: must be >= 0";
  }
  if (config.max_join_hops < 1) return "max_join_hops: must be at least 1";
  if (config.move_up_min_gain < 0) return "move_up_min_gain: must be >= 0";
  if (config.move_cooldown_ns < 0) return "move_cooldown_ns: must be >= 0";
  if (config.suspect_child_after_ns < 0) {
    return "suspect_child_after_ns: must be >= 0";
  }
  if (config.master_priority < 0 || config.master_priority > kMaxMasterPriority) {
    return absl::StrCat("master_priority: must be 0..", kMaxMasterPriority,
                        ", got ", config.master_priority);
  }
  if (config.takeover_after_ns <= 0) return "takeover_after_ns: must be positive";
  if (config.initial_term < 1) return "initial_term: must be at least 1";
  if (config.peer_answer_valid_ns <= 0) {
    return "peer_answer_valid_ns: must be positive";
  }
  if (config.master) {
    if (config.pinned_parent) return "parent: the master has no parent";
    return "";
  }
  if (!config.pinned_parent && config.seeds.empty()) {
    return "join: a node needs --join seeds or a --parent";
  }
  if (config.pinned_parent &&
      config.pinned_parent->node_id == config.self.node_id) {
    return "parent: a node cannot be its own parent";
  }
  return "";
}

int CeilLog(int64_t n, int fanout) {
  if (n <= 1) return 0;
  if (fanout <= 1) return static_cast<int>(n - 1);
  int d = 0;
  int64_t reach = 1;
  while (reach < n) {
    reach *= fanout;
    ++d;
  }
  return d;
}

// --- Membership ---------------------------------------------------------

// Reports from children are trusted only within these ranges (a hostile or
// broken child must not overflow the sums or depths computed from them).
int64_t Membership::ClampSubtree(int64_t subtree_size) {
  return std::clamp<int64_t>(subtree_size, 1, kMaxSubtreeSize);
}

int32_t Membership::ClampFreeSlotDepth(int32_t free_slot_depth) {
  return std::clamp<int32_t>(free_slot_depth, 0, kNoFreeSlot);
}

Membership::Membership(MembershipConfig config)
    : config_(std::move(config)),
      state_(config_.master ? MembershipState::kMaster
                            : MembershipState::kDetached) {
  if (config_.master) {
    term_ = highest_term_ = config_.initial_term;
    last_master_ = config_.self;
  }
}

int64_t Membership::SubtreeSize() const {
  int64_t size = 1;
  for (const auto& [id, child] : children_) {
    size = std::min(size + ClampSubtree(child.subtree_size), kMaxSubtreeSize);
  }
  return size;
}

// The master's FreeSlotDepth() + 1; anyone else passes on its parent's.
int32_t Membership::LandingDepth(int64_t now_ns) const {
  if (state_ == MembershipState::kMaster) return FreeSlotDepth(now_ns) + 1;
  return landing_depth_;
}

int32_t Membership::FreeSlotDepth(int64_t now_ns) const {
  if (static_cast<int>(children_.size()) < config_.max_children) return 0;
  int32_t nearest = kNoFreeSlot;
  for (const auto& [id, child] : children_) {
    if (now_ns - child.last_heard_ns > config_.suspect_child_after_ns) {
      continue;
    }
    nearest = std::min(nearest, child.free_slot_depth + 1);
  }
  return nearest;
}

bool Membership::HasLease(int64_t now_ns) const {
  if (state_ == MembershipState::kMaster) return true;
  return state_ == MembershipState::kAttached && now_ns < lease_expiry_ns_;
}

// The lease a child gets now: the master grants a full one; anyone else
// passes on what is left of its own, so no lease in the tree outlives the
// master's grant it descends from. Recorded for RejoinAllowedAtNs().
int64_t Membership::GrantLease(int64_t now_ns) {
  int64_t remaining = 0;
  if (state_ == MembershipState::kMaster) {
    remaining = config_.lease_ns;
  } else if (HasLease(now_ns)) {
    remaining = lease_expiry_ns_ - now_ns;
  }
  if (remaining > 0) {
    granted_until_ns_ = std::max(granted_until_ns_, now_ns + remaining);
  }
  return remaining;
}

JoinDecision Membership::Accept(const JoinRequestInfo& request,
                                int64_t now_ns) {
  ChildInfo& child = children_[request.newcomer.node_id];
  child.ref = request.newcomer;
  child.subtree_size = ClampSubtree(request.subtree_size);
  child.free_slot_depth = ClampFreeSlotDepth(request.free_slot_depth);
  child.last_heard_ns = now_ns;
  children_heard_floor_ns_ = std::min(children_heard_floor_ns_, now_ns);
  child.pinned = request.pinned;
  child.master_priority =
      std::clamp(request.master_priority, 0, kMaxMasterPriority);
  child.candidates = NormalizeCandidates(request.candidates);
  JoinDecision decision;
  decision.kind = JoinDecision::Kind::kAccepted;
  decision.attachment = MakeAttachment(now_ns);
  return decision;
}

JoinDecision Membership::HandleJoin(const JoinRequestInfo& request,
                                    int64_t now_ns) {
  JoinDecision decision;
  decision.kind = JoinDecision::Kind::kRejected;
  const std::string& id = request.newcomer.node_id;
  if (id.empty()) {
    decision.reason = RejectReason::kInvalid;
    decision.detail = "newcomer has no node id";
    return decision;
  }
  // Cycle guard from the chain: I am the newcomer, or it is above me.
  if (id == config_.self.node_id) {
    decision.reason = RejectReason::kWouldFormCycle;
    decision.detail = "the newcomer is this node";
    return decision;
  }
  if (ContainsId(ancestors_, id)) {
    decision.reason = RejectReason::kWouldFormCycle;
    decision.detail =
        absl::StrCat(id, " is an ancestor of ", config_.self.node_id);
    return decision;
  }
  // Only a node attached to the master's tree (by a valid lease) takes
  // children; this is what makes the guarantee hold with stale chains.
  if (!HasLease(now_ns)) {
    decision.reason = RejectReason::kNotAttached;
    decision.detail = absl::StrCat(
        config_.self.node_id, " is ", MembershipStateName(state_),
        state_ == MembershipState::kAttached ? " with an expired lease" : "");
    return decision;
  }
  // A move up takes only a place at most max_depth deep.
  const int32_t my_depth = static_cast<int32_t>(depth());
  if (request.max_depth >= 0 && my_depth + 1 > request.max_depth) {
    decision.reason = RejectReason::kTooDeep;
    decision.detail = absl::StrCat("a child of ", config_.self.node_id,
                                   " would be at depth ", my_depth + 1);
    return decision;
  }
  const bool known = children_.count(id) > 0;
  if (!known && static_cast<int>(children_.size()) >= config_.max_children) {
    for (const std::string& lost : request.avoid_ids) {
      auto it = children_.find(lost);
      if (it != children_.end() &&
          now_ns - it->second.last_heard_ns > config_.suspect_child_after_ns) {
        children_.erase(it);
      }
    }
  }
  // The master takes candidates even when full: next to it they see it
  // die first and hold the best mapping to continue from.
  const bool candidate_at_master = is_master() && request.master_priority > 0;
  if (known || request.pinned || candidate_at_master ||
      static_cast<int>(children_.size()) < config_.max_children) {
    return Accept(request, now_ns);
  }
  // Full: redirect to the best eligible child (order below).
  std::vector<const ChildInfo*> eligible;
  for (const auto& [child_id, child] : children_) {
    if (std::find(request.avoid_ids.begin(), request.avoid_ids.end(),
                  child_id) != request.avoid_ids.end()) {
      continue;
    }
    // Where the newcomer would land through this child, as it reported.
    if (request.max_depth >= 0 &&
        static_cast<int64_t>(my_depth) + 2 + child.free_slot_depth >
            request.max_depth) {
      continue;
    }
    eligible.push_back(&child);
  }
  if (eligible.empty() && request.max_depth >= 0) {
    decision.reason = RejectReason::kTooDeep;
    decision.detail = absl::StrCat("no place at depth <= ", request.max_depth,
                                   " below ", config_.self.node_id);
    return decision;
  }
  if (eligible.empty()) {
    decision.reason = RejectReason::kFull;
    decision.detail =
        absl::StrCat(config_.self.node_id, " has ", children_.size(),
                     " children, none eligible");
    return decision;
  }
  // Order: children heard lately before silent ones (which may be dead),
  // then the shallowest free slot (the newcomer lands as high as the tree
  // allows), then the smallest subtree (the balance the tree keeps), then
  // the known round trip (lower first; unknown last), then the id (the map
  // iterates in id order and the sort is stable).
  auto suspect = [&](const ChildInfo* c) {
    return now_ns - c->last_heard_ns > config_.suspect_child_after_ns;
  };
  // The report plus newcomers still on their way to it.
  auto subtree = [&](const ChildInfo* c) {
    return c->subtree_size + (now_ns - c->last_redirect_ns <= kRedirectInFlightNs
                                  ? c->redirected_size
                                  : 0);
  };
  auto rtt_key = [](const ChildInfo* c) {
    return c->rtt_ns >= 0 ? c->rtt_ns : std::numeric_limits<int64_t>::max();
  };
  std::stable_sort(eligible.begin(), eligible.end(),
                   [&](const ChildInfo* a, const ChildInfo* b) {
                     if (suspect(a) != suspect(b)) return !suspect(a);
                     if (a->free_slot_depth != b->free_slot_depth) {
                       return a->free_slot_depth < b->free_slot_depth;
                     }
                     if (subtree(a) != subtree(b)) return subtree(a) < subtree(b);
                     return rtt_key(a) < rtt_key(b);
                   });
  decision.kind = JoinDecision::Kind::kRedirect;
  decision.redirect_to = eligible.front()->ref;
  decision.redirect_has_room = eligible.front()->free_slot_depth == 0;
  for (const ChildInfo* c : eligible) {
    if (suspect(c) != suspect(eligible.front()) ||
        c->free_slot_depth != eligible.front()->free_slot_depth) {
      break;
    }
    decision.alternatives.push_back(c->ref);
  }
  // Count the newcomer into that subtree at once, so that a burst of joins
  // arriving before the next reports spreads over the children instead of
  // piling onto one.
  ChildInfo& chosen = children_[decision.redirect_to.node_id];
  if (now_ns - chosen.last_redirect_ns > kRedirectInFlightNs) chosen.redirected_size = 0;
  chosen.redirected_size =
      std::min(chosen.redirected_size + ClampSubtree(request.subtree_size), kMaxSubtreeSize);
  chosen.last_redirect_ns = now_ns;
  return decision;
}

bool Membership::HandleLeave(const std::string& child_id) {
  return children_.erase(child_id) > 0;
}

bool Membership::OnChildHeard(const std::string& child_id, int64_t subtree_size,
                              int64_t rtt_ns, int64_t now_ns,
                              int32_t free_slot_depth,
                              const std::vector<Candidate>* candidates) {
  auto it = children_.find(child_id);
  if (it == children_.end()) return false;
  if (candidates != nullptr) {
    it->second.candidates = NormalizeCandidates(*candidates);
  }
  it->second.subtree_size = ClampSubtree(subtree_size);
  if (rtt_ns >= 0) it->second.rtt_ns = rtt_ns;
  if (free_slot_depth >= 0) {
    it->second.free_slot_depth = ClampFreeSlotDepth(free_slot_depth);
  }
  it->second.last_heard_ns = std::max(it->second.last_heard_ns, now_ns);
  return true;
}

std::optional<Attachment> Membership::AttachmentForChild(
    const std::string& child_id, int64_t now_ns) {
  if (children_.count(child_id) == 0) return std::nullopt;
  if (state_ == MembershipState::kLeft) return std::nullopt;
  return MakeAttachment(now_ns);
}

// The chain through this node, a lease, the landing depth, and the term
// and candidates of the tree (the master's own).
Attachment Membership::MakeAttachment(int64_t now_ns) {
  Attachment a;
  a.ancestors = ancestors_;
  a.ancestors.push_back(config_.self);
  a.depth = static_cast<uint32_t>(a.ancestors.size());
  a.lease_remaining_ns = GrantLease(now_ns);
  a.landing_depth = LandingDepth(now_ns);
  a.term = term_;
  a.candidates = TreeCandidates();
  return a;
}

std::vector<std::string> Membership::ExpireChildren(int64_t now_ns,
                                                    int64_t timeout_ns) {
  std::vector<std::string> expired;
  // Called at every tick: no pass while no child can have timed out.
  if (children_.empty() || now_ns - children_heard_floor_ns_ <= timeout_ns) {
    return expired;
  }
  int64_t floor_ns = std::numeric_limits<int64_t>::max();
  for (auto it = children_.begin(); it != children_.end();) {
    if (now_ns - it->second.last_heard_ns > timeout_ns) {
      expired.push_back(it->first);
      it = children_.erase(it);
    } else {
      floor_ns = std::min(floor_ns, it->second.last_heard_ns);
      ++it;
    }
  }
  children_heard_floor_ns_ = floor_ns;
  return expired;
}

JoinRequestInfo Membership::MakeJoinRequest(int64_t now_ns) const {
  JoinRequestInfo request;
  request.newcomer = config_.self;
  request.subtree_size = SubtreeSize();
  request.free_slot_depth = FreeSlotDepth(now_ns);
  request.pinned = pinned();
  request.master_priority = config_.master_priority;
  request.candidates = SubtreeCandidates();
  // Never be sent back into the subtrees we came from: those of the former
  // chain's nodes, down to the parent that failed or left. A pinned node
  // asks its one parent and is never redirected anyway.
  if (!pinned() && (detach_cause_ == DetachCause::kLost ||
                    detach_cause_ == DetachCause::kLeft)) {
    for (const NodeRef& a : ancestors_) {
      if (!a.node_id.empty()) request.avoid_ids.push_back(a.node_id);
    }
  }
  return request;
}

std::vector<NodeRef> Membership::RejoinCandidates() const {
  std::vector<NodeRef> out;
  auto add = [&](const NodeRef& ref) {
    if (ref.node_id.empty() && ref.grpc_address.empty() &&
        ref.probe_address.empty()) {
      return;
    }
    if (!ref.node_id.empty() && ref.node_id == config_.self.node_id) return;
    if (!ref.grpc_address.empty() &&
        ref.grpc_address == config_.self.grpc_address) {
      return;
    }
    for (const NodeRef& have : out) {
      if (!ref.node_id.empty() && have.node_id == ref.node_id) return;
      if (!ref.grpc_address.empty() && have.grpc_address == ref.grpc_address) {
        return;
      }
    }
    out.push_back(ref);
  };
  if (config_.pinned_parent) {
    add(*config_.pinned_parent);
    return out;
  }
  if (successor_) add(*successor_);
  // The chain without the parent (the one that failed or left): nearest
  // ancestor first, up to the root.
  const bool attached = state_ == MembershipState::kAttached;
  const std::string skip =
      attached ? (parent_ ? parent_->node_id : std::string())
               : (former_parent_ ? former_parent_->node_id : std::string());
  if (detach_cause_ == DetachCause::kDisowned && former_parent_) {
    add(*former_parent_);
  }
  for (auto it = ancestors_.rbegin(); it != ancestors_.rend(); ++it) {
    if (it->node_id == skip) continue;
    add(*it);
  }
  // The tree's candidates next: after a takeover one of them is master.
  for (const Candidate& c : tree_candidates_) add(c.ref);
  for (const NodeRef& seed : config_.seeds) add(seed);
  // Then every candidate and master it has known (a fragment whose own
  // candidates and seeds are gone finds the others' tree through them).
  for (const NodeRef& peer : MastershipPeers()) add(peer);
  // A lost parent may only have been unreachable for a while: last resort.
  // One that left is gone.
  if (!attached && former_parent_ && detach_cause_ != DetachCause::kLeft) {
    add(*former_parent_);
  }
  if (attached && parent_) add(*parent_);
  return out;
}

JoinWalk Membership::StartJoin(int64_t now_ns) const {
  return JoinWalk(RejoinCandidates(), MakeJoinRequest(now_ns),
                  config_.max_join_hops);
}

int64_t Membership::RejoinAllowedAtNs() const {
  if (granted_until_ns_ == 0) return std::numeric_limits<int64_t>::min();
  return granted_until_ns_ + config_.lease_margin_ns;
}

void Membership::AssumeGrantedUntil(int64_t until_ns) {
  granted_until_ns_ = std::max(granted_until_ns_, until_ns);
}

absl::Status Membership::CheckChain(const Attachment& attachment) const {
  if (attachment.ancestors.empty() ||
      attachment.depth != attachment.ancestors.size()) {
    return absl::InvalidArgumentError("malformed chain");
  }
  std::set<std::string> seen;
  for (const NodeRef& a : attachment.ancestors) {
    if (a.node_id == config_.self.node_id) {
      return absl::FailedPreconditionError(
          absl::StrCat("chain contains ", config_.self.node_id,
                       ": attaching would close a cycle"));
    }
    if (!seen.insert(a.node_id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("chain repeats ", a.node_id));
    }
  }
  return absl::OkStatus();
}

// A new attachment: a fresh lease (not the max with an old one: the old
// parent's grants say nothing about the new one's).
void Membership::Adopt(const Attachment& attachment, int64_t request_sent_ns) {
  state_ = MembershipState::kAttached;
  ancestors_ = attachment.ancestors;
  parent_ = ancestors_.back();
  lease_expiry_ns_ = request_sent_ns + attachment.lease_remaining_ns;
  landing_depth_ = attachment.landing_depth;
  attached_at_ns_ = request_sent_ns;
  missed_probes_ = 0;
  former_parent_.reset();
  successor_.reset();
  detach_cause_ = DetachCause::kNew;
  AdoptMastership(attachment, request_sent_ns);
}

absl::Status Membership::OnAttached(const Attachment& attachment,
                                    int64_t request_sent_ns) {
  if (state_ != MembershipState::kDetached) {
    return absl::FailedPreconditionError(
        absl::StrCat(config_.self.node_id, " is ", MembershipStateName(state_),
                     ", not detached"));
  }
  if (request_sent_ns < RejoinAllowedAtNs()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "request sent at ", request_sent_ns, " ns, before leases granted by ",
        config_.self.node_id, " expire at ", RejoinAllowedAtNs(), " ns"));
  }
  absl::Status status = CheckChain(attachment);
  if (!status.ok()) return status;
  Adopt(attachment, request_sent_ns);
  return absl::OkStatus();
}

bool Membership::OnParentInfo(const Attachment& attachment,
                              int64_t request_sent_ns) {
  if (state_ != MembershipState::kAttached || !parent_) return false;
  if (attachment.ancestors.empty() ||
      attachment.depth != attachment.ancestors.size() ||
      attachment.ancestors.back().node_id != parent_->node_id) {
    return false;
  }
  if (ContainsId(attachment.ancestors, config_.self.node_id)) {
    // My parent's chain runs through me: the tree is broken somewhere. The
    // protocol should make this impossible; if it happens, cut the loop.
    OnParentLost(request_sent_ns);
    return false;
  }
  ancestors_ = attachment.ancestors;
  parent_ = ancestors_.back();
  landing_depth_ = attachment.landing_depth;
  // Within one attachment the expiry only grows (each reply is a lower
  // bound of the parent's own expiry, which only grows while it stays
  // attached); a reply from a parent that lost its lease adds nothing.
  if (attachment.lease_remaining_ns > 0) {
    lease_expiry_ns_ = std::max(
        lease_expiry_ns_, request_sent_ns + attachment.lease_remaining_ns);
  }
  AdoptMastership(attachment, request_sent_ns);
  return true;
}

bool Membership::OnParentProbe(bool answered, int64_t now_ns) {
  if (state_ != MembershipState::kAttached) return false;
  if (answered) {
    missed_probes_ = 0;
    return false;
  }
  if (++missed_probes_ < config_.missed_probes_for_loss) return false;
  OnParentLost(now_ns);
  return true;
}

void Membership::Detach(DetachCause cause, int64_t now_ns) {
  if (state_ != MembershipState::kAttached) return;
  detached_since_ns_ = now_ns;
  // Without a master from the earlier of now and the lease's end.
  masterless_since_ns_ =
      std::min(now_ns, std::max(lease_expiry_ns_, attached_at_ns_));
  former_parent_ = parent_;
  parent_.reset();
  detach_cause_ = cause;
  state_ = MembershipState::kDetached;
  // No lease any more: HasLease() is false from here, so GrantLease()
  // grants nothing and HandleJoin() refuses.
  lease_expiry_ns_ = 0;
  missed_probes_ = 0;
  successor_.reset();
}

void Membership::OnParentLost(int64_t now_ns) {
  Detach(DetachCause::kLost, now_ns);
}

void Membership::OnParentLeft(const std::optional<NodeRef>& successor,
                              int64_t now_ns) {
  if (state_ != MembershipState::kAttached) return;
  Detach(DetachCause::kLeft, now_ns);
  successor_ = successor;
}

void Membership::OnDisowned(int64_t now_ns) {
  Detach(DetachCause::kDisowned, now_ns);
}

bool Membership::ParentStale(int64_t now_ns) const {
  return state_ == MembershipState::kAttached &&
         now_ns - lease_expiry_ns_ >= config_.abandon_parent_after_ns;
}

bool Membership::WantsToMoveUp() const {
  if (state_ != MembershipState::kAttached || pinned() ||
      config_.move_up_min_gain <= 0 || !children_.empty()) {
    return false;
  }
  // A candidate belongs at depth 1, which the master always gives it.
  if (is_candidate()) return depth() > 1;
  return landing_depth_ >= 1 &&
         static_cast<int64_t>(depth()) >=
             static_cast<int64_t>(landing_depth_) + config_.move_up_min_gain;
}

bool Membership::ShouldMoveUp(int64_t now_ns) const {
  return WantsToMoveUp() && HasLease(now_ns) && now_ns >= RejoinAllowedAtNs() &&
         now_ns - std::max(attached_at_ns_, last_move_attempt_ns_) >=
             config_.move_cooldown_ns;
}

JoinWalk Membership::StartMoveUp(int64_t now_ns) {
  last_move_attempt_ns_ = now_ns;
  JoinRequestInfo request = MakeJoinRequest(now_ns);
  request.max_depth =
      is_candidate()
          ? 1
          : static_cast<int32_t>(depth()) - std::max(1, config_.move_up_min_gain);
  std::vector<NodeRef> candidates;
  if (!ancestors_.empty()) candidates.push_back(ancestors_.front());
  // A move is optional: give up sooner than a join would.
  return JoinWalk(std::move(candidates), std::move(request),
                  std::min(config_.max_join_hops, kMaxMoveHops));
}

absl::StatusOr<NodeRef> Membership::OnMovedUp(const Attachment& attachment,
                                              int64_t request_sent_ns) {
  if (state_ != MembershipState::kAttached || !parent_) {
    return absl::FailedPreconditionError(
        absl::StrCat(config_.self.node_id, " is ", MembershipStateName(state_),
                     ", not attached"));
  }
  if (!children_.empty() || request_sent_ns < RejoinAllowedAtNs()) {
    return absl::FailedPreconditionError(absl::StrCat(
        config_.self.node_id, " is no longer a leaf without running grants"));
  }
  if (attachment.depth >= depth()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "depth ", attachment.depth, " is no higher than ", depth()));
  }
  absl::Status status = CheckChain(attachment);
  if (!status.ok()) return status;
  const NodeRef old_parent = *parent_;
  Adopt(attachment, request_sent_ns);
  return old_parent;
}

LeavePlan Membership::Leave() {
  LeavePlan plan;
  if (state_ == MembershipState::kLeft) return plan;
  if (state_ == MembershipState::kAttached) plan.parent = parent_;
  plan.successor = plan.parent;
  for (const auto& [id, child] : children_) plan.children.push_back(child.ref);
  state_ = MembershipState::kLeft;
  parent_.reset();
  lease_expiry_ns_ = 0;
  children_.clear();
  return plan;
}

// --- JoinWalk -----------------------------------------------------------

JoinWalk::JoinWalk(std::vector<NodeRef> candidates,
                   JoinRequestInfo base_request, int max_hops)
    : candidates_(std::move(candidates)),
      base_(std::move(base_request)),
      max_hops_(max_hops) {
  Advance();
}

std::string JoinWalk::Key(const NodeRef& ref) {
  if (!ref.node_id.empty()) return ref.node_id;
  return "@" + ref.grpc_address;
}

// Moves to the next top-level candidate not failed yet.
void JoinWalk::Advance() {
  path_.clear();
  while (next_candidate_ < candidates_.size()) {
    const NodeRef& c = candidates_[next_candidate_++];
    if (failed_.count(Key(c)) == 0) {
      path_.push_back(c);
      return;
    }
  }
}

const NodeRef* JoinWalk::target() const {
  if (path_.empty() || hops_ >= max_hops_) return nullptr;
  return &path_.back();
}

JoinRequestInfo JoinWalk::request() const {
  JoinRequestInfo r = base_;
  for (const std::string& key : failed_) {
    if (!key.empty() && key[0] != '@' &&
        std::find(r.avoid_ids.begin(), r.avoid_ids.end(), key) ==
            r.avoid_ids.end()) {
      r.avoid_ids.push_back(key);
    }
  }
  return r;
}

void JoinWalk::OnRedirect(
    const JoinDecision& decision,
    const std::function<int64_t(const NodeRef&)>& rtt_ns) {
  if (path_.empty()) return;
  ++hops_;
  if (target_promised_room_ && target_equals_ > 0) {
    // Full after all (its report predates the joins it took since): one of
    // its equals may still have the room it no longer has.
    FailTarget();
    return;
  }
  std::vector<NodeRef> options = decision.alternatives;
  if (options.empty()) options.push_back(decision.redirect_to);
  const NodeRef* choice = nullptr;
  int64_t best_rtt = std::numeric_limits<int64_t>::max();
  for (const NodeRef& option : options) {
    if (option.node_id.empty() || failed_.count(Key(option)) > 0) continue;
    if (choice == nullptr) choice = &option;
    if (!rtt_ns) break;
    const int64_t rtt = rtt_ns(option);
    if (rtt >= 0 && rtt < best_rtt) {
      best_rtt = rtt;
      choice = &option;
    }
  }
  if (choice == nullptr) {
    // Nothing usable offered: this node is a dead end for us.
    FailTarget();
    return;
  }
  for (const NodeRef& on_path : path_) {
    if (Key(on_path) == Key(*choice)) {
      // A loop through stale child lists: avoid that node and ask again.
      failed_.insert(Key(*choice));
      return;
    }
  }
  path_.push_back(*choice);
  target_promised_room_ = decision.redirect_has_room;
  target_equals_ = 0;
  for (const NodeRef& option : options) {
    if (!option.node_id.empty() && failed_.count(Key(option)) == 0 &&
        Key(option) != Key(*choice)) {
      ++target_equals_;
    }
  }
}

void JoinWalk::OnFailed() {
  if (path_.empty()) return;
  ++hops_;
  FailTarget();
}

void JoinWalk::FailTarget() {
  target_promised_room_ = false;
  target_equals_ = 0;
  failed_.insert(Key(path_.back()));
  path_.pop_back();
  // Back up to the node that redirected us (it will be asked again with
  // the failed child avoided), or on to the next candidate.
  if (path_.empty()) Advance();
}

}  // namespace clocksync
