// probe/raw_clock_test.cc: RealtimeToRaw converts CLOCK_REALTIME
// instants into the raw clock's domain never early and within its stated
// error, fresh and aged, and saturates on absurd input.

#include "probe/raw_clock.h"

#include <time.h>

#include <cstdint>

#include "gtest/gtest.h"

namespace clocksync::probe {
namespace {

void SleepNs(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000),
              static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);
}

TEST(RawClockTest, RawClockNeverGoesBackwards) {
  int64_t previous = RawNowNs();
  for (int i = 0; i < 100'000; ++i) {
    const int64_t now = RawNowNs();
    ASSERT_GE(now, previous);
    previous = now;
  }
}

// The documented bound: 0 <= ToRaw - true <= width + 2 * rate * age + 1.
// The true raw time of a realtime reading lies in [before, after] of a
// sandwich around it, so ToRaw must be >= before and <= after + slack.
void ExpectWithinBound(const RealtimeToRaw& conversion, int64_t offset_ns) {
  const int64_t before = RawNowNs();
  const int64_t realtime = RealtimeNowNs();
  const int64_t after = RawNowNs();
  const int64_t raw = conversion.ToRaw(realtime + offset_ns);
  int64_t age = after + offset_ns - conversion.calibrated_raw_ns();
  age = age < 0 ? -age : age;
  const int64_t slack = conversion.sandwich_width_ns() +
                        2 * age * RealtimeToRaw::kMaxRateDiffPpm / 1'000'000 +
                        1;
  EXPECT_GE(raw, before + offset_ns) << "converted early";
  EXPECT_LE(raw, after + offset_ns + slack) << "later than the stated bound";
}

// The mirror bound for ToRawEarly: 0 <= true - ToRawEarly <= width + ...
void ExpectEarlyWithinBound(const RealtimeToRaw& conversion,
                            int64_t offset_ns) {
  const int64_t before = RawNowNs();
  const int64_t realtime = RealtimeNowNs();
  const int64_t after = RawNowNs();
  const int64_t raw = conversion.ToRawEarly(realtime + offset_ns);
  int64_t age = after + offset_ns - conversion.calibrated_raw_ns();
  age = age < 0 ? -age : age;
  const int64_t slack = conversion.sandwich_width_ns() +
                        2 * age * RealtimeToRaw::kMaxRateDiffPpm / 1'000'000 +
                        1;
  EXPECT_LE(raw, after + offset_ns) << "converted late";
  EXPECT_GE(raw, before + offset_ns - slack) << "earlier than the bound";
}

TEST(RealtimeToRawTest, EarlyConversionIsNeverLateAndWithinBound) {
  RealtimeToRaw conversion;
  for (int i = 0; i < 10'000; ++i) {
    conversion.Calibrate();
    ExpectEarlyWithinBound(conversion, 0);
    ExpectEarlyWithinBound(conversion, -20'000);
    // The same instant both ways: early <= late, apart by about the width.
    const int64_t realtime = RealtimeNowNs();
    EXPECT_LE(conversion.ToRawEarly(realtime), conversion.ToRaw(realtime));
  }
  EXPECT_EQ(conversion.ToRawEarly(INT64_MIN), INT64_MIN);
}

TEST(RealtimeToRawTest, FreshConversionIsNeverEarlyAndWithinBound) {
  RealtimeToRaw conversion;
  for (int i = 0; i < 10'000; ++i) {
    conversion.Calibrate();
    ASSERT_GE(conversion.sandwich_width_ns(), 0);
    ExpectWithinBound(conversion, 0);
    // A kernel stamp is from the past: 20 µs before now.
    ExpectWithinBound(conversion, -20'000);
  }
}

TEST(RealtimeToRawTest, AgedCalibrationStaysWithinBound) {
  RealtimeToRaw conversion;
  SleepNs(50'000'000);
  ExpectWithinBound(conversion, 0);
  ExpectWithinBound(conversion, -1'000'000);
}

TEST(RealtimeToRawTest, TightestOfSeveralSandwiches) {
  // With many sandwiches the kept width is the minimum, so it is no wider
  // than a single sandwich taken right after.
  RealtimeToRaw many(64);
  const int64_t before = RawNowNs();
  RealtimeNowNs();
  const int64_t after = RawNowNs();
  // Not strict: a single sandwich can be just as tight; allow 1 µs for a
  // preemption inside the 64.
  EXPECT_LE(many.sandwich_width_ns(), (after - before) + 1'000);
  EXPECT_LT(many.sandwich_width_ns(), 1'000'000);
}

TEST(RealtimeToRawTest, OffsetMatchesTheClocks) {
  RealtimeToRaw conversion;
  const int64_t realtime = RealtimeNowNs();
  const int64_t raw = RawNowNs();
  // realtime − raw now, against the calibrated offset: equal to within the
  // few µs between the readings.
  EXPECT_NEAR(static_cast<double>(realtime - raw),
              static_cast<double>(conversion.offset_ns()), 1e6);
}

TEST(RealtimeToRawTest, MaybeRecalibrateHonorsMaxAge) {
  RealtimeToRaw conversion;
  const int64_t calibrated = conversion.calibrated_raw_ns();
  EXPECT_FALSE(conversion.MaybeRecalibrate(calibrated + 99, 100));
  EXPECT_EQ(conversion.calibrated_raw_ns(), calibrated);
  SleepNs(1'000);
  EXPECT_TRUE(conversion.MaybeRecalibrate(RawNowNs(), 100));
  EXPECT_GT(conversion.calibrated_raw_ns(), calibrated);
}

TEST(RealtimeToRawTest, AbsurdInputsSaturateLate) {
  RealtimeToRaw conversion;
  EXPECT_EQ(conversion.ToRaw(INT64_MIN), INT64_MAX);
  // No overflow here (the raw clock counts from boot), just very late.
  EXPECT_GT(conversion.ToRaw(INT64_MAX), RawNowNs() + 1'000'000'000'000'000);
}

}  // namespace
}  // namespace clocksync::probe
