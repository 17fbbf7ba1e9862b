// clocksyncd/membership_agent.h: runs a node's Membership (membership.h)
// over gRPC. It answers the membership RPCs of other nodes (Join, Leave,
// Heartbeat, through the daemon's NodeView) and, in its own thread, does
// this node's side of the protocol:
//   - detached: once Membership::RejoinAllowedAtNs() has passed, walks the
//     candidates (successor, ancestors, seeds) with Join RPCs, following
//     redirects; with several equally good alternatives it measures the
//     round trip to each (a few UDP probes) and takes the nearest; after a
//     failed walk it retries with a growing back-off;
//   - attached: a Heartbeat to the parent every heartbeat_interval (subtree
//     size, free-slot depth, round trip), whose answer renews the lease
//     and hands down the ancestor chain; the parent counts as lost after
//     heartbeat_failures_for_loss failed heartbeats in a row, or when its
//     probes go unanswered longer than a live parent's would on the loss
//     measured so far (ParentLossDetector: heartbeats still answered keep
//     the parent up to a cap); a NOT_FOUND answer (the parent dropped us)
//     means join again; a leaf deep
//     below the landing depth moves up (Membership::ShouldMoveUp);
//   - always: drops children silent for child_timeout.
// With the tree's key (probe_key), its Join, Heartbeat, Leave, Peer and
// Handover calls carry a tag (rpc_auth.h) and the calls it answers must too.
// Leaving cleanly (LeaveAndStop): the node stops accepting, tells its
// children to rejoin at its own parent (the successor), keeps answering
// their probes until every child has re-attached elsewhere (they say so
// with a Leave) or the grace time passes, then tells its parent.
//
// The sync loop learns where to probe from ProbeTarget(): the parent, or
// while detached the last parent (which may still answer: a parent that
// left cleanly serves its children until they have moved).
//
// Standby masters (membership_agent_mastership.cc; docs/MEMBERSHIP.md,
// "Terms, takeover and handover"): a second thread polls the node's peers
// (Peer RPCs) while it is master, or a candidate without a master, and
// carries out Membership::DecideMastership: take over (is_master() turns
// true; the sync loop then serves its synchronized mapping as global
// time), demote to a master of a higher term (the children are handed to
// it), or join a live master found. A master started with seeds first asks
// them whether a master is live, and joins as a node if one is. Leaving a
// master hands over to the best candidate first (Handover RPC).
//
// Thread safety: every public method may be called from any thread; one
// mutex guards the Membership, and no RPC is made while holding it.

#ifndef CLOCKSYNC_CLOCKSYNCD_MEMBERSHIP_AGENT_H_
#define CLOCKSYNC_CLOCKSYNCD_MEMBERSHIP_AGENT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "clocksyncd/membership_wire.h"
#include "clocksyncd/parent_loss_detector.h"
#include "membership/membership.h"
#include "probe/auth.h"
#include "proto/clocksync.grpc.pb.h"
#include "proto/clocksync.pb.h"

