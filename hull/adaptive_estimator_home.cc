// hull/adaptive_estimator_home.cc: AdaptiveWindowEstimator's home
// candidate (adaptive_estimator.h, step 5): W* from the delay spread and
// the wander, and the linear verdicts that make the longest window home.

#include "hull/adaptive_estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace clocksync::hull {
namespace {

// The home window: W* = kHomeScale × (spread / (rate × wander))^0.4 s,
// spread the median round trip's excess over the minimum (ns), rate in
// samples per second, wander in ppb/√s: where the wander's error over the
// window (∝ W^1.5) meets the delay noise's (∝ spread / (rate W)).
constexpr double kHomeScale = 2.4;
constexpr double kHomeExponent = 0.4;
constexpr int kHomeMinRoundTrips = 16;
// The clock counts as linear (home = the longest window) when some level's
// measured wander (DriftWander::Negligible, drift_wander.h) is below this
// fraction of the configured allowance.
constexpr double kNegligibleWanderFraction = 0.1;
// Before the drifts can tell (the first DriftWander::kFullWindowFraction +
// kMinDifferences shortest windows, 131 s by default), the longest
// level's errors against the short references tell a linear clock: under a
// random-walk wander σ a line fitted over a span S misses the newest offset
// by about kFitErrorScale σ² S³ in mean square (measured: 0.026 on 109 with
// 1 ppb/√s, 200 seeds; a least-squares line: 0.01). The clock counts as
// linear when Σ e² < kFitErrorScale (f σ)² Σ S³ over at least
// kEarlyMinCheckpoints checkpoints whose span is at least
// kEarlyMinSpanFraction (adaptive_estimator.cc) of the shortest window
// (both by 56 s by default), f = kEarlyNegligibleWanderFraction, a tenth
// as for the drifts' and the references' verdicts. On 109 with 1 ppb/√s of wander it fires on 6 of 100
// seeds (f = 0.2), and only until the drifts take over; at 0.3 ppb/√s on 3
// of 10 (7 at f = 0.2: `109/wander=0.3` 1.066 → 1.022 × on seeds 10-19).
constexpr double kFitErrorScale = 0.025;
constexpr double kEarlyNegligibleWanderFraction = 0.1;
constexpr int kEarlyMinCheckpoints = 2;
// The home's wander is never below this (ppb/√s).
constexpr double kMinHomeWander = 1e-6;
// A clean stretch between congested intervals shorter than this fraction
// of W* counts as congested (HomePosition).
constexpr double kShortStretchFraction = 0.25;

// A 95 % upper bound of σ² from the references' estimate and its
// standard error. Their error grows with σ² (on 102's network wandering at
// 1 ppb/√s, 600 s runs read 0.19 ± 0.14 to 2.0 ± 0.8): a normal bound
// (σ² + 2 errors) sat below the truth on 5 seeds of 10. Read as a
// chi-squared estimate with 2 (σ² / error)² degrees of freedom, at least
// kMinDof (Wilson–Hilferty, as DriftWander::UpperBound), it sat below on
// none; the normal bound stands where it is higher (σ² near 0, where the
// references' own noise, taken out, makes the error: a linear clock).
constexpr double kMinDof = 4;
double ReferenceWanderUpperBound2(double wander2, double error) {
  constexpr double kZ = 1.645;
  const double normal = std::max(0.0, wander2 + 2 * error);
  if (wander2 <= 0 || error <= 0) return normal;
  const double dof =
      std::max(kMinDof, 2 * (wander2 / error) * (wander2 / error));
  const double c = 2 / (9 * dof);
  const double q = std::pow(1 - c - kZ * std::sqrt(c), 3);
  if (q <= 0) return std::numeric_limits<double>::infinity();
  return std::max(normal, wander2 / q);
}

}  // namespace

