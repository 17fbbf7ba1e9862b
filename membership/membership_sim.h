// membership/membership_sim.h: many Membership objects in one
// process, joined by a simulated network, and the invariants of the tree.
//
// The simulator plays the daemons' part around membership.h: it sends join
// requests and follows redirects with JoinWalk, sends heartbeats child ->
// parent (subtree size, round trip) whose replies carry the chain and lease
// (AttachmentForChild -> OnParentInfo), counts unanswered heartbeats as
// missed probes (OnParentProbe), expires silent children, abandons stale
// parents, rejoins detached nodes through RejoinCandidates() once
// RejoinAllowedAtNs() has passed, and lets deep leaves move up
// (ShouldMoveUp, StartMoveUp, OnMovedUp). It decides nothing about
// placement or cycles itself: that is all the code under test.
//
// Nodes can also be cut off for a while (Isolate: a partition around them)
// and the network split in two sides for a while (Partition).
//
// Standby masters (membership_sim_mastership.cc): candidates (AddCandidate)
// report up and learn down the tree's candidate list; masters, and
// candidates without a master, poll the peers they know (Peer messages
// carrying PeerView both ways); DecideMastership's verdicts are carried
// out (Promote, Demote with the children handed to the winner, rejoin at a
// master found); a master can leave by handing over (HandOverAndLeave).
// Kill(master) is master loss. In the simulator a candidate counts as
// synchronized once it has been attached.
//
// Time advances in ticks. In order mode (interleave = false) a message is
// delivered in the tick it is sent, first in first out: joins complete as
// if RPCs were synchronous. In interleaved mode every message takes 1 to
// max_delay_ticks ticks and the messages due in one tick are delivered in
// random order, so joins, redirects, heartbeats, leaves and failures of
// many nodes overlap and race. A message to a dead (or departed) node fails:
// the sender learns it after the same delay, as from an RPC error.
//
// Round trips come from a model cluster: pods of racks; 30 µs within a
// rack, 100 µs within a pod, 400 µs across pods.
//
// Invariants: CheckSafety() holds after every step (no cycle, capacity,
// consistent chains, leases flow down, and no two masters able to reach
// each other for longer than master_resolution_ns()), CheckConverged() once
// the tree has settled (one live master, one tree rooted at it holding
// every live node, chains and subtree sizes equal to the real ones, child
// lists exact, every node listing the live candidates).

#ifndef CLOCKSYNC_MEMBERSHIP_MEMBERSHIP_SIM_H_
#define CLOCKSYNC_MEMBERSHIP_MEMBERSHIP_SIM_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "membership/membership.h"

