// Tree membership and placement (membership.h): acceptance until full and
// redirection to the smallest subtree, cycle refusals, detached nodes
// refusing, the lease rule where a stale chain alone would close a cycle,
// rejoin order, clean leave, pinned parents, the join walk; then the
// simulator (membership_sim.h): depth of sequential and concurrent joins,
// clean leave, parent and child killed together, a randomized test of joins,
// kills, leaves and rejoins with invariants after every tick (seeds
// printed), and the round-trip preference measured against the id
// tie-break.

#include "membership/membership.h"

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "membership/membership_sim.h"
#include "gtest/gtest.h"

namespace clocksync {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kLease = 300 * kMs;

NodeRef Ref(const std::string& id) {
  return NodeRef{id, id + ":3190", id + ":3191"};
}

MembershipConfig Config(const std::string& id, int max_children = 16,
                        bool master = false) {
  MembershipConfig c;
  c.self = Ref(id);
  c.master = master;
  c.max_children = max_children;
  c.lease_ns = kLease;
  c.lease_margin_ns = 5 * kMs;
  c.missed_probes_for_loss = 3;
  c.abandon_parent_after_ns = 1000 * kMs;
  if (!master) c.seeds = {NodeRef{"", "", "m:3191"}};
  return c;
}

JoinRequestInfo Request(const std::string& id, int64_t subtree = 1) {
  JoinRequestInfo r;
  r.newcomer = Ref(id);
  r.subtree_size = subtree;
  return r;
}

// Joins `child` directly under `parent` at `t` (request sent at `t`).
void Attach(Membership& parent, Membership& child, int64_t t) {
  JoinDecision d = parent.HandleJoin(child.MakeJoinRequest(0), t);
  ASSERT_EQ(d.kind, JoinDecision::Kind::kAccepted)
      << parent.self().node_id << " refused " << child.self().node_id << ": "
      << d.detail;
  ASSERT_TRUE(child.OnAttached(d.attachment, t).ok());
}

// One heartbeat child -> parent sent and answered at `t`.
void Heartbeat(Membership& parent, Membership& child, int64_t t) {
  ASSERT_TRUE(
      parent.OnChildHeard(child.self().node_id, child.SubtreeSize(), -1, t));
  std::optional<Attachment> a =
      parent.AttachmentForChild(child.self().node_id, t);
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(child.OnParentInfo(*a, t));
}

std::vector<std::string> IdsOf(const std::vector<NodeRef>& refs) {
  std::vector<std::string> ids;
  for (const NodeRef& r : refs) {
    ids.push_back(r.node_id.empty() ? "@" + r.grpc_address : r.node_id);
  }
  return ids;
}

// --- Membership, one node at a time ---------------------------------------

TEST(MembershipTest, ConfigValidation) {
  EXPECT_EQ(ValidateMembershipConfig(Config("a")), "");
  EXPECT_EQ(ValidateMembershipConfig(Config("m", 16, true)), "");
  MembershipConfig c = Config("a");
  c.max_children = 0;
  EXPECT_EQ(ValidateMembershipConfig(c), "max_children: must be at least 1");
  c = Config("a");
  c.seeds.clear();
  EXPECT_EQ(ValidateMembershipConfig(c),
            "join: a node needs --join seeds or a --parent");
  c.pinned_parent = Ref("p");
  EXPECT_EQ(ValidateMembershipConfig(c), "");
  c.pinned_parent = Ref("a");
  EXPECT_EQ(ValidateMembershipConfig(c),
            "parent: a node cannot be its own parent");
  c = Config("");
  EXPECT_EQ(ValidateMembershipConfig(c), "node_id: must not be empty");
}

TEST(MembershipTest, CeilLog) {
  EXPECT_EQ(CeilLog(1, 16), 0);
  EXPECT_EQ(CeilLog(16, 16), 1);
  EXPECT_EQ(CeilLog(17, 16), 2);
  EXPECT_EQ(CeilLog(1000, 16), 3);
  EXPECT_EQ(CeilLog(20, 3), 3);
  EXPECT_EQ(CeilLog(27, 3), 3);
  EXPECT_EQ(CeilLog(28, 3), 4);
  EXPECT_EQ(CeilLog(5, 1), 4);
}

TEST(MembershipTest, AcceptsUntilFullThenRedirectsToSmallestSubtree) {
  Membership m(Config("m", 3, true));
  for (const char* id : {"a", "b", "c"}) {
    JoinDecision d = m.HandleJoin(Request(id), 0);
    ASSERT_EQ(d.kind, JoinDecision::Kind::kAccepted) << id;
    EXPECT_EQ(d.attachment.depth, 1u);
    EXPECT_EQ(IdsOf(d.attachment.ancestors), std::vector<std::string>{"m"});
    EXPECT_EQ(d.attachment.lease_remaining_ns, kLease);
  }
  EXPECT_EQ(m.children().size(), 3u);
  EXPECT_EQ(m.SubtreeSize(), 4);

  m.OnChildHeard("a", 5, -1, 1);
  m.OnChildHeard("b", 2, -1, 1);
  m.OnChildHeard("c", 3, -1, 1);
  EXPECT_EQ(m.SubtreeSize(), 11);
  JoinDecision d = m.HandleJoin(Request("d"), 2);
  ASSERT_EQ(d.kind, JoinDecision::Kind::kRedirect);
  EXPECT_EQ(d.redirect_to.node_id, "b");
  // All three have room (free slot one level down): any is as high; the
  // smallest first.
  EXPECT_EQ(IdsOf(d.alternatives), (std::vector<std::string>{"b", "c", "a"}));
  EXPECT_EQ(m.children().size(), 3u);  // A redirect adds no child.
  // The newcomer is counted into b's subtree at once (2 + 1 in flight = 3):
  // now b and c tie at 3 and the id decides.
  EXPECT_EQ(m.children().at("b").subtree_size, 2);
  EXPECT_EQ(m.children().at("b").redirected_size, 1);
  EXPECT_TRUE(d.redirect_has_room);
  d = m.HandleJoin(Request("e", 4), 3);
  ASSERT_EQ(d.kind, JoinDecision::Kind::kRedirect);
  EXPECT_EQ(d.redirect_to.node_id, "b");
  EXPECT_EQ(IdsOf(d.alternatives), (std::vector<std::string>{"b", "c", "a"}));
  EXPECT_EQ(m.children().at("b").redirected_size, 5);
  // A report sent before those newcomers arrived does not erase them: b
  // (2 reported + 5 in flight) is the largest, c gets the next one.
  m.OnChildHeard("b", 2, -1, 4);
  EXPECT_EQ(m.children().at("b").subtree_size, 2);
  d = m.HandleJoin(Request("f"), 5);
  EXPECT_EQ(d.redirect_to.node_id, "c");
  // Past kRedirectInFlightNs only the reports count: b (2) is the smallest.
  d = m.HandleJoin(Request("g"), 6 + Membership::kRedirectInFlightNs);
  EXPECT_EQ(d.redirect_to.node_id, "b");
  EXPECT_EQ(m.children().at("b").redirected_size, 1);
}

// A burst of newcomers at a full node spreads evenly over its children
// even when every child reports in between (before the newcomers it was
// sent arrived): no child gets two more than another.
TEST(MembershipTest, ABurstOfJoinsSpreadsEvenlyDespiteStaleReports) {
  Membership m(Config("m", 3, true));
  for (const char* id : {"a", "b", "c"}) m.HandleJoin(Request(id), 0);
  std::map<std::string, int> sent;
  for (int i = 0; i < 9; ++i) {
    const JoinDecision d = m.HandleJoin(Request(absl::StrCat("n", i)), 10 + i);
    ASSERT_EQ(d.kind, JoinDecision::Kind::kRedirect);
    ++sent[d.redirect_to.node_id];
    // Every child reports its size without the newcomers in flight.
    for (const char* id : {"a", "b", "c"}) m.OnChildHeard(id, 1, -1, 10 + i, 0);
  }
  EXPECT_EQ(sent, (std::map<std::string, int>{{"a", 3}, {"b", 3}, {"c", 3}}));
}

// A newcomer that took the nearest of several children offered as having
// room, and found it full (its report was stale), asks again with it
// avoided instead of going a level deeper.
TEST(MembershipTest, AWalkTriesTheEqualsOfAFullChildBeforeGoingDeeper) {
  JoinRequestInfo base = Request("x");
  JoinWalk walk({NodeRef{"m", "m:1", "m:2"}}, base, 16);
  JoinDecision from_master;
  from_master.kind = JoinDecision::Kind::kRedirect;
  from_master.redirect_to = NodeRef{"a", "a:1", "a:2"};
  from_master.alternatives = {NodeRef{"a", "a:1", "a:2"}, NodeRef{"b", "b:1", "b:2"}};
  from_master.redirect_has_room = true;
  // b is nearer: the walk goes there.
  walk.OnRedirect(from_master, [](const NodeRef& r) { return r.node_id == "b" ? 10 : 20; });
  ASSERT_NE(walk.target(), nullptr);
  EXPECT_EQ(walk.target()->node_id, "b");
  // b is full and sends us below it: back to the master, b avoided.
  JoinDecision from_b;
  from_b.kind = JoinDecision::Kind::kRedirect;
  from_b.redirect_to = NodeRef{"b1", "b1:1", "b1:2"};
  walk.OnRedirect(from_b);
  ASSERT_NE(walk.target(), nullptr);
  EXPECT_EQ(walk.target()->node_id, "m");
  EXPECT_EQ(walk.request().avoid_ids, std::vector<std::string>{"b"});
  // Without equals left, a full child's redirect is followed.
  JoinDecision only_a = from_master;
  only_a.alternatives = {NodeRef{"a", "a:1", "a:2"}};
  walk.OnRedirect(only_a);
  EXPECT_EQ(walk.target()->node_id, "a");
  JoinDecision from_a;
  from_a.kind = JoinDecision::Kind::kRedirect;
  from_a.redirect_to = NodeRef{"a1", "a1:1", "a1:2"};
  walk.OnRedirect(from_a);
  EXPECT_EQ(walk.target()->node_id, "a1");
}

// A hostile or broken child claiming an absurd subtree or free-slot depth
// must not overflow this node's sums (which its own parent would then
// refuse, detaching it and its subtree).
TEST(MembershipTest, ChildReportsAreClampedAndSumsSaturate) {
  Membership m(Config("m", 3, true));
  constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();
  ASSERT_EQ(m.HandleJoin(Request("a", kHuge), 1).kind,
            JoinDecision::Kind::kAccepted);
  ASSERT_EQ(m.HandleJoin(Request("b", kHuge), 1).kind,
            JoinDecision::Kind::kAccepted);
  EXPECT_EQ(m.children().at("a").subtree_size, Membership::kMaxSubtreeSize);
  EXPECT_EQ(m.SubtreeSize(), Membership::kMaxSubtreeSize);
  m.OnChildHeard("a", kHuge, -1, 2, std::numeric_limits<int32_t>::max());
  EXPECT_EQ(m.children().at("a").free_slot_depth, Membership::kNoFreeSlot);
  EXPECT_EQ(m.SubtreeSize(), Membership::kMaxSubtreeSize);
  ASSERT_EQ(m.HandleJoin(Request("c"), 3).kind, JoinDecision::Kind::kAccepted);
  // Full now; the redirect guess saturates too.
  m.OnChildHeard("b", 5, -1, 4, 0);
  const JoinDecision d = m.HandleJoin(Request("d", kHuge), 5);
  ASSERT_EQ(d.kind, JoinDecision::Kind::kRedirect);
  EXPECT_LE(m.children().at(d.redirect_to.node_id).subtree_size,
            Membership::kMaxSubtreeSize);
  EXPECT_GE(m.FreeSlotDepth(5), 0);
}

TEST(MembershipTest, ShallowestFreeSlotComesBeforeSmallestSubtree) {
  Membership m(Config("m", 2, true));
  m.HandleJoin(Request("a"), 0);
  m.HandleJoin(Request("b"), 0);
  EXPECT_EQ(m.FreeSlotDepth(0), 1);
  // a is small but full down to its children; b is larger with room.
  m.OnChildHeard("a", 3, -1, 1, 1);
  m.OnChildHeard("b", 5, -1, 1, 0);
  JoinDecision d = m.HandleJoin(Request("x"), 2);
  ASSERT_EQ(d.kind, JoinDecision::Kind::kRedirect);
  EXPECT_EQ(d.redirect_to.node_id, "b");
  EXPECT_EQ(IdsOf(d.alternatives), std::vector<std::string>{"b"});
  // Both full one level down: the smaller subtree again.
  m.OnChildHeard("b", 6, -1, 3, 1);
  d = m.HandleJoin(Request("y"), 4);
  EXPECT_EQ(d.redirect_to.node_id, "a");
  EXPECT_EQ(IdsOf(d.alternatives), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m.FreeSlotDepth(4), 2);
  // -1: not reported, the last report stays.
  m.OnChildHeard("a", 4, -1, 5, -1);
  EXPECT_EQ(m.children().at("a").free_slot_depth, 1);
  // The landing depth handed down is the master's FreeSlotDepth() + 1.
  EXPECT_EQ(m.AttachmentForChild("a", 6)->landing_depth, 3);
  // A child silent for longer than suspect_child_after_ns (2 s here): its
  // report is not trusted, and it is offered last.
  const int64_t later = 2003 * kMs;
  m.OnChildHeard("b", 6, -1, later, 0);
  EXPECT_EQ(m.FreeSlotDepth(later), 1);  // Only b's report counts.
  m.OnChildHeard("a", 4, -1, later, 0);
  m.OnChildHeard("a", 4, -1, later + 3000 * kMs, 0);
  d = m.HandleJoin(Request("z"), later + 3000 * kMs);
  EXPECT_EQ(d.redirect_to.node_id, "a");  // b is silent, though smaller.
  EXPECT_EQ(IdsOf(d.alternatives), std::vector<std::string>{"a"});
}

TEST(MembershipTest, DeepLeafMovesUpOnlyToAHigherPlace) {
  // m (room for 3) <- a <- b <- c: c is a leaf two levels below where a
  // newcomer would land (depth 1, next to a).
  Membership m(Config("m", 3, true));
  MembershipConfig cc = Config("c");
  cc.move_cooldown_ns = 1000 * kMs;
  cc.move_up_min_gain = 2;  // Two levels up at least (the default is one).
  Membership a(Config("a")), b(Config("b")), c(cc);
  Attach(m, a, 0);
  Attach(a, b, 0);
  Attach(b, c, 0);
  EXPECT_EQ(c.landing_depth(), 1);
  EXPECT_EQ(c.depth(), 3u);
  EXPECT_TRUE(c.WantsToMoveUp());
  EXPECT_FALSE(b.WantsToMoveUp());          // Has a child.
  EXPECT_FALSE(c.ShouldMoveUp(999 * kMs));  // Cooldown after attaching.
  Heartbeat(m, a, 900 * kMs);               // (Keeps c's lease alive at 1 s.)
  Heartbeat(a, b, 900 * kMs);
  Heartbeat(b, c, 900 * kMs);
  const int64_t t = 1000 * kMs;
  ASSERT_TRUE(c.ShouldMoveUp(t));
  JoinWalk walk = c.StartMoveUp(t);
  EXPECT_FALSE(c.ShouldMoveUp(t));  // The attempt starts a cooldown.
  ASSERT_NE(walk.target(), nullptr);
  EXPECT_EQ(walk.target()->node_id, "m");
  EXPECT_EQ(walk.request().max_depth, 1);
  // Nothing at depth 1 under a: refused as too deep; m takes it.
  EXPECT_EQ(a.HandleJoin(walk.request(), t).reason, RejectReason::kTooDeep);
  JoinDecision d = m.HandleJoin(walk.request(), t);
  ASSERT_EQ(d.kind, JoinDecision::Kind::kAccepted);
  // c switches without ever detaching; b is to be told.
  absl::StatusOr<NodeRef> old = c.OnMovedUp(d.attachment, t);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->node_id, "b");
  EXPECT_EQ(c.state(), MembershipState::kAttached);
  EXPECT_EQ(c.parent()->node_id, "m");
  EXPECT_EQ(c.depth(), 1u);
  EXPECT_FALSE(c.WantsToMoveUp());
  // A second acceptance (no higher) is refused and must be undone.
  EXPECT_FALSE(c.OnMovedUp(d.attachment, t).ok());

