// membership/membership.h: one node's view of the synchronization tree, and
// the pure logic of joining, placement, leaving and rejoining
// (docs/MEMBERSHIP.md). No sockets, no gRPC, no clock read: time comes in as
// arguments (`now_ns`, any monotonic nanosecond clock of this node), and the
// caller carries the messages (the daemon over gRPC, membership_sim.h in one
// process for tests).
//
//   NodeRef         how to reach a node: id, probe (UDP) and gRPC addresses.
//   Attachment      what a parent gives a child, in a join acceptance and in
//                   every heartbeat reply: the ancestor chain to adopt (root
//                   first, the parent last) and an attachment lease.
//   JoinDecision    a node's answer to a join: accepted, redirect (to the
//                   child whose subtree has the shallowest free place, the
//                   smallest subtree first) or rejected (why).
//   Membership      self, parent, ancestors, children, capacity, seeds, the
//                   lease; both the parent's side (HandleJoin, OnChildHeard,
//                   AttachmentForChild, ExpireChildren) and the child's side
//                   (OnAttached, OnParentInfo, OnParentProbe, OnParentLost,
//                   RejoinCandidates).
//   JoinWalk        the joiner's walk: candidates in order, redirects
//                   followed downward, backtracking when a redirect target
//                   fails, a hop limit.
//
// Rebalancing: a leaf deeper than the master's landing depth by
// move_up_min_gain levels or more moves up (ShouldMoveUp, StartMoveUp,
// OnMovedUp) without ever detaching.
//
// Standby masters (membership/mastership.cc; docs/MEMBERSHIP.md, "Terms,
// takeover and handover"): nodes with master_priority > 0 are candidates;
// their ranking travels up the tree in joins and heartbeats and down again,
// from the master, with every lease (Attachment::candidates). Each
// mastership has a term. A candidate without a master for takeover_after
// polls the candidates and masters it knows (PeerView) and becomes master
// (Promote) when none better is alive and no live master answers; a master
// that meets a master of a higher term, or of the same term and a lower
// id, demotes itself (Demote) and hands its children to it. A master
// leaving on purpose hands over to the best candidate first (HandOver,
// AcceptHandover).
//
// Why no cycle can form (the full argument and its limits are in
// docs/MEMBERSHIP.md): a node accepts a join only while it holds a valid
// attachment lease, and leases flow only down from the master: a child's
// lease never outlasts the one its parent held when granting it. A node that
// detaches stops granting and may not attach again before every lease it
// granted has expired (RejoinAllowedAtNs). So while a node is detached
// nothing in its subtree holds a lease, nothing there accepts joins, and the
// node cannot land below itself, however stale anyone's view is. The
// ancestor-chain check (a node refuses a newcomer found in its own chain)
// is a second, cheaper guard that answers with a clear reason.
//
// Example (a non-master daemon; RPCs elided):
//   MembershipConfig config;
//   config.self = {"node-7", "10.0.0.7:3190", "10.0.0.7:3191"};
//   config.seeds = {{"", "", "master:3191"}};
//   Membership m(config);
//   // Detached: once now >= m.RejoinAllowedAtNs(), walk the candidates.
//   JoinWalk walk = m.StartJoin(now_ns);
//   while (const NodeRef* target = walk.target()) {
//     JoinDecision d = CallJoin(*target, walk.request());  // gRPC
//     if (d.kind == JoinDecision::Kind::kAccepted) {
//       if (m.OnAttached(d.attachment, sent_ns).ok()) break;
//       CallLeave(*target);  // Stale acceptance: undo it.
//       walk.OnFailed();
//     } else if (d.kind == JoinDecision::Kind::kRedirect) {
//       walk.OnRedirect(d);
//     } else {
//       walk.OnFailed();
//     }
//   }
//   // Then every heartbeat: OnParentInfo(reply, sent_ns); every probe:
//   // OnParentProbe(answered, now_ns).
//
// Thread safety: none; the owner serializes calls (one mutex in the daemon).

#ifndef CLOCKSYNC_MEMBERSHIP_MEMBERSHIP_H_
#define CLOCKSYNC_MEMBERSHIP_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace clocksync {