double AdaptiveWindowEstimator::LearntWanderPpb() const {
  double learnt = std::numeric_limits<double>::infinity();
  if (reference_wander_.effective_count() >= kReferenceMinReadings &&
      !ReferencesTooNoisy()) {
    learnt = std::sqrt(ReferenceWanderUpperBound2(
        reference_wander_.wander2(), reference_wander_.wander2_error()));
  } else {
    for (const DriftWander& w : wander_) learnt = std::min(learnt, w.UpperBound());
  }
  // 0 means "nothing learnt": a bound of 0 is kMinHomeWander.
  return std::isfinite(learnt) ? std::max(learnt, kMinHomeWander) : 0;
}

bool AdaptiveWindowEstimator::WanderNegligible(int64_t x) const {
  const double limit =
      kNegligibleWanderFraction * config_.base.wander_ppb_per_sqrt_s;
  // The references' estimate (once they count) and the samples' check
  // veto every verdict (see the header, step 5).
  const bool counted =
      reference_wander_.effective_count() >= kReferenceMinReadings;
  const double w2 = reference_wander_.wander2();
  if ((counted && w2 > limit * limit) || linearity_.wander_seen()) return false;
  for (size_t k = 0; k < levels_.size(); ++k) {
    if (wander_[k].Negligible(limit)) return true;
  }
  // Or the references' interval's upper end (as for W*) lies below it.
  if (counted && ReferenceWanderUpper2() < limit * limit) {
    return true;
  }
  return EarlyWanderNegligible(x);
}

bool AdaptiveWindowEstimator::EarlyWanderNegligible(int64_t x) const {
  if (x - first_x_ > early_wander_ns_) return false;
  for (const DriftWander& w : wander_) {
    if (w.count() >= DriftWander::kMinDifferences) return false;
  }
  const double limit =
      kEarlyNegligibleWanderFraction * config_.base.wander_ppb_per_sqrt_s;
  return fit_error_count_ >= kEarlyMinCheckpoints &&
         fit_error_sum_ < kFitErrorScale * limit * limit * fit_span3_sum_;
}

