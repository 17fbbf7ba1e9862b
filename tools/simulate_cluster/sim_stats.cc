// tools/simulate_cluster/sim_stats.cc: the simulator's error statistics
// (sim_stats.h).

#include "tools/simulate_cluster/sim_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "shm/shm_publisher.h"

namespace clocksync::sim {
namespace {

const double kInvLogStep = 1.0 / std::log(1.02);

int BucketOf(int64_t v) {
  if (v < 1) return 0;
  const int b = 1 + static_cast<int>(std::log(static_cast<double>(v)) * kInvLogStep);
  return std::min(b, LogHistogram::kBuckets - 1);
}

double ValueOf(int b) {
  return b == 0 ? 0 : std::exp((b - 0.5) / kInvLogStep);
}

}  // namespace

void LogHistogram::Add(int64_t value) {
  ++counts_[BucketOf(value)];
  ++count_;
}

void LogHistogram::Merge(const LogHistogram& other) {
  for (int b = 0; b < kBuckets; ++b) counts_[b] += other.counts_[b];
  count_ += other.count_;
}

double LogHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  const uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    if (seen >= std::max<uint64_t>(rank, 1)) return ValueOf(b);
  }
  return ValueOf(kBuckets - 1);
}

void ErrorAcc::Add(int64_t error_ns, int64_t half_ns) {
  if (half_ns >= ShmPublisher::kUnknownBoundNs) {
    ++unsynced;
    return;
  }
  const int64_t a = std::llabs(error_ns);
  sum_sq += static_cast<unsigned __int128>(a) * static_cast<unsigned __int128>(a);
  ++n;
  if (a <= half_ns) ++covered;
  max_abs = std::max(max_abs, a);
  error.Add(a);
  half.Add(half_ns);
}

void ErrorAcc::Merge(const ErrorAcc& o) {
  sum_sq += o.sum_sq;
  n += o.n;
  covered += o.covered;
  unsynced += o.unsynced;
  max_abs = std::max(max_abs, o.max_abs);
  error.Merge(o.error);
  half.Merge(o.half);
}

ErrorStats ErrorAcc::Stats(int depth) const {
  ErrorStats s;
  s.depth = depth;
  s.samples = n;
  s.unsynced_samples = unsynced;
  if (n == 0) return s;
  s.rms_ns = std::sqrt(static_cast<double>(sum_sq) / static_cast<double>(n));
  s.p99_ns = std::min<double>(error.Quantile(0.99), static_cast<double>(max_abs));
  s.max_ns = static_cast<double>(max_abs);
  s.coverage = static_cast<double>(covered) / static_cast<double>(n);
  s.median_half_width_ns = half.Quantile(0.5);
  return s;
}

void StatsAcc::Sample(int d, int64_t t_ns, int64_t error_ns, int64_t half_ns,
                      bool counted) {
  if (counted) depth[std::clamp(d, 0, kMaxDepth - 1)].Add(error_ns, half_ns);
  if (half_ns >= ShmPublisher::kUnknownBoundNs || t_ns < 0) return;
  const size_t b = static_cast<size_t>(t_ns / bucket_ns);
  if (b >= series.size()) return;
  Bucket& k = series[b];
  const int64_t a = std::llabs(error_ns);
  k.sum_sq += static_cast<unsigned __int128>(a) * static_cast<unsigned __int128>(a);
  ++k.n;
  k.max_abs = std::max(k.max_abs, a);
  k.half.Add(half_ns);
}

void StatsAcc::Merge(const StatsAcc& o) {
  for (int d = 0; d < kMaxDepth; ++d) depth[d].Merge(o.depth[d]);
  if (series.size() < o.series.size()) series.resize(o.series.size());
  for (size_t b = 0; b < o.series.size(); ++b) {
    series[b].sum_sq += o.series[b].sum_sq;
    series[b].n += o.series[b].n;
    series[b].max_abs = std::max(series[b].max_abs, o.series[b].max_abs);
    series[b].half.Merge(o.series[b].half);
  }
  exchanges += o.exchanges;
  lost += o.lost;
  inconsistencies += o.inconsistencies;
  steps += o.steps;
}

}  // namespace clocksync::sim
