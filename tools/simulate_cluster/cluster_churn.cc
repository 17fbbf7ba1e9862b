// tools/simulate_cluster/cluster_churn.cc: the cluster simulator's run:
// the join storm, the membership simulator stepped in lockstep with the
// clocks while the tree changes (its invariants checked at every step),
// churn (kills, restarts, a rack failure, a partition) and rejoin times,
// and the report's totals (cluster_sim.h).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>

#include "tools/simulate_cluster/cluster_sim_impl.h"

namespace clocksync::sim {
namespace {

int IndexOf(const std::string& id) { return std::atoi(id.c_str() + 1); }

double PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) * 1024;
  }
  return 0;
}

}  // namespace

int DepthLimit(int64_t total_nodes, int fanout) {
  // ceil(log_f N) + 1, in integers: the smallest k with f^k >= N.
  int k = 0;
  for (long double p = 1; p < static_cast<long double>(total_nodes); p *= fanout) ++k;
  return k + 1;
}

bool ClusterSim::Impl::ReachesMaster(int i) const {
  for (int hops = 0; hops <= static_cast<int>(nodes_.size()); ++hops) {
    if (i == master_) return nodes_[i].alive;
    if (!nodes_[i].alive || nodes_[i].parent < 0) return false;
    i = nodes_[i].parent;
  }
  return false;
}

void ClusterSim::Impl::RefreshTopology() {
  const int n = static_cast<int>(nodes_.size());
  for (int i = 1; i < n; ++i) {
    Node& node = nodes_[i];
    node.parent = -1;
    if (!node.alive) continue;
    const Membership& m = ms_->node(ids_[i]);
    if (m.state() == MembershipState::kAttached && m.parent()) {
      const std::string& pid = m.parent()->node_id;
      if (!pid.empty()) node.parent = IndexOf(pid);
    }
  }
  // Depth along real parents, so that a parent is processed before its
  // children; a detached node is a root (group 0) with its subtree below.
  auto parent_of = [&](int j) {
    const int p = nodes_[j].parent;
    return p >= 0 && nodes_[p].alive ? p : -1;
  };
  std::vector<int32_t> depth(n, -1);
  depth[0] = 0;
  std::vector<int> chain;
  for (int i = 1; i < n; ++i) {
    if (depth[i] >= 0 || !nodes_[i].alive) continue;
    chain.clear();
    int j = i;
    while (j >= 0 && depth[j] < 0 && static_cast<int>(chain.size()) < n) {
      chain.push_back(j);
      j = parent_of(j);
    }
    int32_t d = j >= 0 ? depth[j] : -1;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) depth[*it] = ++d;
  }
  groups_.assign(1, {});
  for (int i = 1; i < n; ++i) {
    if (!nodes_[i].alive) continue;
    const int32_t d = std::min<int32_t>(depth[i], StatsAcc::kMaxDepth - 1);
    nodes_[i].depth = d;
    if (static_cast<int>(groups_.size()) <= d) groups_.resize(d + 1);
    groups_[d].push_back(i);
  }
}

std::string ClusterSim::Impl::CheckDepth() const {
  const int limit = DepthLimit(ms_->live_count(), o_.fanout);
  const int depth = ms_->MaxDepth();
  if (depth > limit) {
    return "depth " + std::to_string(depth) + " > ceil(log_" + std::to_string(o_.fanout) +
           " " + std::to_string(ms_->live_count()) + ") + 1 = " + std::to_string(limit);
  }
  return "";
}

// After a membership tick: the incremental invariant check, and the full
// one every membership_full_check_every ticks.
std::string ClusterSim::Impl::CheckMembershipStep() {
  ++report.invariant_checks;
  const int every = o_.membership_full_check_every;
  const bool full = every <= 1 || report.invariant_checks % every == 0;
  if (std::string e = ms_->CheckSafetyIncremental(); !e.empty()) return e;
  if (!full) return "";
  ++report.full_invariant_checks;
  return ms_->CheckSafety();
}

// Membership ticks up to cluster time `until_ns`, checked after each;
// refreshes the topology and ends the active phase once settled.
std::string ClusterSim::Impl::StepMembership(int64_t until_ns) {
  bool ticked = false;
  while (ms_->now_ns() + membership_offset_ns_ + o_.membership_tick_ns <= until_ns) {
    ms_->Tick();
    ++membership_ticks_;
    ticked = true;
    if (std::string e = CheckMembershipStep(); !e.empty()) {
      return "membership invariant at t=" + std::to_string(until_ns / 1e9) + " s: " + e;
    }
  }
  if (!ticked) return "";
  RefreshTopology();
  FollowMaster(until_ns);
  TrackRejoins(until_ns);
  const bool restarts_pending =
      std::any_of(restarts_.begin(), restarts_.end(),
                  [&](const auto& r) { return r.first <= until_ns; });
  if (!restarts_pending && ms_->CheckConverged().empty()) {
    membership_active_ = false;
    ++report.full_invariant_checks;
    if (std::string e = ms_->CheckSafety(); !e.empty()) return "settled: " + e;
    if (std::string e = CheckDepth(); !e.empty()) return "after settling: " + e;
  }
  return "";
}

