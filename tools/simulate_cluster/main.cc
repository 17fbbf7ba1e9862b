// tools/simulate_cluster/main.cc: simulate_cluster, the command line of
// the discrete-event cluster simulator (cluster_sim.h): the real
// estimator, slewer and membership code on N simulated nodes.
//
//   bazel run -c opt //tools:simulate_cluster -- --nodes=10000 --fanout=16
//       --duration_s=3600 --probe_interval_s=1 --seed=1 [--json=FILE]
//       [--kill_pct_per_min=1] [--rack_failure_at_s=600]
//       [--partition_at_s=900 --partition_s=30] [--network=datacenter]

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tools/simulate_cluster/cluster_sim.h"

ABSL_FLAG(int, nodes, 1000, "Nodes besides the master.");
ABSL_FLAG(int, fanout, 16, "Most children per node (max_children).");
ABSL_FLAG(double, duration_s, 600, "Simulated seconds after the tree formed.");
ABSL_FLAG(double, probe_interval_s, 1, "Seconds between a node's probes.");
ABSL_FLAG(double, warmup_s, 120, "Errors are counted from this time on.");
ABSL_FLAG(uint64_t, seed, 1, "Seed: the same seed gives the same run.");
ABSL_FLAG(std::string, json, "", "Write the report as JSON to this file.");
ABSL_FLAG(int, threads, 2, "Threads for the nodes of one depth.");
ABSL_FLAG(double, long_slice_s, 32,
          "While the tree stands still, advance time in slices this long (at "
          "most 32 probe intervals and 32 s; 0: half an interval): faster, "
          "same results.");
ABSL_FLAG(int, standbys, 0,
          "Master candidates among the nodes (master_priority 200, 199, ...).");
ABSL_FLAG(double, master_failure_at_s, -1,
          "Kill the master for good at this simulated second (< 0: never; "
          "needs --standbys >= 1): a candidate takes over.");
ABSL_FLAG(int, full_check_every, 10,
          "Membership: the full invariant check every this many ticks (the "
          "incremental one runs every tick; 1: full every tick).");
ABSL_FLAG(double, window_s, 300, "Estimator window, s (the daemon's default).");
ABSL_FLAG(int, window_levels, 4, "Estimator windows side by side (1: fixed).");
ABSL_FLAG(std::string, network, "datacenter",
          "datacenter (switch hierarchy, defaults of network_model.h), "
          "loopback (the README demo's one host) or chrony (chrony's default "
          "simulation model: 100 us + exp(100 us) each way).");
ABSL_FLAG(double, jitter_mean_ns, -1, "Override: mean queueing jitter, ns.");
ABSL_FLAG(double, loss, -1, "Override: packet loss probability.");
ABSL_FLAG(double, congestion_probability, -1,
          "Override: probability that a switch is congested in an epoch.");
