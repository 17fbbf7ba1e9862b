// hull/adaptive_estimator_scores.cc: AdaptiveWindowEstimator's test of
// the paired scores (adaptive_estimator.h, step 3): whether one candidate
// has predicted significantly better than another.

#include "hull/adaptive_estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "hull/student_t.h"

namespace clocksync::hull {
namespace {

// A shorter level answers only while its score's upper confidence bound
// (mean + kConfidenceZ standard errors) is below the alternatives'.
constexpr double kConfidenceZ = 1.5;
// No level but the longest answers before this many effective checkpoints.
constexpr double kMinEffectiveCheckpoints = 4.0;
// An extrapolated candidate answers only when better by this many
// standard errors (with the others' 1.5, 114 1.051 × the best fixed
// window instead of 1.044, 107 0.411 × instead of 0.389: it answered
// through the flat parts of the swings too).
constexpr double kExtrapolationConfidenceZ = 2.5;

}  // namespace

double AdaptiveWindowEstimator::PairedUpperBound(int a, int b,
                                                 bool against_home) const {
  // The bound moves only when a checkpoint is scored (ScoreCheckpoint
  // clears the cache); Select asks for the same pairs at every sample.
  const size_t i = static_cast<size_t>(
      ((against_home ? candidates_ : 0) + a) * candidates_ + b);
  if (!bound_valid_[i]) {
    bound_cache_[i] = ComputePairedUpperBound(a, b, against_home);
    bound_valid_[i] = 1;
  }
  return bound_cache_[i];
}

double AdaptiveWindowEstimator::ComputePairedUpperBound(
    int a, int b, bool against_home) const {
  const int kind = PairKind(a, b);
  const double w = weight_sum_[kind];
  if (w <= 0) return std::numeric_limits<double>::infinity();
  const PairedScore& p = scores_[Pair(a, b)];
  const double mean = p.sum_d / w;
  // At least what the reference's own noise gives (header, step 3).
  const double variance =
      std::max({0.0, p.sum_d2 / w - mean * mean,
                4 * ReferenceNoiseNs2(kind) * p.sum_gap2 / w});
  // Long references overlap kLongReferenceFactor times more.
  const double overlap =
      against_home ? home_overlap_[Pair(a, b)] : overlap_[Pair(a, b)];
  const double effective = w * w / weight_sum2_[kind] / overlap;
  if (effective < kMinEffectiveCheckpoints) {
    return std::numeric_limits<double>::infinity();
  }
  double z = a >= blends_ ? kExtrapolationConfidenceZ : kConfidenceZ;
  // Against references too noisy to resolve a wander: Student's t (see
  // ReferencesTooNoisy).
  if (ReferencesTooNoisy()) z = StudentQuantile(z, effective - 1);
  return mean + z * std::sqrt(variance / effective);
}

}  // namespace clocksync::hull
