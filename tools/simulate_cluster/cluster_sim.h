// tools/simulate_cluster/cluster_sim.h: the discrete-event cluster
// simulator: the real estimator, slewer and membership code at thousands
// to hundreds of thousands of nodes, in simulated time, in one process.
//
// Every node has a modeled clock (hull/sim/clock_model: offset, frequency,
// random-walk wander, a temperature swing, occasional steps) and runs the
// daemon's per-node path on probe exchanges with its parent: the real
// hull::Estimator (MakeEstimator), then NodeSlewTarget and MappingSlewer
// (shm/mapping_slewer) into the mapping it publishes. What a node serves
// its children (t2, t3 and the parent bound) is its published mapping read
// at its own clock, as the daemon's responder serves it. The master's clock
// is the truth. Packets cross network_model.h's switch hierarchy.
//
// Placement is membership/'s: a MembershipSim holds one Membership per node
// (joins, redirects, heartbeats, leases, rejoins), and its invariant
// checker (CheckSafety) runs after every one of its steps; once the tree
// has settled (CheckConverged) the depth must be <= ceil(log_f N) + 1. The
// tree forms first (all N nodes join at once: the join storm), then the
// clocks run. While the tree is settled and nothing fails, membership is
// paused (its state stands still; heartbeats are counted at their
// interval); a churn event (kills, a rack failure, a partition) runs it
// step by step, in lockstep with the clocks, until it has settled again.
//
// Time advances in slices: within a slice the nodes are processed depth by
// depth (a parent before its children), each node keeping the mappings it
// published (the last 40) so that a child reads its parent's mapping as it
// was at the instant of the exchange. Slices are at most half a probe
// interval while membership runs; while it stands still they are up to
// long_slice_s (32 s, at most 32 intervals), so that a node's passes run
// back to back with its estimator in cache: at 100,000 nodes a pass that
// finds the node's state cold costs several times one that finds it warm. The nodes of
// one depth are independent and can run on several threads; results are
// the same for any thread count (each node has its own random stream, and
// every statistic is an integer sum or maximum). Deterministic by seed.

#ifndef CLOCKSYNC_TOOLS_SIMULATE_CLUSTER_CLUSTER_SIM_H_
#define CLOCKSYNC_TOOLS_SIMULATE_CLUSTER_CLUSTER_SIM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hull/estimator.h"
#include "shm/mapping_slewer.h"
#include "tools/simulate_cluster/network_model.h"