double AdaptiveWindowEstimator::HomePosition(int64_t x, double clean_home_s,
                                             double longest_s) const {
  const RoundTrips::Intervals barring = BarringIntervals();
  if (round_trips_.congested_intervals(barring) == 0) {
    return 2 * std::log2(longest_s / clean_home_s);
  }
  // W* balances the delay noise's error, K / L² in mean square for a
  // window holding L clean seconds, against the wander's, W³ for a window
  // spanning W: K / W² + W³ is least at W = W* for K = 1.5 W*⁵. Congested
  // intervals leave holes (L < W), and while one is open the newest clean
  // sample is g old: the answer extrapolates the clean samples' line by
  // g, which multiplies the noise's mean square by
  // (1 + 3 (1 + 2 g / L)²) / 4 (a least-squares line's, g beyond the end
  // of its L). The home window minimises the sum, a convex function of W
  // within each clean stretch. Between two intervals a stretch shorter
  // than W*/4 counts as congested: where a queue's short draws break its
  // runs, such stretches hold its draws, not clean samples.
  const double k = 1.5 * std::pow(clean_home_s, 5);
  double home_s = std::min(clean_home_s, longest_s);
  double best_cost = std::numeric_limits<double>::infinity();
  double newer_clean_s = 0;  // Held by the stretches walked.
  double age_s = -1;         // g.
  const double min_stretch_s = kShortStretchFraction * clean_home_s;
  auto too_short = [&](int64_t begin, int64_t end) {
    return end < x && begin != std::numeric_limits<int64_t>::min() &&
           static_cast<double>(end - begin) * 1e-9 < min_stretch_s;
  };
  round_trips_.ForEachCleanStretch(x, barring, [&](int64_t begin,
                                                   int64_t end) {
    const double from_s = static_cast<double>(x - end) * 1e-9;
    if (from_s >= longest_s || from_s * from_s * from_s >= best_cost) {
      return false;  // No longer window costs less.
    }
    if (too_short(begin, end)) return true;
    if (age_s < 0) age_s = from_s;
    const double to_s =
        begin == std::numeric_limits<int64_t>::min()
            ? longest_s
            : std::min(longest_s, static_cast<double>(x - begin) * 1e-9);
    auto cost = [&](double window_s) {
      const double clean_s = newer_clean_s + window_s - from_s;
      if (clean_s <= 0) return std::numeric_limits<double>::infinity();
      const double lever = 1 + 2 * age_s / clean_s;
      return k * (1 + 3 * lever * lever) / (4 * clean_s * clean_s) +
             window_s * window_s * window_s;
    };
    // Golden-section search over [from_s, to_s], to a millisecond.
    constexpr double kInvPhi = 0.6180339887498949;
    double a = from_s;
    double b = to_s;
    double c = b - kInvPhi * (b - a);
    double d = a + kInvPhi * (b - a);
    double cost_c = cost(c);
    double cost_d = cost(d);
    while (b - a > 1e-3) {
      if (cost_c < cost_d) {
        b = d;
        d = c;
        cost_d = cost_c;
        c = b - kInvPhi * (b - a);
        cost_c = cost(c);
      } else {
        a = c;
        c = d;
        cost_c = cost_d;
        d = a + kInvPhi * (b - a);
        cost_d = cost(d);
      }
    }
    for (const double window_s : {0.5 * (a + b), to_s}) {
      const double f = cost(window_s);
      if (f < best_cost) {
        best_cost = f;
        home_s = window_s;
      }
    }
    newer_clean_s += to_s - from_s;
    return true;
  });
  // The levels' windows hold holes too, unlike the ladder's windows
  // between them: the home is where the clean seconds the levels hold
  // reach the home window's (between two levels, in log2 of those); none
  // does before the samples held reach it: the longest. A level longer
  // than the samples held holds what they do.
  auto clean_s = [&](double window_s) {
    const int64_t from_x = x - static_cast<int64_t>(window_s * 1e9);
    double total_s = 0;
    round_trips_.ForEachCleanStretch(x, barring, [&](int64_t begin,
                                                     int64_t end) {
      if (end <= from_x) return false;
      if (!too_short(begin, end)) {
        total_s += static_cast<double>(end - std::max(begin, from_x)) * 1e-9;
      }
      return true;
    });
    return total_s;
  };
  const double wanted_s = clean_s(home_s);
  const double held_s = static_cast<double>(x - first_x_) * 1e-9;
  auto level_clean_s = [&](size_t level) {
    return clean_s(std::min(
        held_s,
        static_cast<double>(levels_[level]->config().window_ns) * 1e-9));
  };
  double longer_clean_s = level_clean_s(0);
  double position = 0;
  for (size_t level = 1; level < levels_.size(); ++level) {
    const double shorter_clean_s = level_clean_s(level);
    if (shorter_clean_s >= wanted_s) {
      position = 2.0 * static_cast<double>(level);
      longer_clean_s = shorter_clean_s;
      continue;
    }
    if (longer_clean_s > shorter_clean_s && shorter_clean_s > 0) {
      position = 2.0 * static_cast<double>(level) -
                 2 * std::clamp(std::log(wanted_s / shorter_clean_s) /
                                    std::log(longer_clean_s / shorter_clean_s),
                                0.0, 1.0);
    }
    break;
  }
  return position;
}

