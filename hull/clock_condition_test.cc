// hull/clock_condition_test.cc: tests of the clock-condition check: counts,
// the worst message, extremes, and the check through per-process
// corrections (uncorrected clocks violate it, corrected ones do not).

#include "hull/clock_condition.h"

#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "hull/postmortem.h"

namespace clocksync::hull {
namespace {

// An exchange whose master gave one stamp m (t2 = t3 = m): local send s,
// local receive r.
constexpr ProbeSample Exchange(int64_t s, int64_t m, int64_t r) {
  return ProbeSample::OneMasterStamp(s, m, r);
}

constexpr int64_t kEpochNs = 1'700'000'000'000'000'000;
constexpr int64_t kSecondNs = 1'000'000'000;

MatchedMessage Message(int64_t send_ns, int64_t latency_ns) {
  return MatchedMessage{0, 1, kEpochNs + send_ns,
                        kEpochNs + send_ns + latency_ns};
}

TEST(ClockConditionTest, CountsViolationsAndFindsTheWorst) {
  const std::vector<MatchedMessage> messages = {
      Message(0, 5000),    // fine
      Message(10, 500),    // faster than the minimum latency
      Message(20, 0),      // same time: below the minimum, not reversed
      Message(30, -200),   // received before sent
      Message(40, -5400),  // the worst
      Message(50, -5400),  // as bad: the first one stays the worst
      Message(60, 1000),   // exactly the minimum: fine
  };
  const ClockConditionReport r = CheckClockCondition(messages, 1000);
  EXPECT_EQ(r.messages, 7);
  EXPECT_EQ(r.reversed, 3);
  EXPECT_EQ(r.below_min_latency, 5);
  EXPECT_FALSE(r.ok());
  ASSERT_TRUE(r.has_worst);
  EXPECT_EQ(r.worst_index, 4);
  EXPECT_EQ(r.worst_latency_ns, -5400);
  EXPECT_EQ(r.worst_shortfall_ns, 6400);
  EXPECT_EQ(r.worst.send_global_ns, kEpochNs + 40);
  EXPECT_EQ(r.ToString(),
            "clock condition: 3 of 7 messages received before sent, 5 within "
            "the 1000 ns minimum latency; worst: message 4 (0 -> 1), latency "
            "-5400 ns, short by 6400 ns");
}

TEST(ClockConditionTest, ZeroMinimumLatencyCountsOnlyReversed) {
  const ClockConditionReport r =
      CheckClockCondition({Message(0, 0), Message(1, 1), Message(2, -1)}, 0);
  EXPECT_EQ(r.reversed, 1);
  EXPECT_EQ(r.below_min_latency, 1);
  EXPECT_EQ(r.worst_index, 2);
  EXPECT_EQ(r.worst_shortfall_ns, 1);
}

TEST(ClockConditionTest, NoMessagesOrNoViolations) {
  ClockConditionReport r = CheckClockCondition({}, 1000);
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.has_worst);
  EXPECT_EQ(r.ToString(),
            "clock condition: 0 of 0 messages received before sent, 0 within "
            "the 1000 ns minimum latency");
  r = CheckClockCondition({Message(0, 2000), Message(5, 1001)}, 1000);
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.has_worst);
}

TEST(ClockConditionTest, ExtremeTimesSaturate) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const ClockConditionReport r =
      CheckClockCondition({MatchedMessage{3, 4, kMax, kMin}}, 1000);
  EXPECT_EQ(r.reversed, 1);
  EXPECT_EQ(r.worst_latency_ns, kMin);
  EXPECT_EQ(r.worst_shortfall_ns, kMax);
}

// The local clock of a process that is `offset_ns` behind global time and
// `ppb` slow, at global time g.
int64_t LocalOf(int64_t offset_ns, int64_t ppb, int64_t g) {
  return g - offset_ns -
         static_cast<int64_t>(static_cast<__int128>(g - kEpochNs) * ppb /
                              kSecondNs);
}

