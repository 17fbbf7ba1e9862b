// hull/reference_asymmetry.h: ReferenceAsymmetry, what unequal jitter in
// the two directions does to the adaptive estimator's checkpoint
// references, learnt from the references themselves and taken out.
//
// A reference (adaptive_estimator.h, step 1) is the middle of
// [lower, upper] over D seconds of samples: upper = θ + f_fwd + e_fwd and
// lower = θ − f_back − e_back, f each direction's floor delay and e the
// excess of its lowest delay over those seconds. The middle misses θ by
// (e_fwd − e_back) / 2 (and by half the floors' difference, which no
// two-way method sees); the width is f_fwd + f_back + e_fwd + e_back. With
// jitter on one direction only (a loaded uplink) the miss is about half
// the excess of D seconds' minimum: 1.3 µs at 20 probes/s with 1 ms of
// exponential jitter, where the windows themselves are within 0.2–0.5 µs.
// Every window's estimate has the same kind of miss, smaller the more
// samples it holds, so scores against such references favour the short
// windows, whose miss is most like the references'.
//
// The middle moves with the width: the regression slope
//   k = Cov(middle, width) / Var(width) ∈ [−½, ½],
// measured on differences of successive short references (θ's own
// change, after the answer's slope, does not move with the width), is
// (v_fwd − v_back) / (2 (v_fwd + v_back)) for excess variances v: ½ with
// jitter one way only, 0 with the same jitter both ways. A reference of
// width w is taken to miss θ by
//   k (w − the smallest of the recent widths),
// the smallest standing for the floors' sum. With jitter one way this is
// the miss itself, half the excess. With jitter both ways it is more
// than the mean miss, (μ_fwd − μ_back) / 2 (the minimum of many delays is
// close to exponential: mean = spread; at 2:1, k = 0.3, 0.45 μ_fwd
// against 0.25), but k's shrinkage (below) takes most of that back where
// k rests on a few hundred seconds: in the test, 240 → −5 ns. Inferring
// μ_back from k instead (r = √((1 − 2k) / (1 + 2k))) is exact in that
// model but fragile near k = ½: k reads 0.47 for 1 ms against 10 µs,
// which the model takes for a sixth as much jitter the other way, and
// that kept a third of the miss (`accuracy_table --kinds`, the
// 1 ms one-way runs: 1.29 × against 1.16 × on seeds 10–19). The long
// references (2D) have their own widths and the same k. The widths are
// the last kWidths, so that a route change (the floors' sum moves for
// good) is out of them soon.
//
// Where the jitter is the same both ways, k is noise around 0: it is
// shrunk towards 0 by how far it stands out, k (1 − (z SE / k)²),
// z = kSignificance, and is 0 within z SE. Its standard error is the
// sandwich (heteroskedasticity-robust) one: a wide reference is one with
// a large excess on some side, so the middle scatters more where the
// width is larger (with the plain one, k stood out by 3 standard errors
// on 10 of 20 seeds of equal jitter).
//
// k needs kMinDifferences differences of references learnt from 4 D on:
// about 300 s. Until then the references would miss as the short windows
// do, and the shortest would answer (1 ms of jitter one way at 20
// probes/s: from 120 to 420 s; at 300–360 s 1,037 ns RMS against 98 for
// the 150 s window). The
// samples tell the two directions apart sooner: successive samples'
// offsets, after the answer's slope, differ by their delays' differences
// only (θ's own change cancels), and the median |difference| each way
// is the spread of that direction's delays (μ ln 2 for an exponential
// of mean μ). For exponential delays the minima's variances go as μ², so
// k = ½ tanh(ln(μ_fwd / μ_back)); the prior k is that, with the log
// ratio's first kPriorDeadZone taken off (below it: 0), over the last
// kSpreadSamples samples outside congestion episodes, applied to a
// reference's width above the smallest since the start. It stands until
// the regression has its differences (`accuracy_table --kinds`, one way
// 10–500 times the other at 20 probes/s: 4 of 8 misses on seeds 10–19
// before, 0 after).
//
// What is left after the correction is noise: e_fwd (½ − k) −
// e_back (½ + k), of variance V (¼ − k²) at the regression's k, V =
// v_fwd + v_back the variance of the widths (NoiseNs2). The widths do not
// move with θ, so this reads the references' noise from the first few,
// where their scatter cannot yet tell it from the clock's wander
// (ReferenceWander needs minutes to split the two); the adaptive
// estimator's paired test takes it as a floor (adaptive_estimator.h,
// step 3).
//
// Thread safety: none; one owner.

#ifndef CLOCKSYNC_HULL_REFERENCE_ASYMMETRY_H_
#define CLOCKSYNC_HULL_REFERENCE_ASYMMETRY_H_

#include <array>
#include <cstdint>

#include "hull/recent_values.h"

