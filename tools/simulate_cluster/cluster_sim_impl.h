// tools/simulate_cluster/cluster_sim_impl.h: ClusterSim's insides, shared
// by its parts: the nodes and their exchanges (cluster_sim.cc), membership,
// churn and the run (cluster_churn.cc). Not for other users.

#ifndef CLOCKSYNC_TOOLS_SIMULATE_CLUSTER_CLUSTER_SIM_IMPL_H_
#define CLOCKSYNC_TOOLS_SIMULATE_CLUSTER_CLUSTER_SIM_IMPL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hull/sim/clock_model.h"
#include "membership/membership_sim.h"
#include "tools/simulate_cluster/cluster_sim.h"
#include "tools/simulate_cluster/sim_stats.h"

namespace clocksync::sim {

inline constexpr int64_t kSecond = 1'000'000'000;
// Mappings a node keeps for its children (Node::published); a long slice
// holds at most kLongSliceIntervals probe intervals, so at most
// kLongSliceIntervals / 0.9 + 1 passes of a node, plus the mapping in force
// when it began.
inline constexpr int kMappingHistory = 40;
inline constexpr int kLongSliceIntervals = 32;
static_assert(kLongSliceIntervals * 10 / 9 + 3 <= kMappingHistory);
// The longest slice (ClusterSimOptions::long_slice_s at most): a node's
// modeled clock keeps its walk this far back (and 2 s more) for the
// children that read it at their instants in the slice.
inline constexpr int64_t kMaxLongSliceNs = 32 * kSecond;

class ClusterSim::Impl {
 public:
  explicit Impl(const ClusterSimOptions& o);
  std::string Run();
  ClusterSimReport report;

 private:
  struct Node {
    std::unique_ptr<hull::ModeledClock> clock;
    std::unique_ptr<hull::Estimator> estimator;
    MappingSlewer slewer;
    // The mappings this node published, a ring whose newest entry is
    // published[(published_count - 1) % kMappingHistory]: its children's
    // exchanges of the current slice read the one in force at their
    // instant (a long slice holds several of this node's passes).
    std::array<Mapping, kMappingHistory> published;
    uint32_t published_count = 0;
    int64_t next_event_ns = 0;
    int64_t last_reply_ns = 0;
    uint64_t inconsistencies_seen = 0;
    uint64_t rng = 0;
    int32_t parent = -1;
    int32_t depth = 0;
    bool alive = true;
  };
  // What a node serves at true time t: global time and its bound.
  struct Served {
    int64_t global_ns;
    int64_t half_ns;
  };

  void InitNode(int i, bool fresh_process);
  Served ServedAt(int i, int64_t t_ns) const;
  // The same for a node that is not node 0, from its clock's reading r.
  Served ServedAtRaw(const Node& n, int64_t r) const;
  void Event(int i, int64_t t_ns, StatsAcc& acc);
  void ProcessSlice(int64_t end_ns);
  void Publish(Node& n, const Mapping& m);
  std::string FormTree();
  std::string StepMembership(int64_t until_ns);
  std::string CheckMembershipStep();
  void RefreshTopology();
  void StartEvent(const std::string& kind, const std::vector<int>& killed,
                  int cut_pod, int64_t t_ns, bool restart = true);
  void FollowMaster(int64_t t_ns);
  void TrackRejoins(int64_t t_ns);
  bool ReachesMaster(int i) const;
  std::string CheckDepth() const;
  // The report's totals from the merged accumulators.
  void Finish(const StatsAcc& acc, double wall_s);

  ClusterSimOptions o_;
  int64_t interval_ns_;
  hull::AdaptiveConfig estimator_config_;
  NetworkModel net_;
  std::unique_ptr<MembershipSim> ms_;
  std::vector<std::string> ids_;
  std::vector<Node> nodes_;
  std::vector<std::vector<int>> groups_;  // [0]: detached; [d]: depth d.
  std::vector<StatsAcc> accs_;
  bool membership_active_ = false;
  int64_t membership_offset_ns_ = 0;  // cluster time − membership time.
  int64_t membership_ticks_ = 0;
  struct Tracked {
    size_t event;
    int node;
    int64_t from_ns;
    bool done = false;
  };
  std::vector<Tracked> tracked_;
  int master_ = 0;  // The live master's index (0 until a takeover).
  int64_t master_lost_at_ns_ = -1;
  std::vector<std::pair<int64_t, int>> restarts_;  // (at, node).
  uint64_t heartbeat_messages_ = 0;
};


}  // namespace clocksync::sim

#endif  // CLOCKSYNC_TOOLS_SIMULATE_CLUSTER_CLUSTER_SIM_IMPL_H_
