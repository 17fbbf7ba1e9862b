// tools/simulate_cluster/sim_stats.h: the cluster simulator's error
// statistics: per depth and per time bucket, |error| and bound half-width
// histograms (2 % log buckets), exact integer sums of squares, maxima.
// Integer sums only, so accumulators filled by different threads merge to
// the same result in any order.

#ifndef CLOCKSYNC_TOOLS_SIMULATE_CLUSTER_SIM_STATS_H_
#define CLOCKSYNC_TOOLS_SIMULATE_CLUSTER_SIM_STATS_H_

#include <cstdint>
#include <vector>

#include "tools/simulate_cluster/cluster_sim.h"

namespace clocksync::sim {

// A histogram of non-negative values in 2 % buckets from 1 ns to ~1e10 ns.
class LogHistogram {
 public:
  static constexpr int kBuckets = 1'200;
  void Add(int64_t value);
  void Merge(const LogHistogram& other);
  uint64_t count() const { return count_; }
  // The value below which a fraction q of the samples lie (bucket middle).
  double Quantile(double q) const;

 private:
  std::vector<uint64_t> counts_ = std::vector<uint64_t>(kBuckets, 0);
  uint64_t count_ = 0;
};

struct ErrorAcc {
  unsigned __int128 sum_sq = 0;
  uint64_t n = 0;
  uint64_t covered = 0;
  uint64_t unsynced = 0;
  int64_t max_abs = 0;
  LogHistogram error;
  LogHistogram half;
  void Add(int64_t error_ns, int64_t half_ns);
  void Merge(const ErrorAcc& other);
  ErrorStats Stats(int depth) const;
};

// One thread's accumulators.
struct StatsAcc {
  static constexpr int kMaxDepth = 64;
  std::vector<ErrorAcc> depth = std::vector<ErrorAcc>(kMaxDepth);
  struct Bucket {
    unsigned __int128 sum_sq = 0;
    uint64_t n = 0;
    int64_t max_abs = 0;
    LogHistogram half;
  };
  std::vector<Bucket> series;
  int64_t bucket_ns = 10'000'000'000;
  uint64_t exchanges = 0;
  uint64_t lost = 0;
  uint64_t inconsistencies = 0;
  uint64_t steps = 0;

  void Resize(size_t buckets) { series.resize(buckets); }
  // One measurement of a node at depth `depth` at true time t_ns: error
  // against the truth and its published half-width (kUnknownBoundNs:
  // unsynced). `counted`: past the warm-up (the series takes every one).
  void Sample(int depth, int64_t t_ns, int64_t error_ns, int64_t half_ns,
              bool counted);
  void Merge(const StatsAcc& other);
};

}  // namespace clocksync::sim

#endif  // CLOCKSYNC_TOOLS_SIMULATE_CLUSTER_SIM_STATS_H_
