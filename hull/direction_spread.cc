// hull/direction_spread.cc: DirectionSpread (see direction_spread.h).

#include "hull/direction_spread.h"

#include <algorithm>
#include <cmath>

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

double DirectionSpread::QuartileHeight(const std::array<double, kSize>& y) const {
  const int n = count_;
  const int oldest = n < kSize ? 0 : next_;
  std::array<double, kSize> xs;
  std::array<double, kSize> ys;
  for (int i = 0; i < n; ++i) {
    const int at = (oldest + i) % kSize;
    xs[i] = static_cast<double>(x_[at] - x_[oldest]);
    ys[i] = y[at];
  }
  // The lower hull (Andrew's monotone chain; x never decreases).
  std::array<int, kSize> hull;
  int h = 0;
  for (int i = 0; i < n; ++i) {
    while (h >= 2) {
      const int a = hull[h - 2];
      const int b = hull[h - 1];
      // b on or above the chord from a to i: not on the lower hull.
      if ((xs[b] - xs[a]) * (ys[i] - ys[a]) -
              (ys[b] - ys[a]) * (xs[i] - xs[a]) >
          0) {
        break;
      }
      --h;
    }
    hull[h++] = i;
  }
  // Each point's height above the hull's edge beneath it.
  std::array<double, kSize> heights;
  int edge = 0;
  for (int i = 0; i < n; ++i) {
    while (edge + 2 < h && xs[hull[edge + 1]] <= xs[i]) ++edge;
    const int a = hull[edge];
    const int b = hull[std::min(edge + 1, h - 1)];
    const double t = xs[b] > xs[a] ? (xs[i] - xs[a]) / (xs[b] - xs[a]) : 0;
    heights[i] = ys[i] - (ys[a] + t * (ys[b] - ys[a]));
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
