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
// A shorter candidate than a home the samples find likely linear (the
// check's probability of a linear clock above kLinearHomeProbability)
// answers only when better by this many (the header, step 5; 102, seed
// 19: the 37.5 s level answered at 120-210 s, 95-110 ns off where the
// 75 s home was 20-70).
constexpr double kLinearHomeConfidenceZ = 2.5;
constexpr double kLinearHomeProbability = 0.3;

}  // namespace

bool AdaptiveWindowEstimator::LikelyLinearHome(double linear_probability) {
  const bool likely = linear_probability > kLinearHomeProbability;
  if (likely != bounds_likely_linear_) {  // the home tests' z moved
    std::fill(bound_valid_.begin() + candidates_ * candidates_,
              bound_valid_.end(), 0);
    bounds_likely_linear_ = likely;
  }
  return likely;
}

double AdaptiveWindowEstimator::PairedUpperBound(int a, int b,
                                                 Against against) const {
  // The bound moves only when a checkpoint is scored (ScoreCheckpoint
  // clears the cache); Select asks for the same pairs at every sample.
  const size_t i = static_cast<size_t>(
      ((against == Against::kCandidate ? 0 : candidates_) + a) * candidates_ +
      b);
  if (!bound_valid_[i]) {
    bound_cache_[i] = ComputePairedUpperBound(a, b, against);
    bound_valid_[i] = 1;
  }
  return bound_cache_[i];
}

double AdaptiveWindowEstimator::ComputePairedUpperBound(
    int a, int b, Against against) const {
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
      against == Against::kCandidate ? overlap_[Pair(a, b)]
                                     : home_overlap_[Pair(a, b)];
  const double effective = w * w / weight_sum2_[kind] / overlap;
  if (effective < kMinEffectiveCheckpoints) {
    return std::numeric_limits<double>::infinity();
  }
  double z = a >= blends_                      ? kExtrapolationConfidenceZ
             : against == Against::kLinearHome ? kLinearHomeConfidenceZ
                                               : kConfidenceZ;
  // Against references too noisy to resolve a wander: Student's t (see
  // ReferencesTooNoisy).
  if (ReferencesTooNoisy()) z = StudentQuantile(z, effective - 1);
  return mean + z * std::sqrt(variance / effective);
}

}  // namespace clocksync::hull
