// tools/simulate_cluster/cluster_report.cc: the cluster simulator's
// report: totals from the accumulators (traffic, fan-out, churn), JSON,
// and the text tables ending with the FIGURE lines (cluster_sim.h).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "probe/packet.h"
#include "tools/simulate_cluster/cluster_sim_impl.h"

namespace clocksync::sim {
namespace {

// A probe datagram on the wire: payload, UDP, IPv4, Ethernet framing
// (header, FCS, preamble, gap).
constexpr double kWireBytes = probe::kProbePacketSize + 8 + 20 + 38;

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string StatsJson(const ErrorStats& s) {
  return "{\"depth\": " + std::to_string(s.depth) + ", \"nodes\": " + std::to_string(s.nodes) +
         ", \"samples\": " + std::to_string(s.samples) + ", \"rms_ns\": " + Fmt("%.1f", s.rms_ns) +
         ", \"p99_ns\": " + Fmt("%.1f", s.p99_ns) + ", \"max_ns\": " + Fmt("%.0f", s.max_ns) +
         ", \"coverage\": " + Fmt("%.6f", s.coverage) +
         ", \"median_half_width_ns\": " + Fmt("%.1f", s.median_half_width_ns) +
         ", \"unsynced_samples\": " + std::to_string(s.unsynced_samples) + "}";
}

std::string StatsRow(const std::string& label, const ErrorStats& s) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "| %s | %lld | %.0f | %.0f | %.0f | %.6f | %.0f |\n",
                label.c_str(), static_cast<long long>(s.nodes), s.rms_ns, s.p99_ns,
                s.max_ns, s.coverage, s.median_half_width_ns);
  return buf;
}

}  // namespace

void ClusterSim::Impl::Finish(const StatsAcc& acc, double wall_s) {
  ErrorAcc all;
  report.depths.clear();
  for (int d = 0; d < StatsAcc::kMaxDepth; ++d) {
    const int64_t nodes = d < static_cast<int>(groups_.size())
                              ? static_cast<int64_t>(groups_[d].size()) : 0;
    all.Merge(acc.depth[d]);
    if (d == 0 || (acc.depth[d].n == 0 && nodes == 0)) continue;
    ErrorStats s = acc.depth[d].Stats(d);
    s.nodes = nodes;
    report.depths.push_back(s);
  }
  report.overall = all.Stats(-1);
  report.overall.nodes = o_.nodes;
  report.max_depth = ms_->MaxDepth();
  report.depth_limit = DepthLimit(static_cast<int64_t>(ms_->live_count()), o_.fanout);
  std::vector<int> children(nodes_.size(), 0);
  for (size_t i = 1; i < nodes_.size(); ++i) {
    if (nodes_[i].alive && nodes_[i].parent >= 0) ++children[nodes_[i].parent];
  }
  int64_t parents = 0, sum = 0;
  for (int c : children) {
    if (c > 0) {
      ++parents;
      sum += c;
    }
    report.max_fanout = std::max(report.max_fanout, c);
  }
  report.mean_fanout = parents > 0 ? static_cast<double>(sum) / parents : 0;
  report.master_children = children[master_];
  report.exchanges = acc.exchanges;
  report.lost = acc.lost;
  report.inconsistencies = acc.inconsistencies;
  report.steps = acc.steps;
  const double p = o_.probe_interval_s;
  const double hb = o_.heartbeat_interval_ns / 1e9;
  report.master_probes_per_s = children[master_] / p;
  report.master_probe_bytes_per_s = children[master_] / p * 2 * kWireBytes;
  report.master_heartbeats_per_s = children[master_] / hb;
  if (master_ != 0) {
    const int64_t end = static_cast<int64_t>(o_.duration_s * 1e9);
    const Served s = ServedAt(master_, end);
    report.new_master_error_ns_end = static_cast<double>(s.global_ns - end);
    report.new_master_bound_ns_end = static_cast<double>(s.half_ns);
  }
  report.node_probe_bytes_per_s =
      2.0 * static_cast<double>(acc.exchanges) * 2 * kWireBytes / (o_.nodes * o_.duration_s);
  report.node_heartbeats_per_s = 2 / hb;
  report.membership_messages = ms_->stats().messages;
  for (ChurnEvent& e : report.events) {
    std::vector<double>& r = e.rejoin_times_s;
    std::sort(r.begin(), r.end());
    if (!r.empty()) {
      e.rejoin_median_s = r[r.size() / 2];
      e.rejoin_max_s = r.back();
    }
    e.not_rejoined = 0;
    const int64_t from = static_cast<int64_t>(e.at_s / o_.series_bucket_s);
    for (int64_t b = from; b < from + static_cast<int64_t>(std::ceil(120 / o_.series_bucket_s)) &&
                           b < static_cast<int64_t>(acc.series.size()); ++b) {
      e.max_error_ns_next_120s = std::max<double>(e.max_error_ns_next_120s, acc.series[b].max_abs);
    }
  }
  for (const Tracked& t : tracked_) {
    if (!t.done) ++report.events[t.event].not_rejoined;
  }
  report.series.clear();
  for (size_t b = 0; b < acc.series.size(); ++b) {
    const StatsAcc::Bucket& k = acc.series[b];
    if (k.n == 0) continue;
    SeriesPoint pt;
    pt.t_s = (b + 0.5) * o_.series_bucket_s;
    pt.rms_ns = std::sqrt(static_cast<double>(k.sum_sq) / static_cast<double>(k.n));
    pt.max_ns = static_cast<double>(k.max_abs);
    pt.median_half_width_ns = k.half.Quantile(0.5);
    pt.samples = k.n;
    report.series.push_back(pt);
  }
  report.wall_s = wall_s;
  report.node_seconds_per_wall_second = o_.nodes * o_.duration_s / wall_s;
}