// After a takeover: the one live master membership shows is the root
// whose mapping children read (it serves its own, no longer the truth).
void ClusterSim::Impl::FollowMaster(int64_t t_ns) {
  if (master_lost_at_ns_ < 0) return;
  const std::string id = ms_->CurrentMaster();
  if (id.empty() || id == ids_[master_]) return;
  master_ = IndexOf(id);
  if (report.takeover_s < 0) {
    report.takeover_s = (t_ns - master_lost_at_ns_) / 1e9;
    report.new_master = id;
  }
}

std::string ClusterSim::Impl::FormTree() {
  const auto start = std::chrono::steady_clock::now();
  for (int64_t tick = 0; tick < o_.max_settle_ticks; ++tick) {
    ms_->Tick();
    if (std::string e = CheckMembershipStep(); !e.empty()) {
      return "membership invariant during the join storm: " + e;
    }
    if (tick % 10 == 9 && ms_->CheckConverged().empty()) {
      ++report.full_invariant_checks;
      if (std::string e = ms_->CheckSafety(); !e.empty()) {
        return "membership invariant once the tree formed: " + e;
      }
      report.formation_s = ms_->now_ns() / 1e9;
      report.formation_messages = ms_->stats().messages;
      report.formation_wall_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      membership_offset_ns_ = -ms_->now_ns();  // Cluster time starts at 0 now.
      RefreshTopology();
      return CheckDepth();
    }
  }
  return "the tree did not settle within " + std::to_string(o_.max_settle_ticks) +
         " membership ticks: " + ms_->CheckConverged();
}

void ClusterSim::Impl::StartEvent(const std::string& kind, const std::vector<int>& killed,
                                  int cut_pod, int64_t t_ns, bool restart) {
  ChurnEvent e;
  e.kind = kind;
  e.at_s = t_ns / 1e9;
  e.killed = static_cast<int64_t>(killed.size());
  const size_t index = report.events.size();
  std::vector<std::string> dead_ids;
  for (int k : killed) {
    nodes_[k].alive = false;
    dead_ids.push_back(ids_[k]);
    if (restart) restarts_.push_back({t_ns + static_cast<int64_t>(o_.restart_after_s * 1e9), k});
  }
  if (!dead_ids.empty()) ms_->Kill(dead_ids);
  int64_t from = t_ns;
  std::set<std::string> side;
  if (cut_pod >= 0) {
    const int64_t until = t_ns + static_cast<int64_t>(o_.partition_s * 1e9);
    net_.CutPod(cut_pod, until);
    for (size_t i = 1; i < nodes_.size(); ++i) {
      if (net_.pod_of(static_cast<int>(i)) == cut_pod) side.insert(ids_[i]);
    }
    ms_->Partition(side, until - membership_offset_ns_);
    from = until;  // Rejoins count from the end of the partition.
  }
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const int n = static_cast<int>(i);
    if (!nodes_[n].alive) continue;
    const bool cut = cut_pod >= 0 && net_.pod_of(n) == cut_pod;
    if (cut || !ReachesMaster(n)) {
      ++e.affected;
      tracked_.push_back({index, n, from});
    }
  }
  report.events.push_back(e);
  membership_active_ = true;
}

void ClusterSim::Impl::TrackRejoins(int64_t t_ns) {
  for (Tracked& tr : tracked_) {
    if (tr.done || t_ns < tr.from_ns) continue;
    if (!nodes_[tr.node].alive) {
      tr.done = true;  // Killed meanwhile: not counted.
      continue;
    }
    // Rejoined: attached on a chain up to the master (or master itself).
    if (ReachesMaster(tr.node) &&
        (tr.node == master_ ||
         ms_->node(ids_[tr.node]).state() == MembershipState::kAttached)) {
      tr.done = true;
      report.events[tr.event].rejoin_times_s.push_back((t_ns - tr.from_ns) / 1e9);
    }
  }
}

