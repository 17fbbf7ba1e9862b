// shm/tsc_calibrator_test.cc: the TSC fit on modeled counters: a
// steady counter gives a mapping within its stated error over its whole
// range; a counter that jumps or changes rate has its mapping withdrawn and
// is calibrated again; cpuinfo flags decide whether the TSC is used; and on
// this machine's real clocks (where it has an invariant TSC) the published
// mapping holds against clock_gettime.

#include "shm/tsc_calibrator.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace clocksync {
namespace {

// A modeled host: raw time advances by step_ns per sandwich; the TSC runs
// at ticks_per_ns from tsc0, plus `jump` ticks from sandwich jump_at on.
struct FakeHost {
  double ticks_per_ns = 2.9;
  int64_t raw_ns = 1'000'000'000'000;
  int64_t step_ns = 100'000'000;  // 16 sandwiches: 1.6 s per Update().
  int64_t width_ns = 40;
  uint64_t tsc0 = 5'000'000'000;
  int sandwiches = 0;
  int jump_at = -1;
  int64_t jump_ticks = 0;
  double new_rate = 0;     // From change_raw_ns on, when nonzero,
  int64_t change_raw_ns = 0;  // continuing from the counter's value there.

  TscCalibrator::Sandwich Next() {
    raw_ns += step_ns;
    ++sandwiches;
    TscCalibrator::Sandwich s;
    s.raw_before_ns = raw_ns - width_ns / 2;
    s.raw_after_ns = raw_ns + width_ns / 2;
    s.tsc = TscAt(raw_ns);
    return s;
  }
  uint64_t TscAt(int64_t raw) const {
    constexpr int64_t kStart = 1'000'000'000'000;
    double ticks = static_cast<double>(raw - kStart) * ticks_per_ns;
    if (new_rate != 0 && raw > change_raw_ns) {
      ticks = static_cast<double>(change_raw_ns - kStart) * ticks_per_ns +
              static_cast<double>(raw - change_raw_ns) * new_rate;
    }
    uint64_t tsc = tsc0 + static_cast<uint64_t>(std::llround(ticks));
    if (jump_at >= 0 && sandwiches >= jump_at) tsc += jump_ticks;
    return tsc;
  }
};

TscCalibrator::Options TestOptions() {
  TscCalibrator::Options o;
  o.sandwiches = 1;
  return o;
}

TEST(TscCalibratorTest, SteadyCounterMapsWithinItsError) {
  FakeHost host;
  host.step_ns = 500'000'000;  // One Update() every 0.5 s.
  TscCalibrator calibrator(TestOptions(), [&] { return host.Next(); });
  EXPECT_EQ(calibrator.Update().max_ticks, 0u);  // One point: no rate.
  EXPECT_EQ(calibrator.problem(), "calibrating");
  EXPECT_EQ(calibrator.Update().max_ticks, 0u);  // 0.5 s: still too short.
  TscValues v;
  for (int i = 0; i < 20; ++i) v = calibrator.Update();
  ASSERT_GT(v.max_ticks, 0u) << calibrator.problem();
  EXPECT_EQ(calibrator.problem(), "");
  EXPECT_GT(v.error_ns, 0);
  EXPECT_LT(v.error_ns, 200);
  // Across the whole validity range the mapping is within error_ns.
  for (int64_t dt_ns = 0; dt_ns < 4'000'000'000; dt_ns += 37'000'000) {
    const int64_t raw = v.anchor_raw_ns + dt_ns;
    int64_t mapped = 0;
    ASSERT_TRUE(shm::TscToRaw(v, host.TscAt(raw), &mapped)) << dt_ns;
    EXPECT_LE(std::abs(mapped - raw), v.error_ns) << dt_ns;
  }
  // Beyond it, no mapping (the reader falls back to clock_gettime).
  int64_t mapped = 0;
  EXPECT_FALSE(
      shm::TscToRaw(v, host.TscAt(v.anchor_raw_ns + 4'100'000'000), &mapped));
  EXPECT_FALSE(shm::TscToRaw(v, v.anchor_tsc - 1, &mapped));  // Before it.
}

TEST(TscCalibratorTest, AJumpWithdrawsTheMappingUntilRecalibrated) {
  FakeHost host;
  host.step_ns = 500'000'000;
  host.jump_at = 30;
  host.jump_ticks = 29'000;  // 10 µs.
  TscCalibrator calibrator(TestOptions(), [&] { return host.Next(); });
  TscValues v;
  for (int i = 0; i < 29; ++i) v = calibrator.Update();
  ASSERT_GT(v.max_ticks, 0u);
  v = calibrator.Update();  // The 30th sandwich: jumped.
  EXPECT_EQ(v.max_ticks, 0u);
  EXPECT_EQ(calibrator.jumps(), 1u);
  EXPECT_NE(calibrator.problem().find("disagreed"), std::string::npos)
      << calibrator.problem();
  // After a new baseline, a mapping again, consistent with the new offset.
  for (int i = 0; i < 4; ++i) v = calibrator.Update();
  ASSERT_GT(v.max_ticks, 0u);
  int64_t mapped = 0;
  const int64_t raw = v.anchor_raw_ns + 1'000'000'000;
  ASSERT_TRUE(shm::TscToRaw(v, host.TscAt(raw), &mapped));
  EXPECT_LE(std::abs(mapped - raw), v.error_ns);
}

TEST(TscCalibratorTest, ARateChangeIsCaught) {
  FakeHost host;
  host.step_ns = 500'000'000;
  // 2 ppm faster after 29 updates (14.5 s): 1 µs more every 0.5 s, the
  // counter continuous at the change.
  host.new_rate = 2.9 * (1 + 2e-6);
  host.change_raw_ns = host.raw_ns + 29 * host.step_ns;
  TscCalibrator::Options o = TestOptions();
  o.max_residual_ns = 500;
  TscCalibrator calibrator(o, [&] { return host.Next(); });
  TscValues v;
  for (int i = 0; i < 29; ++i) v = calibrator.Update();
  ASSERT_GT(v.max_ticks, 0u);
  // 0.5 s after the change the point is 1 µs off its prediction: beyond
  // max_residual_ns (500) plus the sandwich.
  v = calibrator.Update();
  EXPECT_EQ(v.max_ticks, 0u);
  EXPECT_EQ(calibrator.jumps(), 1u);
}

TEST(TscCalibratorTest, CpuFlagsDecide) {
  std::string why;
  EXPECT_TRUE(HasInvariantTscIn(
      "processor : 0\nflags\t\t: fpu tsc msr constant_tsc nonstop_tsc "
      "tsc_known_freq\n",
      &why));
  EXPECT_FALSE(HasInvariantTscIn("flags\t\t: fpu tsc msr constant_tsc\n", &why));
  EXPECT_EQ(why, "the CPU flags lack nonstop_tsc");
  EXPECT_FALSE(HasInvariantTscIn("processor : 0\n", &why));
  EXPECT_EQ(why, "no CPU flags in /proc/cpuinfo");
}

// On this machine's clocks: where the TSC is invariant, a mapping comes
// after the baseline and holds against clock_gettime within its error.
TEST(TscCalibratorTest, RealClocksAgreeWithinTheError) {
  std::string why;
  if (!HasInvariantTsc(&why)) GTEST_SKIP() << why;
  TscCalibrator::Options o;
  o.min_baseline_ns = 200'000'000;
  TscCalibrator calibrator(o);
  TscValues v;
  for (int i = 0; i < 8 && v.max_ticks == 0; ++i) {
    timespec pause = {0, 100'000'000};
    nanosleep(&pause, nullptr);
    v = calibrator.Update();
  }
  ASSERT_GT(v.max_ticks, 0u) << calibrator.problem();
  int outside = 0;
  for (int i = 0; i < 1000; ++i) {
    const TscCalibrator::Sandwich s = TscCalibrator::ReadClocks();
    int64_t mapped = 0;
    ASSERT_TRUE(shm::TscToRaw(v, s.tsc, &mapped));
    // The true raw time of the TSC read is within the sandwich.
    if (mapped < s.raw_before_ns - v.error_ns ||
        mapped > s.raw_after_ns + v.error_ns) {
      ++outside;
    }
  }
  EXPECT_EQ(outside, 0) << "error_ns " << v.error_ns;
}

}  // namespace
}  // namespace clocksync
