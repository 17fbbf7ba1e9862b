// hull/linearity_check.h: LinearityCheck, whether the samples of the
// first longest window fit one line, judged from the samples themselves;
// the adaptive estimator's linear verdicts need it (adaptive_estimator.h,
// step 5).
//
// The verdicts read the drifts and the checkpoint references, whose own
// noise can hide a wander that matters where the delays are quiet: on
// kernel timestamps a clock wandering at a tenth of the allowance makes
// the shortest window the best by far, and its drifts read "below a tenth"
// half the time. The samples show it directly. The time since the first
// sample is cut into stretches of S seconds; a stretch's offset combines
// its lowest request offset and highest response offset (read along the
// stretches' own fitted slope), and each one's noise comes from the
// spacing of that direction's kLowest lowest excesses (for delays with a
// density at their floor, the minimum of n lies about spread / n above
// it, and the next ones about as far apart), so no noise model from
// elsewhere enters. Each side is weighed by the other's noise variance,
// pooled over the stretches (the same weights for all, so the floors add
// one constant, which the line takes): with 1 ms of jitter one way and
// 10 µs the other, the plain middle carried the forward side's tail,
// which read as a wander on a linear clock (at 20 probes/s, seeds 90–99:
// the home 37.5|75 s from 150 to 270 s, 1.050 × the best fixed window;
// 1.009 × now) and hid one the quiet side shows. A stretch whose width
// (its two least delays' sum; θ cancels) lies more than 5 noise standard
// deviations above the median width rests on delayed samples only (a
// standing queue too small for the round trips' congestion limit shifts
// its middle by half the queue) and is left out: kept, such a queue read
// as a wander and vetoed the linear verdicts for the whole window (a
// linear clock at 1.3 probes/s with 22 µs + exp(25 µs) queued one way
// for 80 s three times, random seed 4's r38: 5.0 → 3.1 × the best fixed
// window). The stretches' offsets are then weighed by the
// restricted likelihood (the line's two parameters integrated out) of a
// random-walk frequency against none: with σ² at 0.01, 0.1, 1 and 10
// times the allowance's, the best ratio above e² says the clock wanders.
// The test runs at each completed stretch from the 5th (75 s) on, and
// the latest result stands: a run of noisy stretches is outvoted later.
// Before the 8th (120 s) its ratio is the least with each stretch left
// out in turn: with so few, one stretch's minimum far in its exponential
// tail passes the limit alone (109 without wander, seed 42: e^3.6 at
// 75 s), and the pooled noise rests on few spacings. A wander the
// samples show plainly still shows from the 6th (90 s): on kernel stamps
// a tenth of the allowance, which makes the 37.5 s window the best, by
// 105 s on half the seeds (`109/wander=0.1` 1.246 → 1.110 × the best
// fixed window; nothing before 120 s without it).
// The same test gives the Bayes factor of a wander (the four σ² equally
// likely) against none, from all the stretches, and with it the
// probability of a linear clock at given prior odds: the adaptive
// estimator's home leans towards the longest window by it.
// From the 5th stretch (75 s) on, the same likelihoods at σ² of 1 to 10⁵
// times the allowance's (steps of √10) give the lower end of the wander's
// likelihood interval (the smallest σ² within e² of the best) where the
// allowance's lies outside it: a clock wandering many times faster than
// the allowance (a steep swing) departs from a line by many times the
// stretches' noise within a few of them (fast_wander_ppb). That end
// must hold with the first or the last stretch left out: a stretch's
// minimum far in its exponential tail reads as a bend where the walk can
// bend once, at either end (1 ms against 250 µs at 5 probes/s, seed 8:
// the home at 37.5–150 s from 120 to 330 s, 2.47 × the best fixed
// window; 1.04 × with it). It costs detection time: 30 times the
// allowance on 102's network shows by 90 s on 14 of 20 seeds (18
// without), by 105 s on 17.
//
// The check runs for one longest window from the first sample (or until
// a step), then keeps its last result: after that the drifts of the
// longest windows measure the wander. It keeps the samples of the
// filling stretch only; of a complete one, the kKept lowest of each
// direction along the slope known when it completed (the longest
// level's drift); the lowest along a later, better slope is among them.
//
// Thread safety: none; one owner.

