// tools/simulate_cluster/cluster_sim.cc: ClusterSim: the nodes' clocks,
// probe exchanges, estimators and slewers, the membership simulator around
// them, churn, and the statistics (cluster_sim.h).

#include "tools/simulate_cluster/cluster_sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tools/simulate_cluster/cluster_sim_impl.h"

namespace clocksync::sim {
namespace {

std::string Bad(const char* name, const char* why, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), " (%g)", value);
  return std::string(name) + ": " + why + buf;
}

}  // namespace

std::string ValidateOptions(const ClusterSimOptions& o) {
  if (o.nodes < 1 || o.nodes > 2'000'000) return Bad("nodes", "must be in [1, 2000000]", o.nodes);
  if (o.fanout < 2 || o.fanout > 1024) return Bad("fanout", "must be in [2, 1024]", o.fanout);
  if (!(o.duration_s > 0)) return Bad("duration_s", "must be > 0", o.duration_s);
  if (!(o.probe_interval_s >= 0.01 && o.probe_interval_s <= 60)) {
    return Bad("probe_interval_s", "must be in [0.01, 60]", o.probe_interval_s);
  }
  if (!(o.warmup_s >= 0)) return Bad("warmup_s", "must be >= 0", o.warmup_s);
  if (o.threads < 1 || o.threads > 64) return Bad("threads", "must be in [1, 64]", o.threads);
  if (o.membership_full_check_every < 1) {
    return Bad("full_check_every", "must be >= 1", o.membership_full_check_every);
  }
  if (!(o.long_slice_s >= 0 && o.long_slice_s * 1e9 <= kMaxLongSliceNs)) {
    return Bad("long_slice_s", "must be in [0, 32]", o.long_slice_s);
  }
  if (o.min_nodes_per_split < 1) {
    return Bad("min_nodes_per_split", "must be >= 1", o.min_nodes_per_split);
  }
  if (!(o.window_s >= 1)) return Bad("window_s", "must be >= 1", o.window_s);
  if (o.window_levels < 1 || o.window_levels > 8) {
    return Bad("window_levels", "must be in [1, 8]", o.window_levels);
  }
  if (!(o.offset_max_s >= 0 && o.offset_max_s <= 100)) {
    return Bad("offset_max_s", "must be in [0, 100]", o.offset_max_s);
  }
  if (!(o.freq_max_ppm >= 0 && o.freq_max_ppm <= 500)) {
    return Bad("freq_max_ppm", "must be in [0, 500]", o.freq_max_ppm);
  }
  if (!(o.wander_ppb >= 0)) return Bad("wander_ppb", "must be >= 0", o.wander_ppb);
  if (!(o.steps_per_node_hour >= 0)) {
    return Bad("steps_per_node_hour", "must be >= 0", o.steps_per_node_hour);
  }
  if (o.nodes_per_rack < 1) return Bad("nodes_per_rack", "must be >= 1", o.nodes_per_rack);
  if (o.racks_per_pod < 1) return Bad("racks_per_pod", "must be >= 1", o.racks_per_pod);
  if (!(o.kill_pct_per_min >= 0 && o.kill_pct_per_min <= 50)) {
    return Bad("kill_pct_per_min", "must be in [0, 50]", o.kill_pct_per_min);
  }
  if (!(o.partition_s > 0)) return Bad("partition_s", "must be > 0", o.partition_s);
  if (o.standbys < 0 || o.standbys > o.nodes || o.standbys > 200) {
    return Bad("standbys", "must be in [0, min(nodes, 200)]", o.standbys);
  }
  if (o.master_failure_at_s >= 0 && o.standbys < 1) {
    return Bad("master_failure_at_s", "needs standbys >= 1 to take over", o.master_failure_at_s);
  }
  if (!(o.series_bucket_s > 0)) return Bad("series_bucket_s", "must be > 0", o.series_bucket_s);
  if (std::string e = ValidateNetworkParams(o.network); !e.empty()) return e;
  if (const char* e = ValidateSlewConfig(o.slew); *e != '\0') return e;
  return "";
}