namespace clocksync::hull {

class ReferenceAsymmetry {
 public:
  // z of the shrinkage (above).
  static constexpr double kSignificance = 2;
  // Successive differences share a reference, so the products' sum
  // varies more than that of independent ones: 1 + 2 × ¼ for independent
  // references (the short ones also overlap by half: an approximation).
  static constexpr double kOverlapVariance = 1.5;
  // Fewest differences before k counts.
  static constexpr int kMinDifferences = 8;
  // The recent widths kept per kind (16 short references: 150 s with a
  // 37.5 s shortest window; with 31, 113's route change cost 0.18 → 0.58 ×
  // the best fixed window while the floors' old sum stayed among them).
  static constexpr int kWidths = 16;
  // The prior k: successive samples' differences held per direction, and
  // the log ratio of their spreads that counts for nothing (a ratio
  // within e ≈ 2.7). With e^1.5 ≈ 4.5 a path with 4 times the jitter one
  // way had no prior at all, and the regression needs minutes there
  // (1 ms against 250 µs at 5 probes/s: on seeds 40–49 a mean of the two
  // shortest levels answered from 230 to 370 s, 20–140 times the 300 s
  // window's error; 1.069 → 0.990 × the best fixed window; the one-way
  // kinds at 20 probes/s 0.005–0.011 × lower). With no dead zone 109's
  // 5:1 kernel stamps miss on seeds 0–9 (1.027 ×, 1.002 × its 300 s
  // window); at e^0.5 and with none the 2:1 and 4:1 kinds at 5 probes/s
  // move both ways (`--kinds` 877 and 874 of 888; 880 at e^1, 879 at
  // e^1.5).
  static constexpr int kSpreadSamples = 63;
  static constexpr double kPriorDeadZone = 1.0;
  // Fewest widths before NoiseNs2 counts.
  static constexpr int kMinNoiseWidths = 4;

  // `memory_ns`: older references weigh e^(−age / memory_ns).
  explicit ReferenceAsymmetry(int64_t memory_ns);

  // The reference for θ from an interval [lower, upper] (ns) of `kind`
  // (0 short, 1 long) at local time x: its middle less Miss(). With
  // `learn`, the interval also counts (AddWidth, and AddShort for a short
  // one, with `slope`, the answer's then, ns per ns).
  double Reference(int kind, int64_t x_ns, double upper_ns, double lower_ns,
                   double slope, bool learn);

  // A scored reference's width (ns), by kind.
  void AddWidth(int kind, double width_ns);
  // A short reference's middle and width (ns) at x, and the answer's slope
  // then (ns per ns), for k. In increasing x.
  void AddShort(int64_t x_ns, double middle_ns, double width_ns,
                double slope);
  // A sample's bounds of θ: its request offset (ns, any fixed origin) at
  // local time request_x (t1) and its response offset at response_x (t4),
  // with the answer's slope (ns per ns); `skip`: not counted (in a
  // congestion episode, or before any answer). For the prior k,
  // until k rests on kMinDifferences differences.
  void AddSample(int64_t request_x, double request_offset, int64_t response_x,
                 double response_offset, double slope, bool skip);
  // The prior k (see the header); 0 until kSpreadSamples are held.
  double prior_slope() const;

  // Forgets the last short reference and sample (a step: θ jumps across
  // it); what was learnt stays (the network did not change).
  void Restart() {
    have_last_ = false;
    have_sample_ = false;
  }

  // How far the middle of a reference of `kind` and `width_ns` misses θ
  // (ns; subtract it), 0 until k is significant.
  double Miss(int kind, double width_ns) const;
  // The noise variance (ns²) left in a reference of `kind` after Miss():
  // with excess variances v_fwd + v_back = V, the variance of the recent
  // widths, the middle less k times the width misses θ by
  // e_fwd (½ − k) − e_back (½ + k), whose variance is V (¼ − k²) at the
  // regression's k. Unlike the references' scatter, the widths do not
  // move with θ, so this holds from the first few references on (0 before
  // kMinNoiseWidths).
  double NoiseNs2(int kind) const;
  // k, its standard error, and the differences it rests on.
  double slope() const;
  double slope_error() const;
  int count() const { return count_; }

 private:
  // k as Miss() applies it: the prior until kMinDifferences, then the
  // regression's, shrunk.
  double AppliedSlope() const;
  // The widths Miss() measures from (the early ones until kMinDifferences).
  const RecentValues<kWidths>& Widths(int kind) const;

  int64_t memory_ns_;
  std::array<RecentValues<kWidths>, 2> widths_;
  // The prior k's: the widths since the start (the regression's are
  // those from when it learns), and each direction's |difference| of
  // successive samples' offsets after the slope.
  std::array<RecentValues<kWidths>, 2> early_widths_;
  RecentValues<kSpreadSamples> forward_;
  RecentValues<kSpreadSamples> backward_;
  bool have_sample_ = false;
  int64_t last_request_x_ = 0;
  int64_t last_response_x_ = 0;
  double last_request_ = 0;
  double last_response_ = 0;
  // The regression of Δmiddle (after the slope) on Δwidth, weighted; the
  // fourth-order sums give its robust standard error.
  double sum_mw_ = 0;
  double sum_ww_ = 0;
  double sum_wwmm_ = 0;
  double sum_wwwm_ = 0;
  double sum_wwww_ = 0;
  int count_ = 0;
  bool have_last_ = false;
  int64_t last_x_ = 0;
  double last_middle_ = 0;
  double last_width_ = 0;
  // NoiseNs2 by kind, until a width, k or the prior k moves.
  mutable std::array<double, 2> noise_ns2_{};
  mutable std::array<bool, 2> noise_valid_{};
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_REFERENCE_ASYMMETRY_H_
