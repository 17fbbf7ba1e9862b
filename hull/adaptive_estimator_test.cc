// AdaptiveWindowEstimator: with one level it is the fixed-window estimator;
// on a clock whose frequency bends it moves to a shorter window, on a
// straight one it loses little to the longest; config errors name the key.

#include "hull/adaptive_estimator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "hull/sim/accuracy.h"
#include "hull/sim/probe_simulator.h"
#include "hull/sim/scenarios.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kS = 1'000'000'000;

SimulationParams Params(double sine_ppb) {
  SimulationParams p;
  p.clock.frequency_ppm = 15;
  p.clock.sine_amplitude_ppb = sine_ppb;
  p.clock.sine_period_s = 1200;
  p.forward.min_ns = p.backward.min_ns = 20'000;
  p.forward.exp_mean_ns = p.backward.exp_mean_ns = 10'000;
  p.interval_ns = 500'000'000;
  p.duration_ns = 1500 * kS;
  return p;
}

TEST(AdaptiveEstimatorTest, OneLevelIsTheFixedWindow) {
  AdaptiveConfig config;
  config.levels = 1;
  AdaptiveWindowEstimator adaptive(config);
  TwoHullEstimator fixed(config.base);
  ProbeSimulator sim(Params(500));
  SimulatedSample s;
  while (sim.Next(&s)) {
    EXPECT_EQ(adaptive.Add(s.sample), fixed.Add(s.sample));
    const TimeEstimate a = adaptive.Estimate(s.sample.t4_ns);
    const TimeEstimate f = fixed.Estimate(s.sample.t4_ns);
    ASSERT_EQ(a.state, f.state);
    EXPECT_EQ(a.global_ns, f.global_ns);
    EXPECT_EQ(a.earliest_ns, f.earliest_ns);
    EXPECT_EQ(a.latest_ns, f.latest_ns);
  }
  EXPECT_EQ(adaptive.selected_level(), 0);
}

// On a bending clock the adaptive estimator answers mostly from shorter
// windows and beats the longest window by far; on a straight one (no
// wander: the longest window is the best there is) it loses little to it.
TEST(AdaptiveEstimatorTest, BendingClockSelectsShorterWindowStraightLosesLittle) {
  for (const double sine_ppb : {0.0, 2000.0}) {
    AdaptiveWindowEstimator est{AdaptiveConfig()};
    EstimatorConfig longest = AdaptiveConfig().base;
    longest.wander_ppb_per_sqrt_s = 0;
    TwoHullEstimator fixed(longest);
    ProbeSimulator sim(Params(sine_ppb));
    SimulatedSample s;
    int shorter = 0, checks = 0;
    double sum_sq_adaptive = 0, sum_sq_fixed = 0;
    while (sim.Next(&s)) {
      est.Add(s.sample);
      fixed.Add(s.sample);
      if (s.true_ns < 600 * kS) continue;
      ++checks;
      shorter += est.selected_level() > 0;
      const double ea = static_cast<double>(est.Estimate(s.sample.t4_ns).global_ns -
                                            s.true_global_at_t4_ns);
      const double ef = static_cast<double>(fixed.Estimate(s.sample.t4_ns).global_ns -
                                            s.true_global_at_t4_ns);
      sum_sq_adaptive += ea * ea;
      sum_sq_fixed += ef * ef;
    }
    const double rms_adaptive = std::sqrt(sum_sq_adaptive / checks);
    const double rms_fixed = std::sqrt(sum_sq_fixed / checks);
    std::printf("sine %.0f ppb: adaptive %.1f ns, 600 s %.1f ns, shorter "
                "windows %d of %d\n",
                sine_ppb, rms_adaptive, rms_fixed, shorter, checks);
    if (sine_ppb > 0) {
      EXPECT_GT(shorter, checks * 3 / 4);
      EXPECT_LT(rms_adaptive, rms_fixed / 3);
    } else {
      EXPECT_LT(rms_adaptive, 1.25 * rms_fixed);
    }
  }
}

// Kernel timestamps at 16 Hz: sub-µs delays (the 109 scenario's network).
SimulationParams KernelStamped(double wander_ppb_per_sqrt_s, uint64_t seed) {
  SimulationParams p;
  p.clock.frequency_ppm = 37;
  p.clock.wander_ppb_per_sqrt_s = wander_ppb_per_sqrt_s;
  p.clock.seed = 7 + seed;
  p.forward.min_ns = p.backward.min_ns = 150;
  p.forward.exp_mean_ns = 1000;
  p.backward.exp_mean_ns = 200;
  p.turnaround_ns = 2000;
  p.interval_ns = 62'500'000;
  p.duration_ns = 60 * kS;
  p.seed = 109 + 1'000'003 * seed;
  return p;
}

// On how many of `seeds` kernel-stamped runs of `duration_ns` with this
// wander the home is the longest window at the end.
int SeedsWithTheLongestHome(double wander_ppb_per_sqrt_s, int seeds,
                            int64_t duration_ns) {
  int longest = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    AdaptiveWindowEstimator est{AdaptiveConfig()};
    SimulationParams p = KernelStamped(wander_ppb_per_sqrt_s, seed);
    p.duration_ns = duration_ns;
    ProbeSimulator sim(p);
    SimulatedSample s;
    while (sim.Next(&s)) est.Add(s.sample);
    longest += est.home_candidate() == 0;
  }
  return longest;
}

// Before the drifts can show it (3 differences of the shortest level's
// drift, 131 s), the longest level's fit against the references tells a
// linear clock at this noise level by 60 s, and mostly not a clock that
// wanders at the allowance.
TEST(AdaptiveEstimatorTest, LinearClockAnswersFromTheLongestWindowBy60s) {
  constexpr int kSeeds = 20;
  const int linear_home_longest = SeedsWithTheLongestHome(0.0, kSeeds, 60 * kS);
  const int wandering_home_longest =
      SeedsWithTheLongestHome(1.0, kSeeds, 60 * kS);
  std::printf("home = the longest window at 60 s: linear %d of %d seeds, "
              "wandering at 1 ppb/sqrt(s) %d of %d\n",
              linear_home_longest, kSeeds, wandering_home_longest, kSeeds);
  EXPECT_GE(linear_home_longest, kSeeds * 3 / 4);
  EXPECT_LE(wandering_home_longest, kSeeds / 10);
}

// With delays as quiet as kernel timestamps', a clock wandering at a tenth
// of the allowance passes the drifts' test of a linear clock, but its
// wander still outweighs the delays' noise over the longest window: the
// longest window predicts significantly worse than the allowance's home,
// and the home stays there (the 37.5 s level is then 4 times better than
// the 600 s one). A linear clock's home is still the longest.
TEST(AdaptiveEstimatorTest, QuietDelaysAndSmallWanderKeepTheShortHome) {
  constexpr int kSeeds = 10;
  const int linear_home_longest =
      SeedsWithTheLongestHome(0.0, kSeeds, 300 * kS);
  const int wandering_home_longest =
      SeedsWithTheLongestHome(0.1, kSeeds, 300 * kS);
  std::printf("home = the longest window at 300 s: linear %d of %d seeds, "
              "wandering at 0.1 ppb/sqrt(s) %d of %d\n",
              linear_home_longest, kSeeds, wandering_home_longest, kSeeds);
  EXPECT_GE(linear_home_longest, kSeeds * 3 / 4);
  EXPECT_LE(wandering_home_longest, kSeeds / 4);
}

// The allowance is an upper bound of the wander. Where the delays are too
// noisy for the drifts to show a linear clock within a tenth of it (1 probe/s,
// 100 µs + exp(100 µs) each way), they still bound its wander below the
// allowance as they accumulate, and W* lengthens; a clock wandering as the
// allowance says keeps it.
TEST(AdaptiveEstimatorTest, DriftsBoundTheHomeWanderBelowTheAllowance) {
  int linear_below = 0, wandering_below = 0;
  constexpr int kSeeds = 10;
  for (int seed = 0; seed < kSeeds; ++seed) {
    for (const double wander : {0.0, 1.0}) {
      SimulationParams p;
      p.clock.frequency_ppm = 100;
      p.clock.wander_ppb_per_sqrt_s = wander;
      p.clock.seed = 11 + seed;
      p.forward.min_ns = p.backward.min_ns = 100'000;
      p.forward.exp_mean_ns = p.backward.exp_mean_ns = 100'000;
      p.duration_ns = 3600 * kS;
      p.seed = 101 + 1'000'003 * seed;
      AdaptiveWindowEstimator est{AdaptiveConfig()};
      ProbeSimulator sim(p);
      SimulatedSample s;
      while (sim.Next(&s)) est.Add(s.sample);
      const bool below = est.home_wander_ppb() < 0.8;
      (wander == 0 ? linear_below : wandering_below) += below;
      std::printf("seed %d wander %.0f: home wander %.3f ppb/sqrt(s)\n", seed,
                  wander, est.home_wander_ppb());
    }
  }
  EXPECT_GE(linear_below, kSeeds * 8 / 10);
  EXPECT_LE(wandering_below, kSeeds / 10);
}

