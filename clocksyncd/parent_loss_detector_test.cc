// clocksyncd/parent_loss_detector_test.cc: the silence threshold grows with
// measured loss, heartbeats keep a live parent, a dead one is still lost.

#include "clocksyncd/parent_loss_detector.h"

#include <random>

#include "gtest/gtest.h"

namespace clocksync {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kStart = 1000 * kS;

ParentLossOptions Options() {
  ParentLossOptions o;
  o.missed_probes_for_loss = 10;
  o.probe_interval_ns = 100 * kMs;
  o.heartbeat_alive_ns = 1 * kS;
  o.probe_silence_cap_ns = 30 * kS;
  return o;
}

// Probes every 100 ms from `from` to `to`, each answered with probability
// 1 - loss, 1 ms later; heartbeats (if any) answered every 200 ms.
int64_t Exchange(ParentLossDetector* d, int64_t from, int64_t to, double loss,
                 bool heartbeats, std::mt19937_64* rng,
                 int* lost_at_ms = nullptr) {
  std::bernoulli_distribution lost(loss);
  for (int64_t t = from; t < to; t += 100 * kMs) {
    d->OnProbeSent(t);
    if (!lost(*rng)) d->OnProbeAnswered(t + kMs);
    if (heartbeats && (t / (100 * kMs)) % 2 == 0) d->OnHeartbeatAnswered(t + 2 * kMs);
    if (lost_at_ms != nullptr && *lost_at_ms < 0 && d->Check(t + 50 * kMs)) {
      *lost_at_ms = static_cast<int>((t - from) / kMs);
    }
  }
  return to;
}

TEST(ParentLossDetectorTest, OptionsAreValidated) {
  EXPECT_EQ(ValidateParentLossOptions(Options()), "");
  ParentLossOptions o = Options();
  o.max_loss_ratio = 1;
  EXPECT_NE(ValidateParentLossOptions(o).find("max_loss_ratio"), std::string::npos);
  o = Options();
  o.missed_probes_for_loss = 0;
  EXPECT_NE(ValidateParentLossOptions(o).find("missed_probes_for_loss"), std::string::npos);
}

TEST(ParentLossDetectorTest, WithoutLossTheThresholdIsTheFixedCount) {
  ParentLossDetector d(Options());
  d.Reset(kStart);
  std::mt19937_64 rng(1);
  Exchange(&d, kStart, kStart + 30 * kS, 0.0, false, &rng);
  EXPECT_EQ(d.LossRatio().value_or(-1), 0.0);
  EXPECT_EQ(d.SilenceThresholdNs(), 1 * kS);
}

TEST(ParentLossDetectorTest, TheThresholdGrowsWithMeasuredLoss) {
  ParentLossDetector d(Options());
  d.Reset(kStart);
  std::mt19937_64 rng(2);
  Exchange(&d, kStart, kStart + 60 * kS, 0.5, false, &rng);
  ASSERT_TRUE(d.LossRatio().has_value());
  EXPECT_NEAR(*d.LossRatio(), 0.5, 0.1);
  // 0.5^k < 1e-6: k >= 20 probes, about 2 s (1.7..2.6 s for 0.4..0.6).
  EXPECT_GE(d.SilenceThresholdNs(), 16 * 100 * kMs);
  EXPECT_LE(d.SilenceThresholdNs(), 30 * 100 * kMs);
}

// 70 % loss each way (91 % of exchanges): once the loss is measured (the
// first 10 s, heartbeats answered meanwhile), 10 minutes of probes without
// heartbeats show no run of misses taken for a loss. The fixed count (10
// misses, 39 % likely at any probe) would lose the parent every few seconds.
TEST(ParentLossDetectorTest, NoFalseLossAtSeventyPercentEachWay) {
  ParentLossDetector d(Options());
  d.Reset(kStart);
  std::mt19937_64 rng(3);
  const double loss = 1 - 0.3 * 0.3;
  int lost_at_ms = -1;
  const int64_t t = Exchange(&d, kStart, kStart + 10 * kS, loss, true, &rng, &lost_at_ms);
  EXPECT_EQ(lost_at_ms, -1);
  Exchange(&d, t, t + 600 * kS, loss, false, &rng, &lost_at_ms);
  EXPECT_EQ(lost_at_ms, -1);
  EXPECT_GE(d.SilenceThresholdNs(), 100 * 100 * kMs);
}

// Loss that sets in suddenly is measured within seconds (the 10 s view),
// and the next parent starts from what the last one's path showed.
TEST(ParentLossDetectorTest, SuddenLossIsSeenFastAndCarriedToTheNextParent) {
  ParentLossDetector d(Options());
  d.Reset(kStart);
  std::mt19937_64 rng(8);
  int64_t t = Exchange(&d, kStart, kStart + 50 * kS, 0.0, false, &rng);
  // Ten seconds of 50 % loss: the last minute says 15 %, the last 10 s 50 %.
  t = Exchange(&d, t, t + 11 * kS, 0.5, true, &rng);
  ASSERT_TRUE(d.LossRatio().has_value());
  EXPECT_GT(*d.LossRatio(), 0.35);
  const double before = *d.LossRatio();
  d.Reset(t);
  ASSERT_TRUE(d.LossRatio().has_value());
  EXPECT_EQ(*d.LossRatio(), before);
  EXPECT_GT(d.SilenceThresholdNs(), 1 * kS);
}

TEST(ParentLossDetectorTest, ADeadParentIsLostAfterTheFixedCountWithoutLoss) {
  ParentLossDetector d(Options());
  d.Reset(kStart);
  std::mt19937_64 rng(4);
  const int64_t dead = Exchange(&d, kStart, kStart + 30 * kS, 0.0, false, &rng);
  EXPECT_FALSE(d.Check(dead + 900 * kMs));
  const std::optional<std::string> why = d.Check(dead + 1200 * kMs);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("no probe answered for"), std::string::npos) << *why;
  EXPECT_NE(why->find("no heartbeat"), std::string::npos) << *why;
}