namespace clocksync {

struct MembershipSimOptions {
  uint64_t seed = 1;
  int max_children = 16;
  // false: delivery in order, in the tick of sending. true: random delays
  // of 1..max_delay_ticks ticks and random order among due messages.
  bool interleave = false;
  int max_delay_ticks = 3;
  int64_t tick_ns = 10'000'000;
  int64_t heartbeat_interval_ns = 100'000'000;
  // A node heartbeats at once (at most once a tick) when its subtree size
  // or free-slot depth differs from what it last reported, so they reach
  // the root within a few message delays instead of an interval per level.
  bool early_heartbeat_on_size_change = true;
  // > (depth + 2) x (interval + delay) for the deepest trees tested (about
  // depth 10 at fanout 2); see MembershipConfig::lease_ns.
  int64_t lease_ns = 2'000'000'000;
  // 0: the global simulated clock has no rate error, so the invariant
  // checker can hold the lease rule to the exact nanosecond.
  int64_t lease_margin_ns = 0;
  int64_t abandon_parent_after_ns = 3'000'000'000;
  // Unanswered heartbeats in a row before a parent counts as lost.
  int missed_heartbeats_for_loss = 3;
  int64_t child_timeout_ns = 500'000'000;
  int64_t suspect_child_after_ns = 250'000'000;
  // MembershipConfig::move_up_min_gain and move_cooldown_ns.
  int move_up_min_gain = 1;
  int64_t move_cooldown_ns = 1'000'000'000;
  // After a walk ran out of candidates, wait this long before the next.
  int64_t join_retry_ns = 50'000'000;
  // How a joiner picks among a redirect's equally small children:
  // kParentOrder takes the parent's pick (smallest subtree, then the
  // child's round trip to the parent if reported, then id); kNewcomerRtt
  // measures its own round trip to each alternative and takes the nearest.
  enum class Choice { kParentOrder, kNewcomerRtt };
  Choice choice = Choice::kParentOrder;
  // Children report their round trip to the parent in heartbeats (the
  // parent's tie-break); false: unknown, ties go by id.
  bool children_report_rtt = true;
  int pods = 4;
  int racks_per_pod = 8;
  // Mastership: MembershipConfig::takeover_after_ns, how often masters and
  // masterless candidates poll their peers, and how long a poll's answer
  // counts.
  int64_t takeover_after_ns = 1'000'000'000;
  int64_t peer_poll_interval_ns = 250'000'000;
  int64_t peer_answer_valid_ns = 1'000'000'000;
};

struct MembershipSimStats {
  uint64_t messages = 0;
  uint64_t join_requests = 0;
  uint64_t accepted = 0;
  uint64_t redirects = 0;
  std::map<std::string, uint64_t> rejected;  // By RejectReasonName.
  uint64_t join_unreachable = 0;
  uint64_t attach_refused = 0;  // OnAttached failed; the acceptor undone.
  uint64_t stale_accepts = 0;   // Acceptance for a walk no longer running.
  uint64_t parents_lost = 0;
  uint64_t parents_left = 0;
  uint64_t disowned = 0;
  uint64_t abandoned = 0;  // ParentStale.
  uint64_t walks_exhausted = 0;
  uint64_t move_attempts = 0;       // Leaves that tried to move up ...
  uint64_t moves = 0;               // ... and those that did.
  uint64_t move_levels_gained = 0;  // Sum over moves of old - new depth.
  uint64_t max_walk_hops = 0;
  // Mastership.
  uint64_t peer_polls = 0;
  uint64_t promotions = 0;   // Takeovers (DecideMastership: kPromote).
  uint64_t demotions = 0;    // Masters that met a higher term.
  uint64_t handovers = 0;    // Accepted handovers.
  uint64_t handover_refusals = 0;
  uint64_t rejoin_verdicts = 0;  // kRejoin verdicts (one per tick while waiting).
  // Longest time two masters could reach each other, ns.
  int64_t max_masters_together_ns = 0;
};

class MembershipSim {
 public:
  explicit MembershipSim(const MembershipSimOptions& options);

  // The first master (the one the simulator started with).
  const std::string& master_id() const { return master_id_; }
  // A new node that joins through the given nodes (by id; they become its
  // --join seeds, given by gRPC address only) or, with none, the master.
  // It sends its first join in the next Tick().
  std::string AddNode(const std::vector<std::string>& seed_ids = {});
  // A node pinned (--parent=) to `parent_id`.
  std::string AddPinnedNode(const std::string& parent_id);
  // Crash: the nodes stop at once, all together; nobody is told.
  void Kill(const std::vector<std::string>& ids);
  // Clean leave: tells the parent and the children (with the successor).
  void Leave(const std::string& id);
  // Network partition: until `until_ns` every message to or from `id`
  // fails (requests bounce back as unreachable, the rest is lost).
  void Isolate(const std::string& id, int64_t until_ns);
  // Until `until_ns`, messages between `side` and every other node fail
  // (nodes added meanwhile are on the other side). Replaces an earlier
  // Partition.
  void Partition(const std::set<std::string>& side, int64_t until_ns);
  // Whether a message from `from` to `to` would pass now.
  bool Reachable(const std::string& from, const std::string& to) const;

  // --- Mastership -----------------------------------------------------
  // A candidate (master_priority `priority`, 1..255) joining like AddNode.
  std::string AddCandidate(int priority,
                           const std::vector<std::string>& seed_ids = {});
  // A dead node comes back under the same id, not as master, with its
  // priority, joining through the live candidates and the first master;
  // it waits out the leases its previous run may have granted.
  void Restart(const std::string& id);
  // A master leaves cleanly: hands mastership to its best candidate
  // (trying the next if one refuses), then tells its children to join it;
  // without any taker, an ordinary Leave.
  void HandOverAndLeave(const std::string& id);
  // Live nodes that are master now.
  std::vector<std::string> LiveMasters() const;
  // The one live master, or "" when there are none or several.
  std::string CurrentMaster() const;
  // CheckSafety's bound on two masters that can reach each other: two
  // poll rounds and their messages (a round may be needed to learn of the
  // other), plus a few ticks.
  int64_t master_resolution_ns() const;
  // The id the node added as the `index`-th gets (the master is 0), so a
  // test can name seeds that do not exist yet.
  static std::string IdAt(int index);

