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
// With the tree's key (probe_key), its Join, Heartbeat and Leave calls carry
// a tag (rpc_auth.h) and the calls it answers must too.
// Leaving cleanly (LeaveAndStop): the node stops accepting, tells its
// children to rejoin at its own parent (the successor), keeps answering
// their probes until every child has re-attached elsewhere (they say so
// with a Leave) or the grace time passes, then tells its parent.
//
// The sync loop learns where to probe from ProbeTarget(): the parent, or
// while detached the last parent (which may still answer: a parent that
// left cleanly serves its children until they have moved).
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
};

// Empty when valid, else "field: reason".
std::string ValidateMembershipAgentOptions(const MembershipAgentOptions& o,
                                           const MembershipConfig& config);

// Wire conversions (exposed for tests).
NodeAddress ToProto(const NodeRef& ref);
NodeRef FromProto(const NodeAddress& address);
JoinRequestInfo FromProto(const JoinRequest& request);
JoinRequest ToProto(const JoinRequestInfo& request);
JoinResponse ToProto(const JoinDecision& decision);
JoinDecision FromProto(const JoinResponse& response);
JoinResponse::Accepted ToProto(const Attachment& attachment);
Attachment FromProto(const JoinResponse::Accepted& accepted);

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
  };
  Snapshot snapshot() const;
  const NodeRef& self() const { return self_; }

 private:
  class Channels;

  void Loop();
  void Tick(int64_t now_ns);
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