// How to reach a node. A seed given as --join=HOST:PORT has only
// grpc_address until it answers; everything else is known by id.
struct NodeRef {
  std::string node_id;
  std::string probe_address;  // host:port of its UDP probe responder.
  std::string grpc_address;   // host:port of its gRPC service.

  bool operator==(const NodeRef&) const = default;
};

// A master candidate as the tree knows it: a node with master_priority > 0.
struct Candidate {
  NodeRef ref;
  // 1 (first choice) .. 255 (last), as PTP's priority1: lower wins, ties go
  // to the lower id. 0 is never a candidate and never listed.
  int priority = 0;

  bool operator==(const Candidate&) const = default;
};
// True when `a` ranks before `b`: lower priority, then lower id.
bool CandidateBefore(const Candidate& a, const Candidate& b);
// Candidates as they may be kept: ids present, priorities in 1..255 (others
// dropped), one entry per id, ranked, at most kMaxCandidates.
std::vector<Candidate> NormalizeCandidates(std::vector<Candidate> candidates);
inline constexpr int kMaxMasterPriority = 255;
// A tree lists its best candidates only: a takeover needs one, a few more
// cover several failures; the lists travel in every heartbeat.
inline constexpr size_t kMaxCandidates = 8;
// Candidates and masters a node remembers to poll (Membership::
// MastershipPeers), most recently noted kept.
inline constexpr size_t kMaxKnownPeers = 32;

// What a parent hands a child: in an accepted join and in every heartbeat
// reply. Carrying the chain and the lease together means a child's chain is
// always the one that came with its current lease.
struct Attachment {
  // The chain the child adopts: root first, the parent (the sender) last.
  std::vector<NodeRef> ancestors;
  // The child's depth: ancestors.size() (the master is depth 0).
  uint32_t depth = 0;
  // How long the child may consider itself attached, counted from when it
  // sent the request this answers (so message delay only shortens it).
  // 0: the parent holds no lease (it is detached or cut off itself).
  int64_t lease_remaining_ns = 0;
  // Depth a newcomer asking the master would get now (the master's
  // FreeSlotDepth() + 1), passed down unchanged; -1 unknown. Lets a deep
  // leaf see that it could move up (Membership::ShouldMoveUp).
  int32_t landing_depth = -1;
  // The term of the master at the chain's root (ancestors.front()); 0
  // unknown (a parent of an older version).
  uint64_t term = 0;
  // The tree's master candidates, best first, as the master knows them
  // (passed down unchanged).
  std::vector<Candidate> candidates;
};

// A join request as the acceptor sees it.
struct JoinRequestInfo {
  NodeRef newcomer;
  // The newcomer and its descendants (they come along when it rejoins).
  int64_t subtree_size = 1;
  // The newcomer's FreeSlotDepth() (0 for a newcomer without children).
  int32_t free_slot_depth = 0;
  // A pinned newcomer (--parent=) is never redirected: it is accepted even
  // beyond max_children, or rejected.
  bool pinned = false;
  // Children the acceptor must not redirect to: the newcomer's former chain
  // after its parent failed or left (their subtrees are where it came from;
  // the lost parent may be dead), and nodes that already failed during
  // this walk. A full acceptor also drops such a child if it has been
  // silent for suspect_child_after_ns, and gives its slot to the newcomer.
  std::vector<std::string> avoid_ids;
  // A leaf trying to move up (Membership::StartMoveUp) takes no place
  // deeper than this; -1: any depth.
  int32_t max_depth = -1;
  // The newcomer's master_priority: the master accepts a candidate even
  // when full (candidates belong at depth 1, next to the master they may
  // replace).
  int master_priority = 0;
  // The candidates in the newcomer's subtree (itself included), best first.
  std::vector<Candidate> candidates;
};

enum class RejectReason {
  kNone = 0,
  // The newcomer is this node or one of its ancestors: accepting it would
  // close a cycle.
  kWouldFormCycle,
  // This node holds no valid lease (detached, in holdover, cut off, or
  // leaving): accepting could attach two detached fragments to each other.
  kNotAttached,
  // Full, and no child is eligible to take the newcomer (all avoided).
  kFull,
  // Malformed request (empty id).
  kInvalid,
  // The request's max_depth cannot be met at or below this node.
  kTooDeep,
};
const char* RejectReasonName(RejectReason reason);