#ifndef CLOCKSYNC_HULL_LINEARITY_CHECK_H_
#define CLOCKSYNC_HULL_LINEARITY_CHECK_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace clocksync::hull {

class LinearityCheck {
 public:
  // Stretches of this length.
  static constexpr int64_t kStretchNs = 15'000'000'000;

  // For `horizon_ns` from the first sample; `wander_ppb_per_sqrt_s`: the
  // allowance, which scales the alternatives (0: no check).
  LinearityCheck(int64_t horizon_ns, double wander_ppb_per_sqrt_s,
                 int64_t stretch_ns = kStretchNs);

  // A sample's two bounds of the offset θ (ns, relative to any fixed
  // origin): θ ≤ request_offset at local time request_x (t1), θ ≥
  // response_offset at response_x (t4); `slope_ppb` is the best slope
  // known now, NaN if none (a stretch completed now keeps its lowest
  // points along it, or along the last fit's).
  void Add(int64_t request_x, double request_offset, int64_t response_x,
           double response_offset, double slope_ppb);
  // Ends the check (a step: the line before it says nothing after it).
  void Stop();

  // The latest test found the stretches off a line (before 8 of them,
  // with each one left out in turn).
  bool wander_seen() const { return wander_seen_; }
  bool running() const { return running_; }
  // The latest test's lower end of the wander's likelihood interval
  // (ppb/√s) where the allowance lies below that interval, 0 otherwise
  // (tested from 5 stretches on; see the top of this file).
  double fast_wander_ppb() const { return fast_wander_ppb_; }
  int stretches() const { return static_cast<int>(stretches_.size()); }
  // The probability, after the latest test, that the clock does not
  // wander, at prior odds `wander_odds` of a wander (σ² at 0.01, 0.1, 1 or
  // 10 times the allowance's, equally likely) against none; NaN before
  // the first test (5 stretches).
  double LinearProbability(double wander_odds) const;

  // Points kept per direction and stretch, and the lowest of them whose
  // spacing gives the noise.
  static constexpr int kKept = 8;
  static constexpr int kLowest = 4;

 private:
  // One direction of a stretch: its kKept lowest values (relative to
  // `base`) along the stretch's slope, with their times from its centre.
  struct Side {
    double base = 0;
    bool have_base = false;
    int n = 0;
    std::array<float, kKept> dx_s{};
    std::array<float, kKept> value{};  // unslanted, relative to base
    std::array<float, kKept> key{};    // along the stretch's slope
    void Add(double dx_s, double value, double slope_ppb);
    // The lowest of value − slope × dx over the points kept; the
    // spacing of the kLowest lowest in `spacing`.
    double Lowest(double slope_ppb, double* spacing) const;
  };
  struct Stretch {
    Side up;    // request offsets
    Side down;  // response offsets, negated
  };
  // A sample of the filling stretch, times from its centre.
  struct Point {
    double request_dx_s;
    double request;
    double response_dx_s;
    double negated_response;
  };
  // Keeps the filling stretch's lowest points along `slope_ppb`.
  void Close(double slope_ppb);
  void Test();

  int64_t stretch_ns_;
  int64_t horizon_ns_;
  double wander_ppb_;
  bool have_first_ = false;
  int64_t first_x_ = 0;
  bool running_ = true;
  bool wander_seen_ = false;
  double fast_wander_ppb_ = 0;
  // The latest test's log Bayes factor of a wander against none.
  double log_bayes_factor_ = std::numeric_limits<double>::quiet_NaN();
  double slope_ppb_ = 0;  // the last fit's
  std::vector<Stretch> stretches_;  // complete (empty where none came)
  std::vector<Point> filling_;
  std::size_t filling_index_ = 0;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_LINEARITY_CHECK_H_