std::string ReportJson(const ClusterSimOptions& o, const ClusterSimReport& r) {
  std::string j = "{\n  \"options\": {\"nodes\": " + std::to_string(o.nodes) +
                  ", \"fanout\": " + std::to_string(o.fanout) +
                  ", \"duration_s\": " + Fmt("%g", o.duration_s) +
                  ", \"probe_interval_s\": " + Fmt("%g", o.probe_interval_s) +
                  ", \"warmup_s\": " + Fmt("%g", o.warmup_s) +
                  ", \"seed\": " + std::to_string(o.seed) +
                  ", \"window_s\": " + Fmt("%g", o.window_s) +
                  ", \"window_levels\": " + std::to_string(o.window_levels) +
                  ", \"threads\": " + std::to_string(o.threads) + "},\n";
  j += "  \"overall\": " + StatsJson(r.overall) + ",\n  \"depths\": [";
  for (size_t i = 0; i < r.depths.size(); ++i) {
    j += (i ? ",\n    " : "\n    ") + StatsJson(r.depths[i]);
  }
  j += "],\n  \"tree\": {\"max_depth\": " + std::to_string(r.max_depth) +
       ", \"depth_limit\": " + std::to_string(r.depth_limit) +
       ", \"mean_fanout\": " + Fmt("%.2f", r.mean_fanout) +
       ", \"max_fanout\": " + std::to_string(r.max_fanout) +
       ", \"master_children\": " + std::to_string(r.master_children) +
       ", \"formation_s\": " + Fmt("%.3f", r.formation_s) +
       ", \"formation_wall_s\": " + Fmt("%.3f", r.formation_wall_s) +
       ", \"formation_messages\": " + std::to_string(r.formation_messages) + "},\n";
  j += "  \"traffic\": {\"exchanges\": " + std::to_string(r.exchanges) +
       ", \"lost\": " + std::to_string(r.lost) +
       ", \"master_probes_per_s\": " + Fmt("%.1f", r.master_probes_per_s) +
       ", \"master_probe_bytes_per_s\": " + Fmt("%.0f", r.master_probe_bytes_per_s) +
       ", \"master_heartbeats_per_s\": " + Fmt("%.1f", r.master_heartbeats_per_s) +
       ", \"node_probe_bytes_per_s\": " + Fmt("%.1f", r.node_probe_bytes_per_s) +
       ", \"node_heartbeats_per_s\": " + Fmt("%.1f", r.node_heartbeats_per_s) +
       ", \"membership_messages\": " + std::to_string(r.membership_messages) + "},\n";
  j += "  \"estimators\": {\"inconsistencies\": " + std::to_string(r.inconsistencies) +
       ", \"mapping_steps\": " + std::to_string(r.steps) +
       ", \"invariant_checks\": " + std::to_string(r.invariant_checks) +
       ", \"full_invariant_checks\": " + std::to_string(r.full_invariant_checks) + "},\n";
  if (r.takeover_s >= 0) {
    j += "  \"takeover\": {\"after_s\": " + Fmt("%.3f", r.takeover_s) + ", \"new_master\": \"" +
         r.new_master + "\", \"error_ns_end\": " + Fmt("%.0f", r.new_master_error_ns_end) +
         ", \"bound_ns_end\": " + Fmt("%.0f", r.new_master_bound_ns_end) + "},\n";
  }
  j += "  \"events\": [";
  for (size_t i = 0; i < r.events.size(); ++i) {
    const ChurnEvent& e = r.events[i];
    j += std::string(i ? ",\n    " : "\n    ") + "{\"kind\": \"" + e.kind + "\", \"at_s\": " +
         Fmt("%.2f", e.at_s) + ", \"killed\": " + std::to_string(e.killed) +
         ", \"affected\": " + std::to_string(e.affected) +
         ", \"rejoin_median_s\": " + Fmt("%.3f", e.rejoin_median_s) +
         ", \"rejoin_max_s\": " + Fmt("%.3f", e.rejoin_max_s) +
         ", \"not_rejoined\": " + std::to_string(e.not_rejoined) +
         ", \"max_error_ns_next_120s\": " + Fmt("%.0f", e.max_error_ns_next_120s) + "}";
  }
  j += "],\n  \"series\": [";
  for (size_t i = 0; i < r.series.size(); ++i) {
    const SeriesPoint& p = r.series[i];
    j += std::string(i ? ", " : "") + "[" + Fmt("%.1f", p.t_s) + ", " + Fmt("%.1f", p.rms_ns) +
         ", " + Fmt("%.0f", p.max_ns) + ", " + Fmt("%.1f", p.median_half_width_ns) + ", " +
         std::to_string(p.samples) + "]";
  }
  j += "],\n  \"run\": {\"wall_s\": " + Fmt("%.2f", r.wall_s) +
       ", \"node_seconds_per_wall_second\": " + Fmt("%.0f", r.node_seconds_per_wall_second) +
       ", \"bytes_per_node\": " + Fmt("%.0f", r.bytes_per_node) + "}\n}\n";
  return j;
}