struct JoinDecision {
  enum class Kind { kAccepted, kRedirect, kRejected };
  Kind kind = Kind::kRejected;
  // kAccepted: what the newcomer adopts.
  Attachment attachment;
  // kRedirect: the child to ask next: among the children whose subtree has
  // the shallowest free slot, the one with the smallest subtree; ties by
  // the lowest round trip to this node when known, then by id ...
  NodeRef redirect_to;
  // ... and every child whose subtree has a free slot as shallow, best
  // first (redirect_to first): any of them places the newcomer as high, so
  // a newcomer that measures its own round trips may prefer the nearest
  // (JoinWalk::OnRedirect with a rtt function).
  std::vector<NodeRef> alternatives;
  // kRedirect: redirect_to and the alternatives reported room for a child
  // of their own (free_slot_depth 0).
  bool redirect_has_room = false;
  // kRejected.
  RejectReason reason = RejectReason::kNone;
  std::string detail;
};

// One child as its parent knows it.
struct ChildInfo {
  NodeRef ref;
  // The child's own report (1 + its descendants).
  int64_t subtree_size = 1;
  // Newcomers this node redirected to it lately (their subtree sizes), and
  // when the last one was: counted on top of the report for
  // kRedirectInFlightNs, since a report sent before they arrived does not
  // include them (a burst of joins would otherwise pile onto one child).
  int64_t redirected_size = 0;
  int64_t last_redirect_ns = 0;
  // The child's report of FreeSlotDepth(): how far below it the nearest
  // slot for a newcomer is (0: it has room itself).
  int32_t free_slot_depth = 0;
  // Round trip child <-> this node as the child measured it, ns; -1 unknown.
  int64_t rtt_ns = -1;
  int64_t last_heard_ns = 0;
  bool pinned = false;
  // Its master_priority and the candidates of its subtree, as it reported.
  int master_priority = 0;
  std::vector<Candidate> candidates;
};

enum class MembershipState {
  kMaster,    // The root: its clock is global time; always attached.
  kDetached,  // No parent: new, lost its parent, or its parent left.
  kAttached,  // Has a parent (its lease may still have run out).
  kLeft,      // Left cleanly; this object only answers queries.
};
const char* MembershipStateName(MembershipState state);

struct MembershipConfig {
  NodeRef self;
  bool master = false;
  // Children accepted before newcomers are redirected (--max_children).
  int max_children = 16;
  // --join: nodes to ask when nothing better is known.
  std::vector<NodeRef> seeds;
  // --parent: a static tree. The node asks only this parent, is never
  // redirected, and never rejoins elsewhere.
  std::optional<NodeRef> pinned_parent;
  // An attachment lease granted by the master lasts this long; every
  // heartbeat reply renews it down the tree. A node's lease is only as
  // fresh as its parent's was at the last refresh, so freshness drops by up
  // to one refresh interval (plus a message delay) per level: the lease
  // must exceed (deepest depth + 2) x refresh interval, or deep nodes lapse
  // between refreshes and refuse joins. 5 s suits refreshes every 250 ms to
  // depth 18. It is also the longest a detached node with children waits
  // before rejoining (RejoinAllowedAtNs).
  int64_t lease_ns = 5'000'000'000;
  // Extra wait after the last granted lease expires before a detached node
  // may attach again: covers clock rate differences between nodes
  // (50 ms on 5 s allows 1% of accumulated rate error along a chain).
  int64_t lease_margin_ns = 50'000'000;
  // Consecutive unanswered probes after which the parent counts as lost.
  int missed_probes_for_loss = 10;
  // An attached node whose lease has been expired this long gives up on its
  // parent (which is alive but detached or cut off) and rejoins itself.
  int64_t abandon_parent_after_ns = 10'000'000'000;
  // A full node drops a child it has not heard from for this long when a
  // newcomer names that child as lost (avoid_ids), and gives the newcomer
  // its slot: orphans then take their dead parent's place under their
  // grandparent instead of being pushed a level deeper. A child dropped by
  // mistake learns it at its next heartbeat (OnDisowned) and rejoins.
  int64_t suspect_child_after_ns = 1'000'000'000;
  // A leaf whose depth exceeds the landing depth (Attachment) by at least
  // this many levels tries to move up: it asks the master for a place that
  // many levels higher while staying attached, and switches parents only if
  // it gets one. Subtrees that rejoined after failures hang below the
  // shallowest free slot, so without moves the tree deepens under churn.
  // 0: never move. 1: a level is worth a change of clock source (a few
  // seconds of wider bounds once, against a level's error for good); moves
  // only go up, so they end.
  int move_up_min_gain = 1;
  // At most one attempt per this long, counted from the last attachment or
  // attempt: orphans pushed deep while their grandparent still counted
  // their dead parent move up within about this long.
  int64_t move_cooldown_ns = 20'000'000'000;
  // Join messages one walk may send before it gives up.
  int max_join_hops = 64;
  // 0: never master (unless `master`). 1..255: a master candidate, lower
  // first (Candidate::priority).
  int master_priority = 0;
  // A candidate takes over once it has been without a master this long,
  // counted from the last instant its lease proves the master alive (its
  // lease expiry minus lease_ns), and it holds no lease any more.
  int64_t takeover_after_ns = 3'000'000'000;
  // The term a `master` starts with (a returning master that found no live
  // master starts above every term it saw).
  uint64_t initial_term = 1;
  // How long a poll answer counts as news of a peer: older ones are
  // ignored by DecideMastership.
  int64_t peer_answer_valid_ns = 2'000'000'000;
};