std::string ClusterSim::Impl::Run() {
  const auto start = std::chrono::steady_clock::now();
  if (std::string e = FormTree(); !e.empty()) return e;
  const int64_t duration = static_cast<int64_t>(o_.duration_s * 1e9);
  // Short slices while membership runs (it steps in lockstep with the
  // clocks); long ones while it stands still and no churn event is due:
  // each node then runs several passes in a row with its state in cache.
  const int64_t short_slice = std::min<int64_t>(interval_ns_ * 45 / 100, kSecond / 2);
  const int64_t long_slice = std::max(
      short_slice, std::min<int64_t>(static_cast<int64_t>(o_.long_slice_s * 1e9),
                                     kLongSliceIntervals * interval_ns_));
  const int64_t minute = 60 * kSecond;
  int64_t next_kill = o_.kill_pct_per_min > 0 ? minute : -1;
  const int64_t rack_at = o_.rack_failure_at_s >= 0 ? static_cast<int64_t>(o_.rack_failure_at_s * 1e9) : -1;
  const int64_t cut_at = o_.partition_at_s >= 0 ? static_cast<int64_t>(o_.partition_at_s * 1e9) : -1;
  const int64_t fail_at =
      o_.master_failure_at_s >= 0 ? static_cast<int64_t>(o_.master_failure_at_s * 1e9) : -1;
  uint64_t churn_rng = o_.seed ^ 0xc0ffee;
  // Whether something is due in [t, until): then the slice stays short, so
  // that the event starts in the slice that holds it, as with short ones.
  auto due_before = [&](int64_t t, int64_t until) {
    auto in = [&](int64_t at) { return at >= t && at < until; };
    if ((next_kill >= 0 && next_kill < until) || in(rack_at) || in(cut_at) || in(fail_at)) {
      return true;
    }
    for (const auto& r : restarts_) {
      if (r.first < until) return true;
    }
    return false;
  };
  int64_t end = 0;
  for (int64_t t = 0; t < duration; t = end) {
    const bool quiet = !membership_active_ && !due_before(t, t + long_slice);
    end = std::min(t + (quiet ? long_slice : short_slice), duration);
    // Restarts due: fresh processes on the same clocks.
    for (auto it = restarts_.begin(); it != restarts_.end();) {
      if (it->first < end) {
        InitNode(it->second, true);
        // The new process's first pass comes within an interval of its start.
        Node& n = nodes_[it->second];
        n.next_event_ns =
            it->first + static_cast<int64_t>(NextUniform(n.rng) * static_cast<double>(interval_ns_));
        ms_->Restart(ids_[it->second]);
        membership_active_ = true;
        it = restarts_.erase(it);
      } else {
        ++it;
      }
    }
    if (next_kill >= 0 && next_kill < end) {
      std::vector<int> live;
      for (size_t i = 1; i < nodes_.size(); ++i) {
        if (nodes_[i].alive) live.push_back(static_cast<int>(i));
      }
      const size_t k = static_cast<size_t>(std::llround(live.size() * o_.kill_pct_per_min / 100));
      std::vector<int> killed;
      for (size_t j = 0; j < k && !live.empty(); ++j) {
        const size_t pick = NextRandom(churn_rng) % live.size();
        killed.push_back(live[pick]);
        live[pick] = live.back();
        live.pop_back();
      }
      StartEvent("kill", killed, -1, next_kill);
      next_kill += minute;
    }
    if (rack_at >= t && rack_at < end) {
      // The first rack of the last pod that is not the master's.
      const int rack = net_.rack_of(static_cast<int>(nodes_.size()) - 1);
      std::vector<int> killed;
      for (size_t i = 1; i < nodes_.size(); ++i) {
        if (nodes_[i].alive && net_.rack_of(static_cast<int>(i)) == rack && rack != net_.rack_of(0)) {
          killed.push_back(static_cast<int>(i));
        }
      }
      StartEvent("rack", killed, -1, rack_at);
    }
    if (cut_at >= t && cut_at < end) {
      StartEvent("partition", {}, net_.pods() > 1 ? net_.pods() - 1 : -1, cut_at);
    }
    if (fail_at >= t && fail_at < end) {
      // The master dies for good: every node is cut off until the tree
      // has re-formed under the new master.
      master_lost_at_ns_ = fail_at;
      StartEvent("master", {0}, -1, fail_at, /*restart=*/false);
    }
    if (membership_active_) {
      if (std::string e = StepMembership(end); !e.empty()) return e;
    } else {
      membership_offset_ns_ += end - t;  // Membership stands still.
    }
    ProcessSlice(end);
  }
  // Totals.
  for (int k = 1; k < o_.threads; ++k) accs_[0].Merge(accs_[k]);
  const StatsAcc& acc = accs_[0];
  Finish(acc, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  report.bytes_per_node = PeakRssBytes() / static_cast<double>(o_.nodes);
  return "";
}

ClusterSim::ClusterSim(const ClusterSimOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}
ClusterSim::~ClusterSim() = default;
std::string ClusterSim::Run() { return impl_->Run(); }
const ClusterSimReport& ClusterSim::report() const { return impl_->report; }

}  // namespace clocksync::sim