namespace clocksync {

struct MembershipAgentOptions {
  // Time between two heartbeats to the parent.
  int64_t heartbeat_interval_ns = 200'000'000;
  // Deadline of one Join, Leave or Heartbeat RPC.
  int64_t rpc_timeout_ns = 500'000'000;
  // Failed heartbeats in a row after which the parent counts as lost.
  int heartbeat_failures_for_loss = 4;
  // When unanswered probes (reported by the sync loop through
  // OnProbeSent and OnProbeAnswered) lose the parent; nullopt: never.
  std::optional<ParentLossOptions> parent_loss = ParentLossOptions{};
  // A child not heard from for this long is dropped.
  int64_t child_timeout_ns = 3'000'000'000;
  // Measure the round trip to redirect alternatives (UDP probes).
  bool measure_rtt = true;
  // Back-off after a failed join walk: starts here, doubles, capped.
  int64_t retry_min_ns = 200'000'000;
  int64_t retry_max_ns = 5'000'000'000;
  // Sent as sender id in RTT probes.
  uint64_t probe_sender_id = 0;
  // The tree's probe key, for RTT probes and the tags of membership calls
  // (none: unauthenticated); SetProbeKey() replaces it.
  std::optional<probe::ProbeKeys> probe_key;
  // How often a master, or a candidate without a master, polls its peers.
  int64_t peer_poll_interval_ns = 400'000'000;
  // Deadline of one Peer RPC.
  int64_t peer_rpc_timeout_ns = 300'000'000;
  // A master with seeds asks them this long at start whether a master is
  // live already.
  int64_t startup_check_ns = 1'000'000'000;
};

// Empty when valid, else "field: reason".
std::string ValidateMembershipAgentOptions(const MembershipAgentOptions& o,
                                           const MembershipConfig& config);

class MembershipAgent {
 public:
  MembershipAgent(MembershipConfig config, MembershipAgentOptions options);
  ~MembershipAgent();
  MembershipAgent(const MembershipAgent&) = delete;
  MembershipAgent& operator=(const MembershipAgent&) = delete;

  // Starts the agent's thread. A non-master node first waits out any lease
  // a previous run under the same id may have granted (AssumeGrantedUntil).
  void Start();
  // Stops the thread without telling anyone (as a crash would look to the
  // others, except that the RPC service may still answer). Idempotent.
  void Stop();
  // Leaves cleanly (see the file comment); returns when done or when
  // `grace_ns` has passed; then Stop(). Call from a thread other than the
  // one running the sync loop: probes must go on meanwhile.
  void LeaveAndStop(int64_t grace_ns);

  // --- Other nodes' RPCs (the daemon's NodeView forwards them) ----------
  JoinResponse HandleJoin(const JoinRequest& request);
  absl::Status HandleLeave(const LeaveRequest& request);
  absl::StatusOr<HeartbeatResponse> HandleHeartbeat(
      const HeartbeatRequest& request);
  absl::StatusOr<PeerResponse> HandlePeer(const PeerRequest& request);
  absl::Status HandleHandover(const HandoverRequest& request);
  std::vector<NodeAddress> Children() const;

  // --- The sync loop ------------------------------------------------------
  struct ProbeTarget {
    // Increments whenever the target changes.
    uint64_t generation = 0;
    // Empty before the first attachment.
    std::optional<NodeRef> parent;
  };
  ProbeTarget probe_target() const;
  // A probe went to the current target at `now_ns` (raw clock).
  void OnProbeSent(int64_t now_ns);
  // A probe reply from the current target arrived at `now_ns` (raw clock).
  void OnProbeAnswered(int64_t now_ns);
  // Shortest round trip to the parent (for heartbeats), ns; -1 unknown.
  void SetParentRoundTripNs(int64_t rtt_ns);
  // Replaces the tree's key (a reload): the next membership calls and RTT
  // probes use it.
  void SetProbeKey(const std::optional<probe::ProbeKeys>& key);
  // Whether the node has a synchronized mapping to continue global time
  // from (a candidate takes over only with one); the sync loop says so
  // every pass.
  void SetSynchronized(bool synchronized);
  // Master now (configured and not demoted, or promoted since).
  bool is_master() const { return is_master_.load(); }

  // --- Status -------------------------------------------------------------
  struct Snapshot {
    MembershipState state = MembershipState::kDetached;
    uint32_t depth = 0;
    std::optional<NodeRef> parent;
    std::vector<NodeRef> ancestors;
    uint32_t children = 0;
    int64_t subtree_size = 1;
    uint64_t joins = 0;            // Successful attachments so far.
    uint64_t parent_losses = 0;    // Times the parent was lost.
    // Mastership.
    uint64_t term = 0;
    std::optional<NodeRef> master;
    std::vector<Candidate> candidates;
    int master_priority = 0;
    uint64_t takeovers = 0;        // Promotions: takeover or handover.
    int64_t masterless_ns = 0;     // Without a master since the first join.
    bool has_master = false;
  };
  Snapshot snapshot() const;
  const NodeRef& self() const { return self_; }