// Empty when valid, else "field: reason".
std::string ValidateMembershipConfig(const MembershipConfig& config);

class JoinWalk;

// What a node that leaves cleanly must tell (Membership::Leave).
struct LeavePlan {
  std::optional<NodeRef> parent;     // Gets HandleLeave(self id).
  std::vector<NodeRef> children;     // Each gets OnParentLeft(successor).
  std::optional<NodeRef> successor;  // The leaving node's parent.
};

// What a node says of itself to a polling peer (and what a poller sends),
// and, on the poller's side, when it asked and whether it got an answer.
// Masters poll the peers they know all the time; a candidate without a
// master polls them before taking over (Membership::DecideMastership).
struct PeerView {
  NodeRef ref;
  bool is_master = false;
  // Attached under a master by a lease still running (or is the master).
  bool has_master = false;
  // The term of its master (its own when master); 0 none known.
  uint64_t term = 0;
  // Its master: itself when master; the chain's root when attached (the
  // last one known while detached); empty when none is known.
  NodeRef master;
  int priority = 0;
  // A candidate with a synchronized mapping, not master: it could take
  // over now.
  bool eligible = false;
  // Candidates and masters it knows (gossip: a master learns of others
  // through the peers it polls).
  std::vector<NodeRef> known_peers;
  // The poller's side: when the last poll of this peer was sent (its own
  // clock) and whether it was answered (else it failed or timed out).
  int64_t asked_ns = 0;
  bool answered = false;
};

// What a node should do about mastership now (Membership::
// DecideMastership); `why` says it in words for the log.
struct MastershipDecision {
  enum class Kind {
    kNone,     // Nothing to do.
    kWait,     // Without a master, but not taking over yet (see why).
    kPromote,  // Become master with `term` (Promote).
    kDemote,   // A master: `master` leads a higher term; Demote to it.
    kRejoin,   // Without a master: `master` is alive; join it
               // (OnMasterFound).
  };
  Kind kind = Kind::kNone;
  uint64_t term = 0;
  NodeRef master;
  std::string why;
};
const char* MastershipDecisionName(MastershipDecision::Kind kind);
// True when a master of (term_a, id_a) outranks one of (term_b, id_b):
// the higher term, at equal terms the lower id.
bool MasterOutranks(uint64_t term_a, const std::string& id_a, uint64_t term_b,
                    const std::string& id_b);

class Membership {
 public:
  explicit Membership(MembershipConfig config);

