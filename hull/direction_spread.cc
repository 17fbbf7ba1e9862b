// hull/direction_spread.cc: DirectionSpread (see direction_spread.h).

#include "hull/direction_spread.h"

#include <algorithm>
#include <cmath>

#include "hull/convex_chain.h"

namespace clocksync::hull {
namespace {

// Exponential delays of mean μ: the first quartile lies −ln(0.75) μ above
// the floor.
constexpr double kQuartile = 0.25;
const double kQuartileOverMean = -std::log(1 - kQuartile);
// Exponential delays of means μf and μb: the median round trip's excess
// is 1.678 μ where both are μ; per unit of μf + μb, half that.
constexpr double kMedianRoundTripPerScale = 0.839;

}  // namespace

void DirectionSpread::Add(int64_t x, double request_offset,
                          double negated_response_offset) {
  x_[next_] = x;
  request_[next_] = request_offset;
  negated_response_[next_] = negated_response_offset;
  next_ = (next_ + 1) % kSize;
  count_ = std::min(count_ + 1, kSize);
}

double DirectionSpread::QuartileHeight(
    const std::array<double, kSize>& y) const {
  const int n = count_;
  const int oldest = n < kSize ? 0 : next_;
  ConvexChain lower(/*lower=*/true);
  for (int i = 0; i < n; ++i) {
    const int at = (oldest + i) % kSize;
    lower.Add(static_cast<double>(x_[at] - x_[oldest]), y[at]);
  }
  std::array<double, kSize> heights;
  for (int i = 0; i < n; ++i) {
    const int at = (oldest + i) % kSize;
    heights[i] = y[at] - lower.At(static_cast<double>(x_[at] - x_[oldest]));
  }
  const int k = static_cast<int>(kQuartile * n);
  std::nth_element(heights.begin(), heights.begin() + k, heights.begin() + n);
  return std::max(heights[k], 0.0);
}

double DirectionSpread::SpreadFloor(bool skip) {
  if (!skip && count_ >= kMinPoints) {
    const double scale_sum =
        (QuartileHeight(request_) + QuartileHeight(negated_response_)) /
        (kQuartileOverMean * kHullHugging);
    records_[records_next_] = kMedianRoundTripPerScale * scale_sum;
    records_next_ = (records_next_ + 1) % kFloorRecords;
    records_count_ = std::min(records_count_ + 1, kFloorRecords);
  }
  if (records_count_ == 0) return 0;
  return std::max(
      *std::min_element(records_.begin(), records_.begin() + records_count_),
      1.0);
}

}  // namespace clocksync::hull