namespace clocksync::sim {

struct ClusterSimOptions {
  int nodes = 1000;   // Besides the master.
  int fanout = 16;    // max_children of every node.
  double duration_s = 600;
  double probe_interval_s = 1;
  double warmup_s = 120;  // Errors are counted from here on.
  uint64_t seed = 1;
  int threads = 1;
  // A depth's nodes are split over the threads only when it has at least
  // this many (fewer are not worth starting threads for).
  int min_nodes_per_split = 4'000;
  // While membership stands still and no churn event is due, time advances
  // in slices of up to this long (and at most 10 probe intervals); 0: in
  // short slices (<= half an interval) throughout. Results are the same up
  // to the order of floating-point sums; a long slice is faster because a
  // node's passes run back to back with its state in cache.
  double long_slice_s = 32;
  // The estimator (the daemon's defaults: 300 s × 4 windows).
  double window_s = 300;
  int window_levels = 4;
  double estimator_wander_ppb = 1;
  SlewConfig slew;
  // Clocks: offset uniform in ±offset_max_s, frequency in ±freq_max_ppm,
  // random walk wander_ppb per sqrt(s), a temperature swing of
  // sine_ppb amplitude and a period in [sine_min_s, 2 sine_min_s], and
  // steps of ±step_ns at rate steps_per_node_hour.
  double offset_max_s = 1;
  double freq_max_ppm = 100;
  double wander_ppb = 1;
  double sine_ppb = 20;
  double sine_min_s = 1800;
  double steps_per_node_hour = 0.01;
  int64_t step_ns = 1'000'000;
  int64_t turnaround_ns = 5'000;
  int64_t holdover_after_ns = 10'000'000'000;
  NetworkParams network;
  int nodes_per_rack = 40;
  int racks_per_pod = 16;
  // Membership (the daemon's heartbeat and lease defaults).
  int64_t membership_tick_ns = 10'000'000;
  int64_t heartbeat_interval_ns = 200'000'000;
  int64_t lease_ns = 3'000'000'000;
  // Churn: kill_pct_per_min % of the live nodes killed once a minute (they
  // restart after restart_after_s); a whole rack killed at rack_failure_at_s
  // (< 0: none); a pod cut off at partition_at_s for partition_s.
  double kill_pct_per_min = 0;
  double restart_after_s = 60;
  double rack_failure_at_s = -1;
  double partition_at_s = -1;
  double partition_s = 30;
  // Master takeover: the first `standbys` nodes are master candidates
  // (master_priority 200, 199, ...); the master dies for good at
  // master_failure_at_s (< 0: never) and membership promotes one of them,
  // which goes on serving global time from its synchronized mapping, as
  // the daemon does. Errors stay measured against the old master's clock.
  int standbys = 0;
  double master_failure_at_s = -1;
  double series_bucket_s = 10;
  // At most this many membership ticks for the join storm / a settling.
  int64_t max_settle_ticks = 200'000;
  // The membership invariants: the incremental check (what a tick changed)
  // after every tick, the full check over every node every this many
  // ticks (1: every tick) and whenever the tree has settled.
  int membership_full_check_every = 10;
};

// Returns "" when valid, else "name: reason (value)".
std::string ValidateOptions(const ClusterSimOptions& options);

struct ErrorStats {
  int depth = -1;  // -1: over all depths.
  int64_t nodes = 0;
  uint64_t samples = 0;
  double rms_ns = 0;
  double p99_ns = 0;
  double max_ns = 0;
  double coverage = 0;  // Fraction of samples with |error| <= bound.
  double median_half_width_ns = 0;
  uint64_t unsynced_samples = 0;
};

struct SeriesPoint {
  double t_s = 0;
  double rms_ns = 0;
  double max_ns = 0;
  double median_half_width_ns = 0;
  uint64_t samples = 0;  // Measurements of synchronized nodes in the bucket.
};

struct ChurnEvent {
  std::string kind;  // "kill", "rack", "partition", "master".
  double at_s = 0;
  int64_t killed = 0;
  int64_t affected = 0;  // Nodes cut off from the master by it.
  double rejoin_median_s = 0;
  double rejoin_max_s = 0;
  int64_t not_rejoined = 0;
  std::vector<double> rejoin_times_s;  // One per affected node that rejoined.
  double max_error_ns_next_120s = 0;
};

struct ClusterSimReport {
  std::vector<ErrorStats> depths;  // Depth 1, 2, ...
  ErrorStats overall;
  int max_depth = 0;
  int depth_limit = 0;  // ceil(log_f N) + 1.
  double mean_fanout = 0;  // Over nodes with children.
  int max_fanout = 0;
  int master_children = 0;
  double formation_s = 0;  // Join storm: all N join at once -> settled.
  double formation_wall_s = 0;
  uint64_t formation_messages = 0;
  uint64_t exchanges = 0;
  uint64_t lost = 0;
  uint64_t inconsistencies = 0;
  uint64_t steps = 0;
  // Traffic: probe replies the master sends per second, and bytes per
  // second on the wire (request + reply) per node (its own probes and its
  // children's), heartbeats per second the master receives.
  double master_probes_per_s = 0;
  double master_probe_bytes_per_s = 0;
  double master_heartbeats_per_s = 0;
  double node_probe_bytes_per_s = 0;
  double node_heartbeats_per_s = 0;
  uint64_t membership_messages = 0;
  uint64_t invariant_checks = 0;       // Ticks checked (incrementally) ...
  uint64_t full_invariant_checks = 0;  // ... and full checks among them.
  std::vector<ChurnEvent> events;
  // Master takeover: from the master's death to one live master (s), who
  // (an id), and what it serves at the end of the run against the old
  // master's clock, with its bound (ns).
  double takeover_s = -1;
  std::string new_master;
  double new_master_error_ns_end = 0;
  double new_master_bound_ns_end = 0;
  std::vector<SeriesPoint> series;
  double wall_s = 0;
  double node_seconds_per_wall_second = 0;
  double bytes_per_node = 0;  // Peak resident set / nodes.
};

class ClusterSim {
 public:
  explicit ClusterSim(const ClusterSimOptions& options);
  ~ClusterSim();

  // Runs the join storm and the whole duration. Returns "" or the first
  // invariant violation (the run stops there).
  std::string Run();
  const ClusterSimReport& report() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// ceil(log_f N) + 1: the deepest a settled tree of N nodes may be.
int DepthLimit(int64_t total_nodes, int fanout);

// The report as JSON, and as text tables ending with the FIGURE lines.
std::string ReportJson(const ClusterSimOptions& options,
                       const ClusterSimReport& report);
std::string ReportText(const ClusterSimOptions& options,
                       const ClusterSimReport& report);

}  // namespace clocksync::sim

#endif  // CLOCKSYNC_TOOLS_SIMULATE_CLUSTER_CLUSTER_SIM_H_
