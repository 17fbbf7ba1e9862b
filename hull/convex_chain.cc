// hull/convex_chain.cc: see convex_chain.h.
#include "hull/convex_chain.h"

#include <algorithm>
#include <limits>

namespace clocksync::hull {

void ConvexChain::Add(double t, double y) {
  while (points_.size() >= 2) {
    const auto& [t0, y0] = points_[points_.size() - 2];
    const auto& [t1, y1] = points_.back();
    // > 0: (t, y) lies left of the line through the last two points.
    const double cross = (t1 - t0) * (y - y0) - (y1 - y0) * (t - t0);
    if (lower_ ? cross > 0 : cross < 0) break;
    points_.pop_back();
  }
  points_.emplace_back(t, y);
}

double ConvexChain::Extreme(double slope) const {
  double best = lower_ ? std::numeric_limits<double>::infinity()
                       : -std::numeric_limits<double>::infinity();
  for (const auto& [t, y] : points_) {
    const double v = y - slope * t;
    best = lower_ ? std::min(best, v) : std::max(best, v);
  }
  return best;
}

double ConvexChain::At(double t) const {
  if (points_.empty()) return std::numeric_limits<double>::quiet_NaN();
  // The first vertex right of t ends the edge beneath it.
  const auto right = std::upper_bound(
      points_.begin(), points_.end(), t,
      [](double v, const std::pair<double, double>& p) { return v < p.first; });
  if (right == points_.begin()) return points_.front().second;
  if (right == points_.end()) return points_.back().second;
  const auto& [t0, y0] = *(right - 1);
  const auto& [t1, y1] = *right;
  return y0 + (t - t0) / (t1 - t0) * (y1 - y0);
}

}  // namespace clocksync::hull
