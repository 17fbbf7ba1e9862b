// shm/mapping_slewer_test.cc: MappingSlewer: continuity and monotonicity under random corrections,
// convergence, the step rules, and that the published bound contains the
// target's bound between updates; NodeSlewTarget from a real estimator.

#include "shm/mapping_slewer.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "hull/estimator.h"

namespace clocksync {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kEpoch = 1'800'000'000'000'000'000;

// Global time of a published mapping at raw instant r, as a reader computes
// it (same formula, independent code path).
long double Eval(const Mapping& m, int64_t r) {
  const long double dt = static_cast<long double>(r - m.anchor_raw_ns);
  return static_cast<long double>(m.anchor_global_ns) + dt + dt * m.rate_adj;
}

SlewTarget Target(int64_t raw, int64_t global, double rate, int64_t half) {
  SlewTarget t;
  t.raw_ns = raw;
  t.global_ns = global;
  t.rate_adj = rate;
  t.earliest_ns = global - half;
  t.latest_ns = global + half;
  t.bound_growth_ppb = 50;
  t.state = CLOCKSYNC_STATE_SYNCED;
  return t;
}

TEST(MappingSlewerTest, FirstSyncStepsThenSlewsContinuously) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> jitter_ns(0, 20'000);
    MappingSlewer slewer;
    int64_t raw = 1'000'000 * kMs;
    const double true_rate = 42e-6;
    Mapping previous;
    bool first = true;
    for (int i = 0; i < 2000; ++i) {
      const int64_t truth = kEpoch + static_cast<int64_t>(raw * (1 + true_rate));
      // The estimate wanders around the truth by tens of microseconds.
      const int64_t estimate = truth + static_cast<int64_t>(jitter_ns(rng));
      const Mapping m = slewer.Update(Target(raw, estimate, true_rate, 100'000));
      if (first) {
        EXPECT_TRUE(m.stepped);
        EXPECT_EQ(m.anchor_global_ns, estimate);
        first = false;
      } else {
        EXPECT_FALSE(m.stepped);
        // Continuous: the new mapping starts where the old one is.
        EXPECT_LE(std::fabs(static_cast<double>(
                      static_cast<long double>(m.anchor_global_ns) -
                      Eval(previous, raw))),
                  1.0);
        // Monotonic: rate stays far from -1, within the slew limit.
        EXPECT_LE(std::fabs(m.rate_adj - true_rate), 500e-6 + 1e-12);
      }
      // The published bound contains the target's bound until the next
      // update (and beyond, up to a second).
      for (const int64_t ahead : {int64_t{0}, 100 * kMs, 1000 * kMs}) {
        const long double pub = Eval(m, raw + ahead);
        const long double half =
            m.bound_at_anchor_ns + ahead * m.bound_growth_ppb * 1e-9L;
        const long double moved = ahead * (1 + static_cast<long double>(true_rate));
        const long double target_lo =
            static_cast<long double>(estimate) - 100'000 + moved - ahead * 50e-9L;
        const long double target_hi =
            static_cast<long double>(estimate) + 100'000 + moved + ahead * 50e-9L;
        EXPECT_LE(pub - half, target_lo + 1) << i << " " << ahead;
        EXPECT_GE(pub + half, target_hi - 1) << i << " " << ahead;
      }
      previous = m;
      raw += 100 * kMs;
    }
    EXPECT_EQ(slewer.steps(), 1u);
  }
}

TEST(MappingSlewerTest, ConvergesToAConstantOffsetAtTheSlewLimit) {
  SlewConfig config;
  config.max_slew_ppm = 100;
  MappingSlewer slewer(config);
  int64_t raw = 5'000 * kMs;
  slewer.Update(Target(raw, kEpoch + raw, 0, 1000));
  // The estimate moves 5 ms ahead; no jump was detected: slew at 100 ppm,
  // 5 ms takes 50 s, then converge within the slew time.
  int64_t max_published_step = 0;
  int64_t last_published = slewer.PublishedAt(raw);
  for (int i = 0; i < 1000; ++i) {
    raw += 100 * kMs;
    const Mapping m = slewer.Update(Target(raw, kEpoch + raw + 5 * kMs, 0, 1000));
    EXPECT_FALSE(m.stepped);
    const int64_t now = slewer.PublishedAt(raw);
    max_published_step = std::max(max_published_step, now - last_published);
    last_published = now;
  }
  // Never faster than 100 ms * (1 + 100 ppm) per update.
  EXPECT_LE(max_published_step, 100 * kMs + 10'000 + 1);
  EXPECT_LT(std::llabs(slewer.last_correction_ns()), 1'000);
}

TEST(MappingSlewerTest, StepsOnlyAfterADetectedJumpAboveThreshold) {
  MappingSlewer slewer;
  int64_t raw = 10'000 * kMs;
  slewer.Update(Target(raw, kEpoch, 0, 1000));
  raw += 100 * kMs;
  SlewTarget t = Target(raw, kEpoch + 100 * kMs + 50 * kMs, 0, 1000);
  EXPECT_FALSE(slewer.Update(t).stepped);  // No jump reported: slew.
  raw += 100 * kMs;
  t = Target(raw, kEpoch + 200 * kMs + 50 * kMs, 0, 1000);
  t.jump_detected = true;
  EXPECT_TRUE(slewer.Update(t).stepped);
  raw += 100 * kMs;
  t = Target(raw, slewer.PublishedAt(raw) + 10'000, 0, 1000);
  t.jump_detected = true;  // Below the 1 ms threshold: slewed anyway.
  EXPECT_FALSE(slewer.Update(t).stepped);
  EXPECT_EQ(slewer.steps(), 2u);
}

TEST(MappingSlewerTest, UnsyncedKeepsTheLineWithUnknownBound) {
  MappingSlewer slewer;
  EXPECT_EQ(slewer.Update(SlewTarget()).bound_at_anchor_ns,
            ShmPublisher::kUnknownBoundNs);
  slewer.Update(Target(1'000 * kMs, kEpoch, 1e-5, 1000));
  SlewTarget lost;
  lost.raw_ns = 2'000 * kMs;
  const Mapping m = slewer.Update(lost);
  EXPECT_EQ(m.state, CLOCKSYNC_STATE_UNSYNCED);
  EXPECT_EQ(m.bound_at_anchor_ns, ShmPublisher::kUnknownBoundNs);
  EXPECT_LE(std::llabs(m.anchor_global_ns - (kEpoch + 1'000 * kMs + 10'000)), 2);
}

// A reload changes the slew settings mid-correction: the next update
// slews at the new rate limit, continuously, and its bound still covers
// the target's.
TEST(MappingSlewerTest, NewConfigAppliesFromTheNextUpdate) {
  SlewConfig fast;
  fast.max_slew_ppm = 500;
  MappingSlewer slewer(fast);
  int64_t raw = 1'000'000 * kMs;
  slewer.Update(Target(raw, kEpoch, 0, 1'000));
  // 5 ms behind: slewed at the limit.
  raw += 100 * kMs;
  Mapping m = slewer.Update(Target(raw, kEpoch + 100 * kMs + 5 * kMs, 0, 1'000));
  EXPECT_NEAR(m.rate_adj, 500e-6, 1e-12);
  SlewConfig slow = fast;
  slow.max_slew_ppm = 50;
  slewer.set_config(slow);
  raw += 100 * kMs;
  const int64_t target = kEpoch + 200 * kMs + 5 * kMs;
  const long double before = Eval(m, raw);
  m = slewer.Update(Target(raw, target, 0, 1'000));
  EXPECT_NEAR(m.rate_adj, 50e-6, 1e-12);
  EXPECT_NEAR(static_cast<double>(Eval(m, raw) - before), 0, 1);
  EXPECT_GE(m.bound_at_anchor_ns, target + 1'000 - m.anchor_global_ns);
}

// A node whose local clock runs 20 ppm fast with offset −3 ms against its
// parent, probed with symmetric 50 µs delays: the target is the truth
// within the delay, its rate the clock's (global runs slower), its bound
// contains the truth and grows.
TEST(NodeSlewTargetTest, LinearClockFromTheEstimator) {
  hull::AdaptiveConfig config;
  config.levels = 1;
  config.base.wander_ppb_per_sqrt_s = 0;
  std::unique_ptr<hull::Estimator> estimator = hull::MakeEstimator(config);
  auto local_of = [](int64_t truth) {
    return truth - 3 * kMs + truth / 50'000;  // 20 ppm fast.
  };
  EXPECT_EQ(NodeSlewTarget(*estimator, 5, 5, 6, 7, 2).state,
            CLOCKSYNC_STATE_UNSYNCED);
  for (int64_t s = 1; s <= 60; ++s) {
    const int64_t t = s * 1'000 * kMs;
    hull::ProbeSample sample;
    sample.t1_ns = local_of(t);
    sample.t2_ns = sample.t3_ns = t + 50'000;
    sample.t4_ns = local_of(t + 100'000);
    ASSERT_TRUE(hull::IsAccepted(estimator->Add(sample)));
  }
  const int64_t truth = 60'500 * kMs;
  const int64_t local = local_of(truth);
  const SlewTarget target = NodeSlewTarget(
      *estimator, local, local, local + 1'000 * kMs, local + 10'000 * kMs, 2);
  EXPECT_EQ(target.state, CLOCKSYNC_STATE_SYNCED);
  EXPECT_EQ(target.depth, 2u);
  EXPECT_LE(std::llabs(target.global_ns - truth), 50'000);
  EXPECT_LE(target.earliest_ns, truth);
  EXPECT_GE(target.latest_ns, truth);
  EXPECT_NEAR(target.rate_adj, 1.0 / 1.00002 - 1, 1e-8);
  EXPECT_GE(target.bound_growth_ppb, 0);
  EXPECT_EQ(ToShmState(hull::SyncState::kRecovering),
            CLOCKSYNC_STATE_RECOVERING);
}

}  // namespace
}  // namespace clocksync