ClusterSim::Impl::Impl(const ClusterSimOptions& o)
    : o_(o),
      interval_ns_(static_cast<int64_t>(o.probe_interval_s * 1e9)),
      net_(o.network,
           std::max(1, (o.nodes + 1 + o.nodes_per_rack * o.racks_per_pod - 1) /
                           (o.nodes_per_rack * o.racks_per_pod)),
           o.racks_per_pod) {
  estimator_config_.base.window_ns = static_cast<int64_t>(o.window_s * 1e9);
  estimator_config_.base.wander_ppb_per_sqrt_s = o.estimator_wander_ppb;
  estimator_config_.levels = o.window_levels;
  estimator_config_.score_time_constant_ns = estimator_config_.base.window_ns;
  MembershipSimOptions mo;
  mo.seed = o.seed;
  mo.max_children = o.fanout;
  mo.interleave = true;
  mo.tick_ns = o.membership_tick_ns;
  mo.heartbeat_interval_ns = o.heartbeat_interval_ns;
  mo.lease_ns = o.lease_ns;
  mo.pods = net_.pods();
  mo.racks_per_pod = o.racks_per_pod;
  ms_ = std::make_unique<MembershipSim>(mo);
  ids_.push_back(ms_->master_id());
  nodes_.resize(o.nodes + 1);
  net_.Place(0, 0, 0);
  for (int i = 1; i <= o.nodes; ++i) {
    ids_.push_back(i <= o.standbys ? ms_->AddCandidate(201 - i) : ms_->AddNode());
    const auto [pod, rack] = ms_->LocationOf(ids_.back());
    net_.Place(i, pod, rack);
  }
  for (int i = 1; i <= o.nodes; ++i) InitNode(i, false);
  accs_.resize(o.threads);
  const size_t buckets =
      static_cast<size_t>(std::ceil(o.duration_s / o.series_bucket_s)) + 1;
  for (StatsAcc& a : accs_) {
    a.Resize(buckets);
    a.bucket_ns = static_cast<int64_t>(o.series_bucket_s * 1e9);
  }
}

void ClusterSim::Impl::InitNode(int i, bool fresh_process) {
  Node& n = nodes_[i];
  uint64_t r = o_.seed * 0x100000001b3ULL + static_cast<uint64_t>(i);
  if (!fresh_process) {
    hull::ClockModelParams p;
    p.offset_ns = static_cast<int64_t>((2 * NextUniform(r) - 1) * o_.offset_max_s * 1e9);
    p.frequency_ppm = (2 * NextUniform(r) - 1) * o_.freq_max_ppm;
    p.wander_ppb_per_sqrt_s = o_.wander_ppb;
    p.sine_amplitude_ppb = o_.sine_ppb * NextUniform(r);
    p.sine_period_s = o_.sine_ppb > 0 ? o_.sine_min_s * (1 + NextUniform(r)) : 0;
    if (o_.steps_per_node_hour > 0) {
      const double mean_gap_ns = 3600e9 / o_.steps_per_node_hour;
      for (double at = -std::log(NextUniform(r)) * mean_gap_ns;
           at < o_.duration_s * 1e9; at += -std::log(NextUniform(r)) * mean_gap_ns) {
        p.steps.push_back({static_cast<int64_t>(at),
                           NextUniform(r) < 0.5 ? -o_.step_ns : o_.step_ns});
      }
    }
    p.seed = NextRandom(r);
    n.clock = std::make_unique<hull::ModeledClock>(p);
    n.rng = NextRandom(r);
    // First events spread over one interval.
    n.next_event_ns = static_cast<int64_t>(NextUniform(r) * interval_ns_);
  }
  n.estimator = hull::MakeEstimator(estimator_config_);
  n.slewer = MappingSlewer(o_.slew);
  Mapping unknown;
  unknown.bound_at_anchor_ns = ShmPublisher::kUnknownBoundNs;
  n.published_count = 0;
  Publish(n, unknown);
  n.inconsistencies_seen = 0;
  n.last_reply_ns = 0;
  n.alive = true;
}

ClusterSim::Impl::Served ClusterSim::Impl::ServedAt(int i, int64_t t_ns) const {
  if (i == 0) return {t_ns, 0};  // The master's clock is the truth.
  const Node& n = nodes_[i];
  return ServedAtRaw(n, n.clock->LocalAt(t_ns));
}

ClusterSim::Impl::Served ClusterSim::Impl::ServedAtRaw(const Node& n, int64_t r) const {
  // The newest mapping anchored at or before r (else the oldest kept).
  const uint32_t kept = std::min<uint32_t>(n.published_count, kMappingHistory);
  uint32_t k = n.published_count - 1;
  for (uint32_t j = 1; j < kept && r < n.published[k % kMappingHistory].anchor_raw_ns; ++j) --k;
  const Mapping& m = n.published[k % kMappingHistory];
  const int64_t dt = r - m.anchor_raw_ns;
  const int64_t global =
      m.anchor_global_ns + dt + static_cast<int64_t>(std::llround(static_cast<double>(dt) * m.rate_adj));
  if (m.bound_at_anchor_ns >= ShmPublisher::kUnknownBoundNs ||
      m.state == CLOCKSYNC_STATE_UNSYNCED) {
    return {global, ShmPublisher::kUnknownBoundNs};
  }
  const double grow = std::fabs(static_cast<double>(dt)) * m.bound_growth_ppb * 1e-9;
  return {global, m.bound_at_anchor_ns + static_cast<int64_t>(std::ceil(grow))};
}