  // --- State -------------------------------------------------------------
  MembershipState state() const { return state_; }
  const NodeRef& self() const { return config_.self; }
  const MembershipConfig& config() const { return config_; }
  // The root now: started as master, or promoted since (and not demoted).
  bool is_master() const { return state_ == MembershipState::kMaster; }
  bool pinned() const { return config_.pinned_parent.has_value(); }
  // Set while attached.
  const std::optional<NodeRef>& parent() const { return parent_; }
  // Root first, excluding self, the parent last. While detached: the chain
  // the node last had (its candidates for rejoining); empty for the master.
  const std::vector<NodeRef>& ancestors() const { return ancestors_; }
  uint32_t depth() const { return static_cast<uint32_t>(ancestors_.size()); }
  const std::map<std::string, ChildInfo>& children() const { return children_; }
  // 1 + the children's reported subtree sizes.
  int64_t SubtreeSize() const;
  // Levels below this node to the nearest place a newcomer can take: 0
  // with room for a child, else 1 + the smallest report of the children
  // heard within suspect_child_after_ns (a silent child's report is not
  // trusted; kNoFreeSlot if none is left). Reported to the parent in
  // heartbeats, like SubtreeSize().
  int32_t FreeSlotDepth(int64_t now_ns) const;
  static constexpr int32_t kNoFreeSlot = 1 << 20;
  // Largest subtree a report may claim: far above any real cluster, small
  // enough that sums over children never overflow. Reports outside
  // [1, kMaxSubtreeSize] or free-slot depths outside [0, kNoFreeSlot] are
  // refused by the service and clamped here; SubtreeSize() saturates, so a
  // child that claims too much cannot make this node's own report invalid.
  static constexpr int64_t kMaxSubtreeSize = int64_t{1} << 24;
  // How long a redirected newcomer counts into its target's subtree on top
  // of the target's reports (ChildInfo::redirected_size): a join walk takes
  // milliseconds, a report comes every heartbeat interval.
  static constexpr int64_t kRedirectInFlightNs = 1'000'000'000;
  // The master always; an attached node until its lease runs out.
  bool HasLease(int64_t now_ns) const;
  int64_t lease_expiry_ns() const { return lease_expiry_ns_; }
  // The latest expiry of any lease this node has granted.
  int64_t granted_until_ns() const { return granted_until_ns_; }
  // When the node last detached (meaningful while kDetached after having
  // been attached; 0 for a new node): how long it has been holding over.
  int64_t detached_since_ns() const { return detached_since_ns_; }

  // --- As a parent -------------------------------------------------------
  // Accept (capacity left, or a pinned newcomer, or already my child),
  // redirect (see JoinDecision::redirect_to), or reject (cycle, not
  // attached, too deep for a move, malformed, nobody eligible). Accepting
  // records the child and grants it a lease.
  JoinDecision HandleJoin(const JoinRequestInfo& request, int64_t now_ns);
  // A child left cleanly (or declined a stale acceptance). False if unknown.
  bool HandleLeave(const std::string& child_id);
  // A child's heartbeat: its subtree size, its measured round trip to this
  // node (-1: unknown) and its FreeSlotDepth() (-1: not reported, keep the
  // last). False if it is not (or no longer) a child: it should be told so
  // (OnDisowned on its side).
  // `candidates`, when given, replaces the child's report of the
  // candidates in its subtree.
  bool OnChildHeard(const std::string& child_id, int64_t subtree_size,
                    int64_t rtt_ns, int64_t now_ns,
                    int32_t free_slot_depth = -1,
                    const std::vector<Candidate>* candidates = nullptr);
  // The heartbeat reply for a child: the chain to adopt and a renewed lease
  // (0 while this node holds none). Empty if `child_id` is not a child.
  std::optional<Attachment> AttachmentForChild(const std::string& child_id,
                                               int64_t now_ns);
  // Drops children not heard for `timeout_ns`; returns their ids.
  std::vector<std::string> ExpireChildren(int64_t now_ns, int64_t timeout_ns);

