// hull/adaptive_estimator.h: AdaptiveWindowEstimator, an Estimator
// (hull/estimator.h) that picks the sliding window's length from the data,
// as linuxptp's linreg servo picks its regression length by prediction error.
//
// A line fits a clock only over so long: when the frequency bends (a
// temperature swing), a 5-minute window averages over the bend and the
// estimate lags; when it does not, the longest window averages most delay
// noise away. This estimator runs `levels` two-hull estimators side by side
// on the same samples, with windows W, W/2, W/4, ... and, before each sample
// enters them, scores how well each one predicted it:
//   residual = ((t2 − t1) + (t3 − t4)) / 2 − θ_k((t1 + t4) / 2)
// (the sample's midpoint offset against estimator k's line). The midpoint
// carries delay noise (d_fwd − d_back) / 2, common to all levels and small
// for samples whose round trip is near the minimum, so each residual is
// weighted by 1 / (excess² + c²) with excess = round trip − the minimum
// round trip in the longest window and c = a tenth of that minimum. Scores
// are exponentially weighted means of squared residuals over
// `score_time_constant_ns`; the level with the lowest score answers
// Estimate(). Its bound is its own (each level's bound is valid alone).
//
// Costs `levels` times a TwoHullEstimator per sample (see the benchmark).
// Thread safety: none; one owner.

#ifndef CLOCKSYNC_HULL_ADAPTIVE_ESTIMATOR_H_
#define CLOCKSYNC_HULL_ADAPTIVE_ESTIMATOR_H_

#include <memory>
#include <string>
#include <vector>

#include "hull/estimator.h"
#include "hull/two_hull_estimator.h"

namespace clocksync::hull {

// The window is config.base.window_ns / 2^k for k in [0, levels); see
// AdaptiveConfig (hull/estimator.h).
class AdaptiveWindowEstimator final : public Estimator {
 public:
  explicit AdaptiveWindowEstimator(const AdaptiveConfig& config = {});

  AddResult Add(const ProbeSample& sample) override;
  TimeEstimate Estimate(int64_t local_ns) const override;

  // The level answering now (0 = the longest window) and its window.
  int selected_level() const { return selected_; }
  int64_t selected_window_ns() const;
  // The answering level's estimator (its window, hulls and counters).
  const TwoHullEstimator& selected() const { return *levels_[selected_]; }
  // Statistics of the longest window (sample counters are the same for all).
  const EstimatorStats& stats() const override { return levels_[0]->stats(); }
  // The answering level's window and hulls.
  size_t window_samples() const override {
    return selected().window_samples();
  }
  int64_t window_span_ns() const override {
    return selected().window_span_ns();
  }
  size_t lower_hull_vertices() const override {
    return selected().lower_hull_vertices();
  }
  size_t upper_hull_vertices() const override {
    return selected().upper_hull_vertices();
  }
  double score(int level) const { return levels_[level]->stats().accepted ? scores_[level] : 0; }
  int levels() const { return static_cast<int>(levels_.size()); }

 private:
  AdaptiveConfig config_;
  std::vector<std::unique_ptr<TwoHullEstimator>> levels_;
  std::vector<double> scores_;
  double score_weight_ = 0;  // Decayed sum of weights (shared by levels).
  int64_t last_score_x_ = 0;
  bool scored_once_ = false;
  int selected_ = 0;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_ADAPTIVE_ESTIMATOR_H_
