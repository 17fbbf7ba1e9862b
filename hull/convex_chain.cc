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

}  // namespace clocksync::hull