  // One tick: every live node's periodic work (heartbeats, expiries, join
  // starts), then delivery of the messages that are due.
  void Tick();
  // Ticks until CheckConverged() passes (true) or max_ticks ran (false).
  bool Settle(int max_ticks);

  // Empty when the always-true invariants hold, else what broke: the full
  // check over every live node (see the file comment). O(N x depth).
  std::string CheckSafety() const;
  // The same invariants over what changed since the previous call (or
  // since the simulator was made): every node a message was delivered to,
  // whose children expired, that lost its parent, carried out a mastership
  // verdict, left, was killed, restarted or added, and the real children of
  // each of them (their lease is held against the changed parent); cycles
  // are searched from each of them up; the masters-per-side rule in full.
  // Nothing else can change an invariant's outcome: the remaining checks
  // read only a node's own state and its parent's, and time alone cannot
  // break the lease rule (a child's lease never outlasts the parent lease
  // it was checked against). Clears the set of changed nodes. A long run
  // calls it after every Tick() and CheckSafety() every few ticks and once
  // settled (tools/simulate_cluster).
  std::string CheckSafetyIncremental();
  // Empty when the tree has settled: see the file comment. O(N x depth).
  std::string CheckConverged() const;

  int64_t now_ns() const { return now_ns_; }
  bool alive(const std::string& id) const;
  const Membership& node(const std::string& id) const;
  // For tests that break the invariants on purpose: the node, counted as
  // changed for CheckSafetyIncremental().
  Membership& mutable_node(const std::string& id);
  std::vector<std::string> LiveIds() const;
  size_t live_count() const;
  // Over live nodes: the length of the real parent path to the master
  // (nodes not reaching it are skipped), and its histogram.
  int MaxDepth() const;
  std::map<int, int> DepthHistogram() const;
  // Mean model round trip between each attached live node and its parent.
  double MeanParentRttNs() const;
  // Model round trip between two nodes, ns.
  int64_t Rtt(const std::string& a, const std::string& b) const;
  // The node's place in the model cluster: its pod and its rack in the pod.
  std::pair<int, int> LocationOf(const std::string& id) const;
  // Live ids of a node's real children (live nodes whose parent it is).
  std::vector<std::string> RealChildren(const std::string& id) const;
  // One line on a node's view, for failure messages.
  std::string Describe(const std::string& id) const;
  std::mt19937_64& rng() { return rng_; }
  const MembershipSimStats& stats() const { return stats_; }
  size_t pending_messages() const;

 private:
  using Idx = int32_t;  // A node's dense index: IdAt(index) is its id.
  struct Message {
    enum class Type {
      kJoin,
      kJoinReply,
      kJoinFailed,
      kHeartbeat,
      kHeartbeatReply,
      kHeartbeatFailed,
      kLeave,
      kParentLeft,
      kPeer,
      kPeerReply,
      kPeerFailed,
      kHandover,
      kHandoverReply,
      kHandoverFailed,
    };
    Type type = Type::kJoin;
    Idx from = -1;  // Sender.
    Idx to = -1;    // Receiver (resolved from the address; -1: nobody).
    int64_t deliver_at_ns = 0;
    int64_t sent_ns = 0;   // When the request was sent (replies too).
    uint64_t walk_id = 0;  // Join messages: which walk.
    JoinRequestInfo join;
    JoinDecision decision;
    int64_t subtree_size = 0;              // Heartbeat.
    int32_t free_slot_depth = -1;          // Heartbeat.
    int64_t rtt_ns = -1;                   // Heartbeat.
    std::optional<Attachment> attachment;  // Heartbeat reply.
    std::optional<NodeRef> successor;      // Parent left.
    std::vector<Candidate> candidates;     // Heartbeat.
    // Peer, PeerReply (shared: messages are copied and most carry none).
    std::shared_ptr<const PeerView> view;
    uint64_t term = 0;                     // Handover.
    bool ok = false;                       // HandoverReply.
  };
  struct Node {
    Node(std::string node_id, const MembershipConfig& config)
        : id(std::move(node_id)), m(config) {}
    std::string id;
    Membership m;
    bool alive = true;
    int pod = 0;
    int rack = 0;
    std::optional<JoinWalk> walk;
    uint64_t walk_id = 0;
    bool walk_is_move = false;  // A move up (StartMoveUp), not a join.
    int64_t next_heartbeat_ns = 0;
    // Subtree size and free-slot depth in the last heartbeat.
    int64_t reported_size = 0;
    int32_t reported_free = -1;
    int64_t next_join_ns = 0;
    // Until when every message to or from it fails (Isolate).
    int64_t isolated_until_ns = 0;
    bool partition_side = false;  // On Partition()'s side.
    bool changed = false;         // In changed_ (CheckSafetyIncremental).
    // Mastership.
    int priority = 0;
    bool synced = false;  // Attached at least once (or the first master).
    std::map<Idx, PeerView> views;  // Latest poll of each peer.
    bool views_changed = false;  // An answer (or failure) since the last verdict.
    int64_t next_poll_ns = 0;
    bool handing_over = false;
    std::set<std::string> handover_tried;
  };

