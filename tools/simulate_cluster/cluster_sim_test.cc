// tools/simulate_cluster/cluster_sim_test.cc: the cluster simulator on
// small cases with known answers: a linear clock at depth 1 over a
// jitter-free network is off by exactly its link's delay asymmetry; runs
// are the same for a seed, any thread count and long or short slices;
// the tree keeps its depth limit and bounds cover the truth; a rack
// failure's orphans rejoin; killed nodes restart and resume; bad options
// are named.

#include <cmath>
#include <cstdlib>

#include "gtest/gtest.h"
#include "tools/simulate_cluster/cluster_sim.h"
#include "tools/simulate_cluster/network_model.h"

namespace clocksync::sim {
namespace {

ClusterSimOptions Small(int nodes, int fanout, double duration_s) {
  ClusterSimOptions o;
  o.nodes = nodes;
  o.fanout = fanout;
  o.duration_s = duration_s;
  o.warmup_s = duration_s / 2;
  o.threads = 1;
  return o;
}

ClusterSimOptions Linear(ClusterSimOptions o) {
  o.wander_ppb = 0;
  o.sine_ppb = 0;
  o.steps_per_node_hour = 0;
  o.network.jitter_mean_ns = 0;
  o.network.congestion_probability = 0;
  o.network.tail_probability = 0;
  o.network.loss = 0;
  return o;
}

// One child of the master, a linear clock (offset, frequency), constant
// delays: every exchange has the same round trip, and the offset the
// child can infer is off by the asymmetry (forward − return) / 2 exactly.
TEST(ClusterSimTest, LinearClockAtDepthOneIsExactWithinTheAsymmetry) {
  for (int64_t asymmetry : {0, 400}) {
    ClusterSimOptions o = Linear(Small(1, 4, 200));
    o.network.asymmetry_max_ns = asymmetry;
    o.freq_max_ppm = 80;
    const NetworkModel net(o.network, 1, o.racks_per_pod);
    const int64_t expected = std::llabs(net.AsymmetryNs(1));
    ClusterSim sim(o);
    ASSERT_EQ(sim.Run(), "");
    const ClusterSimReport& r = sim.report();
    ASSERT_EQ(r.depths.size(), 1u);
    EXPECT_EQ(r.depths[0].depth, 1);
    EXPECT_GT(r.depths[0].samples, 90u);
    EXPECT_EQ(r.lost, 0u);
    // Within 3 ns of the asymmetry (rounding of the mapping and the slew
    // of the last correction), and never outside the bound.
    EXPECT_NEAR(r.depths[0].rms_ns, static_cast<double>(expected), 3) << asymmetry;
    EXPECT_LE(r.depths[0].max_ns, static_cast<double>(expected) + 3) << asymmetry;
    EXPECT_EQ(r.depths[0].coverage, 1.0);
    if (asymmetry > 0) {
      EXPECT_GT(expected, 0);
    }
  }
}

void ExpectSameStats(const ClusterSimReport& a, const ClusterSimReport& b) {
  ASSERT_EQ(a.depths.size(), b.depths.size());
  for (size_t d = 0; d < a.depths.size(); ++d) {
    EXPECT_EQ(a.depths[d].samples, b.depths[d].samples);
    EXPECT_EQ(a.depths[d].rms_ns, b.depths[d].rms_ns);
    EXPECT_EQ(a.depths[d].max_ns, b.depths[d].max_ns);
    EXPECT_EQ(a.depths[d].median_half_width_ns, b.depths[d].median_half_width_ns);
  }
  EXPECT_EQ(a.exchanges, b.exchanges);
  EXPECT_EQ(a.lost, b.lost);
  EXPECT_EQ(a.max_depth, b.max_depth);
}

TEST(ClusterSimTest, DeterministicBySeedForAnyThreadCount) {
  ClusterSimOptions o = Small(300, 4, 60);
  ClusterSim a(o);
  ASSERT_EQ(a.Run(), "");
  o.threads = 2;
  o.min_nodes_per_split = 1;  // Every depth split over both threads.
  ClusterSim b(o);
  ASSERT_EQ(b.Run(), "");
  ExpectSameStats(a.report(), b.report());
  o.seed = 2;
  ClusterSim c(o);
  ASSERT_EQ(c.Run(), "");
  EXPECT_NE(a.report().overall.rms_ns, c.report().overall.rms_ns);
}

// Long slices (a node's passes back to back while membership stands
// still) give the same run as half-interval slices throughout: each child
// reads the mapping its parent had at the instant of the exchange. With
// churn, time falls back to short slices around each event, on another
// grid, so only the quiet run is the same to the bit.
TEST(ClusterSimTest, LongSlicesGiveTheSameRun) {
  // The report of a run with `o`, with long slices or without.
  auto run = [](ClusterSimOptions o, double long_slice_s) {
    o.long_slice_s = long_slice_s;
    ClusterSim sim(o);
    EXPECT_EQ(sim.Run(), "");
    return sim.report();
  };
  ClusterSimOptions o = Small(300, 4, 90);
  ExpectSameStats(run(o, 0), run(o, 32));
  ExpectSameStats(run(o, 0), run(o, 8));
  o.probe_interval_s = 0.25;  // 32 intervals: slices of 8 s.
  ExpectSameStats(run(o, 0), run(o, 32));

  o = Small(300, 4, 150);
  o.kill_pct_per_min = 3;
  o.restart_after_s = 20;
  const ClusterSimReport e = run(o, 0);
  const ClusterSimReport f = run(o, 32);
  ASSERT_EQ(e.events.size(), f.events.size());
  for (size_t k = 0; k < e.events.size(); ++k) {
    EXPECT_EQ(e.events[k].killed, f.events[k].killed);
    EXPECT_EQ(e.events[k].not_rejoined, f.events[k].not_rejoined);
  }
  EXPECT_NEAR(f.overall.rms_ns, e.overall.rms_ns, 0.05 * e.overall.rms_ns);
  EXPECT_GE(f.overall.coverage, 0.999);
}

// 400 nodes at fan-out 4: depth within ceil(log_4 401) + 1 = 6, the bound
// covers the truth, and errors grow with depth.
TEST(ClusterSimTest, TreeDepthBoundsAndErrorGrowth) {
  ClusterSim sim(Small(400, 4, 240));
  ASSERT_EQ(sim.Run(), "");
  const ClusterSimReport& r = sim.report();
  EXPECT_EQ(r.depth_limit, 6);
  EXPECT_LE(r.max_depth, r.depth_limit);
  EXPECT_GE(r.max_depth, 4);
  EXPECT_LE(r.max_fanout, 4);
  EXPECT_EQ(r.master_children, 4);
  EXPECT_GE(r.overall.coverage, 0.999);
  ASSERT_GE(r.depths.size(), 3u);
  EXPECT_GT(r.depths.back().rms_ns, r.depths.front().rms_ns);
  EXPECT_GT(r.depths.back().median_half_width_ns, r.depths.front().median_half_width_ns);
  EXPECT_GT(r.invariant_checks, 0u);
  // The full check every 10 ticks, and once formed.
  EXPECT_GE(r.full_invariant_checks, r.invariant_checks / 10);
  EXPECT_LE(r.full_invariant_checks, r.invariant_checks / 10 + 1);
  EXPECT_GT(r.formation_s, 0);
  EXPECT_NEAR(r.master_probes_per_s, 4, 1e-9);
}

TEST(ClusterSimTest, RackFailureOrphansRejoin) {
  ClusterSimOptions o = Small(300, 4, 120);
  o.nodes_per_rack = 20;
  o.rack_failure_at_s = 60;
  ClusterSim sim(o);
  ASSERT_EQ(sim.Run(), "");
  const ClusterSimReport& r = sim.report();
  ASSERT_EQ(r.events.size(), 1u);
  const ChurnEvent& e = r.events[0];
  EXPECT_EQ(e.kind, "rack");
  EXPECT_GT(e.killed, 5);
  EXPECT_EQ(e.not_rejoined, 0);
  EXPECT_EQ(static_cast<int64_t>(e.rejoin_times_s.size()), e.affected);
  EXPECT_LT(e.rejoin_max_s, 10);
}

// Killed nodes restart as fresh processes 20 s later, rejoin and resume:
// about one exchange per live node-second (300 nodes × 150 s, less 2 × 9
// nodes × 20 s dead, less the seconds orphans spend detached). A
// restarted node's first estimates are loose (one sample: ± half a round
// trip with congestion) but within their bound.
TEST(ClusterSimTest, KilledNodesRestartAndResume) {
  ClusterSimOptions o = Small(300, 4, 150);
  o.warmup_s = 30;
  o.steps_per_node_hour = 0;
  o.kill_pct_per_min = 3;
  o.restart_after_s = 20;
  ClusterSim sim(o);
  ASSERT_EQ(sim.Run(), "");
  const ClusterSimReport& r = sim.report();
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].killed, 9);
  for (const ChurnEvent& e : r.events) EXPECT_EQ(e.not_rejoined, 0);
  EXPECT_GE(r.overall.coverage, 0.999);
  EXPECT_LT(r.overall.max_ns, 1'000'000);
  EXPECT_LE(r.exchanges, 300u * 150u - 2u * 9u * 20u + 60u);
  EXPECT_GT(r.exchanges, 300u * 150u - 2u * 9u * 20u - 600u);
}

