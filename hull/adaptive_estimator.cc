// hull/adaptive_estimator.cc: AdaptiveWindowEstimator (see
// adaptive_estimator.h for the method, estimator.h for the conventions).

#include "hull/adaptive_estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace clocksync::hull {
namespace {

// A shorter level answers only while its score's upper confidence bound
// (mean + kConfidenceZ standard errors) is below the alternatives'.
constexpr double kConfidenceZ = 2.0;
// Checkpoints overlap by half (every D/2, each reference D long): the
// effective number of independent scores is about half their count.
constexpr double kCheckpointOverlap = 2.0;
// No level but the longest answers before this many effective checkpoints.
constexpr double kMinEffectiveCheckpoints = 4.0;
// A level whose hull range is wider than this times the next longer
// level's has lost its low-delay samples (see the header).
constexpr double kEligibleRangeRatio = 4.0;
// Purity: a reference wider than median + this × (median − minimum) of the
// recent ones is left out. Needs this many widths before it judges.
constexpr double kPurityFactor = 3.0;
constexpr int kPurityMinWidths = 8;

}  // namespace

AdaptiveWindowEstimator::AdaptiveWindowEstimator(const AdaptiveConfig& config)
    : config_(config) {
  for (int k = 0; k < config.levels; ++k) {
    EstimatorConfig c = config.base;
    c.window_ns = config.base.window_ns >> k;
    levels_.push_back(std::make_unique<TwoHullEstimator>(c));
  }
  reference_ns_ = std::max<int64_t>(1, levels_.back()->config().window_ns / 2);
}

int64_t AdaptiveWindowEstimator::selected_window_ns() const {
  return levels_[selected_]->config().window_ns;
}

double AdaptiveWindowEstimator::score(int level) const {
  if (level <= 0 || weight_sum_ <= 0) return 0;
  return scores_[level].sum_d / weight_sum_;
}

double AdaptiveWindowEstimator::score_upper_bound(int level) const {
  if (level <= 0 || weight_sum_ <= 0) return 0;
  const double mean = scores_[level].sum_d / weight_sum_;
  const double variance =
      std::max(0.0, scores_[level].sum_d2 / weight_sum_ - mean * mean);
  const double effective =
      weight_sum_ * weight_sum_ / weight_sum2_ / kCheckpointOverlap;
  if (effective < kMinEffectiveCheckpoints) {
    return std::numeric_limits<double>::infinity();
  }
  return mean + kConfidenceZ * std::sqrt(variance / effective);
}

bool AdaptiveWindowEstimator::IsPure(double width_ns) {
  widths_[widths_next_] = width_ns;
  widths_next_ = (widths_next_ + 1) % static_cast<int>(widths_.size());
  widths_count_ = std::min(widths_count_ + 1, static_cast<int>(widths_.size()));
  if (widths_count_ < kPurityMinWidths) return true;
  std::array<double, 31> sorted = widths_;
  std::sort(sorted.begin(), sorted.begin() + widths_count_);
  const double minimum = sorted[0];
  const double median = sorted[widths_count_ / 2];
  return width_ns <= median + kPurityFactor * (median - minimum);
}

void AdaptiveWindowEstimator::ScoreCheckpoint(const Checkpoint& c) {
  if (!c.has_upper || !c.has_lower) return;
  if (!IsPure(c.upper - c.lower)) {
    ++checkpoints_impure_;
    return;
  }
  ++checkpoints_scored_;
  const double reference = (c.upper + c.lower) / 2;
  const double decay =
      checkpoints_scored_ == 1
          ? 0.0
          : std::exp(-static_cast<double>(std::max<int64_t>(0, c.x - last_score_x_)) /
                     static_cast<double>(config_.score_time_constant_ns));
  last_score_x_ = c.x;
  weight_sum_ = weight_sum_ * decay + 1;
  weight_sum2_ = weight_sum2_ * decay * decay + 1;
  const double e0 = c.predicted[0] - reference;
  for (size_t k = 1; k < levels_.size(); ++k) {
    const double ek = c.predicted[k] - reference;
    const double d = ek * ek - e0 * e0;
    scores_[k].sum_d = scores_[k].sum_d * decay + d;
    scores_[k].sum_d2 = scores_[k].sum_d2 * decay + d * d;
  }
}

