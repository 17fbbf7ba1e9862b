// ModeledClock and ProbeSimulator: the model's terms, parsing, and that
// simulated samples are causal and carry the right truth.

#include "hull/sim/clock_model.h"

#include <cmath>

#include "gtest/gtest.h"
#include "hull/sim/probe_simulator.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST(ClockModelTest, OffsetAndFrequency) {
  ClockModelParams p;
  p.offset_ns = 5 * kSecond;
  p.frequency_ppm = 100;
  ModeledClock clock(p);
  EXPECT_EQ(clock.LocalAt(0), 5 * kSecond);
  EXPECT_EQ(clock.LocalAt(1000 * kSecond), 1000 * kSecond + 5 * kSecond + 100'000'000);
  EXPECT_DOUBLE_EQ(clock.FrequencyPpbAt(3 * kSecond), 100'000);
}

TEST(ClockModelTest, StepsApplyFromTheirTime) {
  ClockModelParams p;
  p.steps = {{10 * kSecond, 2'000'000}, {20 * kSecond, -500}};
  ModeledClock clock(p);
  EXPECT_EQ(clock.LocalAt(10 * kSecond - 1), 10 * kSecond - 1);
  EXPECT_EQ(clock.LocalAt(10 * kSecond), 10 * kSecond + 2'000'000);
  EXPECT_EQ(clock.LocalAt(30 * kSecond), 30 * kSecond + 2'000'000 - 500);
}

TEST(ClockModelTest, WanderIsAContinuousRandomWalkOfFrequency) {
  ClockModelParams p;
  p.wander_ppb_per_sqrt_s = 1;
  p.seed = 3;
  ModeledClock clock(p);
  // Continuous phase: no jumps at second boundaries.
  for (int s = 1; s < 100; ++s) {
    const int64_t before = clock.LocalAt(s * kSecond - 1);
    const int64_t at = clock.LocalAt(s * kSecond);
    EXPECT_LE(std::llabs(at - before - 1), 1) << s;
  }
  // The walk's spread after 10,000 s is about sqrt(10,000) = 100 ppb.
  double sum_sq = 0;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    p.seed = seed;
    ModeledClock c(p);
    const double f = c.FrequencyPpbAt(10'000 * kSecond);
    sum_sq += f * f;
  }
  const double rms = std::sqrt(sum_sq / 50);
  EXPECT_GT(rms, 60);
  EXPECT_LT(rms, 150);
  // Same seed, same clock.
  p.seed = 9;
  ModeledClock a(p), b(p);
  EXPECT_EQ(a.LocalAt(5'000 * kSecond), b.LocalAt(5'000 * kSecond));
}

TEST(ClockModelTest, SineIntegratesToItsPhase) {
  ClockModelParams p;
  p.sine_amplitude_ppb = 1000;
  p.sine_period_s = 100;
  ModeledClock clock(p);
  // After a whole period the sine's phase returns to 0.
  EXPECT_NEAR(static_cast<double>(clock.LocalAt(100 * kSecond) - 100 * kSecond), 0, 1);
  // After half a period: A P / π ns.
  EXPECT_NEAR(static_cast<double>(clock.LocalAt(50 * kSecond) - 50 * kSecond),
              1000 * 100 / M_PI, 1);
}

TEST(ClockModelTest, ParsesSpecAndNamesBadKeys) {
  ClockModelParams p;
  EXPECT_EQ(ParseClockModel("offset=2.5s,frequency_ppm=-40,wander=1,"
                            "sine_ppb=500,sine_period_s=600,step=120s:+2ms,"
                            "step=1h:1,seed=7",
                            &p),
            "step: bad value '1h:1' (expected AT:SIZE, e.g. 60s:+1ms)");
  ASSERT_EQ(ParseClockModel("offset=2.5s,frequency_ppm=-40,wander=1,"
                            "sine_ppb=500,sine_period_s=600,step=120s:+2ms,"
                            "seed=7",
                            &p),
            "");
  EXPECT_EQ(p.offset_ns, 2'500'000'000);
  EXPECT_DOUBLE_EQ(p.frequency_ppm, -40);
  EXPECT_DOUBLE_EQ(p.wander_ppb_per_sqrt_s, 1);
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].at_ns, 120 * kSecond);
  EXPECT_EQ(p.steps[0].step_ns, 2'000'000);
  EXPECT_EQ(p.seed, 7u);
  EXPECT_EQ(ParseClockModel("colour=red", &p), "unknown key 'colour'");
  EXPECT_EQ(ParseClockModel("frequency_ppm=abc", &p),
            "frequency_ppm: bad value 'abc'");
  EXPECT_EQ(ParseClockModel("frequency_ppm=5000", &p),
            "frequency_ppm: over 1000 ppm");
  EXPECT_EQ(ParseClockModel("offset", &p), "'offset': expected key=value");
}

// Forgetting the past keeps the same walk ahead and bounded memory.
TEST(ClockModelTest, ForgetBeforeKeepsTheWalk) {
  ClockModelParams p;
  p.wander_ppb_per_sqrt_s = 5;
  p.frequency_ppm = 3;
  p.seed = 11;
  ModeledClock whole(p);
  ModeledClock trimmed(p);
  for (int64_t s = 0; s < 3'000; s += 7) {
    const int64_t t = s * kSecond + 123'456;
    EXPECT_EQ(trimmed.LocalAt(t), whole.LocalAt(t)) << s;
    EXPECT_DOUBLE_EQ(trimmed.FrequencyPpbAt(t), whole.FrequencyPpbAt(t));
    trimmed.ForgetBefore(t - 10 * kSecond);
    EXPECT_LE(trimmed.walk_seconds_held(), 20u);
  }
  EXPECT_GT(whole.walk_seconds_held(), 2'900u);
}

TEST(ClockModelTest, DrawUntilDrawsTheSameWalkAhead) {
  ClockModelParams p;
  p.wander_ppb_per_sqrt_s = 5;
  p.seed = 12;
  ModeledClock lazy(p);
  ModeledClock ahead(p);
  ahead.DrawUntil(100 * kSecond);
  EXPECT_EQ(ahead.walk_seconds_held(), 101u);
  for (int64_t s = 0; s < 200; s += 3) {
    const int64_t t = s * kSecond + 5'000;
    EXPECT_EQ(ahead.LocalAt(t), lazy.LocalAt(t)) << s;
  }
}

TEST(ProbeSimulatorTest, SamplesAreCausalAndCarryTruth) {
  SimulationParams p;
  p.clock.frequency_ppm = 50;
  p.clock.offset_ns = -3 * kSecond;
  p.duration_ns = 100 * kSecond;
  p.loss = 0.1;
  p.outages = {{40 * kSecond, 60 * kSecond}};
  ProbeSimulator sim(p);
  SimulatedSample s;
  int n = 0;
  while (sim.Next(&s)) {
    ++n;
    EXPECT_LE(s.sample.t1_ns, s.sample.t4_ns);
    EXPECT_EQ(s.sample.t3_ns - s.sample.t2_ns, p.turnaround_ns);
    EXPECT_FALSE(s.true_ns >= 40 * kSecond && s.true_ns < 60 * kSecond);
    // The request's offset is at least the true offset (forward delay > 0).
    EXPECT_EQ(s.true_global_at_t4_ns, p.global_origin_ns + s.true_ns);
  }
  EXPECT_GT(n, 60);
  EXPECT_LT(n, 80);
}

}  // namespace
}  // namespace clocksync::hull
