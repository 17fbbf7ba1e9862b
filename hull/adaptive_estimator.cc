// hull/adaptive_estimator.cc: AdaptiveWindowEstimator (see adaptive_estimator.h).

#include "hull/adaptive_estimator.h"

#include <algorithm>
#include <cmath>

namespace clocksync::hull {
namespace {

constexpr double kShorterWindowMargin = 0.85;

}  // namespace

AdaptiveWindowEstimator::AdaptiveWindowEstimator(const AdaptiveConfig& config)
    : config_(config), scores_(config.levels, 0.0) {
  for (int k = 0; k < config.levels; ++k) {
    EstimatorConfig c = config.base;
    c.window_ns = config.base.window_ns >> k;
    levels_.push_back(std::make_unique<TwoHullEstimator>(c));
  }
}

int64_t AdaptiveWindowEstimator::selected_window_ns() const {
  return levels_[selected_]->config().window_ns;
}

AddResult AdaptiveWindowEstimator::Add(const ProbeSample& s) {
  // Score each level's prediction of this sample before it learns from it.
  const int64_t mid_x = s.t1_ns + (s.t4_ns - s.t1_ns) / 2;
  // Negative round trips (within the sample's widening) count as 0.
  const double round_trip = std::max(
      0.0, static_cast<double>(s.t4_ns - s.t1_ns) -
               static_cast<double>(s.t3_ns - s.t2_ns));
  const int64_t min_round_trip = levels_[0]->stats().min_round_trip_ns;
  bool all_synced = true;
  std::vector<TimeEstimate> predictions(levels_.size());
  for (size_t k = 0; k < levels_.size(); ++k) {
    predictions[k] = levels_[k]->Estimate(mid_x);
    all_synced = all_synced && predictions[k].state != SyncState::kUnsynced;
  }
  if (all_synced && s.t4_ns > s.t1_ns && levels_[0]->stats().accepted > 0) {
    // Midpoint offset of the sample, relative to level 0's estimate to keep
    // the arithmetic small: residual_k = midpoint − estimate_k.
    const __int128 twice_midpoint = static_cast<__int128>(s.t2_ns) - s.t1_ns +
                                    (static_cast<__int128>(s.t3_ns) - s.t4_ns);
    const double excess = round_trip - static_cast<double>(min_round_trip);
    const double c = 0.02 * static_cast<double>(min_round_trip) + 1.0;
    const double weight = 1.0 / (excess * excess + c * c);
    const double dt = scored_once_ ? static_cast<double>(mid_x - last_score_x_) : 0;
    const double decay =
        std::exp(-std::max(0.0, dt) / static_cast<double>(config_.score_time_constant_ns));
    score_weight_ = score_weight_ * decay + weight;
    for (size_t k = 0; k < levels_.size(); ++k) {
      const double residual =
          static_cast<double>(twice_midpoint -
                              2 * static_cast<__int128>(predictions[k].offset_ns)) /
          2;
      scores_[k] = scores_[k] * decay + weight * residual * residual;
    }
    last_score_x_ = mid_x;
    scored_once_ = true;
    // A shorter window must predict clearly better than the longer one it
    // replaces (its score below kShorterWindowMargin times the other's):
    // shorter windows are noisier, and a lucky run should not win.
    int best = 0;
    for (size_t k = 1; k < levels_.size(); ++k) {
      if (scores_[k] < kShorterWindowMargin * scores_[best]) {
        best = static_cast<int>(k);
      }
    }
    selected_ = best;
  }
  AddResult result = AddResult::kAccepted;
  for (size_t k = 0; k < levels_.size(); ++k) {
    const AddResult r = levels_[k]->Add(s);
    if (k == 0) result = r;
  }
  // Until scores exist, answer from the longest window that is synced.
  if (!scored_once_) {
    selected_ = 0;
  }
  return result;
}

TimeEstimate AdaptiveWindowEstimator::Estimate(int64_t local_ns) const {
  return levels_[selected_]->Estimate(local_ns);
}

}  // namespace clocksync::hull