ABSL_FLAG(double, freq_max_ppm, 100, "Clock frequency errors in +-this, ppm.");
ABSL_FLAG(double, wander_ppb, 1, "Clock random-walk wander, ppb/sqrt(s).");
ABSL_FLAG(double, sine_ppb, 20, "Largest temperature swing amplitude, ppb.");
ABSL_FLAG(double, steps_per_node_hour, 0.01, "Clock steps (1 ms) per node-hour.");
ABSL_FLAG(double, kill_pct_per_min, 0, "Churn: % of live nodes killed each minute.");
ABSL_FLAG(double, restart_after_s, 60, "Churn: killed nodes restart after this.");
ABSL_FLAG(double, rack_failure_at_s, -1, "Kill a whole rack at this time (<0: never).");
ABSL_FLAG(double, partition_at_s, -1, "Cut a pod off at this time (<0: never).");
ABSL_FLAG(double, partition_s, 30, "How long the pod stays cut off.");
ABSL_FLAG(double, series_bucket_s, 10, "Time buckets of the error series, s.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Simulates a clocksync cluster: the real estimator, slewer and membership\n"
      "  simulate_cluster --nodes=N --fanout=F --duration_s=S --probe_interval_s=P\n"
      "                   --seed=K [--json=FILE] [churn options]");
  absl::ParseCommandLine(argc, argv);
  clocksync::sim::ClusterSimOptions o;
  o.nodes = absl::GetFlag(FLAGS_nodes);
  o.fanout = absl::GetFlag(FLAGS_fanout);
  o.duration_s = absl::GetFlag(FLAGS_duration_s);
  o.probe_interval_s = absl::GetFlag(FLAGS_probe_interval_s);
  o.warmup_s = absl::GetFlag(FLAGS_warmup_s);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.membership_full_check_every = absl::GetFlag(FLAGS_full_check_every);
  o.long_slice_s = absl::GetFlag(FLAGS_long_slice_s);
  o.standbys = absl::GetFlag(FLAGS_standbys);
  o.master_failure_at_s = absl::GetFlag(FLAGS_master_failure_at_s);
  o.window_s = absl::GetFlag(FLAGS_window_s);
  o.window_levels = absl::GetFlag(FLAGS_window_levels);
  o.freq_max_ppm = absl::GetFlag(FLAGS_freq_max_ppm);
  o.wander_ppb = absl::GetFlag(FLAGS_wander_ppb);
  o.sine_ppb = absl::GetFlag(FLAGS_sine_ppb);
  o.steps_per_node_hour = absl::GetFlag(FLAGS_steps_per_node_hour);
  o.kill_pct_per_min = absl::GetFlag(FLAGS_kill_pct_per_min);
  o.restart_after_s = absl::GetFlag(FLAGS_restart_after_s);
  o.rack_failure_at_s = absl::GetFlag(FLAGS_rack_failure_at_s);
  o.partition_at_s = absl::GetFlag(FLAGS_partition_at_s);
  o.partition_s = absl::GetFlag(FLAGS_partition_s);
  o.series_bucket_s = absl::GetFlag(FLAGS_series_bucket_s);
  o.network.seed = o.seed;
  const std::string network = absl::GetFlag(FLAGS_network);
  if (network == "loopback") {
    // One host: no switches, kernel timestamps on loopback (the demo's
    // median depth-1 bound, ~600 ns, is about half its smallest round trip).
    o.network.host_ns = 250;
    o.network.hop_ns = 0;
    o.network.asymmetry_max_ns = 50;
    o.network.jitter_mean_ns = 150;
    o.network.jitter_per_hop = false;
    o.network.congestion_probability = 0;
    o.network.tail_probability = 0.002;
    o.network.tail_scale_ns = 2'000;
    o.network.loss = 0;
  } else if (network == "chrony") {
    o.network.host_ns = 50'000;
    o.network.hop_ns = 0;
    o.network.asymmetry_max_ns = 0;
    o.network.jitter_mean_ns = 100'000;
    o.network.jitter_per_hop = false;
    o.network.congestion_probability = 0;
    o.network.tail_probability = 0;
    o.network.loss = 0;
  } else if (network != "datacenter") {
    std::cerr << "simulate_cluster: --network: unknown model '" << network
              << "' (datacenter, loopback, chrony)\n";
    return 2;
  }
  if (absl::GetFlag(FLAGS_jitter_mean_ns) >= 0) o.network.jitter_mean_ns = absl::GetFlag(FLAGS_jitter_mean_ns);
  if (absl::GetFlag(FLAGS_loss) >= 0) o.network.loss = absl::GetFlag(FLAGS_loss);
  if (absl::GetFlag(FLAGS_congestion_probability) >= 0) {
    o.network.congestion_probability = absl::GetFlag(FLAGS_congestion_probability);
  }
  if (std::string e = clocksync::sim::ValidateOptions(o); !e.empty()) {
    std::cerr << "simulate_cluster: --" << e << "\n";
    return 2;
  }
  clocksync::sim::ClusterSim sim(o);
  const std::string error = sim.Run();
  if (!error.empty()) {
    std::cerr << "simulate_cluster: " << error << "\n";
    return 1;
  }
  std::cout << clocksync::sim::ReportText(o, sim.report()) << std::flush;
  const std::string json_path = absl::GetFlag(FLAGS_json);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << clocksync::sim::ReportJson(o, sim.report());
    if (!out) {
      std::cerr << "simulate_cluster: cannot write --json=" << json_path << "\n";
      return 1;
    }
  }
  return 0;
}