  // When m is full, the move finds no place and nothing changes.
  MembershipConfig d2c = cc;
  d2c.self = Ref("d2");
  Membership d2(d2c);
  ASSERT_TRUE(b.HandleLeave("c"));
  Attach(b, d2, t);
  m.HandleJoin(Request("x"), t);  // m: a, c, x.
  m.OnChildHeard("a", 3, -1, t, 0);
  m.OnChildHeard("c", 1, -1, t, 0);
  m.OnChildHeard("x", 1, -1, t, 0);
  JoinRequestInfo r = d2.MakeJoinRequest(t);
  r.max_depth = 1;
  EXPECT_EQ(m.HandleJoin(r, t).reason, RejectReason::kTooDeep);
  r.max_depth = 2;  // Depth 2 is free below any of m's children.
  EXPECT_EQ(m.HandleJoin(r, t).kind, JoinDecision::Kind::kRedirect);
  EXPECT_EQ(d2.parent()->node_id, "b");

  // A leaf with a lease it granted still running may not move: whoever
  // holds it could be below it. (No cooldown here, to see just that.)
  MembershipConfig now_cc = cc;
  now_cc.move_cooldown_ns = 0;
  now_cc.self = Ref("e");
  Membership e(now_cc);
  now_cc.self = Ref("h");
  Membership h(now_cc);
  Attach(b, e, t);
  Attach(b, h, t);
  e.HandleJoin(Request("f"), t);
  e.HandleLeave("f");
  EXPECT_TRUE(e.WantsToMoveUp());
  EXPECT_TRUE(h.ShouldMoveUp(t + 1));
  EXPECT_FALSE(e.ShouldMoveUp(t + 1));
  EXPECT_FALSE(e.OnMovedUp(d.attachment, t + 1).ok());

