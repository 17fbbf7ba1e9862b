// hull/online_correction.cc: the online correction and the evaluation of a
// mapping segment (see online_correction.h, correction.h).

#include "hull/online_correction.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace clocksync::hull {
namespace {

int64_t SaturateToInt64(long double value) {
  if (!(value == value)) return 0;  // NaN
  if (value >= 9.2233720368547758e18L)
    return std::numeric_limits<int64_t>::max();
  if (value <= -9.2233720368547758e18L)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

}  // namespace

int64_t MappingSegment::GlobalAtRaw(int64_t raw_ns) const {
  // dt * rate_adj in long double: |dt| up to ~1e18 keeps sub-ns precision
  // for the rates involved (|rate_adj| < 0.01).
  const __int128 dt = static_cast<__int128>(raw_ns) - anchor_raw_ns;
  const long double adjust = static_cast<long double>(dt) * rate_adj;
  const long double global = static_cast<long double>(anchor_global_ns) +
                             static_cast<long double>(dt) +
                             std::nearbyint(adjust);
  return SaturateToInt64(std::nearbyint(global));
}

OnlineCorrection::OnlineCorrection(std::vector<MappingSegment> segments,
                                   std::function<int64_t(int64_t)> raw_at_local)
    : segments_(std::move(segments)), raw_at_local_(std::move(raw_at_local)) {
  std::stable_sort(segments_.begin(), segments_.end(),
                   [](const MappingSegment& a, const MappingSegment& b) {
                     return a.from_raw_ns < b.from_raw_ns;
                   });
  for (const MappingSegment& s : segments_) {
    min_rate_ = std::min(min_rate_, 1.0 + s.rate_adj);
  }
  if (raw_at_local_) min_rate_ *= 0.999;
}

int64_t OnlineCorrection::ToGlobalNs(int64_t local_ns) const {
  const int64_t raw = raw_at_local_ ? raw_at_local_(local_ns) : local_ns;
  // The latest segment in force at or before `raw`; the first before it.
  auto it = std::upper_bound(segments_.begin(), segments_.end(), raw,
                             [](int64_t value, const MappingSegment& s) {
                               return value < s.from_raw_ns;
                             });
  if (it != segments_.begin()) --it;
  return it->GlobalAtRaw(raw);
}

}  // namespace clocksync::hull