  // --- As a child ----------------------------------------------------------
  // What to send when joining: self, subtree size, free-slot depth,
  // pinned, avoided ids.
  JoinRequestInfo MakeJoinRequest(int64_t now_ns) const;
  // Whom to ask, in order: the successor a leaving parent named (or the
  // master a demoted master yields to, or one found by polls); the nearest
  // living ancestor upward (grandparent ... root); the tree's candidates;
  // the seeds; the candidates and masters it has known; last the lost
  // parent itself (it may only have been unreachable for a while).
  // Pinned: the pinned parent only. Deduplicated, never self.
  std::vector<NodeRef> RejoinCandidates() const;
  // A walk over RejoinCandidates() with MakeJoinRequest(now_ns).
  JoinWalk StartJoin(int64_t now_ns) const;
  // Earliest instant a join request may be sent: every lease this node has
  // granted must have expired (plus the margin), so nothing in its subtree
  // can accept it. Leaves (never granted) may rejoin at once.
  int64_t RejoinAllowedAtNs() const;
  // After a restart a node cannot know which leases its previous run
  // granted: calling this at start-up with start + lease_ns makes
  // RejoinAllowedAtNs() wait them out (docs/MEMBERSHIP.md, "Limits").
  void AssumeGrantedUntil(int64_t until_ns);
  // An acceptance arrived for a request sent at `request_sent_ns`. Fails,
  // changing nothing, when the node is not detached, when the request was
  // sent before RejoinAllowedAtNs(), or when the chain is malformed or
  // contains this node; the caller then tells the acceptor HandleLeave.
  absl::Status OnAttached(const Attachment& attachment,
                          int64_t request_sent_ns);
  // A heartbeat reply from the parent (request sent at `request_sent_ns`):
  // adopts the chain, extends the lease. Ignored (false) unless attached
  // and the chain ends at the current parent. A chain containing this node
  // means the tree is broken: the node detaches (returns false).
  bool OnParentInfo(const Attachment& attachment, int64_t request_sent_ns);
  // One probe to the parent answered or not. After missed_probes_for_loss
  // misses in a row the parent is lost (OnParentLost); returns true then.
  bool OnParentProbe(bool answered, int64_t now_ns);
  // The parent is gone (missed probes, failed heartbeats): detach, stop
  // granting leases, keep the old chain for RejoinCandidates().
  void OnParentLost(int64_t now_ns);
  // The parent left cleanly and named its own parent as successor: detach;
  // the successor is asked first, the leaving parent never.
  void OnParentLeft(const std::optional<NodeRef>& successor, int64_t now_ns);
  // The parent no longer knows this node (it expired it): detach and ask
  // that same parent first.
  void OnDisowned(int64_t now_ns);
  // Attached, but the lease has been expired for abandon_parent_after_ns:
  // the parent is alive yet detached itself; the caller should call
  // OnParentLost and rejoin elsewhere.
  bool ParentStale(int64_t now_ns) const;

  // --- Moving up (rebalancing) ----------------------------------------------
  // A leaf, not pinned, at least move_up_min_gain levels below the landing
  // depth its parent last reported: it would sit higher after a new join.
  bool WantsToMoveUp() const;
  // WantsToMoveUp(), holding a lease, no lease granted by it still running
  // (so it has no subtree at all), and move_cooldown_ns since the last
  // attachment or attempt: time for StartMoveUp().
  bool ShouldMoveUp(int64_t now_ns) const;
  // A walk asking the master for a place at most depth - move_up_min_gain
  // deep (JoinRequestInfo::max_depth), of at most kMaxMoveHops requests.
  // The node stays attached meanwhile; if the walk fails nothing changes.
  // Records the attempt (cooldown).
  JoinWalk StartMoveUp(int64_t now_ns);
  static constexpr int kMaxMoveHops = 16;
  // An acceptance for a move request sent at `request_sent_ns`: switches to
  // the new parent and returns the old one (tell it HandleLeave). Fails,
  // changing nothing, unless still attached, a leaf without running grants,
  // and the new place is higher; the caller then undoes the acceptance.
  // Safe without detaching: a node with no running grants has nobody below
  // it holding a lease, so the acceptor cannot be below it (the argument
  // of RejoinAllowedAtNs()).
  absl::StatusOr<NodeRef> OnMovedUp(const Attachment& attachment,
                                    int64_t request_sent_ns);
  int32_t landing_depth() const { return landing_depth_; }

  // --- Leaving -------------------------------------------------------------
  // Leave cleanly: stop accepting and granting; returns whom to tell.
  LeavePlan Leave();