// The master dies for good at 100 s; one of the three candidates takes
// over within a few seconds (membership's takeover_after is 1 s), every
// live node rejoins under it, global time goes on without a step (the new
// master serves its synchronized mapping) and every bound still covers the
// old master's clock.
TEST(ClusterSimTest, MasterTakeover) {
  ClusterSimOptions o = Small(200, 4, 160);
  o.steps_per_node_hour = 0;
  o.standbys = 3;
  o.master_failure_at_s = 100;
  ClusterSim sim(o);
  ASSERT_EQ(sim.Run(), "");
  const ClusterSimReport& r = sim.report();
  ASSERT_EQ(r.events.size(), 1u);
  const ChurnEvent& e = r.events[0];
  EXPECT_EQ(e.kind, "master");
  EXPECT_EQ(e.affected, 200);
  EXPECT_EQ(e.not_rejoined, 0);
  EXPECT_LT(e.rejoin_max_s, 10);
  EXPECT_GT(r.takeover_s, 0.5);
  EXPECT_LT(r.takeover_s, 5);
  EXPECT_TRUE(r.new_master == "n00001" || r.new_master == "n00002" || r.new_master == "n00003")
      << r.new_master;
  EXPECT_GT(r.master_children, 0);
  EXPECT_EQ(r.overall.coverage, 1.0);
  EXPECT_EQ(r.steps, 200u);  // Each node's first synchronization only.
  EXPECT_LT(std::fabs(r.new_master_error_ns_end), r.new_master_bound_ns_end);
  EXPECT_LT(std::fabs(r.new_master_error_ns_end), 20'000);
  o.standbys = 0;
  EXPECT_EQ(ValidateOptions(o), "master_failure_at_s: needs standbys >= 1 to take over (100)");
}

TEST(ClusterSimTest, BadOptionsAreNamed) {
  ClusterSimOptions o;
  o.fanout = 1;
  EXPECT_EQ(ValidateOptions(o), "fanout: must be in [2, 1024] (1)");
  o = ClusterSimOptions();
  o.network.loss = 1.5;
  EXPECT_EQ(ValidateOptions(o), "loss: must be in [0, 1) (1.500000)");
  o = ClusterSimOptions();
  o.membership_full_check_every = 0;
  EXPECT_EQ(ValidateOptions(o), "full_check_every: must be >= 1 (0)");
  EXPECT_EQ(ValidateOptions(ClusterSimOptions()), "");
}

}  // namespace
}  // namespace clocksync::sim