void ClusterSim::Impl::Event(int i, int64_t t, StatsAcc& acc) {
  Node& n = nodes_[i];
  n.next_event_ns =
      t + static_cast<int64_t>(interval_ns_ * (0.9 + 0.2 * NextUniform(n.rng)));
  // The error of what this node serves now, before this pass's update.
  // Its clock is read once per instant (t, and the reply's arrival).
  const int64_t local_t = n.clock->LocalAt(t);
  const Served now = i == 0 ? Served{t, 0} : ServedAtRaw(n, local_t);
  acc.Sample(n.depth, t, now.global_ns - t, now.half_ns,
             t >= static_cast<int64_t>(o_.warmup_s * 1e9));
  int64_t end = t;
  int64_t raw = local_t;  // The local clock at `end`.
  const int p = n.parent;
  if (p >= 0 && nodes_[p].alive) {
    ++acc.exchanges;
    const int64_t d1 = net_.DelayNs(i, p, i, t, n.rng);
    const int64_t d2 = d1 < 0 ? -1 : net_.DelayNs(p, i, i, t + d1 + o_.turnaround_ns, n.rng);
    if (d2 < 0) {
      ++acc.lost;
    } else {
      const int64_t t_recv = t + d1;
      const int64_t t_send = t_recv + o_.turnaround_ns;
      end = t_send + d2;
      const Served at2 = ServedAt(p, t_recv);
      const Served at3 = ServedAt(p, t_send);
      hull::ProbeSample s;
      raw = n.clock->LocalAt(end);
      s.t1_ns = local_t;
      s.t2_ns = at2.global_ns;
      s.t3_ns = at3.global_ns;
      s.t4_ns = raw;
      s.parent_bound_ns = std::max(at2.half_ns, at3.half_ns);
      if (hull::IsAccepted(n.estimator->Add(s))) n.last_reply_ns = end;
    }
  }
  // Publish, as the daemon's pass after a reply does.
  SlewTarget target = NodeSlewTarget(*n.estimator, raw, raw, raw + kSecond,
                                     raw + 10 * kSecond, static_cast<uint32_t>(n.depth));
  if (target.state != CLOCKSYNC_STATE_UNSYNCED) {
    if (i != master_ && end - n.last_reply_ns > o_.holdover_after_ns) {
      target.state = CLOCKSYNC_STATE_HOLDOVER;
    }
    const uint64_t inconsistencies = n.estimator->stats().inconsistencies;
    target.jump_detected = inconsistencies != n.inconsistencies_seen;
    acc.inconsistencies += inconsistencies - n.inconsistencies_seen;
    n.inconsistencies_seen = inconsistencies;
  }
  const Mapping m = n.slewer.Update(target);
  if (m.stepped) ++acc.steps;
  Publish(n, m);
  // Children read this clock up to the end of the slice: draw the walk
  // that far now (reads are then const), and forget what nobody will ask
  // for (a slice is at most kMaxLongSliceNs).
  n.clock->DrawUntil(t + 3 * interval_ns_);
  n.clock->ForgetBefore(t - kMaxLongSliceNs - 2 * kSecond);
}

void ClusterSim::Impl::Publish(Node& n, const Mapping& m) {
  n.published[n.published_count % kMappingHistory] = m;
  ++n.published_count;
}

void ClusterSim::Impl::ProcessSlice(int64_t end_ns) {
  for (const std::vector<int>& group : groups_) {
    const int threads =
        static_cast<int>(group.size()) >= o_.min_nodes_per_split ? o_.threads : 1;
    auto work = [&](int k) {
      const size_t from = group.size() * k / threads;
      const size_t to = group.size() * (k + 1) / threads;
      for (size_t j = from; j < to; ++j) {
        const int i = group[j];
        while (nodes_[i].alive && nodes_[i].next_event_ns < end_ns) {
          Event(i, nodes_[i].next_event_ns, accs_[k]);
        }
      }
    };
    std::vector<std::thread> pool;
    for (int k = 1; k < threads; ++k) pool.emplace_back(work, k);
    work(0);
    for (std::thread& th : pool) th.join();
  }
}

}  // namespace clocksync::sim