// The home answers from W* itself: between the estimates of the two levels
// around it (never outside them), and strictly between them where W* falls
// between two candidates.
TEST(AdaptiveEstimatorTest, HomeAnswersBetweenTheLevelsAroundIt) {
  SimulationParams p;  // chrony's default model: W* near 300 s.
  p.clock.frequency_ppm = 100;
  p.clock.wander_ppb_per_sqrt_s = 1;
  p.duration_ns = 1200 * kS;
  AdaptiveConfig config;
  AdaptiveWindowEstimator est(config);
  std::vector<std::unique_ptr<TwoHullEstimator>> fixed;
  for (int k = 0; k < config.levels; ++k) {
    EstimatorConfig c = config.base;
    c.window_ns = config.base.window_ns >> k;
    fixed.push_back(std::make_unique<TwoHullEstimator>(c));
  }
  ProbeSimulator sim(p);
  SimulatedSample s;
  int at_home = 0, strictly_between = 0;
  while (sim.Next(&s)) {
    est.Add(s.sample);
    for (auto& f : fixed) f->Add(s.sample);
    const int level = est.selected_level();
    // (While the home leans towards the longest level, step 5, it
    // answers beyond the two: HalfWindowHomeLeansTowardsTheLongestLevel.)
    if (s.true_ns < 120 * kS || level == 0 ||
        est.selected_candidate() != est.home_candidate() ||
        est.linear_weight() > 0) {
      continue;
    }
    ++at_home;
    const int64_t x = s.sample.t4_ns;
    const int64_t answer = est.Estimate(x).global_ns;
    const int64_t a = fixed[level]->Estimate(x).global_ns;
    const int64_t b = fixed[level - 1]->Estimate(x).global_ns;
    ASSERT_GE(answer, std::min(a, b));
    ASSERT_LE(answer, std::max(a, b));
    strictly_between += answer != a && answer != b;
  }
  std::printf("at home %d samples, strictly between two levels %d\n", at_home,
              strictly_between);
  EXPECT_GT(at_home, 500);
  EXPECT_GT(strictly_between, at_home / 2);
}

// A swing far steeper than the allowance's wander: W* (from the allowance)
// falls between the two shortest levels, and the shortest predicts
// significantly better than their mean. The answer is the shortest level's,
// not a blend with the next longer one (which only adds its lag: 1.32 ×
// the 37.5 s window before).
TEST(AdaptiveEstimatorTest, HomeDoesNotBlendTowardsAWorseNeighbour) {
  SimulationParams p;
  p.clock.frequency_ppm = 20;
  p.clock.wander_ppb_per_sqrt_s = 0.2;
  p.clock.sine_amplitude_ppb = 700;
  p.clock.sine_period_s = 1300;
  p.forward.min_ns = p.backward.min_ns = 10'000;
  p.forward.exp_mean_ns = p.backward.exp_mean_ns = 14'000;
  p.interval_ns = 62'000'000;  // 16 probes/s
  p.duration_ns = 1500 * kS;
  double sum_sq_adaptive = 0, sum_sq_shortest = 0;
  for (const uint64_t seed : {1, 2}) {
    p.seed = seed;
    AdaptiveConfig config;
    AdaptiveWindowEstimator est(config);
    EstimatorConfig shortest_config = config.base;
    shortest_config.window_ns = config.base.window_ns >> (config.levels - 1);
    TwoHullEstimator shortest(shortest_config);
    ProbeSimulator sim(p);
    SimulatedSample s;
    while (sim.Next(&s)) {
      est.Add(s.sample);
      shortest.Add(s.sample);
      if (s.true_ns < 300 * kS) continue;
      const int64_t x = s.sample.t4_ns;
      const double ea = static_cast<double>(est.Estimate(x).global_ns -
                                            s.true_global_at_t4_ns);
      const double es = static_cast<double>(shortest.Estimate(x).global_ns -
                                            s.true_global_at_t4_ns);
      sum_sq_adaptive += ea * ea;
      sum_sq_shortest += es * es;
    }
  }
  const double ratio = std::sqrt(sum_sq_adaptive / sum_sq_shortest);
  std::printf("adaptive / 37.5 s window after 300 s: %.3f\n", ratio);
  EXPECT_LT(ratio, 1.05);
}

// The references' wander moves the home both ways: below the allowance on
// a clock that wanders a tenth of it, above it on one that wanders three
// times as much (reference_wander.h), once their interval excludes it
// (with 20 µs of jitter at 2 Hz, after 11–15 minutes on some seeds).
TEST(AdaptiveEstimatorTest, ReferencesMeasureTheHomesWander) {
  for (const double wander : {0.1, 3.0}) {
    SimulationParams p;
    p.clock.frequency_ppm = -12;
    p.clock.wander_ppb_per_sqrt_s = wander;
    p.forward.min_ns = p.backward.min_ns = 30'000;
    p.forward.exp_mean_ns = p.backward.exp_mean_ns = 20'000;
    p.interval_ns = 500'000'000;
    p.duration_ns = 900 * kS;
    int below = 0, above = 0, checks = 0;
    double lowest = 1e9;
    for (const uint64_t seed : {1, 2, 3}) {
      p.seed = seed;
      p.clock.seed = seed + 100;
      AdaptiveWindowEstimator est{AdaptiveConfig()};
      ProbeSimulator sim(p);
      SimulatedSample s;
      while (sim.Next(&s)) {
        est.Add(s.sample);
        if (s.true_ns < 600 * kS) continue;
        ++checks;
        below += est.home_wander_ppb() < 0.75;
        above += est.home_wander_ppb() > 1.05;
        lowest = std::min(lowest, est.home_wander_ppb());
      }
    }
    std::printf("wander %.1f: home wander below 0.75 at %d, above 1.05 at "
                "%d of %d samples after 600 s, lowest %.3f\n",
                wander, below, above, checks, lowest);
    if (wander < 1) {
      EXPECT_GT(below, checks * 9 / 10);
    } else {
      EXPECT_GT(above, checks / 2);
      EXPECT_GE(lowest, 0.99);  // Never below the allowance.
    }
  }
}

// Exponential jitter of `mean_ns` on `min_ns` each way at 1 probe/s, on
// a clock at 100 ppm wandering at the allowance (`--kinds`' jitter-1hz).
SimulationParams NoisySlowPath(int64_t min_ns, int64_t mean_ns,
                               int64_t duration_s) {
  SimulationParams p;
  p.clock.frequency_ppm = 100;
  p.clock.wander_ppb_per_sqrt_s = 1;
  p.forward.min_ns = p.backward.min_ns = min_ns;
  p.forward.exp_mean_ns = p.backward.exp_mean_ns = mean_ns;
  p.interval_ns = 1'000'000'000;
  p.duration_ns = duration_s * kS;
  return p;
}

// 2 ms of exponential jitter each way at 1 probe/s on a clock wandering
// at the allowance: the references' σ² has a standard error of 10⁴–10⁶
// ppb²/s, and now and then the lower end of their interval rises above
// the allowance by chance (to 120–800 ppb/√s). Too noisy to resolve any
// wander a clock has, they do not shorten the home nor widen the bound:
// the home's wander never exceeds the allowance (without the limit: at
// 319 samples in 6 of these 40 runs, up to 325 ppb/√s).
TEST(AdaptiveEstimatorTest, ReferencesTooNoisyToResolveAWanderDoNotCount) {
  SimulationParams p = NoisySlowPath(50'000, 2'000'000, 1800);
  int above = 0, runs_above = 0, checks = 0;
  double highest = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    p.seed = seed;
    p.clock.seed = seed + 1000;
    AdaptiveWindowEstimator est{AdaptiveConfig()};
    ProbeSimulator sim(p);
    SimulatedSample s;
    bool seen = false;
    while (sim.Next(&s)) {
      est.Add(s.sample);
      ++checks;
      if (est.home_wander_ppb() > 1.0) {
        ++above;
        seen = true;
      }
      highest = std::max(highest, est.home_wander_ppb());
    }
    runs_above += seen;
  }
  std::printf("home wander above the allowance at %d of %d samples (%d of "
              "40 runs), highest %.2f ppb/s^0.5\n",
              above, checks, runs_above, highest);
  EXPECT_EQ(above, 0);
}