TEST(ParentLossDetectorTest, ADeadLossyParentIsLostWithinTheCap) {
  ParentLossDetector d(Options());
  d.Reset(kStart);
  std::mt19937_64 rng(5);
  const int64_t dead = Exchange(&d, kStart, kStart + 60 * kS, 0.99, false, &rng);
  // The ratio is capped at 0.95: 270 intervals at most.
  EXPECT_LE(d.SilenceThresholdNs(), 270 * 100 * kMs);
  EXPECT_TRUE(d.Check(dead + d.SilenceThresholdNs() + 100 * kMs));
}

TEST(ParentLossDetectorTest, HeartbeatsKeepAParentWhoseProbesAreLostUpToTheCap) {
  ParentLossDetector d(Options());
  d.Reset(kStart);
  std::mt19937_64 rng(6);
  const int64_t silent_from = Exchange(&d, kStart, kStart + 20 * kS, 0.0, true, &rng);
  // Probes all lost from now on, heartbeats still answered.
  int lost_at_ms = -1;
  Exchange(&d, silent_from, silent_from + 40 * kS, 1.0, true, &rng, &lost_at_ms);
  EXPECT_GE(lost_at_ms, 29'900);
  EXPECT_LE(lost_at_ms, 30'100);
  const std::optional<std::string> why = d.Check(silent_from + 40 * kS);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("while heartbeats are answered"), std::string::npos) << *why;
}

TEST(ParentLossDetectorTest, ResetForgetsTheOldParent) {
  ParentLossDetector d(Options());
  d.Reset(kStart);
  std::mt19937_64 rng(7);
  const int64_t t = Exchange(&d, kStart, kStart + 60 * kS, 0.8, true, &rng);
  d.Reset(t);
  EXPECT_FALSE(d.AnsweredSinceReset());
  EXPECT_EQ(d.LastAnswerNs(), t);
  // Silence counts from the reset; no heartbeat since it keeps the parent.
  EXPECT_FALSE(d.Check(t + d.SilenceThresholdNs() - kMs));
  EXPECT_TRUE(d.Check(t + d.SilenceThresholdNs() + kMs));
}

}  // namespace
}  // namespace clocksync