  // --- Mastership (membership/mastership.cc) -------------------------------
  int master_priority() const { return config_.master_priority; }
  bool is_candidate() const { return config_.master_priority > 0; }
  // The term of the tree this node is in (its own as master; the last one
  // known while detached; 0 before any).
  uint64_t term() const { return term_; }
  // The highest term it has seen anywhere; a promotion takes the next.
  uint64_t highest_term() const { return highest_term_; }
  // Its master: itself as master, the chain's root when attached, the last
  // one known while detached (empty before any).
  std::optional<NodeRef> master() const;
  // Times this node became master by takeover or handover.
  uint64_t promotions() const { return promotions_; }
  // This node (if a candidate) and the candidates its children reported,
  // ranked, at most kMaxCandidates: what it reports to its parent.
  std::vector<Candidate> SubtreeCandidates() const;
  // The tree's candidates, best first: the master's SubtreeCandidates(),
  // handed down with every lease; the last list while detached.
  std::vector<Candidate> TreeCandidates() const;
  // The last instant this node knows its master was alive: a lease ending
  // at E was granted by the master at E - lease_ns or later. Now for a
  // master; 0 before any lease.
  int64_t LastMasterContactNs(int64_t now_ns) const;
  // Since when it has had no master (no lease, not master); -1 while it
  // has one.
  int64_t MasterlessSinceNs(int64_t now_ns) const;
  // A candidate, not master, without a master, and without news of one for
  // takeover_after: time to poll its peers and take over if none better
  // answers (DecideMastership).
  bool TakeoverDue(int64_t now_ns) const;
  // Masters poll their peers always (to meet higher terms); a candidate
  // polls them while it has no master.
  bool ShouldPollPeers(int64_t now_ns) const;
  // Whom to poll: the candidates and masters it has known (at most
  // kMaxKnownPeers, most recent first) and its seeds; never itself.
  std::vector<NodeRef> MastershipPeers() const;
  // What this node tells a peer about itself. `synchronized`: the caller
  // has a synchronized mapping to continue global time from.
  PeerView SelfView(int64_t now_ns, bool synchronized) const;
  // A peer's view (a poll's answer, or a poll received): remembers the
  // peer, its master and the peers it knows; raises highest_term().
  void NotePeer(const PeerView& view);
  // What to do now, given the latest poll of each peer (`peers`, the
  // poller's side filled in). A master demotes itself to an answering peer
  // whose master outranks it (MasterOutranks). A candidate whose
  // TakeoverDue(): joins a live master some peer names (kRejoin); waits
  // while a peer has not been asked since it lost its master, while a
  // better-ranked eligible candidate answers, or without a synchronized
  // mapping; else takes the term after highest_term() (kPromote).
  MastershipDecision DecideMastership(int64_t now_ns, bool synchronized,
                                      const std::vector<PeerView>& peers) const;
  // Become master under `term` (> highest_term()): a root now, keeping its
  // children, granting full leases from now on. Returns the parent it had
  // (tell it HandleLeave), if it was still attached. Safe at any time for
  // the tree's shape: it only removes this node's parent pointer.
  std::optional<NodeRef> Promote(uint64_t term, int64_t now_ns);
  // A master outranked by `winner`'s: detach (waiting out its grants as
  // any detached node, RejoinAllowedAtNs) and ask `winner` first; returns
  // the children to tell (OnParentLeft with `winner` as successor).
  LeavePlan Demote(const NodeRef& winner, int64_t now_ns);
  // A live master found while without one (kRejoin): ask it first; an
  // attached node with an expired lease detaches for that.
  void OnMasterFound(const NodeRef& master, int64_t now_ns);
  // The master `from_id` hands mastership over under `term`: accepted
  // (Promote) when this node is a candidate, synchronized, in from_id's
  // tree, not master and the term is new; else why not.
  absl::Status AcceptHandover(const std::string& from_id, uint64_t term,
                              bool synchronized, int64_t now_ns);
  // The master's best candidate to hand over to, skipping `tried`.
  std::optional<Candidate> HandoverCandidate(
      const std::set<std::string>& tried) const;
  // A master leaving after `new_master` accepted the handover: as Leave(),
  // but the children's successor is the new master (not told itself).
  LeavePlan HandOver(const NodeRef& new_master);

 private:
  enum class DetachCause { kNew, kLost, kLeft, kDisowned, kDemoted };

  static int64_t ClampSubtree(int64_t subtree_size);
  static int32_t ClampFreeSlotDepth(int32_t free_slot_depth);