  // move_up_min_gain 0 turns moves off.
  MembershipConfig off = Config("g");
  off.move_up_min_gain = 0;
  Membership g(off);
  Attach(b, g, t);
  EXPECT_FALSE(g.WantsToMoveUp());
}

TEST(MembershipTest, TiesGoToLowestKnownRoundTripThenId) {
  Membership m(Config("m", 3, true));
  for (const char* id : {"a", "b", "c"}) m.HandleJoin(Request(id), 0);
  // All of size 1; b's round trip known and lower than c's; a's unknown.
  m.OnChildHeard("b", 1, 200'000, 1);
  m.OnChildHeard("c", 1, 90'000, 1);
  JoinDecision d = m.HandleJoin(Request("x"), 2);
  ASSERT_EQ(d.kind, JoinDecision::Kind::kRedirect);
  EXPECT_EQ(IdsOf(d.alternatives), (std::vector<std::string>{"c", "b", "a"}));
  // Without any round trip known the id decides.
  Membership n(Config("n", 2, true));
  n.HandleJoin(Request("q"), 0);
  n.HandleJoin(Request("p"), 0);
  d = n.HandleJoin(Request("x"), 1);
  EXPECT_EQ(d.redirect_to.node_id, "p");
}

TEST(MembershipTest, NeverRedirectsToAvoidedChildOrTheNewcomerItself) {
  Membership m(Config("m", 2, true));
  m.HandleJoin(Request("a"), 0);
  m.HandleJoin(Request("b"), 0);
  m.OnChildHeard("a", 1, -1, 0);
  m.OnChildHeard("b", 9, -1, 0);
  // x lost its parent a: never back into a's subtree, though smaller.
  JoinRequestInfo r = Request("x");
  r.avoid_ids = {"a"};
  JoinDecision d = m.HandleJoin(r, 1);
  ASSERT_EQ(d.kind, JoinDecision::Kind::kRedirect);
  EXPECT_EQ(d.redirect_to.node_id, "b");
  // Everything avoided: refused as full.
  r.avoid_ids = {"a", "b"};
  d = m.HandleJoin(r, 1);
  EXPECT_EQ(d.kind, JoinDecision::Kind::kRejected);
  EXPECT_EQ(d.reason, RejectReason::kFull);
  // A known child joining again is accepted in place (a retried request).
  d = m.HandleJoin(Request("a", 4), 2);
  EXPECT_EQ(d.kind, JoinDecision::Kind::kAccepted);
  EXPECT_EQ(m.children().size(), 2u);
  EXPECT_EQ(m.children().at("a").subtree_size, 4);
}

TEST(MembershipTest, RefusesItselfItsAncestorsAndFromItsDescendants) {
  // m <- a <- b <- c, all attached.
  Membership m(Config("m", 16, true));
  Membership a(Config("a")), b(Config("b")), c(Config("c"));
  Attach(m, a, 0);
  Attach(a, b, 0);
  Attach(b, c, 0);
  EXPECT_EQ(IdsOf(c.ancestors()), (std::vector<std::string>{"m", "a", "b"}));
  EXPECT_EQ(c.depth(), 3u);
  // c is asked to adopt its ancestors, and itself.
  for (const char* id : {"m", "a", "b", "c"}) {
    JoinDecision d = c.HandleJoin(Request(id), 1);
    EXPECT_EQ(d.kind, JoinDecision::Kind::kRejected) << id;
    EXPECT_EQ(d.reason, RejectReason::kWouldFormCycle) << id;
  }
  // a loses its parent and asks its own descendant c to adopt it.
  a.OnParentLost(2);
  JoinDecision d = c.HandleJoin(a.MakeJoinRequest(0), 2);
  EXPECT_EQ(d.reason, RejectReason::kWouldFormCycle) << d.detail;
  // An unrelated newcomer is fine at c.
  EXPECT_EQ(c.HandleJoin(Request("z"), 2).kind, JoinDecision::Kind::kAccepted);
  // And an acceptance whose chain contains the joiner is refused by it.
  Membership x(Config("x"));
  Attachment bad;
  bad.ancestors = {Ref("m"), Ref("x"), Ref("y")};
  bad.depth = 3;
  bad.lease_remaining_ns = kLease;
  EXPECT_FALSE(x.OnAttached(bad, 0).ok());
  EXPECT_EQ(x.state(), MembershipState::kDetached);
}

TEST(MembershipTest, DetachedNewAndLeaselessNodesRefuseJoins) {
  Membership m(Config("m", 16, true));
  Membership a(Config("a")), b(Config("b"));
  // Never attached.
  EXPECT_EQ(a.HandleJoin(Request("z"), 0).reason, RejectReason::kNotAttached);
  Attach(m, a, 0);
  Attach(a, b, 0);
  EXPECT_EQ(a.HandleJoin(Request("z"), 1).kind, JoinDecision::Kind::kAccepted);
  // Lost its parent: holdover, refuses.
  a.OnParentLost(2);
  EXPECT_EQ(a.state(), MembershipState::kDetached);
  EXPECT_EQ(a.HandleJoin(Request("y"), 3).reason, RejectReason::kNotAttached);
  // b is still attached to a but gets no lease from it any more ...
  Heartbeat(a, b, 10);
  EXPECT_TRUE(b.HasLease(10));  // ... what it had still runs ...
  EXPECT_EQ(b.HandleJoin(Request("y"), 10).kind, JoinDecision::Kind::kAccepted);
  // ... until it expires; then b refuses too, though attached.
  EXPECT_FALSE(b.HasLease(kLease));
  EXPECT_EQ(b.state(), MembershipState::kAttached);
  JoinDecision d = b.HandleJoin(Request("w"), kLease);
  EXPECT_EQ(d.reason, RejectReason::kNotAttached);
  EXPECT_EQ(d.detail, "b is attached with an expired lease");
  // And after abandon_parent_after_ns of that, b gives up on a.
  EXPECT_FALSE(b.ParentStale(kLease + 999 * kMs));
  EXPECT_TRUE(b.ParentStale(kLease + 1000 * kMs));
}

// The scenario the lease exists for. m <- p <- {x, z}, x <- w, z <- v. p
// dies; x and z detach. z's grants run out first, so z may rejoin first and
// is accepted by w, which still holds x's lease: z (with v) now hangs below
// x. When x may rejoin, v's chain is stale (m, p, z: no x), so the chain
// check alone would accept x below v and close x -> v -> z -> w -> x. v
// refuses because it holds no lease.
TEST(MembershipTest, LeaseRefusesWhereAStaleChainWouldCloseACycle) {
  Membership m(Config("m", 16, true));
  Membership p(Config("p")), x(Config("x")), z(Config("z")), w(Config("w")),
      v(Config("v"));
  Attach(m, p, 0);
  Attach(p, x, 0);
  Attach(p, z, 0);
  Attach(x, w, 0);
  Attach(z, v, 0);
  // Refreshes: v last at 20 ms, w at 60 ms.
  Heartbeat(m, p, 10 * kMs);
  Heartbeat(p, z, 15 * kMs);
  Heartbeat(z, v, 20 * kMs);
  Heartbeat(m, p, 50 * kMs);
  Heartbeat(p, x, 55 * kMs);
  Heartbeat(x, w, 60 * kMs);
  // p dies; both notice at 100 ms.
  x.OnParentLost(100 * kMs);
  z.OnParentLost(100 * kMs);
  const int64_t z_may = z.RejoinAllowedAtNs();
  const int64_t x_may = x.RejoinAllowedAtNs();
  EXPECT_EQ(z_may, 10 * kMs + kLease + 5 * kMs);  // v's lease + margin.
  EXPECT_EQ(x_may, 50 * kMs + kLease + 5 * kMs);
  ASSERT_LT(z_may, x_may);
  // Too early: an acceptance for a request sent before z_may is refused by
  // z itself (its own subtree might still accept).
  {
    Membership probe_target(Config("t", 16, true));
    JoinDecision d = probe_target.HandleJoin(z.MakeJoinRequest(0), z_may - 1);
    EXPECT_FALSE(z.OnAttached(d.attachment, z_may - 1).ok());
  }
  // z rejoins at z_may through w (say a seed), which holds x's lease.
  ASSERT_TRUE(w.HasLease(z_may));
  JoinDecision d = w.HandleJoin(z.MakeJoinRequest(0), z_may);
  ASSERT_EQ(d.kind, JoinDecision::Kind::kAccepted);
  ASSERT_TRUE(z.OnAttached(d.attachment, z_may).ok());
  EXPECT_EQ(IdsOf(z.ancestors()),
            (std::vector<std::string>{"m", "p", "x", "w"}));
  // x asks v. v's chain does not name x (no heartbeat since) ...
  EXPECT_EQ(IdsOf(v.ancestors()), (std::vector<std::string>{"m", "p", "z"}));
  // ... but v's lease ended with z's grants.
  d = v.HandleJoin(x.MakeJoinRequest(0), x_may);
  EXPECT_EQ(d.kind, JoinDecision::Kind::kRejected);
  EXPECT_EQ(d.reason, RejectReason::kNotAttached);
  // So is z's (its lease came from w, from x): nothing under x accepts x.
  EXPECT_EQ(z.HandleJoin(x.MakeJoinRequest(0), x_may).reason,
            RejectReason::kWouldFormCycle);
  EXPECT_FALSE(z.HasLease(x_may));
  EXPECT_FALSE(w.HasLease(x_may));
}

TEST(MembershipTest, LeafRejoinsAtOnceInteriorNodeAfterItsGrants) {
  Membership m(Config("m", 16, true));
  Membership a(Config("a")), b(Config("b"));
  Attach(m, a, 0);
  Attach(a, b, 0);
  Heartbeat(m, a, 100 * kMs);
  Heartbeat(a, b, 120 * kMs);
  b.OnParentLost(200 * kMs);
  EXPECT_LE(b.RejoinAllowedAtNs(), 200 * kMs);  // Granted nothing.
  a.OnParentLost(200 * kMs);
  EXPECT_EQ(a.granted_until_ns(), 100 * kMs + kLease);
  EXPECT_EQ(a.RejoinAllowedAtNs(), 100 * kMs + kLease + 5 * kMs);
  // A detached node grants nothing more: its heartbeat replies carry 0.
  std::optional<Attachment> reply = a.AttachmentForChild("b", 210 * kMs);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->lease_remaining_ns, 0);
  EXPECT_EQ(a.granted_until_ns(), 100 * kMs + kLease);
}

TEST(MembershipTest, RestartedNodeWaitsOutLeasesItMayHaveGranted) {
  Membership m(Config("m", 16, true));
  Membership a(Config("a"));
  a.AssumeGrantedUntil(kLease);
  EXPECT_EQ(a.RejoinAllowedAtNs(), kLease + 5 * kMs);
  JoinDecision d = m.HandleJoin(a.MakeJoinRequest(0), 0);
  EXPECT_FALSE(a.OnAttached(d.attachment, 0).ok());
  EXPECT_EQ(a.state(), MembershipState::kDetached);
  d = m.HandleJoin(a.MakeJoinRequest(kLease + 5 * kMs), kLease + 5 * kMs);
  EXPECT_TRUE(a.OnAttached(d.attachment, kLease + 5 * kMs).ok());
}

TEST(MembershipTest, RejoinCandidatesNearestAncestorFirstThenSeeds) {
  Membership m(Config("m", 16, true));
  MembershipConfig cc = Config("c");
  // Seeds as given on the command line: addresses only; one is m's.
  cc.seeds = {NodeRef{"", "", "s1:3191"}, NodeRef{"", "", "m:3191"},
              NodeRef{"", "", "c:3191"}};
  Membership a(Config("a")), b(Config("b")), c(cc);
  Attach(m, a, 0);
  Attach(a, b, 0);
  Attach(b, c, 0);
  c.OnParentLost(1);
  // Grandparent, root, seeds (m's address deduplicated, own dropped), and
  // the lost parent last.
  EXPECT_EQ(IdsOf(c.RejoinCandidates()),
            (std::vector<std::string>{"a", "m", "@s1:3191", "b"}));
  // Never redirected back into the subtrees it hung in.
  JoinRequestInfo r = c.MakeJoinRequest(0);
  EXPECT_EQ(r.avoid_ids, (std::vector<std::string>{"m", "a", "b"}));
  EXPECT_EQ(r.newcomer.node_id, "c");

  // Clean leave: b names its parent a; b itself is never asked.
  MembershipConfig cc2 = cc;
  cc2.self = Ref("c2");
  Membership c2(cc2);
  Attach(b, c2, 2);
  LeavePlan plan = b.Leave();
  ASSERT_TRUE(plan.parent.has_value());
  EXPECT_EQ(plan.parent->node_id, "a");
  EXPECT_EQ(plan.successor->node_id, "a");
  EXPECT_EQ(IdsOf(plan.children), (std::vector<std::string>{"c", "c2"}));
  EXPECT_EQ(b.state(), MembershipState::kLeft);
  EXPECT_EQ(b.HandleJoin(Request("q"), 3).reason, RejectReason::kNotAttached);
  c2.OnParentLeft(plan.successor, 3);
  EXPECT_EQ(IdsOf(c2.RejoinCandidates()),
            (std::vector<std::string>{"a", "m", "@s1:3191", "@c:3191"}));
  EXPECT_EQ(c2.MakeJoinRequest(0).avoid_ids,
            (std::vector<std::string>{"m", "a", "b"}));

  // Disowned (the parent expired it): that parent first, nothing avoided.
  Membership d(Config("d"));
  Attach(a, d, 4);
  d.OnDisowned(5);
  EXPECT_EQ(IdsOf(d.RejoinCandidates()), (std::vector<std::string>{"a", "m"}));
  EXPECT_TRUE(d.MakeJoinRequest(0).avoid_ids.empty());
}

TEST(MembershipTest, PinnedParentIsTheOnlyCandidateAndNeverRedirects) {
  Membership m(Config("m", 1, true));
  m.HandleJoin(Request("a"), 0);  // Full now.
  MembershipConfig pc = Config("p");
  pc.pinned_parent = Ref("m");
  Membership p(pc);
  JoinRequestInfo r = p.MakeJoinRequest(0);
  EXPECT_TRUE(r.pinned);
  JoinDecision d = m.HandleJoin(r, 1);
  ASSERT_EQ(d.kind, JoinDecision::Kind::kAccepted);  // Beyond capacity.
  ASSERT_TRUE(p.OnAttached(d.attachment, 1).ok());
  EXPECT_EQ(m.children().size(), 2u);
  // A dynamic newcomer is still redirected.
  EXPECT_EQ(m.HandleJoin(Request("q"), 2).kind, JoinDecision::Kind::kRedirect);
  p.OnParentLost(3);
  EXPECT_EQ(IdsOf(p.RejoinCandidates()), std::vector<std::string>{"m"});
  EXPECT_TRUE(p.MakeJoinRequest(0).avoid_ids.empty());
}

TEST(MembershipTest, MissedProbesChildExpiryAndSubtreeSize) {
  Membership m(Config("m", 16, true));
  Membership a(Config("a"));
  Attach(m, a, 0);
  EXPECT_FALSE(a.OnParentProbe(false, 1));
  EXPECT_FALSE(a.OnParentProbe(false, 2));
  EXPECT_FALSE(a.OnParentProbe(true, 3));  // Resets the count.
  EXPECT_FALSE(a.OnParentProbe(false, 4));
  EXPECT_FALSE(a.OnParentProbe(false, 5));
  EXPECT_TRUE(a.OnParentProbe(false, 6));  // Third miss in a row.
  EXPECT_EQ(a.state(), MembershipState::kDetached);
  EXPECT_EQ(a.detached_since_ns(), 6);
  EXPECT_FALSE(a.OnParentProbe(false, 7));  // Already detached.

  m.HandleJoin(Request("b", 5), 10);
  m.HandleJoin(Request("c", 2), 20);
  EXPECT_EQ(m.SubtreeSize(), 1 + 1 + 5 + 2);
  EXPECT_TRUE(m.OnChildHeard("c", 3, 50'000, 30));
  EXPECT_FALSE(m.OnChildHeard("zz", 3, 50'000, 30));
  EXPECT_FALSE(m.AttachmentForChild("zz", 30).has_value());
  EXPECT_EQ(m.SubtreeSize(), 1 + 1 + 5 + 3);
  // a last heard at 0, b at 10, c at 30; timeout 15 at 30: a and b go.
  EXPECT_TRUE(m.ExpireChildren(15, 15).empty());  // Nobody yet (a: 15 = 15).
  EXPECT_EQ(m.ExpireChildren(30, 15), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m.SubtreeSize(), 4);
  // The passes that skip (no child can have timed out) and the one that
  // does not: c heard at 30 and 40, d joining at 35.
  EXPECT_TRUE(m.ExpireChildren(45, 15).empty());
  m.HandleJoin(Request("d", 1), 35);
  EXPECT_TRUE(m.OnChildHeard("c", 3, 50'000, 40));
  EXPECT_TRUE(m.ExpireChildren(50, 15).empty());
  EXPECT_EQ(m.ExpireChildren(51, 15), (std::vector<std::string>{"d"}));
  EXPECT_TRUE(m.ExpireChildren(55, 15).empty());
  EXPECT_EQ(m.ExpireChildren(56, 15), (std::vector<std::string>{"c"}));
  m.HandleJoin(Request("e", 1), 60);
  EXPECT_TRUE(m.ExpireChildren(75, 15).empty());
  EXPECT_EQ(m.ExpireChildren(76, 15), (std::vector<std::string>{"e"}));
  m.HandleJoin(Request("c", 3), 80);
  EXPECT_EQ(m.SubtreeSize(), 4);
  EXPECT_TRUE(m.HandleLeave("c"));
  EXPECT_FALSE(m.HandleLeave("c"));
  EXPECT_EQ(m.SubtreeSize(), 1);
}

TEST(MembershipTest, ParentInfoUpdatesChainAndOnlyExtendsLease) {
  Membership m(Config("m", 16, true));
  Membership a(Config("a")), b(Config("b"));
  Attach(m, a, 0);
  Attach(a, b, 0);
  EXPECT_EQ(b.lease_expiry_ns(), kLease);
  Heartbeat(m, a, 100 * kMs);
  Heartbeat(a, b, 150 * kMs);
  EXPECT_EQ(b.lease_expiry_ns(), 100 * kMs + kLease);
  // An older reply (sent earlier, arriving late) does not shorten it.
  Attachment old = *a.AttachmentForChild("b", 0);
  old.lease_remaining_ns = 10 * kMs;
  EXPECT_TRUE(b.OnParentInfo(old, 0));
  EXPECT_EQ(b.lease_expiry_ns(), 100 * kMs + kLease);
  // A reply from someone else is ignored.
  Attachment other;
  other.ancestors = {Ref("m"), Ref("q")};
  other.depth = 2;
  EXPECT_FALSE(b.OnParentInfo(other, 200 * kMs));
  // The parent moved (its chain changed): b adopts the new chain.
  Attachment moved;
  moved.ancestors = {Ref("m"), Ref("k"), Ref("a")};
  moved.depth = 3;
  moved.lease_remaining_ns = 50 * kMs;
  EXPECT_TRUE(b.OnParentInfo(moved, 200 * kMs));
  EXPECT_EQ(IdsOf(b.ancestors()), (std::vector<std::string>{"m", "k", "a"}));
  EXPECT_EQ(b.depth(), 3u);
  // A chain through b itself means a broken tree: b cuts loose.
  Attachment loop;
  loop.ancestors = {Ref("m"), Ref("b"), Ref("a")};
  loop.depth = 3;
  EXPECT_FALSE(b.OnParentInfo(loop, 210 * kMs));
  EXPECT_EQ(b.state(), MembershipState::kDetached);
}

TEST(MembershipTest, JoinWalkFollowsRedirectsAndBacksUp) {
  JoinRequestInfo base = Request("x");
  base.avoid_ids = {"lost"};
  JoinWalk walk({Ref("g"), Ref("m")}, base, 10);
  ASSERT_NE(walk.target(), nullptr);
  EXPECT_EQ(walk.target()->node_id, "g");
  JoinDecision redirect;
  redirect.kind = JoinDecision::Kind::kRedirect;
  redirect.redirect_to = Ref("c1");
  redirect.alternatives = {Ref("c1"), Ref("c2")};
  walk.OnRedirect(redirect);
  EXPECT_EQ(walk.target()->node_id, "c1");
  // c1 is dead: back to g, asking it to avoid c1.
  walk.OnFailed();
  EXPECT_EQ(walk.target()->node_id, "g");
  EXPECT_EQ(walk.request().avoid_ids, (std::vector<std::string>{"lost", "c1"}));
  // g now refuses: on to the next candidate.
  walk.OnFailed();
  EXPECT_EQ(walk.target()->node_id, "m");
  // m redirects to a node already on the path (stale child lists looping
  // back): that node is avoided and m stays the target.
  JoinDecision loop;
  loop.kind = JoinDecision::Kind::kRedirect;
  loop.redirect_to = Ref("m");
  walk.OnRedirect(loop);
  EXPECT_EQ(walk.target()->node_id, "m");
  EXPECT_EQ(walk.hops(), 4);
  // With a round-trip function the nearest alternative wins; unknown last.
  JoinWalk near({Ref("g")}, Request("x"), 10);
  redirect.alternatives = {Ref("c1"), Ref("c2"), Ref("c3")};
  near.OnRedirect(redirect, [](const NodeRef& r) -> int64_t {
    if (r.node_id == "c1") return 400'000;
    if (r.node_id == "c2") return -1;
    return 30'000;
  });
  EXPECT_EQ(near.target()->node_id, "c3");
  // The hop limit ends a walk.
  JoinWalk limited({Ref("a"), Ref("b"), Ref("c")}, Request("x"), 2);
  limited.OnFailed();
  limited.OnFailed();
  EXPECT_TRUE(limited.exhausted());
  // So does running out of candidates.
  JoinWalk empty({}, Request("x"), 10);
  EXPECT_TRUE(empty.exhausted());
}

// --- The simulator ---------------------------------------------------------

std::string Histogram(const MembershipSim& sim) {
  std::string out;
  for (const auto& [depth, count] : sim.DepthHistogram()) {
    out += "d" + std::to_string(depth) + ":" + std::to_string(count) + " ";
  }
  return out;
}

TEST(MembershipSimTest, TwentyNodesFanoutThreeDepthAtMostFour) {
  MembershipSimOptions o;
  o.max_children = 3;
  MembershipSim sim(o);
  for (int i = 0; i < 19; ++i) {
    sim.AddNode();
    sim.Tick();  // In-order delivery: the join completes in this tick.
    ASSERT_EQ(sim.CheckSafety(), "");
  }
  ASSERT_TRUE(sim.Settle(500)) << sim.CheckConverged();
  std::cout << "20 nodes, fanout 3: max depth " << sim.MaxDepth() << " ("
            << Histogram(sim) << ")\n";
  EXPECT_LE(sim.MaxDepth(), 4);
  EXPECT_LE(sim.MaxDepth(), CeilLog(20, 3));  // 3: as balanced as can be.
  for (const std::string& id : sim.LiveIds()) {
    EXPECT_LE(sim.node(id).children().size(), 3u);
  }
}

TEST(MembershipSimTest, ThousandNodesFanoutSixteenDepthAtMostThree) {
  MembershipSimOptions o;
  o.max_children = 16;
  MembershipSim sim(o);
  for (int i = 0; i < 999; ++i) {
    sim.AddNode();
    sim.Tick();
  }
  ASSERT_EQ(sim.CheckSafety(), "");
  ASSERT_TRUE(sim.Settle(500)) << sim.CheckConverged();
  std::cout << "1000 nodes joining one by one, fanout 16: max depth "
            << sim.MaxDepth() << " (" << Histogram(sim) << ")\n";
  EXPECT_LE(sim.MaxDepth(), 3);
  // Balanced: the master's 16 subtrees differ by at most one node.
  int64_t smallest = 1'000'000, largest = 0;
  for (const std::string& c : sim.RealChildren(sim.master_id())) {
    smallest = std::min(smallest, sim.node(c).SubtreeSize());
    largest = std::max(largest, sim.node(c).SubtreeSize());
  }
  std::cout << "  master's subtrees: " << smallest << ".." << largest
            << " nodes\n";
  EXPECT_LE(largest - smallest, 1);
}

TEST(MembershipSimTest, ThousandConcurrentJoinsInterleaved) {
  for (uint64_t seed : {11u, 12u, 13u}) {
    MembershipSimOptions o;
    o.seed = seed;
    o.interleave = true;
    o.max_delay_ticks = 3;
    MembershipSim sim(o);
    for (int i = 0; i < 999; ++i) sim.AddNode();
    for (int t = 0; t < 30; ++t) {
      sim.Tick();
      ASSERT_EQ(sim.CheckSafety(), "") << "seed " << seed;
    }
    ASSERT_TRUE(sim.Settle(2000))
        << "seed " << seed << ": " << sim.CheckConverged();
    std::cout << "seed " << seed
              << ": 999 nodes joining at once, interleaved: max depth "
              << sim.MaxDepth() << " (" << Histogram(sim) << "), "
              << sim.stats().redirects << " redirects, "
              << sim.stats().max_walk_hops << " max hops\n";
    EXPECT_LE(sim.MaxDepth(), 4) << "seed " << seed;
  }
}

TEST(MembershipSimTest, CleanLeaveReattachesChildrenToGrandparent) {
  MembershipSimOptions o;
  o.max_children = 4;
  // The tree below is built deeper than it needs to be (through seeds);
  // keep its leaves from moving up.
  o.move_up_min_gain = 0;
  MembershipSim sim(o);
  const std::string a = sim.AddNode();
  sim.Tick();
  // Three children under a, and two grandchildren under the first.
  std::vector<std::string> kids;
  for (int i = 0; i < 3; ++i) {
    kids.push_back(sim.AddNode({a}));
    sim.Tick();
  }
  std::vector<std::string> grandkids;
  for (int i = 0; i < 2; ++i) {
    grandkids.push_back(sim.AddNode({kids[0]}));
    sim.Tick();
  }
  ASSERT_TRUE(sim.Settle(500)) << sim.CheckConverged();
  ASSERT_EQ(sim.node(kids[0]).parent()->node_id, a);
  ASSERT_EQ(sim.node(grandkids[0]).parent()->node_id, kids[0]);

  sim.Leave(a);
  bool grandkids_stayed = true;
  for (int t = 0; t < 500 && !sim.CheckConverged().empty(); ++t) {
    sim.Tick();
    ASSERT_EQ(sim.CheckSafety(), "");
    // The grandchildren never leave kids[0]: their clock source stays.
    for (const std::string& g : grandkids) {
      grandkids_stayed &= sim.node(g).state() == MembershipState::kAttached &&
                          sim.node(g).parent()->node_id == kids[0];
    }
  }
  ASSERT_EQ(sim.CheckConverged(), "");
  EXPECT_TRUE(grandkids_stayed);
  for (const std::string& k : kids) {
    EXPECT_EQ(sim.node(k).parent()->node_id, sim.master_id()) << k;
    EXPECT_EQ(sim.node(k).depth(), 1u);
  }
  for (const std::string& g : grandkids) EXPECT_EQ(sim.node(g).depth(), 2u);
  EXPECT_EQ(sim.stats().parents_left, 3u);
  EXPECT_EQ(sim.stats().parents_lost, 0u);
}

TEST(MembershipSimTest, ParentAndChildKilledTogether) {
  MembershipSimOptions o;
  o.max_children = 2;
  o.move_up_min_gain = 0;  // Only the rejoins change the tree here.
  MembershipSim sim(o);
  for (int i = 0; i < 14; ++i) {
    sim.AddNode();
    sim.Tick();
  }
  ASSERT_TRUE(sim.Settle(500)) << sim.CheckConverged();
  ASSERT_EQ(sim.MaxDepth(), 3);  // A complete binary tree of 15.
  // A depth-1 node p and its child c die together. c's children and p's
  // other child q (with its own children) are orphaned at once; q must
  // bring its subtree along.
  const std::string p = sim.RealChildren(sim.master_id()).front();
  const std::vector<std::string> p_kids = sim.RealChildren(p);
  ASSERT_EQ(p_kids.size(), 2u);
  const std::string c = p_kids[0], q = p_kids[1];
  const std::vector<std::string> orphans = sim.RealChildren(c);
  const std::vector<std::string> q_kids = sim.RealChildren(q);
  ASSERT_EQ(orphans.size(), 2u);
  ASSERT_EQ(q_kids.size(), 2u);
  sim.Kill({p, c});
  for (int t = 0; t < 1000 && !sim.CheckConverged().empty(); ++t) {
    sim.Tick();
    ASSERT_EQ(sim.CheckSafety(), "");
  }
  ASSERT_EQ(sim.CheckConverged(), "");
  EXPECT_EQ(sim.live_count(), 13u);
  for (const std::string& k : q_kids) {
    EXPECT_EQ(sim.node(k).parent()->node_id, q) << k;
  }
  // p's slot under the master went to an orphan (it was dropped as silent
  // when the orphan named it), so the tree stays at depth 3.
  EXPECT_EQ(sim.RealChildren(sim.master_id()).size(), 2u);
  EXPECT_LE(sim.MaxDepth(), 3) << Histogram(sim);
  EXPECT_EQ(sim.stats().parents_lost, 3u);  // q and c's two children.
}

TEST(MembershipSimTest, PinnedNodesStayWithTheirParent) {
  MembershipSimOptions o;
  o.max_children = 2;
  MembershipSim sim(o);
  const std::string a = sim.AddNode();
  sim.Tick();
  std::vector<std::string> pinned;
  for (int i = 0; i < 4; ++i) pinned.push_back(sim.AddPinnedNode(a));
  sim.Tick();
  ASSERT_TRUE(sim.Settle(500)) << sim.CheckConverged();
  for (const std::string& p : pinned) {
    EXPECT_EQ(sim.node(p).parent()->node_id, a);  // Beyond max_children 2.
  }
  // The pinned parent dies: the pinned nodes wait for it, never elsewhere.
  sim.Kill({a});
  for (int t = 0; t < 300; ++t) {
    sim.Tick();
    ASSERT_EQ(sim.CheckSafety(), "");
  }
  for (const std::string& p : pinned) {
    EXPECT_EQ(sim.node(p).state(), MembershipState::kDetached);
  }
}

// The master is cut off: every depth-1 node loses its parent at once, and
// the tree falls apart into fragments whose seeds point into each other.
// Stale chains would let two fragments attach below each other (each check
// passing before the other's new chain arrives); the lease rule refuses
// while the master is away. After the partition heals all rejoin.
TEST(MembershipSimTest, FragmentsNeverAttachBelowEachOther) {
  constexpr int kNodes = 60;
  for (uint64_t seed : {31u, 32u, 33u, 34u, 35u, 36u, 37u, 38u}) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    MembershipSimOptions o;
    o.seed = seed;
    o.interleave = true;
    o.max_delay_ticks = 4;
    o.max_children = 3;
    MembershipSim sim(o);
    std::mt19937_64 pick(seed);
    for (int i = 1; i < kNodes; ++i) {
      // Seeds: three random nodes (some not created yet), master last.
      std::vector<std::string> seeds;
      for (int j = 0; j < 3; ++j) {
        seeds.push_back(
            MembershipSim::IdAt(1 + static_cast<int>(pick() % (kNodes - 1))));
      }
      seeds.push_back(sim.master_id());
      sim.AddNode(seeds);
    }
    ASSERT_TRUE(sim.Settle(3000)) << sim.CheckConverged();
    const MembershipSimStats before = sim.stats();
    sim.Isolate(sim.master_id(), sim.now_ns() + 6'000'000'000);
    int fragments_refused = 0;
    for (int t = 0; t < 600; ++t) {
      sim.Tick();
      ASSERT_EQ(sim.CheckSafety(), "") << "tick " << t;
    }
    fragments_refused =
        static_cast<int>(sim.stats().rejected.count("not_attached")
                             ? sim.stats().rejected.at("not_attached") -
                                   (before.rejected.count("not_attached")
                                        ? before.rejected.at("not_attached")
                                        : 0)
                             : 0);
    // While the master is away nothing reaches it: nobody is attached to
    // the master's tree but the master.
    EXPECT_EQ(sim.DepthHistogram().size(), 1u);
    ASSERT_TRUE(sim.Settle(5000)) << sim.CheckConverged();
    std::cout << "seed " << seed << ": " << fragments_refused
              << " joins refused by fragments during the partition; healed "
                 "to max depth "
              << sim.MaxDepth() << " (" << Histogram(sim) << ")\n";
    EXPECT_GT(fragments_refused, 0);
  }
}

// Random joins (bursts, concurrent), kills of several nodes at once
// (including parent and child together), clean leaves, partitions and
// rejoins, with interleaved delivery; the safety invariants after every tick,
// the tree settled and balanced every 25 rounds and at the end.
TEST(MembershipSimTest, RandomizedChurn) {
  std::vector<uint64_t> seeds = {101, 202, 303, 404, 505, 606};
  if (const char* env = std::getenv("MEMBERSHIP_SEED")) {
    seeds = {std::strtoull(env, nullptr, 10)};
  }
  constexpr int kRounds = 200;
  constexpr int kDepthSlack = 1;
  for (uint64_t seed : seeds) {
    MembershipSimOptions o;
    o.seed = seed;
    o.interleave = true;
    std::mt19937_64 pick(seed * 7919);
    o.max_children = std::vector<int>{2, 3, 4, 8}[pick() % 4];
    o.max_delay_ticks = 1 + static_cast<int>(pick() % 5);
    MembershipSim sim(o);
    std::cout << "RandomizedChurn seed=" << seed
              << " max_children=" << o.max_children
              << " max_delay_ticks=" << o.max_delay_ticks << "\n";
    SCOPED_TRACE(testing::Message() << "seed " << seed
                                    << " (rerun with "
                                       "MEMBERSHIP_SEED="
                                    << seed << ")");
    auto rand = [&](int n) {
      return static_cast<int>(sim.rng()() % static_cast<uint64_t>(n));
    };
    auto random_live = [&](bool allow_master) {
      std::vector<std::string> ids = sim.LiveIds();
      if (!allow_master) {
        ids.erase(std::find(ids.begin(), ids.end(), sim.master_id()));
      }
      return ids.empty() ? std::string() : ids[rand(ids.size())];
    };
    for (int i = 0; i < 40; ++i) sim.AddNode();
    int max_depth_seen = 0, kills = 0, leaves = 0, pair_kills = 0;
    int isolations = 0;
    for (int round = 0; round < kRounds; ++round) {
      const size_t n = sim.live_count();
      const int action = rand(100);
      const bool grow = n < 20 || (n < 250 && action < 40);
      if (grow || (action >= 90 && n < 250)) {
        // A burst of concurrent joins through random seeds.
        const int k = 1 + rand(10);
        for (int i = 0; i < k; ++i) {
          // Mostly the master as seed; sometimes other live nodes first
          // (the master last, as an operator would list it), which may
          // place the newcomer deep or be dead by the time it asks.
          std::vector<std::string> seeds_of;
          if (rand(4) == 0) {
            const int s = 1 + rand(2);
            for (int j = 0; j < s; ++j) seeds_of.push_back(random_live(false));
            seeds_of.push_back(sim.master_id());
          }
          sim.AddNode(seeds_of);
        }
      }
      if (!grow && action < 75) {
        // Kill several at once; often a parent with its child, or a chain.
        std::set<std::string> victims;
        const int k = 1 + rand(4);
        for (int i = 0; i < k; ++i) {
          std::string v = random_live(false);
          if (v.empty()) break;
          victims.insert(v);
          if (rand(2) == 0) {
            std::vector<std::string> kids = sim.RealChildren(v);
            if (!kids.empty()) {
              const std::string kid = kids[rand(kids.size())];
              victims.insert(kid);
              ++pair_kills;
              std::vector<std::string> grandkids = sim.RealChildren(kid);
              if (!grandkids.empty() && rand(2) == 0) {
                victims.insert(grandkids[rand(grandkids.size())]);
              }
            }
          }
        }
        victims.erase(sim.master_id());
        kills += static_cast<int>(victims.size());
        sim.Kill({victims.begin(), victims.end()});
      } else if (!grow && action < 87) {
        const std::string v = random_live(false);
        if (!v.empty()) {
          sim.Leave(v);
          ++leaves;
        }
      } else if (!grow && action < 90) {
        // A partition around one or two nodes (the master too, sometimes)
        // for 0.2 to 3 s.
        for (int i = 1 + rand(2); i > 0; --i) {
          const std::string v =
              rand(4) == 0 ? sim.master_id() : random_live(false);
          sim.Isolate(v, sim.now_ns() + (200 + rand(2800)) * 1'000'000LL);
          ++isolations;
        }
      }
      const int ticks = 1 + rand(40);
      for (int t = 0; t < ticks; ++t) {
        sim.Tick();
        // The incremental check looks at a subset of what the full one
        // does: it must pass wherever the full one passes.
        ASSERT_EQ(sim.CheckSafetyIncremental(), "")
            << "round " << round << " tick " << t;
        const std::string broken = sim.CheckSafety();
        ASSERT_EQ(broken, "") << "round " << round << " tick " << t;
      }
      max_depth_seen = std::max(max_depth_seen, sim.MaxDepth());
      if (round % 25 == 24 || round == kRounds - 1) {
        ASSERT_TRUE(sim.Settle(5000))
            << "round " << round << ": " << sim.CheckConverged();
        const int bound =
            CeilLog(static_cast<int64_t>(sim.live_count()), o.max_children) +
            kDepthSlack;
        EXPECT_LE(sim.MaxDepth(), bound)
            << "round " << round << ", " << sim.live_count()
            << " nodes: " << Histogram(sim);
      }
    }
    // At the end every live node is attached, in one tree.
    ASSERT_EQ(sim.CheckConverged(), "");
    for (const std::string& id : sim.LiveIds()) {
      const Membership& m = sim.node(id);
      EXPECT_TRUE(
          m.state() == MembershipState::kMaster ||
          (m.state() == MembershipState::kAttached && m.HasLease(sim.now_ns())))
          << id;
    }
    const MembershipSimStats& s = sim.stats();
    std::cout << "  end: " << sim.live_count() << " live nodes, max depth "
              << sim.MaxDepth() << " (bound "
              << CeilLog(static_cast<int64_t>(sim.live_count()),
                         o.max_children) +
                     kDepthSlack
              << "; " << Histogram(sim) << "), deepest while churning "
              << max_depth_seen << "\n  " << kills << " killed (" << pair_kills
              << " parent+child), " << leaves << " left, " << isolations
              << " cut off for a while; " << s.accepted << " attachments, "
              << s.redirects << " redirects, " << s.parents_lost
              << " parents lost, " << s.moves << " of " << s.move_attempts
              << " move attempts made (" << s.move_levels_gained
              << " levels gained), " << s.abandoned << " abandoned, "
              << s.disowned << " disowned, " << s.attach_refused
              << " acceptances refused, " << s.stale_accepts
              << " stale; rejected:";
    for (const auto& [reason, count] : s.rejected) {
      std::cout << " " << reason << "=" << count;
    }
    std::cout << "; max hops " << s.max_walk_hops << "\n";
    EXPECT_GT(s.parents_lost, 0u);
    EXPECT_GT(s.redirects, 0u);
  }
}

// The incremental check finds what the full one finds when a tick breaks
// the tree: a lease outliving the parent's, a cycle through the parents,
// though a full check in between has not cleared what changed.
TEST(MembershipSimTest, IncrementalCheckFindsBrokenLeasesAndCycles) {
  auto settled = [](MembershipSim& sim) {
    for (int i = 0; i < 30; ++i) sim.AddNode();
    ASSERT_TRUE(sim.Settle(2000)) << sim.CheckConverged();
    ASSERT_EQ(sim.CheckSafety(), "");
    // Everything up to now has been seen.
    ASSERT_EQ(sim.CheckSafetyIncremental(), "");
  };
  // A node at depth 2 and its parent.
  auto pick = [](const MembershipSim& sim) {
    for (const std::string& id : sim.LiveIds()) {
      if (sim.node(id).depth() == 2 && !sim.RealChildren(id).empty()) {
        return id;
      }
    }
    return std::string();
  };
  MembershipSimOptions o;
  o.max_children = 3;
  {
    MembershipSim sim(o);
    settled(sim);
    const std::string c = pick(sim);
    ASSERT_FALSE(c.empty());
    Membership& m = sim.mutable_node(c);
    Attachment forged;
    forged.ancestors = m.ancestors();
    forged.depth = static_cast<uint32_t>(forged.ancestors.size());
    forged.lease_remaining_ns = 100'000'000'000;
    ASSERT_TRUE(m.OnParentInfo(forged, sim.now_ns()));
    const std::string full = sim.CheckSafety();
    EXPECT_NE(full.find("holds a lease"), std::string::npos) << full;
    EXPECT_EQ(sim.CheckSafetyIncremental(), full);
  }
  {
    // A parent detaches while a child holds a lease beyond what it granted:
    // the child is checked again though only the parent changed.
    MembershipSim sim(o);
    settled(sim);
    const std::string p = pick(sim);
    ASSERT_FALSE(p.empty());
    const std::string c = sim.RealChildren(p).front();
    auto extend = [&](const std::string& id, int64_t remaining_ns) {
      Membership& m = sim.mutable_node(id);
      Attachment a;
      a.ancestors = m.ancestors();
      a.depth = static_cast<uint32_t>(a.ancestors.size());
      a.lease_remaining_ns = remaining_ns;
      return m.OnParentInfo(a, sim.now_ns());
    };
    // The parent's lease (and its own parent's, at depth 1) grows past what
    // it granted, the child's up to it.
    ASSERT_TRUE(extend(sim.node(p).parent()->node_id, 200'000'000'000));
    ASSERT_TRUE(extend(p, 100'000'000'000));
    ASSERT_TRUE(extend(c, 50'000'000'000));
    ASSERT_EQ(sim.CheckSafety(), "");
    ASSERT_EQ(sim.CheckSafetyIncremental(), "");
    sim.mutable_node(p).OnParentLost(sim.now_ns());
    const std::string full = sim.CheckSafety();
    EXPECT_NE(full.find("its detached parent " + p + " never granted"),
              std::string::npos)
        << full;
    EXPECT_EQ(sim.CheckSafetyIncremental(), full);
  }
  {
    MembershipSim sim(o);
    settled(sim);
    // The depth-2 node b's parent a attaches below b: a -> b -> a.
    const std::string b = pick(sim);
    ASSERT_FALSE(b.empty());
    const std::string a = sim.node(b).parent()->node_id;
    const NodeRef b_ref = sim.node(a).children().count(b) > 0
                              ? NodeRef{b, b + ":3190", b + ":3191"}
                              : NodeRef{};
    Membership& m = sim.mutable_node(a);
    m.OnParentLost(sim.now_ns());
    Attachment forged;
    forged.ancestors = {sim.node(sim.master_id()).self(), b_ref};
    forged.depth = 2;
    forged.lease_remaining_ns = 1'000'000'000;
    forged.term = sim.node(sim.master_id()).term();
    ASSERT_TRUE(m.OnAttached(forged, m.RejoinAllowedAtNs()).ok());
    const std::string full = sim.CheckSafety();
    EXPECT_EQ(full.rfind("cycle: ", 0), 0u) << full;
    EXPECT_EQ(sim.CheckSafetyIncremental().rfind("cycle: ", 0), 0u);
  }
}

// Placement preference: among the children that place a newcomer equally
// high, (a) the smallest subtree then the id, (b) then the child's round
// trip to the parent, (c) the newcomer's own round trip to each. Mean round
// trip child <-> parent over the tree, and the depth it costs. Joins one at
// a time, spaced so that reports reach the master between joins; then a
// burst of all joins at once.
TEST(MembershipSimTest, RoundTripPreferenceLowersParentRoundTrip) {
  struct Result {
    double mean_rtt_us = 0;
    int max_depth = 0;
  };
  auto build = [](MembershipSimOptions o, int n, bool burst) {
    MembershipSim sim(o);
    for (int i = 0; i < n - 1; ++i) {
      sim.AddNode();
      if (!burst) {
        // Reports climb one level per tick: enough ticks for the master.
        for (int t = 0; t <= CeilLog(n, o.max_children); ++t) sim.Tick();
      }
    }
    EXPECT_TRUE(sim.Settle(3000)) << sim.CheckConverged();
    return Result{sim.MeanParentRttNs() / 1000, sim.MaxDepth()};
  };
  struct Case {
    int n;
    int fanout;
    bool burst;
    int seeds;
  };
  for (const Case& c : std::vector<Case>{
           {1000, 16, false, 2}, {300, 4, false, 5}, {1000, 16, true, 3}}) {
    double rtt[3] = {0, 0, 0};
    int depth[3] = {0, 0, 0};
    for (int seed = 1; seed <= c.seeds; ++seed) {
      MembershipSimOptions o;
      o.seed = static_cast<uint64_t>(seed);
      o.max_children = c.fanout;
      o.interleave = c.burst;
      o.children_report_rtt = false;
      o.choice = MembershipSimOptions::Choice::kParentOrder;
      const Result by_id = build(o, c.n, c.burst);
      o.children_report_rtt = true;
      const Result by_parent_rtt = build(o, c.n, c.burst);
      o.choice = MembershipSimOptions::Choice::kNewcomerRtt;
      const Result by_own_rtt = build(o, c.n, c.burst);
      const Result* r[3] = {&by_id, &by_parent_rtt, &by_own_rtt};
      for (int k = 0; k < 3; ++k) {
        rtt[k] += r[k]->mean_rtt_us / c.seeds;
        depth[k] = std::max(depth[k], r[k]->max_depth);
      }
    }
    const std::string label = std::to_string(c.n) + (c.burst ? "_burst" : "");
    std::cout << "mean round trip to parent, " << c.n << " nodes, fanout "
              << c.fanout << (c.burst ? ", all joining at once" : "")
              << " (4 pods x 8 racks; 30/100/400 us), " << c.seeds
              << " seeds:\n  by id " << rtt[0] << " us (max depth " << depth[0]
              << ")\n  by child's round trip to the parent " << rtt[1]
              << " us (max depth " << depth[1]
              << ")\n  by newcomer's own round trip " << rtt[2]
              << " us (max depth " << depth[2] << ")\n"
              << "FIGURE membership_parent_rtt_us_by_id_" << label << " "
              << rtt[0] << " us\nFIGURE membership_parent_rtt_us_by_own_rtt_"
              << label << " " << rtt[2] << " us\n";
    // The newcomer's own measurement must help markedly, at no cost in
    // depth beyond the balanced bound when joins come one at a time. In a
    // burst the reports lag and newcomers crowd onto near nodes, which
    // costs up to one level.
    EXPECT_LT(rtt[2], 0.8 * rtt[0]) << label;
    EXPECT_LE(depth[2],
              std::max(depth[0], CeilLog(c.n, c.fanout)) + (c.burst ? 1 : 0))
        << label;
  }
}

}  // namespace
}  // namespace clocksync
