// hull/reference_wander_test.cc: ReferenceWander against offsets of known
// wander and noise.

#include "hull/reference_wander.h"

#include <cmath>
#include <cstdio>
#include <random>

#include "gtest/gtest.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kS = 1'000'000'000;

struct Truth {
  double wander_ppb_per_sqrt_s;
  double noise_ns;        // Standard deviation of each reference.
  double duration_s;
  double every_s = 9.375;  // The checkpoints of the default 600 s window.
};

// Feeds references of a clock whose frequency is a random walk (plus a
// constant rate and offset the triples must not see) and returns the
// estimator after `duration_s`.
ReferenceWander Simulate(const Truth& t, uint64_t seed) {
  ReferenceWander w(1200 * kS, 1.0);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  double frequency_ppb = 25'000;  // 25 ppm: ns per s.
  double theta_ns = 3e9;
  double next_s = 0;
  const double step_s = 0.25;
  for (double x_s = 0; x_s < t.duration_s; x_s += step_s) {
    theta_ns += frequency_ppb * step_s;
    frequency_ppb +=
        t.wander_ppb_per_sqrt_s * std::sqrt(step_s) * normal(rng);
    if (x_s >= next_s) {
      w.Add(static_cast<int64_t>(x_s * 1e9) + 5'000 * kS,
            theta_ns + t.noise_ns * normal(rng));
      next_s += t.every_s;
    }
  }
  return w;
}

// Over seeds: the mean estimate of σ² and how often truth lies within
// one and two standard errors.
struct Summary {
  double mean_wander2 = 0;
  double mean_noise_ns = 0;
  double mean_error = 0;
  int within_2 = 0;
  int runs = 0;
};

Summary Summarize(const Truth& t, int seeds) {
  Summary s;
  const double truth2 = t.wander_ppb_per_sqrt_s * t.wander_ppb_per_sqrt_s;
  for (int seed = 1; seed <= seeds; ++seed) {
    const ReferenceWander w = Simulate(t, static_cast<uint64_t>(seed));
    s.mean_wander2 += w.wander2() / seeds;
    s.mean_noise_ns += std::sqrt(std::max(0.0, w.noise_ns2())) / seeds;
    s.mean_error += w.wander2_error() / seeds;
    s.within_2 += std::abs(w.wander2() - truth2) <= 2 * w.wander2_error();
    ++s.runs;
  }
  std::printf("σ %.2f noise %.0f ns over %.0f s: mean σ² %.4f (truth %.4f) "
              "± %.4f, noise %.0f ns, truth within 2 errors %d of %d\n",
              t.wander_ppb_per_sqrt_s, t.noise_ns, t.duration_s,
              s.mean_wander2, truth2, s.mean_error, s.mean_noise_ns,
              s.within_2, s.runs);
  return s;
}

TEST(ReferenceWanderTest, MeasuresTheAllowancesWanderThroughNoise) {
  const Truth t{1.0, 100, 1200};
  const Summary s = Summarize(t, 40);
  EXPECT_NEAR(s.mean_wander2, 1.0, 0.25);
  EXPECT_NEAR(s.mean_noise_ns, 100, 25);
  EXPECT_GE(s.within_2, 30);
}

TEST(ReferenceWanderTest, SmallWanderUnderLargeNoise) {
  const Truth t{0.1, 200, 1800};
  const Summary s = Summarize(t, 40);
  EXPECT_NEAR(s.mean_wander2, 0.01, 0.01);
  EXPECT_LT(s.mean_wander2 + s.mean_error, 0.1);  // Far below 1 ppb/√s.
  EXPECT_GE(s.within_2, 32);
}

TEST(ReferenceWanderTest, FastWanderIsSeenAboveTheAllowance) {
  const Truth t{3.0, 300, 600};
  const Summary s = Summarize(t, 40);
  EXPECT_NEAR(s.mean_wander2, 9.0, 2.5);
  EXPECT_GT(s.mean_wander2 - s.mean_error, 1.0);
}

TEST(ReferenceWanderTest, LinearClockShowsNoWander) {
  const Truth t{0.0, 50, 900};
  const Summary s = Summarize(t, 20);
  EXPECT_LT(std::abs(s.mean_wander2), 0.005);
  EXPECT_LT(s.mean_error, 0.01);
  EXPECT_NEAR(s.mean_noise_ns, 50, 10);
}

TEST(ReferenceWanderTest, NothingBeforeTwoLagsAndResetForgets) {
  ReferenceWander w(1200 * kS, 1.0);
  for (int i = 0; i < 4; ++i) w.Add(i * 9 * kS, 0);
  EXPECT_EQ(w.effective_count(), 0);
  EXPECT_EQ(w.wander2(), 1.0);  // The prior, until it can tell.
  const ReferenceWander linear = Simulate({0.0, 50, 900}, 7);
  EXPECT_GT(linear.effective_count(), 20);
  ReferenceWander reset = linear;
  reset.Reset();
  EXPECT_EQ(reset.effective_count(), 0);
  EXPECT_EQ(reset.wander2(), 1.0);
}

}  // namespace
}  // namespace clocksync::hull
