// hull/drift_wander.cc: see drift_wander.h.
#include "hull/drift_wander.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace clocksync::hull {
namespace {

// Each new drift difference weighs this much more than the last.
constexpr double kDecay = 0.95;
// The upper bound is the 95 % one: the normal quantile of 5 %, for the
// chi-squared quantile (the 90 % one moved the adaptive estimator's home
// on clocks that wander as the allowance says: 111 0.92 → 0.95 × the best
// fixed window).
constexpr double kBoundZ = 1.645;
// Over one difference fewer than kMinDifferences, the limit is this
// fraction of the one asked for (the warm-up of a linear clock: 94 s
// instead of 131 s with a 37.5 s shortest window).
constexpr double kTwoDifferencesFraction = 0.5;

}  // namespace

void DriftWander::Record(const TimeEstimate& estimate, int64_t span_ns,
                         int64_t window_ns, int64_t x) {
  if (estimate.state == SyncState::kUnsynced ||
      static_cast<double>(span_ns) <
          kFullWindowFraction * static_cast<double>(window_ns)) {
    return;
  }
  if (!have_drift_) {
    have_drift_ = true;
    x_ = x;
    drift_ppb_ = estimate.drift_ppb;
    return;
  }
  const int64_t elapsed = x - x_;
  if (elapsed < window_ns) return;
  const double change = estimate.drift_ppb - drift_ppb_;
  sum_ = sum_ * kDecay + change * change / (static_cast<double>(elapsed) * 1e-9);
  sum_corrected_ =
      sum_corrected_ * kDecay +
      change * change /
          (static_cast<double>(elapsed - window_ns / 3) * 1e-9);
  weight_ = weight_ * kDecay + 1;
  weight2_ = weight2_ * kDecay * kDecay + 1;
  ++count_;
  x_ = x;
  drift_ppb_ = estimate.drift_ppb;
}

double DriftWander::UpperBound() const {
  if (count_ < 2) return std::numeric_limits<double>::infinity();
  const double n = std::min<double>(count_, weight_ * weight_ / weight2_);
  // The chi-squared distribution's 5 % quantile over n (Wilson–Hilferty).
  const double c = 2 / (9 * n);
  const double q = std::pow(1 - c - kBoundZ * std::sqrt(c), 3);
  if (q <= 0) return std::numeric_limits<double>::infinity();
  return std::sqrt(sum_corrected_ / weight_ / q);
}

bool DriftWander::Negligible(double limit) const {
  if (count_ < kMinDifferences - 1) return false;
  const double l =
      count_ >= kMinDifferences ? limit : limit * kTwoDifferencesFraction;
  return sum_ / weight_ < l * l;
}

}  // namespace clocksync::hull