std::string ReportText(const ClusterSimOptions& o, const ClusterSimReport& r) {
  std::string t = "simulate_cluster: " + std::to_string(o.nodes) + " nodes, fan-out " +
                  std::to_string(o.fanout) + ", " + Fmt("%g", o.duration_s) + " s at " +
                  Fmt("%g", 1 / o.probe_interval_s) + " probe/s, seed " +
                  std::to_string(o.seed) + " (errors after " + Fmt("%g", o.warmup_s) + " s)\n\n";
  t += "| depth | nodes | RMS ns | p99 ns | max ns | coverage | median half-width ns |\n"
       "|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const ErrorStats& s : r.depths) t += StatsRow(std::to_string(s.depth), s);
  t += StatsRow("all", r.overall);
  t += "\ntree: depth " + std::to_string(r.max_depth) + " (limit " + std::to_string(r.depth_limit) +
       "), fan-out mean " + Fmt("%.1f", r.mean_fanout) + " max " + std::to_string(r.max_fanout) +
       ", master children " + std::to_string(r.master_children) + "; join storm settled in " +
       Fmt("%.2f", r.formation_s) + " s simulated (" + std::to_string(r.formation_messages) +
       " membership messages, " + Fmt("%.1f", r.formation_wall_s) + " s wall)\n";
  t += "traffic: master " + Fmt("%.1f", r.master_probes_per_s) + " probe replies/s (" +
       Fmt("%.0f", r.master_probe_bytes_per_s) + " B/s), " + Fmt("%.1f", r.master_heartbeats_per_s) +
       " heartbeats/s; per node " + Fmt("%.0f", r.node_probe_bytes_per_s) + " B/s of probes, " +
       Fmt("%.1f", r.node_heartbeats_per_s) + " heartbeats/s\n";
  t += "exchanges " + std::to_string(r.exchanges) + ", lost " + std::to_string(r.lost) +
       ", estimator inconsistencies " + std::to_string(r.inconsistencies) + ", mapping steps " +
       std::to_string(r.steps) + ", membership invariant checks " +
       std::to_string(r.invariant_checks) + " (" + std::to_string(r.full_invariant_checks) +
       " over every node)\n";
  if (!r.events.empty()) {
    t += "\n| event | at s | killed | cut off | rejoin median s | rejoin max s | not rejoined | max error next 120 s, ns |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const ChurnEvent& e : r.events) {
      char buf[256];
      std::snprintf(buf, sizeof(buf), "| %s | %.1f | %lld | %lld | %.2f | %.2f | %lld | %.0f |\n",
                    e.kind.c_str(), e.at_s, static_cast<long long>(e.killed),
                    static_cast<long long>(e.affected), e.rejoin_median_s, e.rejoin_max_s,
                    static_cast<long long>(e.not_rejoined), e.max_error_ns_next_120s);
      t += buf;
    }
  }
  if (r.takeover_s >= 0) {
    t += "\ntakeover: " + r.new_master + " master " + Fmt("%.2f", r.takeover_s) +
         " s after the master died; at the end it serves global time off the old master's clock by " +
         Fmt("%.0f", r.new_master_error_ns_end) + " ns (bound ±" +
         Fmt("%.0f", r.new_master_bound_ns_end) + " ns)\n";
  }
  // The deepest level of the tree at the end (a level only passed through
  // while the tree re-formed has samples but no nodes).
  double deepest = 0;
  for (const ErrorStats& d : r.depths) {
    if (d.nodes > 0) deepest = d.rms_ns;
  }
  t += "\nwall " + Fmt("%.1f", r.wall_s) + " s\n";
  t += "FIGURE sim_node_seconds_per_wall_second " + Fmt("%.0f", r.node_seconds_per_wall_second) + " 1/s\n";
  t += "FIGURE sim_bytes_per_node " + Fmt("%.0f", r.bytes_per_node) + " B\n";
  t += "FIGURE sim_rms_error_ns_deepest " + Fmt("%.1f", deepest) + " ns\n";
  return t;
}

}  // namespace clocksync::sim