int AdaptiveWindowEstimator::HomeCandidate(int64_t x) {
  home_position_ = 0;
  if (config_.base.wander_ppb_per_sqrt_s <= 0) return 0;
  const int n = round_trips_.count();
  if (n < kHomeMinRoundTrips) return 0;
  const double span_s = static_cast<double>(round_trips_.SpanNs()) * 1e-9;
  if (span_s <= 0) return 0;
  const double rate = (n - 1) / span_s;
  // The delay spread of the clean round trips (round_trips.h): a
  // congestion episode raises the median round trip for a while, not the
  // window the clean delays call for.
  double spread = round_trips_.SpreadFloor(x);
  // Heavy-tailed delays: the median lies far out; the directions' floors
  // say how far (direction_spread.h). Never longer than the round trips'.
  const double from_directions =
      direction_spread_.SpreadFloor(round_trips_.CongestionHeld(x));
  if (from_directions > 0) spread = std::min(spread, from_directions);
  // The allowance is an upper bound of the wander; the drifts may bound
  // it tighter, and so may what an earlier run learnt (the prior), until
  // the references count.
  const double allowance = config_.base.wander_ppb_per_sqrt_s;
  const double prior = config_.wander_prior_ppb_per_sqrt_s > 0
                           ? std::min(allowance,
                                      config_.wander_prior_ppb_per_sqrt_s)
                           : allowance;
  home_wander_ppb_ = allowance;
  for (const DriftWander& w : wander_) {
    home_wander_ppb_ = std::min(home_wander_ppb_, w.UpperBound());
  }
  // The references measure the wander with their own noise taken out
  // (reference_wander.h): the allowance stands until it falls outside
  // their interval, then the interval's nearer end does, above the
  // allowance too (a clock wandering faster than it: a shorter home).
  // The prior stands likewise, inside their interval.
  const double readings = reference_wander_.effective_count();
  const double upper = std::sqrt(std::max(0.0, ReferenceWanderUpper2()));
  const double lower = ReferenceWanderLower();
  if (readings >= kReferenceMinReadings ||
      (readings >= kReferenceEarlyReadings && lower > allowance &&
       lower < kReferenceEarlyMaxRatio * allowance)) {
    // The bound, too, widens when the clock wanders faster than the
    // allowance: by the interval's lower end (see Answer).
    bound_wander_ratio_ = std::max(1.0, lower / allowance);
    home_wander_ppb_ = lower > allowance
                           ? lower
                           : std::min(home_wander_ppb_,
                                      std::clamp(prior, lower, upper));
  } else {
    home_wander_ppb_ = std::min(home_wander_ppb_, prior);
  }
  // A steep swing shows in the first longest window's samples sooner
  // than the references' interval clears the allowance: the lesser of the
  // samples' lower end and the references' σ, where σ² is above the
  // allowance's and resolvable, outside congestion (header, step 5).
  const double fast = linearity_.fast_wander_ppb();
  if (fast > 0 && linearity_.running() &&
      readings >= kReferenceEarlyReadings &&
      reference_wander_.wander2() > allowance * allowance &&
      round_trips_.congested_intervals() == 0 && !ReferencesTooNoisy()) {
    home_wander_ppb_ = std::max(
        home_wander_ppb_,
        std::min(fast, std::sqrt(reference_wander_.wander2())));
  }
  const double clean_home_s =
      kHomeScale *
      std::pow(spread / (rate * std::max(home_wander_ppb_, kMinHomeWander)),
               kHomeExponent);
  const double longest_s =
      static_cast<double>(levels_[0]->config().window_ns) * 1e-9;
  home_position_ = HomePosition(x, clean_home_s, longest_s);
  home_position_ =
      std::clamp(home_position_, 0.0, static_cast<double>(blends_ - 1));
  const int home = static_cast<int>(std::lround(home_position_));
  // A clock that wanders far less than the allowance is at home in the
  // longest window, unless that window has predicted significantly worse
  // than the allowance's home (step 3's test): with delays as quiet as
  // kernel timestamps', a tenth of the allowance outweighs their noise
  // over the longest window (109 with 0.1 ppb/√s: 17 → 5.9 ns).
  if (WanderNegligible(x) &&
      (home == 0 || !(PairedUpperBound(home, 0) < 0))) {
    home_position_ = 0;
    return 0;
  }
  return home;
}

}  // namespace clocksync::hull
