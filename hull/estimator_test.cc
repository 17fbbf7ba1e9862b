// The Estimator interface and MakeEstimator: the factory picks the
// implementation from the config, and an estimator held through the
// interface answers exactly as the concrete one.

#include "hull/estimator.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "hull/adaptive_estimator.h"
#include "hull/two_hull_estimator.h"

namespace clocksync::hull {
namespace {

// A clock 40 ppm slow against its parent, 1 s probes with varied delays.
std::vector<ProbeSample> Samples(int n) {
  std::vector<ProbeSample> out;
  for (int i = 0; i < n; ++i) {
    const int64_t t1 = 1'000'000'000'000 + int64_t{i} * 1'000'000'000;
    const int64_t theta = 5'000'000 + (t1 - 1'000'000'000'000) / 25'000;
    const int64_t d1 = 20'000 + (i * 7919) % 13'000;
    const int64_t d2 = 20'000 + (i * 104729) % 17'000;
    const int64_t t2 = t1 + theta + d1;
    const int64_t t3 = t2 + 3'000;
    out.push_back(ProbeSample{t1, t2, t3, t3 - theta + d2});
  }
  return out;
}

TEST(EstimatorTest, FactoryPicksTheImplementationFromTheConfig) {
  AdaptiveConfig config;
  config.levels = 1;
  std::unique_ptr<Estimator> one = MakeEstimator(config);
  EXPECT_NE(dynamic_cast<TwoHullEstimator*>(one.get()), nullptr);
  config.levels = 4;
  std::unique_ptr<Estimator> four = MakeEstimator(config);
  auto* adaptive = dynamic_cast<AdaptiveWindowEstimator*>(four.get());
  ASSERT_NE(adaptive, nullptr);
  EXPECT_EQ(adaptive->levels(), 4);
}

// Levels down to a shortest window: the library's and the daemon's
// defaults, a window too short to halve, and the cap at 8.
TEST(EstimatorTest, LevelsDownToAShortestWindow) {
  constexpr int64_t kS = 1'000'000'000;
  const int64_t shortest = 37'500'000'000;
  EXPECT_EQ(LevelsDownTo(600 * kS, shortest), AdaptiveConfig{}.levels);
  EXPECT_EQ(LevelsDownTo(300 * kS, shortest), 4);
  EXPECT_EQ(LevelsDownTo(100 * kS, shortest), 2);  // 100 and 50 s
  EXPECT_EQ(LevelsDownTo(74 * kS, shortest), 1);
  EXPECT_EQ(LevelsDownTo(shortest, shortest), 1);
  EXPECT_EQ(LevelsDownTo(10 * kS, shortest), 1);
  EXPECT_EQ(LevelsDownTo(86'400 * kS, shortest), 8);
  AdaptiveConfig config;
  config.levels = LevelsDownTo(config.base.window_ns, kS);
  EXPECT_EQ(ValidateAdaptiveConfig(config), "");
}

TEST(EstimatorTest, InterfaceAnswersAsTheConcreteEstimator) {
  for (int levels : {1, 3}) {
    SCOPED_TRACE(levels);
    AdaptiveConfig config;
    config.base.window_ns = 120'000'000'000;
    config.levels = levels;
    std::unique_ptr<Estimator> held = MakeEstimator(config);
    AdaptiveWindowEstimator concrete(config);
    for (const ProbeSample& s : Samples(400)) {
      ASSERT_EQ(held->Add(s), concrete.Add(s));
      const TimeEstimate a = held->Estimate(s.t4_ns + 500'000'000);
      const TimeEstimate b = concrete.Estimate(s.t4_ns + 500'000'000);
      ASSERT_EQ(a.state, b.state);
      ASSERT_EQ(a.global_ns, b.global_ns);
      ASSERT_EQ(a.earliest_ns, b.earliest_ns);
      ASSERT_EQ(a.latest_ns, b.latest_ns);
      ASSERT_EQ(a.drift_ppb, b.drift_ppb);
      ASSERT_EQ(held->stats().accepted, concrete.stats().accepted);
      ASSERT_EQ(held->window_samples(), concrete.selected().window_samples());
      ASSERT_EQ(held->window_span_ns(), concrete.selected().window_span_ns());
      ASSERT_EQ(held->lower_hull_vertices(),
                concrete.selected().lower_hull_vertices());
      ASSERT_EQ(held->upper_hull_vertices(),
                concrete.selected().upper_hull_vertices());
    }
    EXPECT_NE(held->Estimate(0).state, SyncState::kUnsynced);
  }
}

}  // namespace
}  // namespace clocksync::hull
