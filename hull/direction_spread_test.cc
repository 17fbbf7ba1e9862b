// DirectionSpread: in the round trips' unit (the median round trip's
// excess), just above it for exponential delays, far below it for heavy
// tails, independent of the clock's rate; a concave bend on quiet delays
// lifts it.

#include "hull/direction_spread.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace clocksync::hull {
namespace {

// Mean over 20 seeds of DirectionSpread's spread against the median round
// trip's excess over the minimum, both over the same 127 samples at
// 10 probes/s; θ(t) = rate_ppm × t + bend_ns_per_s2 × t², t in s.
// `forward` and `backward` draw a delay (ns).
double MeanRatio(const std::function<double(std::mt19937_64&)>& forward,
                 const std::function<double(std::mt19937_64&)>& backward,
                 double rate_ppm, double bend_ns_per_s2) {
  double sum = 0;
  const int seeds = 20;
  for (int seed = 0; seed < seeds; ++seed) {
    std::mt19937_64 rng(seed);
    DirectionSpread spread;
    std::vector<double> round_trips;
    for (int i = 0; i < DirectionSpread::kSize; ++i) {
      const int64_t x = 1'000'000'000'000 + i * 100'000'000LL;
      const double t_s = i * 0.1;
      const double theta = rate_ppm * 1e3 * t_s + bend_ns_per_s2 * t_s * t_s;
      const double f = forward(rng);
      const double b = backward(rng);
      spread.Add(x, theta + f, -theta + b);
      round_trips.push_back(f + b);
    }
    std::sort(round_trips.begin(), round_trips.end());
    const double median_excess =
        round_trips[round_trips.size() / 2] - round_trips.front();
    sum += spread.SpreadFloor(/*skip=*/false) / median_excess;
  }
  return sum / seeds;
}

std::function<double(std::mt19937_64&)> Exponential(double mean_ns) {
  return [mean_ns](std::mt19937_64& rng) {
    return 50'000 + std::exponential_distribution<double>(1 / mean_ns)(rng);
  };
}

std::function<double(std::mt19937_64&)> Pareto(double alpha, double scale_ns) {
  return [alpha, scale_ns](std::mt19937_64& rng) {
    const double u =
        1 - std::uniform_real_distribution<double>(0, 1)(rng);
    return 50'000 + scale_ns * (std::pow(u, -1 / alpha) - 1);
  };
}

TEST(DirectionSpreadTest, ExponentialBothWaysIsJustAboveTheRoundTrips) {
  // 1.07: the margin kHullHugging leaves (direction_spread.h).
  const double ratio =
      MeanRatio(Exponential(20'000), Exponential(20'000), 25, 0);
  std::printf("exponential both ways: %.3f\n", ratio);
  EXPECT_GT(ratio, 1.0);
  EXPECT_LT(ratio, 1.15);
}

TEST(DirectionSpreadTest, TheClocksRateCancels) {
  const double still =
      MeanRatio(Exponential(20'000), Exponential(20'000), 0, 0);
  const double fast =
      MeanRatio(Exponential(20'000), Exponential(20'000), -500, 0);
  EXPECT_NEAR(fast, still, 0.01 * still);
}

TEST(DirectionSpreadTest, HeavyTailsAreFarBelowTheMedian) {
  // Pareto α 1.1 each way: the median round trip lies 1.75 times as far
  // out (relative to the density at the floor) as for exponential delays.
  const double ratio =
      MeanRatio(Pareto(1.1, 50'000), Pareto(1.1, 50'000), 25, 0);
  std::printf("Pareto 1.1 both ways: %.3f\n", ratio);
  EXPECT_LT(ratio, 0.75);
  EXPECT_GT(ratio, 0.5);
}

TEST(DirectionSpreadTest, JitterOneWayIsAboveTheMedian) {
  // The quiet direction adds nothing: 0.839 μ against 0.693 μ (and the
  // margin): the home keeps the round trips' spread.
  const double ratio =
      MeanRatio(Exponential(20'000), Exponential(100), 25, 0);
  std::printf("exponential one way: %.3f\n", ratio);
  EXPECT_GT(ratio, 1.1);
  EXPECT_LT(ratio, 1.45);
}

TEST(DirectionSpreadTest, AConcaveBendLiftsTheChords) {
  // 1 µs of jitter each way, θ bending at −200 ns/s² (the chord over the
  // 12.7 s span lies 4 µs below the forward points' floor at its middle):
  // the forward heights carry the sag. Why the home takes the lesser of
  // this and the round trips' spread.
  const double ratio =
      MeanRatio(Exponential(1'000), Exponential(1'000), 25, -200);
  std::printf("concave bend: %.3f\n", ratio);
  EXPECT_GT(ratio, 1.5);
}

TEST(DirectionSpreadTest, NothingBeforeEnoughPointsOrWhenSkipped) {
  DirectionSpread spread;
  for (int i = 0; i < DirectionSpread::kMinPoints - 1; ++i) {
    spread.Add(i * 100'000'000LL, 1000.0 * (i % 3), 1000.0 * (i % 5));
  }
  EXPECT_EQ(spread.SpreadFloor(false), 0);
  spread.Add(64 * 100'000'000LL, 0, 0);
  EXPECT_EQ(spread.SpreadFloor(true), 0);
  EXPECT_GT(spread.SpreadFloor(false), 0);
}

}  // namespace
}  // namespace clocksync::hull