// A steep swing (800 ppb over 600 s: `--kinds`' swing-2hz with 50 µs of
// jitter at 2 probes/s) moves the home short as soon as the first longest
// window's samples and the references agree it wanders far faster than
// the allowance: above 4 ppb/√s by 95–125 s on these 10 seeds (by 116 s
// before the samples' reading had to hold with either end stretch left
// out, linearity_check.h), where the references alone left three of them
// at the allowance until 191–193 s.
TEST(AdaptiveEstimatorTest, SteepSwingShortensTheHomeWithinAFewStretches) {
  SimulationParams p;
  p.clock.frequency_ppm = 20;
  p.clock.sine_amplitude_ppb = 800;
  p.clock.sine_period_s = 600;
  p.forward.min_ns = p.backward.min_ns = 50'000;
  p.forward.exp_mean_ns = p.backward.exp_mean_ns = 50'000;
  p.interval_ns = 500'000'000;
  p.duration_ns = 300 * kS;
  double latest_s = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    p.seed = seed;
    p.clock.seed = seed + 300;
    AdaptiveWindowEstimator est{AdaptiveConfig()};
    ProbeSimulator sim(p);
    SimulatedSample s;
    double first_s = 300;
    while (sim.Next(&s)) {
      est.Add(s.sample);
      if (est.home_wander_ppb() > 4.0) {
        first_s = static_cast<double>(s.true_ns) * 1e-9;
        break;
      }
    }
    std::printf("seed %d: home wander above 4 ppb/s^0.5 from %.0f s\n",
                static_cast<int>(seed), first_s);
    latest_s = std::max(latest_s, first_s);
  }
  EXPECT_LE(latest_s, 130);
}

// Local time before the epoch (a clock hours behind an early origin):
// the checkpoints are scored as with any other epoch.
TEST(AdaptiveEstimatorTest, NegativeLocalTimeIsScored) {
  uint64_t scored[2] = {};
  for (const int64_t offset_s : {0, -5 * 3600}) {
    SimulationParams p = KernelStamped(1.0, 0);
    p.clock.offset_ns = offset_s * kS;
    AdaptiveWindowEstimator est{AdaptiveConfig()};
    ProbeSimulator sim(p);
    SimulatedSample s;
    bool negative = false;
    while (sim.Next(&s)) {
      negative = negative || s.sample.t4_ns < 0;
      est.Add(s.sample);
    }
    EXPECT_EQ(negative, offset_s < 0);
    scored[offset_s < 0] = est.checkpoints_scored();
  }
  EXPECT_GT(scored[0], 0u);
  EXPECT_EQ(scored[1], scored[0]);
}

// Minimum delays far above the jitter (220 us each way + Pareto jitter
// of scale 100 us, α 1.5), 14 Hz: a standing queue of 250 us forward for
// 70 s widens a level's range by less than 4 times its usual (the minimum
// delays dominate it), so only the round trips show the episode.
SimulationParams LongRoute(uint64_t seed) {
  SimulationParams p;
  p.clock.frequency_ppm = 20;
  p.clock.wander_ppb_per_sqrt_s = 1;
  p.clock.seed = 3 + seed;
  p.forward.min_ns = p.backward.min_ns = 220'000;
  p.forward.exp_mean_ns = p.backward.exp_mean_ns = 0;
  p.forward.pareto_alpha = p.backward.pareto_alpha = 1.5;
  p.forward.pareto_scale_ns = p.backward.pareto_scale_ns = 100'000;
  p.interval_ns = 70'000'000;
  p.duration_ns = 600 * kS;
  p.seed = 22 + 1'000'003 * seed;
  CongestionEpisode e;
  e.begin_ns = 400 * kS;
  e.end_ns = 470 * kS;
  e.forward_extra.min_ns = 250'000;
  e.forward_extra.exp_mean_ns = 750'000;
  p.congestion.push_back(e);
  return p;
}

// RMS error (ns) of `est` at the samples whose true time is in [from, to),
// over the whole run of `p`.
double RmsBetween(const SimulationParams& p, Estimator& est, int64_t from_ns,
                  int64_t to_ns) {
  ProbeSimulator sim(p);
  SimulatedSample s;
  double sum = 0;
  int n = 0;
  while (sim.Next(&s)) {
    est.Add(s.sample);
    if (s.true_ns < from_ns || s.true_ns >= to_ns) continue;
    const double e = static_cast<double>(
        est.Estimate(s.sample.t4_ns).global_ns - s.true_global_at_t4_ns);
    sum += e * e;
    ++n;
  }
  return n > 0 ? std::sqrt(sum / n) : 0;
}

// The daemon's windows (300 s × 4) on `p` (clock and network drawn afresh
// for seeds 1-3): over the run after the first minute, within `ratio`
// times the 300 s window.
void ExpectDaemonNearIts300sWindow(SimulationParams p, double ratio) {
  AdaptiveConfig daemon = AdaptiveConfig();
  daemon.base.window_ns = 300 * kS;
  daemon.levels = 4;
  const int64_t end_ns = p.duration_ns;
  for (uint64_t seed : {1, 2, 3}) {
    p.seed = seed;
    p.clock.seed = seed;
    AdaptiveWindowEstimator adaptive{daemon};
    TwoHullEstimator fixed(daemon.base);
    const double rms_adaptive = RmsBetween(p, adaptive, 60 * kS, end_ns);
    const double rms_fixed = RmsBetween(p, fixed, 60 * kS, end_ns);
    std::printf("seed %d: adaptive %.0f ns, 300 s window %.0f ns\n",
                static_cast<int>(seed), rms_adaptive, rms_fixed);
    EXPECT_LT(rms_adaptive, ratio * rms_fixed) << "seed " << seed;
  }
}

TEST(AdaptiveEstimatorTest, CongestionIsSeenInTheRoundTrips) {
  for (uint64_t seed = 0; seed < 3; ++seed) {
    SCOPED_TRACE(seed);
    const SimulationParams p = LongRoute(seed);
    AdaptiveWindowEstimator est{AdaptiveConfig()};
    ProbeSimulator sim(p);
    SimulatedSample s;
    bool congested_before = false, congested_during = false;
    int64_t window_at_end_ns = 0;
    while (sim.Next(&s)) {
      est.Add(s.sample);
      if (s.true_ns < 400 * kS) congested_before |= est.round_trips().congested();
      if (s.true_ns >= 400 * kS && s.true_ns < 470 * kS) {
        congested_during |= est.round_trips().congested();
        window_at_end_ns = est.selected_window_ns();
      }
    }
    EXPECT_FALSE(congested_before);
    EXPECT_TRUE(congested_during);
    // 70 s in, the 37.5 and 75 s windows hold only delayed samples.
    EXPECT_GT(window_at_end_ns, 75 * kS);
    // Over the episode and the minute after it, the adaptive estimator
    // stays far closer than the shortest window, which the episode fills
    // (without the round trips' view: up to 1,749 ns, 0.024 of it).
    AdaptiveWindowEstimator adaptive{AdaptiveConfig()};
    EstimatorConfig shortest = AdaptiveConfig().base;
    shortest.window_ns = 37'500'000'000;
    TwoHullEstimator fixed(shortest);
    const double rms_adaptive = RmsBetween(p, adaptive, 400 * kS, 530 * kS);
    const double rms_fixed = RmsBetween(p, fixed, 400 * kS, 530 * kS);
    std::printf("seed %d: RMS over the episode: adaptive %.0f ns, 37.5 s "
                "window %.0f ns\n",
                static_cast<int>(seed), rms_adaptive, rms_fixed);
    EXPECT_LT(rms_adaptive, 0.02 * rms_fixed);
  }
}

// A standing queue too small for the round trips' congestion limit: a
// linear clock at 1.3 probes/s on a path of 160 us at the minimum with 21 us
// of exponential jitter forward and 6 back, and three 80 s episodes adding
// 22 us + exp(25 us) forward. Most of the episodes' round trips lie below
// the limit (the minimum + 2 spreads, about 200 us), so no run of 8 opens
// an interval; their floor rises by 22 us, which moves the short windows'
// hulls by half of it.
SimulationParams StandingQueue(uint64_t seed) {
  SimulationParams p;
  p.clock.frequency_ppm = 20;
  p.clock.wander_ppb_per_sqrt_s = 0;
  p.forward.min_ns = p.backward.min_ns = 80'000;
  p.forward.exp_mean_ns = 21'000;
  p.backward.exp_mean_ns = 6'000;
  p.interval_ns = 770'000'000;
  p.duration_ns = 1200 * kS;
  p.seed = 38 + 1'000'003 * seed;
  for (const int64_t begin_s : {300, 600, 900}) {
    CongestionEpisode e;
    e.begin_ns = begin_s * kS;
    e.end_ns = (begin_s + 80) * kS;
    e.forward_extra.min_ns = 22'000;
    e.forward_extra.exp_mean_ns = 25'000;
    p.congestion.push_back(e);
  }
  return p;
}

