// AdaptiveWindowEstimator: with one level it is the fixed-window estimator;
// on a clock whose frequency bends it moves to a shorter window, on a
// straight one it loses little to the longest; config errors name the key.

#include "hull/adaptive_estimator.h"

#include <cmath>
#include <cstdio>

#include "gtest/gtest.h"
#include "hull/sim/probe_simulator.h"

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
}

}  // namespace
}  // namespace clocksync::hull
