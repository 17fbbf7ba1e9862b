// DriftWander: a linear clock's drifts are negligible and bound the wander
// low; a random walk's bound it from above; young windows and too few
// differences tell nothing.

#include "hull/drift_wander.h"

#include <cmath>
#include <cstdio>
#include <random>

#include "gtest/gtest.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kWindowNs = 100 * kS;

TimeEstimate Drift(double drift_ppb) {
  TimeEstimate e;
  e.state = SyncState::kSynced;
  e.drift_ppb = drift_ppb;
  return e;
}

TEST(DriftWanderTest, NothingBeforeTwoDifferences) {
  DriftWander w;
  EXPECT_TRUE(std::isinf(w.UpperBound()));
  w.Record(Drift(10), kWindowNs, kWindowNs, 0);
  w.Record(Drift(10), kWindowNs, kWindowNs, kWindowNs);
  EXPECT_EQ(w.count(), 1);
  EXPECT_TRUE(std::isinf(w.UpperBound()));
  EXPECT_FALSE(w.Negligible(1));
}

TEST(DriftWanderTest, YoungWindowsAndCloseSamplesAreSkipped) {
  DriftWander w;
  // Less than half full: skipped.
  for (int i = 0; i < 10; ++i) {
    w.Record(Drift(i), kWindowNs / 3, kWindowNs, i * kWindowNs);
  }
  EXPECT_EQ(w.count(), 0);
  // Less than a window apart: not a difference.
  w.Record(Drift(0), kWindowNs, kWindowNs, 0);
  w.Record(Drift(5), kWindowNs, kWindowNs, kWindowNs / 2);
  EXPECT_EQ(w.count(), 0);
  w.Record(Drift(5), kWindowNs, kWindowNs, kWindowNs);
  EXPECT_EQ(w.count(), 1);
  // After Restart the next drift starts afresh.
  w.Restart();
  w.Record(Drift(500), kWindowNs, kWindowNs, 2 * kWindowNs);
  EXPECT_EQ(w.count(), 1);
}

TEST(DriftWanderTest, ALinearClockIsNegligibleAndBoundedLow) {
  DriftWander w;
  std::mt19937_64 rng(1);
  std::normal_distribution<double> noise(0, 0.01);  // ppb
  for (int i = 0; i <= 3; ++i) {
    w.Record(Drift(25 + noise(rng)), kWindowNs, kWindowNs, i * kWindowNs);
  }
  EXPECT_EQ(w.count(), DriftWander::kMinDifferences);
  EXPECT_TRUE(w.Negligible(0.1));
  EXPECT_LT(w.UpperBound(), 0.05);
}

// A random-walk frequency of σ ppb/√s, sampled as window means a window
// apart: the 95 % bound lies above σ on about 95 % of runs, and not far
// above it once many differences are in.
TEST(DriftWanderTest, RandomWalkIsBoundedFromAbove) {
  const double sigma = 1.0;
  int above = 0, runs = 200;
  double sum_ratio = 0;
  for (int run = 0; run < runs; ++run) {
    std::mt19937_64 rng(100 + run);
    std::normal_distribution<double> step(0, 1);
    DriftWander w;
    double frequency = 0;
    const int steps_per_window = 100;  // 1 s steps
    for (int i = 0; i <= 60; ++i) {
      // The window's mean frequency over its 100 s.
      double sum = 0;
      for (int j = 0; j < steps_per_window; ++j) {
        frequency += sigma * step(rng);
        sum += frequency;
      }
      w.Record(Drift(sum / steps_per_window), kWindowNs, kWindowNs,
               (i + 1) * kWindowNs);
    }
    above += w.UpperBound() > sigma;
    sum_ratio += w.UpperBound() / sigma;
  }
  std::printf("bound above sigma on %d of %d runs, mean bound / sigma %.2f\n",
              above, runs, sum_ratio / runs);
  EXPECT_GT(above, runs * 85 / 100);
  EXPECT_LT(sum_ratio / runs, 1.6);
}

TEST(DriftWanderTest, ADriftThatMovesIsNotNegligible) {
  DriftWander w;
  for (int i = 0; i <= 3; ++i) {
    w.Record(Drift(i * 30.0), kWindowNs, kWindowNs, i * kWindowNs);
  }
  EXPECT_FALSE(w.Negligible(1));
  EXPECT_GT(w.UpperBound(), 1);
}

}  // namespace
}  // namespace clocksync::hull