TEST(AdaptiveEstimatorTest, StandingQueueRaisesTheFloor) {
  double log_ratio_sum = 0;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    SCOPED_TRACE(seed);
    const SimulationParams p = StandingQueue(seed);
    AdaptiveWindowEstimator est{AdaptiveConfig()};
    ProbeSimulator sim(p);
    SimulatedSample s;
    int before = 0, inside = 0, inside_congested = 0;
    while (sim.Next(&s)) {
      est.Add(s.sample);
      if (s.true_ns < 300 * kS) {
        before += est.round_trips().congested();
      } else if (s.true_ns % (300 * kS) >= 20 * kS &&
                 s.true_ns % (300 * kS) < 80 * kS && s.true_ns < 1000 * kS) {
        // An episode, once the floor window holds only its round trips.
        ++inside;
        inside_congested += est.round_trips().congested();
      }
    }
    std::printf("seed %d: congested at %d of %d samples inside the episodes, "
                "%d before them\n",
                static_cast<int>(seed), inside_congested, inside, before);
    EXPECT_EQ(before, 0);
    EXPECT_GT(inside_congested, inside * 3 / 4);
    // From the first minute on, the adaptive estimator stays near the
    // 600 s window, the best for a linear clock.
    AdaptiveWindowEstimator adaptive{AdaptiveConfig()};
    TwoHullEstimator longest(AdaptiveConfig().base);
    const double rms_adaptive = RmsBetween(p, adaptive, 60 * kS, 1200 * kS);
    const double rms_longest = RmsBetween(p, longest, 60 * kS, 1200 * kS);
    std::printf("seed %d: RMS adaptive %.0f ns, 600 s window %.0f ns\n",
                static_cast<int>(seed), rms_adaptive, rms_longest);
    log_ratio_sum += std::log(rms_adaptive / rms_longest);
  }
  // 1.1, 3.3 and 2.0 times the 600 s window; with the run detector alone
  // (which sees about a quarter of the episodes' samples) 4.2, 7.0 and 3.4.
  EXPECT_LT(std::exp(log_ratio_sum / 3), 3.0);
}