// Sessions of such a process every minute for ten minutes (symmetric
// delays: exact).
std::vector<SyncSession> SessionsFor(int64_t offset_ns, int64_t ppb) {
  std::vector<SyncSession> sessions;
  for (int64_t i = 0; i <= 10; ++i) {
    const int64_t g = kEpochNs + i * 60 * kSecondNs;
    const int64_t local = LocalOf(offset_ns, ppb, g);
    sessions.push_back(
        SyncSession{i, {Exchange(local - 50'000, g, local + 50'000)}});
  }
  return sessions;
}

TEST(ClockConditionTest, CorrectionsRestoreTheClockCondition) {
  // Process 0 reads global time; process 1 is 80 µs behind and 20 ppm slow.
  // Messages 1 -> 0 and 0 -> 1 take 5..9 µs.
  const auto p0 =
      FitPostmortemCorrection(CorrectionKind::kLinear, SessionsFor(0, 0));
  const auto p1 = FitPostmortemCorrection(CorrectionKind::kLinear,
                                          SessionsFor(80'000, 20'000));
  ASSERT_TRUE(p0.ok() && p1.ok());
  const auto identity = FitPostmortemCorrection(
      CorrectionKind::kLinear,
      {SyncSession{0, {Exchange(kEpochNs, kEpochNs, kEpochNs)}}});
  ASSERT_TRUE(identity.ok());
  ASSERT_EQ((*identity)->ToGlobalNs(kEpochNs + 12345), kEpochNs + 12345);

  std::mt19937_64 rng(2718);
  std::cout << "CorrectionsRestore: seed=2718\n";
  std::uniform_int_distribution<int64_t> when(0, 600 * kSecondNs);
  std::uniform_int_distribution<int64_t> latency(5'000, 9'000);
  auto local_of = [](int process, int64_t g) {
    return process == 0 ? g : LocalOf(80'000, 20'000, g);
  };
  std::vector<LocalMessage> messages;
  for (int i = 0; i < 1000; ++i) {
    const int from = i % 2;
    const int64_t send_g = kEpochNs + when(rng);
    const int64_t receive_g = send_g + latency(rng);
    messages.push_back(LocalMessage{from, 1 - from, local_of(from, send_g),
                                    local_of(1 - from, receive_g)});
  }
  const Correction* uncorrected[] = {identity->get(), identity->get()};
  const Correction* corrected[] = {p0->get(), p1->get()};
  absl::StatusOr<ClockConditionReport> before =
      CheckClockCondition(messages, uncorrected, 1000);
  absl::StatusOr<ClockConditionReport> after =
      CheckClockCondition(messages, corrected, 1000);
  ASSERT_TRUE(before.ok() && after.ok());
  std::cout << "uncorrected: " << before->ToString() << "\n"
            << "linear:      " << after->ToString() << "\n";
  // Every 0 -> 1 message arrives "before" it was sent on the raw clocks.
  EXPECT_EQ(before->reversed, 500);
  EXPECT_GT(before->worst_shortfall_ns, 80'000);
  EXPECT_TRUE(after->ok()) << after->ToString();
}

TEST(ClockConditionTest, MissingCorrectionIsAnError) {
  const auto c = FitPostmortemCorrection(
      CorrectionKind::kLinear,
      {SyncSession{0, {Exchange(kEpochNs, kEpochNs, kEpochNs)}}});
  ASSERT_TRUE(c.ok());
  const Correction* corrections[] = {c->get(), nullptr};
  const std::vector<LocalMessage> ok_message = {{0, 0, 1, 2}};
  EXPECT_TRUE(CheckClockCondition(ok_message, corrections, 0).ok());
  const std::vector<LocalMessage> messages = {{0, 0, 1, 2}, {0, 1, 1, 2}};
  absl::StatusOr<ClockConditionReport> r =
      CheckClockCondition(messages, corrections, 0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "message 1 (0 -> 1): no correction for process 1 of 2");
  const std::vector<LocalMessage> negative = {{-1, 0, 1, 2}};
  EXPECT_FALSE(CheckClockCondition(negative, corrections, 0).ok());
}

}  // namespace
}  // namespace clocksync::hull
