// hull/drift_wander.h: DriftWander, the clock's wander as one level of the
// adaptive estimator (adaptive_estimator.h, step 5) sees it in its drifts.
//
// A window's drift β is sampled a window apart or more (two disjoint sets
// of samples), T apart: under a random-walk frequency of σ ppb/√s two
// window means T apart differ by σ² (T − W/3) in variance, so
// (Δβ)² / (T − W/3) estimates σ², plus the drifts' own noise, which only
// adds to it: an upper bound of the wander. The differences are
// exponentially weighted (each new one weighs 1 / 0.95 times the last).
//
// Thread safety: none; one owner.

#ifndef CLOCKSYNC_HULL_DRIFT_WANDER_H_
#define CLOCKSYNC_HULL_DRIFT_WANDER_H_

#include <cstdint>

#include "hull/estimator.h"

namespace clocksync::hull {

class DriftWander {
 public:
  // Fewest differences Negligible() judges on (one fewer when far below
  // the limit, see Negligible).
  static constexpr int kMinDifferences = 3;
  // A window's drift is sampled only while its samples span this fraction
  // of the window.
  static constexpr double kFullWindowFraction = 0.5;

  // Samples `estimate` of a window `window_ns` long whose samples span
  // `span_ns`, at local time x. Windows less full than
  // kFullWindowFraction are skipped (a young one rests on a few samples).
  void Record(const TimeEstimate& estimate, int64_t span_ns, int64_t window_ns,
              int64_t x);
  // Forgets the last drift (after a cut: drifts from before it are not
  // compared with drifts after it); the differences taken stay.
  void Restart() { have_drift_ = false; }
  // True when the differences show a wander below `limit` (ppb/√s):
  // Σ w (Δβ)² / T below limit² over kMinDifferences differences, or below
  // half that limit over one fewer (two small differences on a wandering
  // clock happen, two far smaller ones hardly).
  bool Negligible(double limit) const;
  // A 95 % upper confidence bound of the wander (ppb/√s), infinite before
  // 2 differences.
  double UpperBound() const;
  int count() const { return count_; }

 private:
  int64_t x_ = 0;          // When the drift was last sampled.
  double drift_ppb_ = 0;   // The drift then.
  bool have_drift_ = false;
  double sum_ = 0;         // Σ w (Δβ)² / T (the linear verdict's).
  double sum_corrected_ = 0;  // Σ w (Δβ)² / (T − W/3).
  double weight_ = 0;      // Σ w
  double weight2_ = 0;     // Σ w²
  int count_ = 0;          // Differences taken.
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_DRIFT_WANDER_H_