// 200 us more each way for good from 900 s on (a longer route): the
// estimator takes it as the new normal after half its longest window, not
// as an episode that never ends, and answers from short levels again.
TEST(AdaptiveEstimatorTest, LongerRouteBecomesTheNewNormal) {
  SimulationParams p;
  p.clock.frequency_ppm = 30;
  p.clock.wander_ppb_per_sqrt_s = 1;
  p.forward.min_ns = p.backward.min_ns = 20'000;
  p.forward.exp_mean_ns = p.backward.exp_mean_ns = 20'000;
  p.interval_ns = 250'000'000;
  p.duration_ns = 2400 * kS;
  CongestionEpisode e;
  e.begin_ns = 900 * kS;
  e.end_ns = p.duration_ns;
  e.forward_extra.min_ns = e.backward_extra.min_ns = 200'000;
  e.forward_extra.exp_mean_ns = e.backward_extra.exp_mean_ns = 0;
  p.congestion.push_back(e);
  AdaptiveWindowEstimator est{AdaptiveConfig()};
  ProbeSimulator sim(p);
  SimulatedSample s;
  int late = 0, late_longest = 0;
  while (sim.Next(&s)) {
    est.Add(s.sample);
    if (s.true_ns < 1500 * kS) continue;
    EXPECT_FALSE(est.round_trips().congested());
    ++late;
    late_longest += est.selected_level() == 0;
  }
  EXPECT_EQ(est.round_trips().congested_intervals(), 0);
  // The limit was learnt afresh: the new round trips' minimum is 440 us.
  EXPECT_GT(est.round_trips().clean_limit_ns(), 440'000);
  EXPECT_LT(late_longest, late / 10);
  AdaptiveWindowEstimator adaptive{AdaptiveConfig()};
  EstimatorConfig middle = AdaptiveConfig().base;
  middle.window_ns = 150 * kS;
  TwoHullEstimator fixed(middle);
  const double rms_adaptive = RmsBetween(p, adaptive, 1500 * kS, 2400 * kS);
  const double rms_fixed = RmsBetween(p, fixed, 1500 * kS, 2400 * kS);
  std::printf("after the new route: adaptive %.0f ns, 150 s window %.0f ns\n",
              rms_adaptive, rms_fixed);
  EXPECT_LT(rms_adaptive, 1.5 * rms_fixed);
}

// A queue one way that outlasts half the longest window is still an
// episode: it moves the shorter levels' middle by half its depth, out of
// the longest level's bound, and no new normal is taken while they
// disagree. The daemon's windows (300 s × 4), 1 probe/s, 200 s episodes
// of 375 µs + exp(90 µs) on the way back every 320 s (as random seed 8's
// r24 draws them): 19–29 µs over the run when the 150 s level answered
// from 150 s into each episode, about the 300 s window's error now.
TEST(AdaptiveEstimatorTest, OneWayQueueOutlastingHalfTheWindowIsNoNewRoute) {
  SimulationParams p;
  p.clock.frequency_ppm = 20;
  p.clock.wander_ppb_per_sqrt_s = 1;
  p.forward.min_ns = p.backward.min_ns = 30'000;
  p.forward.exp_mean_ns = p.backward.exp_mean_ns = 23'000;
  p.interval_ns = kS;
  p.duration_ns = 1300 * kS;
  for (int64_t begin_s = 140; begin_s + 200 < 1300; begin_s += 320) {
    CongestionEpisode e;
    e.begin_ns = begin_s * kS;
    e.end_ns = (begin_s + 200) * kS;
    e.backward_extra.min_ns = 375'000;
    e.backward_extra.exp_mean_ns = 90'000;
    p.congestion.push_back(e);
  }
  ExpectDaemonNearIts300sWindow(p, 2.0);
}

// A deep one-way queue on wide delays (random seed 3's r37: 0.8 probes/s,
// 78 µs of jitter each way, 192 s episodes of 204 µs + exp(1.5 ms)
// forward): the longest level's bound, ±70 µs from the minimum delays and
// growing on the queued side as its clean samples age, held the congested
// levels (a quarter of the range off the longest level's answer); the new
// normal, taken 150 s in, left the shorter levels answering 100-150 µs
// off.
TEST(AdaptiveEstimatorTest, DeepOneWayQueueInsideAWideBoundIsNoNewRoute) {
  SimulationParams p;
  p.clock.frequency_ppm = -35;
  p.clock.wander_ppb_per_sqrt_s = 0.15;
  p.forward.min_ns = p.backward.min_ns = 60'000;
  p.forward.exp_mean_ns = p.backward.exp_mean_ns = 78'000;
  p.interval_ns = 1'250'000'000;
  p.duration_ns = 1300 * kS;
  for (int64_t begin_s : {450, 1000}) {
    CongestionEpisode e;
    e.begin_ns = begin_s * kS;
    e.end_ns = (begin_s + 192) * kS;
    e.forward_extra.min_ns = 204'000;
    e.forward_extra.exp_mean_ns = 1'475'000;
    p.congestion.push_back(e);
  }
  ExpectDaemonNearIts300sWindow(p, 1.3);
}

// Heavy-tailed delays (Pareto, α 1.5) at 20 probes/s for an hour, without
// congestion: runs of high round trips by chance stay rare.
TEST(AdaptiveEstimatorTest, HeavyTailsAreNotCongestion) {
  SimulationParams p;
  p.clock.frequency_ppm = -12;
  p.clock.wander_ppb_per_sqrt_s = 1;
  p.forward.min_ns = p.backward.min_ns = 30'000;
  p.forward.exp_mean_ns = p.backward.exp_mean_ns = 0;
  p.forward.pareto_alpha = p.backward.pareto_alpha = 1.5;
  p.forward.pareto_scale_ns = p.backward.pareto_scale_ns = 20'000;
  p.interval_ns = 50'000'000;
  p.duration_ns = 3600 * kS;
  AdaptiveWindowEstimator est{AdaptiveConfig()};
  ProbeSimulator sim(p);
  SimulatedSample s;
  int samples = 0, congested = 0;
  while (sim.Next(&s)) {
    est.Add(s.sample);
    ++samples;
    congested += est.round_trips().congested();
  }
  std::printf("congested: %d of %d samples\n", congested, samples);
  EXPECT_LT(congested, samples / 1000);
}

// Exponential delays each way at 1 probe/s for three hours, without
// congestion: the smallest of the 19 round trips of a floor window lies
// 0.75 spreads above the clean floor by chance only rarely.
TEST(AdaptiveEstimatorTest, ExponentialDelaysAreNotCongestion) {
  for (uint64_t seed = 0; seed < 3; ++seed) {
    SimulationParams p;
    p.clock.frequency_ppm = 7;
    p.clock.wander_ppb_per_sqrt_s = 1;
    p.forward.min_ns = p.backward.min_ns = 100'000;
    p.forward.exp_mean_ns = p.backward.exp_mean_ns = 50'000;
    p.interval_ns = kS;
    p.duration_ns = 3 * 3600 * kS;
    p.seed = 5 + 1'000'003 * seed;
    AdaptiveWindowEstimator est{AdaptiveConfig()};
    ProbeSimulator sim(p);
    SimulatedSample s;
    int samples = 0, congested = 0;
    while (sim.Next(&s)) {
      est.Add(s.sample);
      ++samples;
      congested += est.round_trips().congested();
    }
    std::printf("seed %d: congested: %d of %d samples\n",
                static_cast<int>(seed), congested, samples);
    EXPECT_LT(congested, samples / 1000);
  }
}

TEST(AdaptiveEstimatorTest, ValidationNamesTheKey) {
  AdaptiveConfig c;
  EXPECT_EQ(ValidateAdaptiveConfig(c), "");
  c.levels = 0;
  EXPECT_EQ(ValidateAdaptiveConfig(c).rfind("levels:", 0), 0u);
  c.levels = 4;
  c.base.window_ns = 2 * kS;
  EXPECT_EQ(ValidateAdaptiveConfig(c).rfind("levels:", 0), 0u);
  c = AdaptiveConfig();
  c.score_time_constant_ns = 0;
  EXPECT_EQ(ValidateAdaptiveConfig(c).rfind("score_time_constant_ns:", 0), 0u);
  c = AdaptiveConfig();
  c.base.window_ns = -1;
  EXPECT_EQ(ValidateAdaptiveConfig(c).rfind("window_ns:", 0), 0u);
  for (const double prior : {-0.1, std::nan(""), HUGE_VAL}) {
    c = AdaptiveConfig();
    c.wander_prior_ppb_per_sqrt_s = prior;
    EXPECT_EQ(ValidateAdaptiveConfig(c).rfind("wander_prior_ppb_per_sqrt_s:", 0),
              0u)
        << prior;
  }
}

// Errors of an estimator at every sample after `from_ns` (true time) of a
// run of `p`: RMS (ns), and how many samples' bounds missed the truth.
struct RunErrors {
  double rms_ns = 0;
  int misses = 0;
  int samples = 0;
};
// `each`, if given, runs at every sample counted (after the estimate).
RunErrors ErrorsAfter(const SimulationParams& p, Estimator& est,
                      int64_t from_ns,
                      const std::function<void()>& each = nullptr) {
  ProbeSimulator sim(p);
  SimulatedSample s;
  RunErrors r;
  double sum = 0;
  while (sim.Next(&s)) {
    est.Add(s.sample);
    if (s.true_ns < from_ns) continue;
    if (each) each();
    const TimeEstimate e = est.Estimate(s.sample.t4_ns);
    const double err =
        static_cast<double>(e.global_ns - s.true_global_at_t4_ns);
    sum += err * err;
    ++r.samples;
    r.misses += s.true_global_at_t4_ns < e.earliest_ns ||
                s.true_global_at_t4_ns > e.latest_ns;
  }
  r.rms_ns = r.samples > 0 ? std::sqrt(sum / r.samples) : 0;
  return r;
}

// The library's default adaptive estimator over 10 seeds of runs that
// `params(seed, wander)` builds (wander 0: a linear clock; 1: the
// allowance's), errors from `from_ns` on, pooled: against the longest
// window on the linear clock, against the longest / `wandering_divisor`
// window on the wandering one. `wandering_end` sees each wandering run's
// estimator when it ends.
struct LeanRatios {
  double linear = 0;
  double wandering = 0;
};
LeanRatios LinearAndWanderingRatios(
    const std::function<SimulationParams(int seed, int wander)>& params,
    int64_t wandering_divisor, int64_t from_ns,
    const std::function<void(const AdaptiveWindowEstimator&)>&
        wandering_end = nullptr) {
  double sum[2][2] = {};  // [wander 0 / 1][adaptive / fixed]
  for (int seed = 0; seed < 10; ++seed) {
    for (const int wander : {0, 1}) {
      const SimulationParams p = params(seed, wander);
      AdaptiveWindowEstimator adaptive{AdaptiveConfig()};
      AdaptiveConfig fixed_config;
      fixed_config.levels = 1;
      if (wander > 0) fixed_config.base.window_ns /= wandering_divisor;
      AdaptiveWindowEstimator fixed(fixed_config);
      const RunErrors a = ErrorsAfter(p, adaptive, from_ns);
      const RunErrors f = ErrorsAfter(p, fixed, from_ns);
      EXPECT_EQ(a.misses, 0);
      sum[wander][0] += a.rms_ns * a.rms_ns;
      sum[wander][1] += f.rms_ns * f.rms_ns;
      if (wander > 0 && wandering_end) wandering_end(adaptive);
    }
  }
  return {std::sqrt(sum[0][0] / sum[0][1]), std::sqrt(sum[1][0] / sum[1][1])};
}

// 102's network (50 µs + exp(20 µs) each way at 10 probes/s): until the
// samples show a clock linear, W* from the allowance puts the home at
// about 60 s, while on a linear clock the longest window is 2-10 times
// better. The home leans towards the longest level by the samples'
// probability of a linear clock (1.44 × the longest window from 90 to
// 360 s, 1.84 × without), and a clock that wanders as the allowance says
// loses little by it (0.938 × the 75 s window, about the allowance's W*;
// 0.918 × without).
TEST(AdaptiveEstimatorTest, HomeLeansTowardsTheLongestLevelOnALinearClock) {
  const std::vector<Scenario> standard = StandardScenarios();
  const Scenario* s102 = FindScenario(standard, "102-large-offset-linear");
  ASSERT_NE(s102, nullptr);
  const LeanRatios r = LinearAndWanderingRatios(
      [&](int seed, int wander) {
        SimulationParams p = SeededScenario(*s102, seed).params;
        p.clock.wander_ppb_per_sqrt_s = wander;
        p.duration_ns = 360 * kS;
        return p;
      },
      /*wandering_divisor=*/8, 90 * kS);
  std::printf("90-360 s: linear, adaptive / 600 s window %.3f; wandering, "
              "adaptive / 75 s window %.3f\n", r.linear, r.wandering);
  // Without the lean: 1.84 and 0.92.
  EXPECT_LT(r.linear, 1.6);
  EXPECT_LT(r.wandering, 1.05);
}

// 102's network on seeds 10-19: on a linear clock no window shorter than
// the home predicts better, and a shorter candidate that has done so
// over a few checkpoints won against the references' noise (seed 19: the
// 37.5 s level answered at 120-210 s, 95-110 ns off where the 75 s home
// was 20-70). While the samples find the clock likely linear, such a
// candidate leaves the home only beyond 2.5 standard errors (1.5 as for
// any other: 1.119 × the 600 s window, 712 samples answered shorter); on
// a clock wandering as the allowance says the samples soon find it is
// not.
TEST(AdaptiveEstimatorTest, ShorterCandidateLeavesALikelyLinearHomeOnStrongEvidence) {
  const std::vector<Scenario> standard = StandardScenarios();
  const Scenario* s102 = FindScenario(standard, "102-large-offset-linear");
  ASSERT_NE(s102, nullptr);
  int shorter_than_home = 0, samples = 0;
  double adaptive2 = 0, longest2 = 0;
  for (int seed = 10; seed < 20; ++seed) {
    const SimulationParams p = SeededScenario(*s102, seed).params;
    AdaptiveWindowEstimator adaptive{AdaptiveConfig()};
    AdaptiveConfig longest_config;
    longest_config.levels = 1;
    AdaptiveWindowEstimator longest(longest_config);
    const RunErrors a = ErrorsAfter(p, adaptive, 60 * kS, [&] {
      ++samples;
      shorter_than_home +=
          adaptive.selected_candidate() > adaptive.home_candidate();
    });
    const RunErrors f = ErrorsAfter(p, longest, 60 * kS);
    EXPECT_EQ(a.misses, 0) << "seed " << seed;
    adaptive2 += a.rms_ns * a.rms_ns;
    longest2 += f.rms_ns * f.rms_ns;
  }
  const double ratio = std::sqrt(adaptive2 / longest2);
  std::printf("seeds 10-19: adaptive / 600 s window %.3f; answered shorter "
              "than the home at %d of %d samples\n",
              ratio, shorter_than_home, samples);
  EXPECT_LT(ratio, 1.09);
  EXPECT_LT(shorter_than_home, samples / 100);
}

// Where the delays put the allowance's home at about a third of the
// longest window (2 probes/s, 50 µs + exp(90 µs) each way: the 150|300 s
// blend), the home leans towards the longest level too. Over 90-600 s,
// 10 seeds: a linear clock against the 600 s window (1.36 ×), one
// wandering at the allowance against the 300 s window (0.94 ×).
TEST(AdaptiveEstimatorTest, HalfWindowHomeLeansTowardsTheLongestLevel) {
  int homes_150_to_300 = 0, homes = 0;
  const LeanRatios r = LinearAndWanderingRatios(
      [](int seed, int wander) {
        SimulationParams p = NoisySlowPath(50'000, 90'000, 600);
        p.interval_ns = 500'000'000;
        p.clock.wander_ppb_per_sqrt_s = wander;
        p.seed = 811 + 1'000'003 * static_cast<uint64_t>(seed);
        p.clock.seed = 812 + 7'919 * static_cast<uint64_t>(seed);
        return p;
      },
      /*wandering_divisor=*/2, 90 * kS,
      [&](const AdaptiveWindowEstimator& adaptive) {
        ++homes;
        // The home these delays call for lies between a quarter and half
        // of the longest window (candidates 2-4: 300, 150|300, 150).
        const int home = adaptive.home_candidate();
        homes_150_to_300 += home >= 2 && home <= 4;
      });
  std::printf("90-600 s: linear, adaptive / 600 s window %.3f; wandering, "
              "adaptive / 300 s window %.3f; homes at 150-300 s: %d of %d\n",
              r.linear, r.wandering, homes_150_to_300, homes);
  EXPECT_GE(homes_150_to_300, 8);
  // Leaning only from a quarter of the longest window: 1.62 and 1.001.
  EXPECT_LT(r.linear, 1.5);
  EXPECT_LT(r.wandering, 1.0);
}

// 200 µs + exp(2 ms) each way at 1 probe/s for an hour, wandering at the
// allowance (`--kinds`' jitter-1hz/200us+exp(2ms)/60min on its seeds
// 30–39): the 600 s window is the best of the levels, and on seed 30 the
// 150 s level predicted better over a few checkpoints by chance and
// answered at 390–460 s, 30–120 µs off. Scored against references this
// noisy, the paired test's z comes from Student's t: the adaptive
// estimator stays with the longest window (before: 1.069 × it).
TEST(AdaptiveEstimatorTest, NoisySlowPathKeepsTheLongestWindow) {
  SimulationParams p = NoisySlowPath(200'000, 2'000'000, 3600);
  double adaptive_sum = 0, fixed_sum = 0, worst = 0;
  for (uint64_t seed = 30; seed < 40; ++seed) {
    p.seed = 5033 + 1'000'003 * seed;
    p.clock.seed = 5032 + 7'919 * seed;
    AdaptiveWindowEstimator adaptive{AdaptiveConfig()};
    AdaptiveConfig longest;
    longest.levels = 1;
    AdaptiveWindowEstimator fixed(longest);
    const RunErrors a = ErrorsAfter(p, adaptive, 60 * kS);
    const RunErrors f = ErrorsAfter(p, fixed, 60 * kS);
    adaptive_sum += a.rms_ns * a.rms_ns;
    fixed_sum += f.rms_ns * f.rms_ns;
    worst = std::max(worst, a.rms_ns / f.rms_ns);
  }
  const double ratio = std::sqrt(adaptive_sum / fixed_sum);
  std::printf("adaptive / 600 s window over seeds 30-39: %.3f (worst run "
              "%.3f)\n", ratio, worst);
  EXPECT_LT(ratio, 1.03);
}

// A steep swing (810 ppb over 1436 s: 3.5 ppb/s at its steepest) on
// 18.7 us + exp(1.8 us / 1 us) delays, with a 103 s episode of +7.6 us +
// exp(3.6 us) back every 130-270 s. The episodes blow up the 300 s level's
// range, which bars every shorter level; the longest, cut alone by the
// bend, is young. With no level eligible, the nearest to the home that is
// not young answers: before, the longest did, 20 us off the truth for
// minutes (8,523-9,313 ns over the run against 2,443-2,470 for the 37.5 s
// window; 545-634 of about 4,080 samples outside its bound without the
// widening of BoundWidensWhenTheClockWandersBeyondTheAllowance).
TEST(AdaptiveEstimatorTest, NoEligibleLevelFallsBackToOneThatIsNotYoung) {
  SimulationParams p;
  p.clock.frequency_ppm = -40;
  p.clock.sine_amplitude_ppb = 810;
  p.clock.sine_period_s = 1436;
  p.forward.min_ns = p.backward.min_ns = 18'700;
  p.forward.exp_mean_ns = 1'800;
  p.backward.exp_mean_ns = 1'000;
  p.interval_ns = 500'000'000;
  p.duration_ns = 2100 * kS;
  for (const int64_t begin_s :
       {135, 356, 525, 746, 993, 1260, 1425, 1605, 1767, 1959}) {
    CongestionEpisode e;
    e.begin_ns = begin_s * kS;
    e.end_ns = (begin_s + 103) * kS;
    e.backward_extra = DelayParams{7'600, 3'600};
    p.congestion.push_back(e);
  }
  for (const uint64_t seed : {1, 2}) {
    SCOPED_TRACE(seed);
    p.seed = seed;
    AdaptiveWindowEstimator adaptive{AdaptiveConfig()};
    EstimatorConfig shortest = AdaptiveConfig().base;
    shortest.window_ns = 37'500'000'000;
    TwoHullEstimator fixed(shortest);
    const RunErrors a = ErrorsAfter(p, adaptive, 60 * kS);
    const RunErrors f = ErrorsAfter(p, fixed, 60 * kS);
    std::printf("seed %d: adaptive %.0f ns (%d of %d samples outside the "
                "bound), 37.5 s window %.0f ns\n",
                static_cast<int>(seed), a.rms_ns, a.misses, a.samples,
                f.rms_ns);
    EXPECT_EQ(a.misses, 0);
    EXPECT_LT(a.rms_ns, 1.6 * f.rms_ns);
  }
}

// A swing far steeper than the allowance's wander (1369 ppb over 1036 s:
// 8.3 ppb/s at its steepest), with 178 s congestion episodes. The
// references measure the wander at several times the allowance; the
// answer's bound widens by as much more, and holds where a level's own
// bound, widened for the allowance only, missed on 3 of 6 seeds (after
// 1,550 s, in the fourth swing).
TEST(AdaptiveEstimatorTest, BoundWidensWhenTheClockWandersBeyondTheAllowance) {
  SimulationParams p;
  p.clock.frequency_ppm = 78;
  p.clock.wander_ppb_per_sqrt_s = 0.36;
  p.clock.sine_amplitude_ppb = 1369;
  p.clock.sine_period_s = 1036;
  p.forward.min_ns = p.backward.min_ns = 8'600;
  p.forward.exp_mean_ns = p.backward.exp_mean_ns = 12'700;
  p.interval_ns = 612'000'000;
  p.duration_ns = 1600 * kS;
  for (const int64_t begin_s : {172, 544, 763, 976, 1334}) {
    CongestionEpisode e;
    e.begin_ns = begin_s * kS;
    e.end_ns = (begin_s + 178) * kS;
    e.forward_extra = e.backward_extra = DelayParams{6'900, 241'600};
    p.congestion.push_back(e);
  }
  int misses = 0, samples = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    p.seed = seed;
    p.clock.seed = seed + 7;
    AdaptiveWindowEstimator adaptive{AdaptiveConfig()};
    const RunErrors a = ErrorsAfter(p, adaptive, 60 * kS);
    EXPECT_GT(adaptive.home_wander_ppb(), 2) << seed;
    std::printf("seed %d: %d of %d samples outside the bound, home wander "
                "%.1f ppb/s^0.5 at the end\n",
                static_cast<int>(seed), a.misses, a.samples,
                adaptive.home_wander_ppb());
    misses += a.misses;
    samples += a.samples;
  }
  std::printf("samples outside the bound: %d of %d\n", misses, samples);
  EXPECT_EQ(misses, 0);
}
// Samples after the first minute outside the answer's bound and outside
// the answering level's own; the guard (header, step 6) only widens it.
struct GuardedMisses {
  int samples = 0;
  int level_misses = 0;
  int misses = 0;
};
GuardedMisses CountGuardedMisses(const SimulationParams& p) {
  AdaptiveWindowEstimator adaptive{AdaptiveConfig()};
  ProbeSimulator sim(p);
  SimulatedSample s;
  GuardedMisses r;
  while (sim.Next(&s)) {
    adaptive.Add(s.sample);
    if (s.true_ns < 60 * kS) continue;
    const int64_t truth = s.true_global_at_t4_ns;
    const TimeEstimate e = adaptive.Estimate(s.sample.t4_ns);
    const TimeEstimate level = adaptive.selected().Estimate(s.sample.t4_ns);
    EXPECT_NE(e.state, SyncState::kUnsynced);
    ++r.samples;
    r.misses += truth < e.earliest_ns || truth > e.latest_ns;
    r.level_misses += truth < level.earliest_ns || truth > level.latest_ns;
    EXPECT_LE(e.earliest_ns, level.earliest_ns);
    EXPECT_GE(e.latest_ns, level.latest_ns);
  }
  std::printf("of %d samples outside the answering level's bound %d, "
              "outside the answer's %d\n",
              r.samples, r.level_misses, r.misses);
  return r;
}

// 110's network (100 us + exp(1 ms) each way at 1 probe/s) on a clock
// with a 1 ppm swing over 15 minutes: before the references show the
// swing, its bend outgrows the allowance of the long level answering on
// two of these seeds (64 and 7 samples outside that level's bound at the
// time), while the 75 s level's bound, the guard's, still holds the
// truth: the answer's bound takes it in and misses none.
TEST(AdaptiveEstimatorTest, GuardHoldsTheBoundOnASwingAtHighJitter) {
  const std::vector<Scenario> all = StandardScenarios();
  const Scenario* base = FindScenario(all, "110-chrony-1ms-jitter");
  ASSERT_NE(base, nullptr);
  int level_misses = 0;
  for (const int seed : {8, 9}) {
    SimulationParams p = SeededScenario(*base, seed).params;
    p.clock.sine_amplitude_ppb = 1000;
    p.clock.sine_period_s = 900;
    const GuardedMisses r = CountGuardedMisses(p);
    level_misses += r.level_misses;
    EXPECT_EQ(r.misses, 0) << seed;
  }
  EXPECT_GT(level_misses, 20);
}

// A clock wandering at 2.3 times the allowance (random seed 8's r2, on
// its seed 8: 1.5 probes/s, 65 us of jitter): while the 300 s level
// answers for want of an eligible shorter one (a longer level's range
// bars them), the wander outgrows its allowance (69 samples outside its
// bound); the 37.5 s level, its own range clean, guards the bound.
TEST(AdaptiveEstimatorTest, GuardIsChosenByItsOwnState) {
  const std::vector<Scenario> random = RandomScenarios(40, 8);
  const GuardedMisses r =
      CountGuardedMisses(SeededScenario(random[2], 8).params);
  EXPECT_GT(r.level_misses, 20);
  EXPECT_EQ(r.misses, 0);
}

// A swing of 800 ppb over 15 minutes (5.6 ppb/s at its steepest) on
// 15 us + exp(15 us) delays at 2 Hz: even the shortest window lags the
// bend. The shortest level's estimate extrapolated away from the next
// one's, (4 θ_37.5 − θ_75) / 3, removes most of that lag, and the
// estimator answers from it through the steep parts: below the 37.5 s
// window's error (here 0.945 ×; on the variant 114-thermal-swing/
// sine=800ppb/900s 0.98 × and 0.95 × over two sets of 10 seeds, 1.07 ×
// before the extrapolated candidates).
TEST(AdaptiveEstimatorTest, ExtrapolationFollowsASteepSwing) {
  SimulationParams p;
  p.clock.frequency_ppm = -8;
  p.clock.wander_ppb_per_sqrt_s = 1;
  p.clock.sine_amplitude_ppb = 800;
  p.clock.sine_period_s = 900;
  p.forward.min_ns = p.backward.min_ns = 15'000;
  p.forward.exp_mean_ns = p.backward.exp_mean_ns = 15'000;
  p.interval_ns = 500'000'000;
  p.duration_ns = 2700 * kS;
  double sum_adaptive = 0, sum_fixed = 0;
  for (const uint64_t seed : {1, 2}) {
    p.seed = seed;
    p.clock.seed = seed + 30;
    const AdaptiveConfig config;
    AdaptiveWindowEstimator adaptive(config);
    EstimatorConfig shortest = config.base;
    shortest.window_ns = config.base.window_ns >> (config.levels - 1);
    TwoHullEstimator fixed(shortest);
    int extrapolated = 0;
    const RunErrors a = ErrorsAfter(p, adaptive, 60 * kS, [&] {
      extrapolated += adaptive.selected_candidate() >= 2 * config.levels - 1;
    });
    const RunErrors f = ErrorsAfter(p, fixed, 60 * kS);
    sum_adaptive += a.rms_ns * a.rms_ns * a.samples;
    sum_fixed += f.rms_ns * f.rms_ns * f.samples;
    std::printf("seed %d: extrapolated at %d of %d samples\n",
                static_cast<int>(seed), extrapolated, a.samples);
    EXPECT_GT(extrapolated, a.samples / 10);
  }
  const double ratio = std::sqrt(sum_adaptive / sum_fixed);
  std::printf("adaptive / 37.5 s window: %.3f\n", ratio);
  EXPECT_LT(ratio, 0.98);
}

// The library default's RMS error over `kind` on seeds [first, first +
// count) against a fixed window of `window_s`, pooled; each seed's pair of
// errors printed and its bound checked.
struct KindRatio {
  double pooled = 0;
  std::vector<double> by_seed;
};
KindRatio RatioToFixedWindow(const char* kind_name, int first, int count,
                             int64_t window_s) {
  const std::vector<Scenario> kinds = KindScenarios();
  const Scenario* kind = FindScenario(kinds, kind_name);
  EXPECT_NE(kind, nullptr) << kind_name;
  KindRatio r;
  if (kind == nullptr) return r;
  double adaptive_sum = 0, fixed_sum = 0;
  for (int seed = first; seed < first + count; ++seed) {
    const SimulationParams p = SeededScenario(*kind, seed).params;
    AdaptiveWindowEstimator adaptive{AdaptiveConfig()};
    AdaptiveConfig window;
    window.base.window_ns = window_s * kS;
    window.levels = 1;
    AdaptiveWindowEstimator fixed(window);
    const RunErrors a = ErrorsAfter(p, adaptive, 60 * kS);
    const RunErrors f = ErrorsAfter(p, fixed, 60 * kS);
    std::printf("%s seed %d: adaptive %.1f ns, %lld s window %.1f ns\n",
                kind_name, seed, a.rms_ns, static_cast<long long>(window_s),
                f.rms_ns);
    adaptive_sum += a.rms_ns * a.rms_ns;
    fixed_sum += f.rms_ns * f.rms_ns;
    r.by_seed.push_back(a.rms_ns / f.rms_ns);
    EXPECT_EQ(a.misses, 0) << "seed " << seed;
  }
  r.pooled = std::sqrt(adaptive_sum / fixed_sum);
  std::printf("adaptive / %lld s window over seeds %d-%d: %.3f\n",
              static_cast<long long>(window_s), first, first + count - 1,
              r.pooled);
  return r;
}

// Each of `count` seeds of the kind from `first` on below `limit` times the
// fixed 300 s window.
void ExpectEachSeedBelow300sWindow(const char* kind_name, int first,
                                   int count, double limit) {
  const KindRatio r = RatioToFixedWindow(kind_name, first, count, 300);
  ASSERT_EQ(r.by_seed.size(), static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    EXPECT_LT(r.by_seed[i], limit) << kind_name << " seed " << first + i;
  }
}

// 40 µs + exp(1 ms) forward against 40 µs + exp(2 µs) back at 20 probes/s
// for 20 minutes, wandering at the allowance (`--kinds`'
// asym-20hz/fwd=exp(1000us)/back=exp(2us), its seeds 60–69): a short
// reference's middle scatters by microseconds, far more than the levels'
// errors, and a paired difference against it varies by 4 (θ_a − θ_b)²
// times its variance. Where the spread of a few checkpoints' differences
// fell below that by chance, a short window answered, far off (seed 68:
// the 37.5 s level over 180–240 s, 2,286 ns RMS there against 365 for
// the 150 s window; 858 against 670 ns over the run, 1.071 × the best
// fixed window over the ten). With the references' own noise as the
// variance's floor: 714 ns there, 698 over the run, 1.021 × (1.015 × with
// the floor from the references' widths too).
TEST(AdaptiveEstimatorTest, NoisyReferencesDoNotMoveTheAnswerByChance) {
  EXPECT_LT(RatioToFixedWindow("asym-20hz/fwd=exp(1000us)/back=exp(2us)", 60,
                               10, 150)
                .pooled,
            1.04);
}

// 1 ms of exponential jitter forward and 500 µs back at 5 probes/s, where
// the 300 s window is the best: over the first 200 s the references'
// scatter had not yet told their noise from a wander (ReferenceWander's r
// 2–3 × 10⁶ ns² against 2.5 × 10⁷), and on seed 80 the 37.5 s level and
// the 37.5|75 s blend answered at 120–210 s, 4–6 µs off where the 300 s
// window was 1–2 µs (1.327 × it over the run; 1.024 × over seeds 80–89).
// With the references' noise from their widths as the floor: 1.111 × and
// 0.993 ×.
TEST(AdaptiveEstimatorTest, EarlyReferencesNoiseComesFromTheirWidths) {
  const KindRatio r =
      RatioToFixedWindow("asym2/fwd=exp(1000us)/back=x0.5/5Hz", 80, 10, 300);
  ASSERT_EQ(r.by_seed.size(), 10u);
  EXPECT_LT(r.by_seed[0], 1.2);
  EXPECT_LT(r.pooled, 1.01);
}

// A shallow queue one way (30 µs + exp(30 µs) forward on 20 µs + exp(20
// µs) each way, 180 s of every 5 minutes at 4 probes/s) is seen only by
// the round trips' floor rising. It also biases the references, which
// then read a wander just above the allowance; while that counted as a
// swing, the floor rises stopped barring the levels the queue filled, and
// on seeds 44 and 45 the 150 s level answered 15–16 µs off for minutes
// (3.94 × and 4.18 × the 300 s window over the run). A swing is a wander
// beyond twice the allowance: 0.92 × and 0.93 ×.
TEST(AdaptiveEstimatorTest, AShallowQueueOneWayStillBarsTheLevelsItFills) {
  ExpectEachSeedBelow300sWindow(
      "congestion-4hz/+30us+exp(30us)/180s-of-300s/fwd", 44, 2, 1.05);
}

// A 60 µs + exp(60 µs) queue one way for 180 s of every 5 minutes at 10
// probes/s: the home (the 75|150 blend) lost its eligibility to the
// episode, and step 4's clause kept it, the 150 s stand-in having
// predicted worse before (through the episode before, its window full of
// it). A quarter of the range's growth allowed for, the 75 s level
// answered with no clean sample left, 47 µs off (seed 1: 2.69 × the 300 s
// window; seed 4: 1.33 ×). Half of it once the window is wholly
// congested (but on a swing, where the stand-in's score is its lag):
// 0.99 × and 0.98 ×.
// With 30 µs + exp(30 µs) the 75 s level's range hardly grows (37 of
// its 66 µs are the two minimum delays: 77 µs wholly congested), and it
// answered 26 µs off even so (seed 111: 1.78 × the 300 s window); the
// floor's rise, 30 µs, tells the queue's depth instead: 0.92 ×.
TEST(AdaptiveEstimatorTest, AWhollyCongestedHomeGivesWayToItsStandIn) {
  const std::pair<const char*, int> runs[] = {
      {"congestion-10hz/+60us+exp(60us)/180s-of-300s/fwd", 1},
      {"congestion-10hz/+60us+exp(60us)/180s-of-300s/fwd", 4},
      {"congestion-10hz/+30us+exp(30us)/180s-of-300s/fwd", 111}};
  for (const auto& [kind, seed] : runs) {
    ExpectEachSeedBelow300sWindow(kind, seed, 1, 1.05);
  }
}

// 180 s episodes in every 5 minutes. The home held W* clean seconds (the
// fixed point reaching across the episodes in its way), during an episode
// W* plus its age, and answered from the blend nearest that window: at 1
// probe/s W* (about 125 s clean) does not fit between the episodes, and
// mid-episode a 150|300 blend answered whose 150 s level, mostly
// congested, extrapolated its few clean seconds far (300 µs one way, seeds
// 3–5: 1.137, 0.985 and 1.161 × the 300 s window); at 4 probes/s the same
// a little (60 µs one way, seeds 8 and 9: 1.132 and 1.042 ×). The home now
// weighs what a window holds, the holes and the extrapolation, and the
// levels by the clean seconds they hold: 1.012, 1.019, 0.999 × and
// 0.969, 0.970 ×. (Seeds 2 and 3 of the 30 µs kind, which a home
// reaching across two episodes cost 1.33 and 1.12 ×: 0.977 and 1.014 ×.)
TEST(AdaptiveEstimatorTest, TheHomeWeighsTheHolesCongestionLeaves) {
  ExpectEachSeedBelow300sWindow(
      "congestion-1hz/+300us+exp(300us)/180s-of-300s/fwd", 3, 3, 1.05);
  ExpectEachSeedBelow300sWindow(
      "congestion-4hz/+60us+exp(60us)/180s-of-300s/fwd", 8, 2, 1.03);
  ExpectEachSeedBelow300sWindow(
      "congestion-1hz/+30us+exp(30us)/180s-of-300s/fwd", 2, 2, 1.1);
}

// 102's network (50 µs + exp(20 µs) each way at 10 probes/s), a linear
// clock (wander 0) or one wandering as the allowance says (1), `seconds`
// long.
SimulationParams Network102(int seed, double wander, int64_t seconds) {
  const std::vector<Scenario> standard = StandardScenarios();
  SimulationParams p =
      SeededScenario(*FindScenario(standard, "102-large-offset-linear"), seed)
          .params;
  p.clock.wander_ppb_per_sqrt_s = wander;
  p.duration_ns = seconds * kS;
  return p;
}

// What a run learns of the wander is an upper bound of it: on a clock
// wandering at 1 ppb/√s it reads above that (1.04-2.1 over 10 minutes;
// the next start's home is not longer than the wander calls for), on a
// linear one far below the allowance (0.10-0.25). Nothing before the
// first bound.
TEST(AdaptiveEstimatorTest, LearntWanderIsAnUpperBound) {
  EXPECT_EQ(AdaptiveWindowEstimator().LearntWanderPpb(), 0);
  int below_truth = 0;
  std::vector<double> linear;
  for (int seed = 0; seed < 10; ++seed) {
    for (const double wander : {0.0, 1.0}) {
      AdaptiveWindowEstimator est;
      ErrorsAfter(Network102(seed, wander, 600), est, 0);
      const double learnt = est.LearntWanderPpb();
      std::printf("seed %d wander %.0f: learnt %.3f ppb/√s (references' "
                  "σ² %.3f ± %.3f ppb²/s)\n",
                  seed, wander, learnt, est.reference_wander().wander2(),
                  est.reference_wander().wander2_error());
      ASSERT_GT(learnt, 0);
      if (wander > 0) {
        below_truth += learnt < wander;
      } else {
        linear.push_back(learnt);
      }
    }
  }
  EXPECT_LE(below_truth, 1);
  std::sort(linear.begin(), linear.end());
  EXPECT_LT(linear[linear.size() / 2], 0.3);
}

// With what an earlier run learnt as its prior, a linear clock's home
// starts long: 102's network from 90 to 360 s, against the 600 s window.
// A prior the clock no longer keeps (it wanders at the allowance now)
// costs until the references overrule it: against the 75 s window, about
// the allowance's W*. The bound keeps the allowance: no miss.
TEST(AdaptiveEstimatorTest, WanderPriorStartsALinearClocksHomeLong) {
  double sum[3] = {};  // linear without, linear with, wandering with
  double fixed[2] = {};
  for (int seed = 0; seed < 10; ++seed) {
    for (const int wander : {0, 1}) {
      const SimulationParams p = Network102(seed, wander, 360);
      AdaptiveConfig fixed_config;
      fixed_config.levels = 1;
      if (wander > 0) fixed_config.base.window_ns /= 8;
      AdaptiveWindowEstimator f(fixed_config);
      const RunErrors e = ErrorsAfter(p, f, 90 * kS);
      fixed[wander] += e.rms_ns * e.rms_ns;
      AdaptiveConfig prior_config;
      prior_config.wander_prior_ppb_per_sqrt_s = 0.05;
      AdaptiveWindowEstimator with(prior_config);
      const RunErrors w = ErrorsAfter(p, with, 90 * kS);
      EXPECT_EQ(w.misses, 0);

      sum[wander == 0 ? 1 : 2] += w.rms_ns * w.rms_ns;
      if (wander == 0) {
        AdaptiveWindowEstimator without;
        const RunErrors o = ErrorsAfter(p, without, 90 * kS);
        sum[0] += o.rms_ns * o.rms_ns;
      }
    }
  }
  const double linear_without = std::sqrt(sum[0] / fixed[0]);
  const double linear_with = std::sqrt(sum[1] / fixed[0]);
  const double wandering_with = std::sqrt(sum[2] / fixed[1]);
  std::printf("90-360 s: linear, adaptive / 600 s window %.3f without the "
              "prior, %.3f with 0.05 ppb/√s; wandering at 1 with that prior, "
              "adaptive / 75 s window %.3f\n",
              linear_without, linear_with, wandering_with);
  // Measured: 1.455 and 1.053; the wrong prior 1.450 (at 360 s the
  // references had raised the home's wander to 0.12-0.88 ppb/√s on 7
  // seeds of 10, not yet on 3).
  EXPECT_LT(linear_with, 0.85 * linear_without);
  EXPECT_LT(linear_with, 1.15);
  EXPECT_LT(wandering_with, 1.6);
}

}  // namespace
}  // namespace clocksync::hull