void AdaptiveWindowEstimator::UpdateCheckpoints(const ProbeSample& s,
                                                int64_t request_y,
                                                int64_t response_y) {
  for (Checkpoint& c : pending_) {
    if (s.t1_ns >= c.x) {
      const double y = static_cast<double>(request_y) -
                       c.slope * static_cast<double>(s.t1_ns - c.x);
      c.upper = c.has_upper ? std::min(c.upper, y) : y;
      c.has_upper = true;
    }
    if (s.t4_ns > c.x) {
      const double y = static_cast<double>(response_y) -
                       c.slope * static_cast<double>(s.t4_ns - c.x);
      c.lower = c.has_lower ? std::max(c.lower, y) : y;
      c.has_lower = true;
    }
  }
  while (!pending_.empty() && s.t4_ns >= pending_.front().due_x) {
    ScoreCheckpoint(pending_.front());
    pending_.pop_front();
  }
}

void AdaptiveWindowEstimator::Select(const std::vector<TimeEstimate>& now,
                                     int64_t x) {
  int best = 0;
  double best_bound = 0;
  double longer_range = 0;
  for (size_t k = 0; k < levels_.size(); ++k) {
    const TimeEstimate& e = now[k];
    if (e.state == SyncState::kUnsynced) break;
    const double range =
        static_cast<double>(e.latest_ns - e.earliest_ns) -
        2 * levels_[k]->AllowanceAtNs(x);
    if (k > 0 && range > kEligibleRangeRatio * longer_range) break;
    longer_range = std::max(range, 1.0);
    const double bound = score_upper_bound(static_cast<int>(k));
    if (bound < best_bound) {
      best = static_cast<int>(k);
      best_bound = bound;
    }
  }
  selected_ = best;
}

AddResult AdaptiveWindowEstimator::Add(const ProbeSample& s) {
  AddResult result = AddResult::kAccepted;
  bool cut = false;
  for (size_t k = 0; k < levels_.size(); ++k) {
    const AddResult r = levels_[k]->Add(s);
    if (k == 0) result = r;
    cut = cut || r == AddResult::kAcceptedAfterInconsistency;
  }
  if (!IsAccepted(result)) return result;
  // The sample's two points, as the hulls see them (estimator.h), relative
  // to the anchor; __int128 as in TwoHullEstimator for epoch timestamps.
  const __int128 request_offset =
      static_cast<__int128>(s.t2_ns) - s.t1_ns + s.parent_bound_ns;
  const __int128 response_offset =
      static_cast<__int128>(s.t3_ns) - s.t4_ns - s.parent_bound_ns;
  if (!have_anchor_) {
    have_anchor_ = true;
    anchor_y_ = static_cast<int64_t>(request_offset);
  }
  if (cut) {
    // A step or a bend beyond the windows: predictions from before it
    // cannot be checked against samples after it.
    pending_.clear();
  } else {
    UpdateCheckpoints(s, static_cast<int64_t>(request_offset - anchor_y_),
                      static_cast<int64_t>(response_offset - anchor_y_));
  }
  const int64_t x = s.t4_ns;
  std::vector<TimeEstimate> now(levels_.size());
  for (size_t k = 0; k < levels_.size(); ++k) now[k] = levels_[k]->Estimate(x);
  Select(now, x);
  if (now[0].state != SyncState::kUnsynced &&
      (pending_.empty() ? x >= next_checkpoint_x_
                        : x >= pending_.back().x + reference_ns_ / 2)) {
    Checkpoint c;
    c.x = x;
    c.due_x = x + reference_ns_;
    c.slope = now[selected_].drift_ppb * 1e-9;
    for (size_t k = 0; k < levels_.size(); ++k) {
      const TimeEstimate& e = now[k].state != SyncState::kUnsynced ? now[k] : now[0];
      c.predicted[k] = static_cast<double>(e.offset_ns - anchor_y_);
    }
    pending_.push_back(c);
    next_checkpoint_x_ = x + reference_ns_ / 2;
  }
  return result;
}

TimeEstimate AdaptiveWindowEstimator::Estimate(int64_t local_ns) const {
  return levels_[selected_]->Estimate(local_ns);
}

}  // namespace clocksync::hull
