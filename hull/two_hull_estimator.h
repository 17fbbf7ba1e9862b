// hull/two_hull_estimator.h: TwoHullEstimator, the online estimate of a
// parent's global time from probe samples, with a hard error bound, over a
// sliding window. One implementation of the Estimator interface
// (hull/estimator.h, where the sign convention is stated).
//
// A probe sample (t1, t2, t3, t4; hull/probe_sample.h): t1 local send, t2
// parent receive (global), t3 parent send (global), t4 local receive. The
// sample is widened by its parent_bound_ns. With non-negative delays
//   request  point (t1, t2 − t1) lies on or above θ: lower hull;
//   response point (t4, t3 − t4) lies on or below θ: upper hull.
// Every line between the hulls is consistent with the window. The estimate is
// the max-margin line; the bound at x is the range of all consistent lines at
// x, widened by a wander allowance (see EstimatorConfig) so that it stays
// valid while the frequency wanders and while no samples arrive (holdover).
//
// Window: samples whose t4 is older than the newest t4 minus `window_ns`
// leave. Insertion and removal are amortized O(1) (sliding_hull.h); the lines
// are recomputed (O(h) for h hull vertices) only when a sample that enters
// or leaves touches one of them, which for random delays is rare at long
// windows (about a quarter of the samples at 300). When the max-margin line
// stands and only an extreme line was touched, only that one is walked to
// again (separation.h, UpdateExtremeLines).
//
// Inconsistency: when the hulls cross (the clock stepped, or bent more than
// the delays allow), or every line between them is steeper than
// max_drift_ppm (a step the few samples since the last cut turned into a
// drift), the estimator notices at the sample that causes it,
// keeps the longest run of newest samples that is still consistent (so a
// bending clock shortens the window; a step restarts it after the step),
// reports it, and stays `kRecovering` for `recovery_hold_ns`.
//
// Numerics: points are stored relative to an anchor (the first sample of a
// window) as exact 64-bit integers; hull and slope tests are exact (128-bit);
// only line values are doubles, evaluated as offsets from a nearby vertex.
// Unix-epoch timestamps (~1.8e18 ns) and offsets of hours lose nothing.
//
// Thread safety: none; one owner (the daemon's sync loop).

#ifndef CLOCKSYNC_HULL_TWO_HULL_ESTIMATOR_H_
#define CLOCKSYNC_HULL_TWO_HULL_ESTIMATOR_H_

#include <cstddef>
#include <cstdint>

#include "hull/estimator.h"
#include "hull/separation.h"
#include "hull/sliding_hull.h"

namespace clocksync::hull {

class TwoHullEstimator final : public Estimator {
 public:
  // `config` must be valid (see ValidateConfig).
  explicit TwoHullEstimator(const EstimatorConfig& config = {});

  TwoHullEstimator(const TwoHullEstimator&) = delete;
  TwoHullEstimator& operator=(const TwoHullEstimator&) = delete;

  // Feeds one sample; implausible samples are counted and dropped.
  AddResult Add(const ProbeSample& sample) override;

  // Global time at local instant `local_ns`, from the samples seen so far.
  TimeEstimate Estimate(int64_t local_ns) const override;
  // The same, and the wander allowance it added on each side of the hulls'
  // range (AllowanceAtNs(local_ns)), set only when the state is synced.
  TimeEstimate Estimate(int64_t local_ns, double* allowance_ns) const;

  // Forgets every sample (state back to kUnsynced); keeps the stats.
  void Reset();

  const EstimatorStats& stats() const override { return stats_; }
  const EstimatorConfig& config() const { return config_; }
  size_t window_samples() const override { return requests_.size(); }
  // Span of the window, newest t4 − oldest t4, ns.
  int64_t window_span_ns() const override;
  size_t lower_hull_vertices() const override {
    return requests_.chain_vertices();
  }
  size_t upper_hull_vertices() const override {
    return responses_.chain_vertices();
  }
  // Bytes held by the window and hulls.
  size_t memory_bytes() const;
  // The wander allowance (see EstimatorConfig) Estimate(local_ns) adds on
  // each side of the hulls' range, ns; 0 with an empty window.
  double AllowanceAtNs(int64_t local_ns) const;

 private:
  HullChains Chains() const;
  void Recompute();
  // Which cached lines adding / removing these points could move (kDirty*
  // bits; kDirtyAll when nothing is cached).
  int Touches(const Point& request, const Point& response) const;
  // Cuts the window to its longest consistent run of newest samples.
  void Recover();
  void PushPoints(const Point& request, const Point& response);
  void PopOldest();
  double AllowanceNs(int64_t x_rel) const;

  EstimatorConfig config_;
  EstimatorStats stats_;
  // Anchor of the relative coordinates: x_rel = local − anchor_x_,
  // y_rel = offset − anchor_y_.
  int64_t anchor_x_ = 0;
  int64_t anchor_y_ = 0;
  bool have_anchor_ = false;
  int64_t last_t1_ = 0;
  int64_t last_t4_ = 0;
  bool have_last_ = false;
  SlidingHull requests_{HullSide::kLower};
  SlidingHull responses_{HullSide::kUpper};
  Separation sep_;
  // Which of sep_'s lines are stale: the smallest slope's, the max-margin
  // one (which stands for everything else), the largest slope's.
  static constexpr int kDirtyMin = 1;
  static constexpr int kDirtyMid = 2;
  static constexpr int kDirtyMax = 4;
  static constexpr int kDirtyAll = kDirtyMin | kDirtyMid | kDirtyMax;
  int dirty_ = kDirtyAll;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_TWO_HULL_ESTIMATOR_H_