 private:
  class Channels;

  void Loop();
  void Tick(int64_t now_ns);
  // The stub for `grpc_address`'s channel; its holder keeps the channel
  // alive. A call's status goes back through NoteCallStatus (see Channels).
  std::shared_ptr<Clocksync::Stub> StubFor(const std::string& grpc_address);
  void NoteCallStatus(const std::string& grpc_address, const Clocksync::Stub* used,
                      const grpc::Status& status);
  // Mastership (membership_agent_mastership.cc).
  void ResolveStartupRole();
  void PeerLoop();
  void PollPeers(int64_t now_ns);
  // Carries out a decision under mu_; the Leave messages it implies go to
  // pending_leaves_, which the peer thread sends.
  void CarryOutLocked(const MastershipDecision& decision, int64_t now_ns);
  std::vector<PeerView> PeerViewsLocked() const;
  bool HandOverMastership(LeavePlan* plan);
  absl::StatusOr<PeerInfo> CallPeer(const NodeRef& target, const PeerInfo& self,
                                    int64_t timeout_ns);
  void AccountMasterlessLocked(int64_t now_ns);
  void RunJoinWalk(int64_t now_ns, bool move_up);
  void SendHeartbeat(int64_t now_ns);
  void LoseParentLocked(int64_t now_ns, const std::string& why);
  int64_t MeasureRttNs(const NodeRef& ref);
  absl::StatusOr<JoinResponse> CallJoin(const NodeRef& target,
                                        const JoinRequestInfo& request);
  absl::Status CallLeave(const NodeRef& target, const std::string& reason,
                         const std::optional<NodeRef>& successor);
  void SetProbeTargetLocked(const NodeRef& parent, int64_t now_ns);
  bool Sleep(int64_t ns);  // False when stopping.
  std::optional<probe::ProbeKeys> ProbeKey() const;

  const NodeRef self_;
  const MembershipAgentOptions options_;
  std::unique_ptr<Channels> channels_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  Membership membership_;
  ProbeTarget target_;
  bool stop_ = false;
  bool leaving_ = false;
  // A parent that left cleanly: told when this node has re-attached.
  std::optional<NodeRef> left_parent_;
  // Leaving: children not yet re-attached elsewhere.
  std::set<std::string> leaving_children_;
  int heartbeat_failures_ = 0;
  int64_t next_heartbeat_ns_ = 0;
  int64_t next_join_ns_ = 0;
  int64_t retry_ns_ = 0;
  uint64_t joins_ = 0;
  uint64_t parent_losses_ = 0;
  std::map<std::string, int64_t> rtt_cache_ns_;
  // Mastership (mu_): the latest poll of each peer (by id, or "@address"
  // for a seed), the sync loop's word on its mapping, masterless time, and
  // children handed to another master that have not moved yet (their
  // heartbeats get UNAVAILABLE meanwhile, as while leaving).
  std::map<std::string, PeerView> peer_views_;
  bool synchronized_ = false;
  int64_t masterless_ns_ = 0;
  int64_t last_account_ns_ = 0;
  std::set<std::string> handed_over_children_;
  struct PendingLeave {
    NodeRef target;
    std::string reason;
    std::optional<NodeRef> successor;
  };
  std::vector<PendingLeave> pending_leaves_;
  // The last reason logged for not taking over (said once per change).
  std::string last_wait_why_;
  std::atomic<bool> is_master_{false};
  std::condition_variable peer_wake_;
  std::thread peer_thread_;
  // Probe answers and heartbeats of the current parent (its own lock).
  std::unique_ptr<ParentLossDetector> parent_loss_;
  std::atomic<int64_t> parent_rtt_ns_{-1};
  // The tree's key (options.probe_key until SetProbeKey()); its own lock,
  // taken while no other is held.
  mutable std::mutex key_mu_;
  std::optional<probe::ProbeKeys> probe_key_;
  std::thread thread_;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_MEMBERSHIP_AGENT_H_