  int64_t GrantLease(int64_t now_ns);
  int32_t LandingDepth(int64_t now_ns) const;
  JoinDecision Accept(const JoinRequestInfo& request, int64_t now_ns);
  void Detach(DetachCause cause, int64_t now_ns);
  absl::Status CheckChain(const Attachment& attachment) const;
  void Adopt(const Attachment& attachment, int64_t request_sent_ns);

  MembershipConfig config_;
  MembershipState state_;
  std::optional<NodeRef> parent_;
  std::vector<NodeRef> ancestors_;
  std::map<std::string, ChildInfo> children_;
  // At most every child's last_heard_ns (which only grows; a child enters
  // heard now): ExpireChildren skips its pass while none can have timed out.
  int64_t children_heard_floor_ns_ = std::numeric_limits<int64_t>::max();
  int64_t lease_expiry_ns_ = 0;
  int64_t granted_until_ns_ = 0;
  int missed_probes_ = 0;
  int64_t detached_since_ns_ = 0;
  int64_t attached_at_ns_ = 0;
  int64_t last_move_attempt_ns_ = 0;
  int32_t landing_depth_ = -1;
  // Why the node is detached, and the parent it had then.
  DetachCause detach_cause_ = DetachCause::kNew;
  std::optional<NodeRef> former_parent_;
  std::optional<NodeRef> successor_;

  // Mastership (mastership.cc).
  void NoteKnownPeer(const NodeRef& ref);
  void AdoptMastership(const Attachment& attachment, int64_t request_sent_ns);
  Attachment MakeAttachment(int64_t now_ns);
  uint64_t term_ = 0;
  uint64_t highest_term_ = 0;
  std::vector<Candidate> tree_candidates_;
  // Last instant the master was known alive (LastMasterContactNs).
  int64_t master_contact_ns_ = 0;
  // When the node lost its master while detached (MasterlessSinceNs).
  int64_t masterless_since_ns_ = 0;
  std::optional<NodeRef> last_master_;
  uint64_t promotions_ = 0;
  // Candidates and masters known, with the order they were last noted in.
  std::map<std::string, std::pair<uint64_t, NodeRef>> known_peers_;
  uint64_t known_peer_seq_ = 0;
};

// The joiner's side of one join: asks candidates in order, follows
// redirects down the tree, and when a redirect target fails (unreachable,
// refused) backs up to the node that redirected and asks it again with the
// failed node avoided. Gives up after max_join_hops requests.
class JoinWalk {
 public:
  JoinWalk(std::vector<NodeRef> candidates, JoinRequestInfo base_request,
           int max_hops);

  // The node to send request() to next; null when the walk is exhausted.
  const NodeRef* target() const;
  // The request for target(): the base plus the ids failed so far.
  JoinRequestInfo request() const;
  // target() redirected. Follows decision.redirect_to, or with `rtt_ns`
  // (this node's measured round trip to a node, <0 unknown) the alternative
  // with the lowest known round trip. A redirect to a node already on the
  // path counts as a failure of it, and so does a redirect from a node
  // offered as having room (JoinDecision::redirect_has_room) while some of
  // its equals remain: the walk asks the node above again with it avoided
  // rather than going a level deeper than needed.
  void OnRedirect(const JoinDecision& decision,
                  const std::function<int64_t(const NodeRef&)>& rtt_ns = {});
  // target() refused or could not be reached.
  void OnFailed();
  int hops() const { return hops_; }
  bool exhausted() const { return target() == nullptr; }

 private:
  void Advance();
  void FailTarget();
  static std::string Key(const NodeRef& ref);

  std::vector<NodeRef> candidates_;
  JoinRequestInfo base_;
  int max_hops_;
  size_t next_candidate_ = 0;
  // Current redirect path: path_[0] is a candidate, each next one a child
  // the previous redirected to. Empty when exhausted.
  std::vector<NodeRef> path_;
  std::set<std::string> failed_;
  int hops_ = 0;
  // The redirect that sent us to target(): it promised room there, and
  // offered this many other usable options.
  bool target_promised_room_ = false;
  size_t target_equals_ = 0;
};

// Smallest d with fanout^d >= n: the depth of a complete tree of n nodes
// needs at most this (the master at depth 0). fanout 1: n - 1.
int CeilLog(int64_t n, int fanout);

}  // namespace clocksync

#endif  // CLOCKSYNC_MEMBERSHIP_MEMBERSHIP_H_
