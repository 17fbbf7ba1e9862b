// TwoHullEstimator: golden cases, the hard-bound property for linear clocks,
// agreement with the brute-force LP over the same window (which checks the
// cached-line shortcuts), rejection of implausible samples, recovery after a
// step, epoch-scale numerics. Random tests print their seed on failure.

#include "hull/two_hull_estimator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "hull/sim/naive_separation.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kEpoch = 1'800'000'000'000'000'000;  // ~2027 in Unix ns.
constexpr int64_t kSecond = 1'000'000'000;

EstimatorConfig ExactConfig(int64_t window_ns) {
  EstimatorConfig c;
  c.window_ns = window_ns;
  c.wander_ppb_per_sqrt_s = 0;  // The hard bound of a linear clock.
  return c;
}

TEST(EstimatorTest, GoldenSymmetricDelays) {
  // Local clock exactly 1 hour behind global; 50 us each way.
  TwoHullEstimator est(ExactConfig(300 * kSecond));
  const int64_t offset = 3600 * kSecond;
  for (int i = 0; i < 3; ++i) {
    const int64_t t1 = 1'000 * kSecond + i * kSecond;
    const int64_t t2 = t1 + offset + 50'000;
    ASSERT_EQ(est.Add({t1, t2, t2 + 1'000, t1 + 101'000}), AddResult::kAccepted);
  }
  const TimeEstimate e = est.Estimate(1'000 * kSecond + 2 * kSecond + 101'000);
  ASSERT_EQ(e.state, SyncState::kSynced);
  EXPECT_EQ(e.global_ns, 1'000 * kSecond + 2 * kSecond + 101'000 + offset);
  EXPECT_EQ(e.offset_ns, offset);
  EXPECT_NEAR(e.drift_ppb, 0, 1e-9);
  // The bound is the half round trip at the newest sample (50 us each way),
  // widened by the spread of slopes for the 101 us after the sample's t1.
  EXPECT_LE(e.earliest_ns, e.global_ns - 50'000);
  EXPECT_GE(e.latest_ns, e.global_ns + 50'000);
  EXPECT_LT(e.latest_ns - e.earliest_ns, 2 * 50'000 + 2 * 1'000);
}

TEST(EstimatorTest, UnsyncedUntilSamplesSpanTime) {
  TwoHullEstimator est;
  EXPECT_EQ(est.Estimate(0).state, SyncState::kUnsynced);
  est.Add({kSecond, kSecond + 10, kSecond + 20, kSecond + 100});
  EXPECT_EQ(est.Estimate(kSecond + 100).state, SyncState::kUnsynced);
  est.Add({2 * kSecond, 2 * kSecond + 10, 2 * kSecond + 20, 2 * kSecond + 100});
  EXPECT_EQ(est.Estimate(2 * kSecond + 100).state, SyncState::kSynced);
}

// A round trip of −200 is consistent with t2 and t3 each ±100 off (the
// receive stamps are given at the middle of their range and the sample
// widened, hull/probe_sample.h); −202 is not.
TEST(EstimatorTest, NegativeRoundTripsWithinTheWideningAreAccepted) {
  TwoHullEstimator est(ExactConfig(300 * kSecond));
  EXPECT_EQ(est.Add({300, 1000, 1302, 400, 100}),
            AddResult::kRejectedRoundTrip);
  EXPECT_EQ(est.Add({300, 1000, 1300, 400, 100}), AddResult::kAccepted);
  EXPECT_EQ(est.stats().min_round_trip_ns, 0);  // Counted as 0, not < 0.
  // The widened constraints still hold the sample's offsets: 700 − 100 ≤
  // θ ≤ 700 + 100 at x = 300..400.
  est.Add({kSecond, kSecond + 700, kSecond + 800, kSecond + 100, 100});
  const TimeEstimate e = est.Estimate(kSecond + 100);
  ASSERT_NE(e.state, SyncState::kUnsynced);
  EXPECT_GE(e.offset_ns, 600);
  EXPECT_LE(e.offset_ns, 800);
}

TEST(EstimatorTest, ImplausibleSamplesAreCountedAndDropped) {
  EstimatorConfig c = ExactConfig(300 * kSecond);
  c.max_round_trip_ns = 1'000'000;
  TwoHullEstimator est(c);
  ASSERT_EQ(est.Add({100, 1000, 1010, 200}), AddResult::kAccepted);
  EXPECT_EQ(est.Add({300, 1000, 1010, 250}),
            AddResult::kRejectedReceiveBeforeSend);
  EXPECT_EQ(est.Add({300, 1000, 990, 400}),
            AddResult::kRejectedReplyBeforeRequest);
  EXPECT_EQ(est.Add({300, 1000, 1010, 300 + 2'000'000}),
            AddResult::kRejectedRoundTrip);
  // Reply took longer at the parent than the whole local round trip.
  EXPECT_EQ(est.Add({300, 1000, 1300, 400}), AddResult::kRejectedRoundTrip);
  EXPECT_EQ(est.Add({100, 1000, 1010, 500}),
            AddResult::kRejectedTimeBackwards);
  EXPECT_EQ(est.Add({150, 1000, 1010, 200}),
            AddResult::kRejectedTimeBackwards);
  const EstimatorStats& s = est.stats();
  EXPECT_EQ(s.accepted, 1u);
  EXPECT_EQ(s.rejected_receive_before_send, 1u);
  EXPECT_EQ(s.rejected_reply_before_request, 1u);
  EXPECT_EQ(s.rejected_round_trip, 2u);
  EXPECT_EQ(s.rejected_time_backwards, 2u);
  EXPECT_EQ(s.rejected(), 6u);
  EXPECT_EQ(est.window_samples(), 1u);
}

TEST(EstimatorTest, ConfigValidationNamesTheKey) {
  EstimatorConfig c;
  EXPECT_EQ(ValidateConfig(c), "");
  c.window_ns = 0;
  EXPECT_EQ(ValidateConfig(c).rfind("window_ns:", 0), 0u);
  c = EstimatorConfig();
  c.wander_ppb_per_sqrt_s = -1;
  EXPECT_EQ(ValidateConfig(c).rfind("wander_ppb_per_sqrt_s:", 0), 0u);
  c = EstimatorConfig();
  c.max_round_trip_ns = -5;
  EXPECT_EQ(ValidateConfig(c).rfind("max_round_trip_ns:", 0), 0u);
  c = EstimatorConfig();
  c.max_drift_ppm = 0;
  EXPECT_EQ(ValidateConfig(c).rfind("max_drift_ppm:", 0), 0u);
}

// A linear clock: θ(x) = global − local = theta0 + slope * (x − x0), exact
// in long double; delays random and non-negative.
struct LinearClock {
  int64_t x0;
  long double theta0;
  long double slope;
  long double Theta(int64_t x) const { return theta0 + slope * (x - x0); }
  // Global time at local x, rounded down / up.
  long double Global(int64_t x) const { return x + Theta(x); }
};

TEST(EstimatorTest, LinearClockTruthAlwaysInsideBound) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    const int64_t window = (2 + static_cast<int64_t>(rng() % 30)) * kSecond;
    TwoHullEstimator est(ExactConfig(window));
    LinearClock clock{7'000 * kSecond,
                      static_cast<long double>(kEpoch) +
                          static_cast<long double>(rng() % 1000) * kSecond,
                      (static_cast<long double>(rng() % 1001) - 500) * 1e-6L};
    std::exponential_distribution<double> jitter(1.0 / (1 + rng() % 200'000));
    int64_t local = clock.x0;
    int checks = 0;
    for (int i = 0; i < 400; ++i) {
      local += 10'000'000 + static_cast<int64_t>(rng() % 100'000'000);
      const int64_t t1 = local;
      const int64_t d1 = static_cast<int64_t>(jitter(rng));
      const int64_t t2 = static_cast<int64_t>(std::ceil(clock.Global(t1))) + d1;
      const int64_t t3 = t2 + static_cast<int64_t>(rng() % 50'000);
      // t4: the first local instant whose global time is >= t3 + d2.
      const int64_t d2 = static_cast<int64_t>(jitter(rng));
      // Solve x + θ(x) = t3 + d2 for x, then step to the first integer.
      const long double target = static_cast<long double>(t3 + d2);
      int64_t t4 = static_cast<int64_t>(
          std::floor((target - clock.theta0 + clock.slope * clock.x0) /
                     (1 + clock.slope)));
      while (clock.Global(t4) >= target) --t4;
      while (clock.Global(t4) < target) ++t4;
      ASSERT_TRUE(IsAccepted(est.Add({t1, t2, t3, t4})));
      local = t4;
      // Query at t4, a little before (inside the window) and after.
      for (const int64_t x : {t4, t4 - static_cast<int64_t>(rng() % window),
                              t4 + static_cast<int64_t>(rng() % (5 * kSecond))}) {
        const TimeEstimate e = est.Estimate(x);
        if (e.state == SyncState::kUnsynced) continue;
        const long double truth = clock.Global(x);
        ASSERT_LE(static_cast<long double>(e.earliest_ns), truth + 1) << x;
        ASSERT_GE(static_cast<long double>(e.latest_ns), truth - 1) << x;
        ASSERT_LE(e.earliest_ns, e.global_ns);
        ASSERT_LE(e.global_ns, e.latest_ns);
        ++checks;
      }
    }
    EXPECT_GT(checks, 1000);
    EXPECT_EQ(est.stats().inconsistencies, 0u);
  }
}

// The estimator's answer equals the brute-force LP over exactly the samples
// in its window, sample after sample: the cached lines are never stale.
TEST(EstimatorTest, MatchesLinearProgramOverTheWindow) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    const int64_t window = 2 * kSecond;
    TwoHullEstimator est(ExactConfig(window));
    std::deque<ProbeSample> kept;
    std::exponential_distribution<double> jitter(1.0 / 20'000);
    const double slope = (static_cast<double>(rng() % 201) - 100) * 1e-6;
    int64_t local = 1'000 * kSecond;
    for (int i = 0; i < 300; ++i) {
      local += 50'000'000 + static_cast<int64_t>(rng() % 100'000'000);
      const int64_t t1 = local;
      const int64_t theta = 5'000'000 + std::llround(slope * (t1 - 1'000 * kSecond));
      const int64_t t2 = t1 + theta + 10'000 + static_cast<int64_t>(jitter(rng));
      const int64_t t3 = t2 + 5'000;
      const int64_t back = 10'000 + static_cast<int64_t>(jitter(rng));
      const int64_t t4 = t1 + (t3 - t2) + (t2 - t1 - theta) + back;
      const ProbeSample s{t1, t2, t3, t4};
      ASSERT_EQ(est.Add(s), AddResult::kAccepted);
      kept.push_back(s);
      while (t4 - kept.front().t4_ns > window) kept.pop_front();
      ASSERT_EQ(est.window_samples(), kept.size());
      std::vector<Point> req, resp;
      for (const ProbeSample& k : kept) {
        req.push_back({k.t1_ns - 1'000 * kSecond, k.t2_ns - k.t1_ns});
        resp.push_back({k.t4_ns - 1'000 * kSecond, k.t3_ns - k.t4_ns});
      }
      const NaiveSeparation naive = NaiveSeparate(req, resp);
      const TimeEstimate e = est.Estimate(t4);
      ASSERT_EQ(naive.bounded && naive.feasible, e.state != SyncState::kUnsynced);
      if (e.state == SyncState::kUnsynced) continue;
      long double low, high;
      NaiveRangeAt(naive, t4 - 1'000 * kSecond, &low, &high);
      EXPECT_NEAR(e.earliest_ns, t4 + low, 1.0);
      EXPECT_NEAR(e.latest_ns, t4 + high, 1.0);
      EXPECT_NEAR(e.global_ns, t4 + naive.MidAt(t4 - 1'000 * kSecond), 1.0);
      EXPECT_NEAR(e.drift_ppb, naive.mid_slope * 1e9, 1e-3);
    }
  }
}

TEST(EstimatorTest, EpochScaleTimestampsLoseNothing) {
  // Local raw clock ~2 h since boot, global in Unix ns: an offset of ~1.8e18.
  TwoHullEstimator est(ExactConfig(300 * kSecond));
  const int64_t boot = 7'200 * kSecond;
  const int64_t offset = kEpoch - boot + 123'456'789;
  for (int i = 0; i < 100; ++i) {
    const int64_t t1 = boot + i * kSecond + 17;
    const int64_t t2 = t1 + offset + 25'000;
    ASSERT_EQ(est.Add({t1, t2, t2 + 3, t1 + 50'003}), AddResult::kAccepted);
  }
  const int64_t x = boot + 100 * kSecond;
  const TimeEstimate e = est.Estimate(x);
  ASSERT_EQ(e.state, SyncState::kSynced);
  EXPECT_EQ(e.global_ns, x + offset);
  EXPECT_EQ(e.offset_ns, offset);
}

TEST(EstimatorTest, StepIsDetectedAndBoundsRecoverWithinTenSeconds) {
  EstimatorConfig c = ExactConfig(300 * kSecond);
  TwoHullEstimator est(c);
  std::mt19937_64 rng(42);
  std::exponential_distribution<double> jitter(1.0 / 30'000);
  const double slope = 20e-6;
  int64_t step = 0;
  int detected_at = -1;
  int64_t detected_t4 = 0;
  for (int i = 0; i < 400; ++i) {
    if (i == 200) step = 2'000'000;  // The parent's time jumps 2 ms.
    const int64_t t1 = 1'000 * kSecond + i * kSecond / 2;
    auto theta = [&](int64_t x) {
      return 10 * kSecond + step + std::llround(slope * (x - 1'000 * kSecond));
    };
    const int64_t d1 = 20'000 + static_cast<int64_t>(jitter(rng));
    const int64_t d2 = 20'000 + static_cast<int64_t>(jitter(rng));
    const int64_t t2 = t1 + theta(t1) + d1;
    const int64_t t3 = t2 + 1'000;
    const int64_t t4 = t1 + d1 + 1'000 + d2;
    const AddResult r = est.Add({t1, t2, t3, t4});
    if (r == AddResult::kAcceptedAfterInconsistency && detected_at < 0) {
      detected_at = i;
      detected_t4 = t4;
    }
    const TimeEstimate e = est.Estimate(t4);
    // From 10 s (20 samples) after the step on, the truth is inside again.
    if ((i >= 2 && i < 200) || i >= 220) {
      ASSERT_NE(e.state, SyncState::kUnsynced) << i;
      const int64_t truth = t4 + theta(t4);
      EXPECT_LE(e.earliest_ns, truth) << "sample " << i;
      EXPECT_GE(e.latest_ns, truth) << "sample " << i;
    }
    // At the step's sample the window restarts from it alone (with the
    // samples before, every line would drift by the 2 ms over 0.5 s,
    // beyond max_drift_ppm): unsynced, until the next.
    if (i == 200) {
      EXPECT_NE(e.state, SyncState::kSynced);
    }
    if (i > 200 && i < 220) {
      EXPECT_EQ(e.state, SyncState::kRecovering) << i;
    }
    if (i >= 260) {
      EXPECT_EQ(e.state, SyncState::kSynced) << i;
    }
  }
  EXPECT_EQ(detected_at, 200);  // At the very sample that shows the step.
  // Pre-step samples that the first post-step sample could not contradict
  // may survive the cut and be thrown out at a later sample.
  EXPECT_GE(est.stats().inconsistencies, 1u);
  EXPECT_LE(est.stats().inconsistencies, 3u);
  EXPECT_GE(est.stats().last_inconsistency_local_ns, detected_t4);
}

// A parent whose served time was off by 1 ms for one sample (its clock
// stepped and it noticed at its next exchange): the estimator restarts at
// that sample (the hulls cross), and the next, correct sample would leave a
// two-sample window whose only lines drift by about −1,000 ppm. Beyond
// max_drift_ppm that is a step, not a drift: the window is cut again and
// the estimate follows the true, gentle slope, its bound around the truth.
TEST(EstimatorTest, AParentsMomentaryStepIsNotTakenForADrift) {
  const double slope = 20e-6;
  auto run = [&](double max_drift_ppm) {
    EstimatorConfig c = ExactConfig(300 * kSecond);
    c.max_drift_ppm = max_drift_ppm;
    TwoHullEstimator est(c);
    std::mt19937_64 rng(7);
    std::exponential_distribution<double> jitter(1.0 / 10'000);
    double worst_drift_error_ppb = 0;
    bool truth_inside = true;
    for (int i = 0; i < 60; ++i) {
      const int64_t glitch = i == 30 ? 1'000'000 : 0;
      const int64_t t1 = 1'000 * kSecond + i * kSecond;
      auto theta = [&](int64_t x) {
        return 10 * kSecond + std::llround(slope * (x - 1'000 * kSecond));
      };
      const int64_t d1 = 20'000 + static_cast<int64_t>(jitter(rng));
      const int64_t d2 = 20'000 + static_cast<int64_t>(jitter(rng));
      const int64_t t2 = t1 + theta(t1) + glitch + d1;
      const int64_t t4 = t1 + d1 + 1'000 + d2;
      est.Add({t1, t2, t2 + 1'000, t4});
      // Read as a client would, until the next sample.
      const int64_t x = t4 + 900'000'000;
      const TimeEstimate e = est.Estimate(x);
      if (i > 30 && e.state != SyncState::kUnsynced) {
        worst_drift_error_ppb =
            std::max(worst_drift_error_ppb, std::fabs(e.drift_ppb - slope * 1e9));
        const int64_t truth = x + theta(x);
        truth_inside = truth_inside && e.earliest_ns <= truth && truth <= e.latest_ns;
      }
    }
    return std::make_pair(worst_drift_error_ppb, truth_inside);
  };
  const auto [with_band_ppb, with_band_inside] = run(500);
  EXPECT_LT(with_band_ppb, 100'000);  // Within 100 ppm of the truth.
  EXPECT_TRUE(with_band_inside);
  // Without it (a band no clock reaches) the step became a drift.
  const auto [without_ppb, without_inside] = run(100'000);
  EXPECT_GT(without_ppb, 900'000);
  EXPECT_FALSE(without_inside);
}

TEST(EstimatorTest, HoldoverBoundGrowsWithTimeSinceLastSample) {
  EstimatorConfig c;
  c.wander_ppb_per_sqrt_s = 1.0;
  TwoHullEstimator est(c);
  for (int i = 0; i < 120; ++i) {
    const int64_t t1 = 5'000 * kSecond + i * kSecond;
    est.Add({t1, t1 + 1'000'000 + 40'000, t1 + 1'000'000 + 41'000, t1 + 81'000});
  }
  int64_t last_width = 0;
  for (const int64_t after_s : {0, 1, 10, 60, 600}) {
    const int64_t x = 5'000 * kSecond + 119 * kSecond + 81'000 + after_s * kSecond;
    const TimeEstimate e = est.Estimate(x);
    const int64_t width = e.latest_ns - e.earliest_ns;
    EXPECT_GT(width, last_width) << after_s;
    last_width = width;
  }
}

TEST(EstimatorTest, WindowSlidesAndMemoryFollowsIt) {
  EstimatorConfig c = ExactConfig(10 * kSecond);
  TwoHullEstimator est(c);
  std::mt19937_64 rng(11);
  for (int64_t i = 0; i < 100'000; ++i) {
    const int64_t t1 = kSecond + i * 1'000'000;  // 1 kHz for 100 s.
    const int64_t d1 = 500 + static_cast<int64_t>(rng() % 300);
    const int64_t d2 = 500 + static_cast<int64_t>(rng() % 300);
    ASSERT_EQ(est.Add({t1, t1 + d1, t1 + d1 + 400, t1 + d1 + 400 + d2}),
              AddResult::kAccepted);
  }
  EXPECT_NEAR(static_cast<double>(est.window_samples()), 10'000, 2);
  EXPECT_LE(est.window_span_ns(), 10 * kSecond);
  EXPECT_LT(est.memory_bytes() / est.window_samples(), 200u);
}

}  // namespace
}  // namespace clocksync::hull