  // The index of an id made by IdAt, or -1.
  Idx IndexOf(const std::string& id) const;
  Idx IndexOrDie(const std::string& id) const;
  // The id of index `i`; "" for -1.
  const std::string& IdOf(Idx i) const;
  Idx NewNode(const MembershipConfig& config);
  MembershipConfig BaseConfig(const std::string& id) const;
  NodeRef RefOf(const std::string& id) const;
  Idx Resolve(const NodeRef& ref) const;
  bool AliveAt(Idx i) const;
  bool ReachableAt(Idx from, Idx to) const;
  int64_t RttAt(Idx a, Idx b) const;
  // The real parent's index: -1 for the master, a detached or dead node.
  Idx ParentOf(Idx i) const;
  void MarkChanged(Idx i);
  void Send(Message message);
  void Deliver(const Message& message);
  void NodeWork(Idx i);
  void SendJoin(Idx i);
  void ContinueWalk(Idx i);
  void CheckNoCycleFrom(Idx i);
  // The invariants that read one node and its parent (chain, capacity,
  // leases); empty when they hold.
  std::string CheckNode(Idx i) const;
  // Mastership (membership_sim_mastership.cc).
  void MastershipWork(Idx i);
  void DeliverMastership(const Message& message, bool to_alive);
  void CarryOut(Idx i, const MastershipDecision& decision);
  void SendHandover(Idx i);
  void TrackMasters();
  std::vector<Idx> LiveMasterIndices() const;
  // Empty when every live node lists the live candidates, best first.
  std::string CheckCandidateLists() const;
  // Real path from `i` up: the indices passed (i first); stops at the
  // master, a detached node or a dead one. `cycle` set if a node repeats.
  std::vector<Idx> PathUp(Idx i, bool* cycle) const;
  std::string PathString(const std::vector<Idx>& path,
                         const char* separator) const;

  MembershipSimOptions options_;
  std::mt19937_64 rng_;
  // Pods and racks of new nodes: a stream of its own, so that every option
  // set lays out the same cluster for a seed.
  std::mt19937_64 topology_rng_;
  int64_t now_ns_ = 0;
  uint64_t next_walk_id_ = 0;
  std::string master_id_;
  // Every node ever added, by index (a deque: references stay valid).
  std::deque<Node> nodes_;
  std::unordered_map<std::string, Idx> by_address_;  // gRPC address.
  int64_t partition_until_ns_ = 0;
  // Pairs of masters that can reach each other, and since when.
  std::map<std::pair<Idx, Idx>, int64_t> masters_together_;
  // Messages in flight, by delivery time.
  std::map<int64_t, std::vector<Message>> pending_;
  std::vector<std::string> violations_;  // Found while delivering.
  // Nodes changed since the last CheckSafetyIncremental, and each node's
  // real parent as that check last saw it (to find the real children).
  std::vector<Idx> changed_;
  std::vector<Idx> checked_parent_;
  std::vector<std::vector<Idx>> checked_children_;
  // What a node's children's lease checks read of it (CheckNode), as that
  // check last saw it: its children are checked again only when it moved.
  struct LeaseView {
    bool alive = false;
    MembershipState state = MembershipState::kDetached;
    int64_t lease_expiry_ns = 0;
    int64_t granted_until_ns = 0;
    bool operator==(const LeaseView&) const = default;
  };
  LeaseView LeaseViewOf(Idx i) const;
  std::vector<LeaseView> checked_lease_view_;
  MembershipSimStats stats_;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_MEMBERSHIP_MEMBERSHIP_SIM_H_
