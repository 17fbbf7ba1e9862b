// shm/tsc_calibrator_test.cc: the TSC fit on modeled counters (the
// calibrator's sandwich source injected): a steady or noisy counter gives
// mappings within their stated error over their whole range, continuous
// from one to the next, published only once confirmed; a counter that
// jumps, stops, goes back, changes rate or bends has its mapping withdrawn
// and is calibrated again, while a late check is no jump; cpuinfo flags
// decide whether the TSC is used; and on this machine's real clocks (where
// it has an invariant TSC) the published mapping holds against
// clock_gettime.

#include "shm/tsc_calibrator.h"

#include <cmath>
#include <cstdint>
#include <random>
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
  double bend_per_ns2 = 0;  // Ticks += bend * (raw - start)^2: a bending rate.
  int64_t freeze_from_ns = -1;  // The counter stops at this raw time ...
  int64_t freeze_to_ns = -1;    // ... and runs on from here, behind.
  // Noise: each sandwich is width_ns plus up to extra_width_ns wide, and
  // the TSC is read anywhere inside it.
  int64_t extra_width_ns = 0;
  std::mt19937_64 rng{1};

  TscCalibrator::Sandwich Next() {
    raw_ns += step_ns;
    ++sandwiches;
    TscCalibrator::Sandwich s;
    int64_t width = width_ns;
    int64_t read_at_ns = raw_ns;
    if (extra_width_ns > 0) {
      width += static_cast<int64_t>(rng() % (extra_width_ns + 1));
      read_at_ns = raw_ns - width / 2 + static_cast<int64_t>(rng() % (width + 1));
    }
    s.raw_before_ns = raw_ns - width / 2;
    s.raw_after_ns = s.raw_before_ns + width;
    s.tsc = TscAt(read_at_ns);
    return s;
  }
  uint64_t TscAt(int64_t raw) const {
    constexpr int64_t kStart = 1'000'000'000'000;
    if (freeze_from_ns >= 0 && raw > freeze_from_ns) {
      raw = raw < freeze_to_ns ? freeze_from_ns
                               : raw - (freeze_to_ns - freeze_from_ns);
    }
    const double since_ns = static_cast<double>(raw - kStart);
    double ticks = since_ns * ticks_per_ns + bend_per_ns2 * since_ns * since_ns;
    if (new_rate != 0 && raw > change_raw_ns) {
      ticks = static_cast<double>(change_raw_ns - kStart) * ticks_per_ns +
              static_cast<double>(raw - change_raw_ns) * new_rate;
    }
    uint64_t tsc = tsc0 + static_cast<uint64_t>(std::llround(ticks));
    if (jump_at >= 0 && sandwiches >= jump_at) tsc += jump_ticks;
    return tsc;
  }
};

// Every raw time in the mapping's range maps within its error of the truth
// (from error_ns after the anchor: the anchor's TSC may have been read up
// to error_ns later than anchor_raw_ns says).
void ExpectWithinError(const FakeHost& host, const TscValues& v) {
  for (int64_t dt_ns = v.error_ns + 1; dt_ns < 3'990'000'000;
       dt_ns += 37'000'000) {
    const int64_t raw = v.anchor_raw_ns + dt_ns;
    int64_t mapped = 0;
    ASSERT_TRUE(shm::TscToRaw(v, host.TscAt(raw), &mapped)) << dt_ns;
    ASSERT_LE(std::abs(mapped - raw), v.error_ns) << dt_ns;
  }
}

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
  // 1 s: a line, but not published before a later point confirms it.
  EXPECT_EQ(calibrator.Update().max_ticks, 0u);
  EXPECT_NE(calibrator.problem().find("confirm"), std::string::npos);
  TscValues v = calibrator.Update();
  ASSERT_GT(v.max_ticks, 0u) << calibrator.problem();
  ExpectWithinError(host, v);
  for (int i = 0; i < 20; ++i) v = calibrator.Update();
  ASSERT_GT(v.max_ticks, 0u) << calibrator.problem();
  EXPECT_EQ(calibrator.problem(), "");
  EXPECT_EQ(calibrator.jumps(), 0u);
  EXPECT_GT(v.error_ns, 0);
  EXPECT_LT(v.error_ns, 200);
  // Across the whole validity range the mapping is within error_ns.
  ExpectWithinError(host, v);
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

// Sandwiches up to 300 ns wide with the TSC read anywhere inside: every
// published mapping holds within its error over its whole range, and each
// starts exactly where the previous one stood at its anchor, so TSC
// readings mapped through successive mappings never go back (1 ns of
// rounding aside).
TEST(TscCalibratorTest, NoisyCounterGivesContinuousMappingsWithinError) {
  FakeHost host;
  host.step_ns = 62'500'000;  // 16 sandwiches per Update(): 1 s.
  host.extra_width_ns = 300;
  TscCalibrator::Options o;
  TscCalibrator calibrator(o, [&] { return host.Next(); });
  TscValues previous;
  int published = 0;
  for (int i = 0; i < 120; ++i) {
    const TscValues v = calibrator.Update();
    ASSERT_EQ(calibrator.jumps(), 0u) << i << ": " << calibrator.problem();
    if (v.max_ticks == 0) {
      ASSERT_LT(i, 3) << calibrator.problem();
      continue;
    }
    ++published;
    ASSERT_NO_FATAL_FAILURE(ExpectWithinError(host, v)) << i;
    if (previous.max_ticks > 0) {
      int64_t old_at_anchor_ns = 0;
      ASSERT_TRUE(shm::TscToRaw(previous, v.anchor_tsc, &old_at_anchor_ns));
      EXPECT_EQ(old_at_anchor_ns, v.anchor_raw_ns) << i;
      // A reader that read through the old mapping just before the anchor
      // and through the new one after it.
      for (uint64_t before : {uint64_t{1}, uint64_t{1000}, uint64_t{100'000}}) {
        for (uint64_t after : {uint64_t{0}, uint64_t{1}, uint64_t{1000}}) {
          int64_t old_ns = 0, new_ns = 0;
          ASSERT_TRUE(shm::TscToRaw(previous, v.anchor_tsc - before, &old_ns));
          ASSERT_TRUE(shm::TscToRaw(v, v.anchor_tsc + after, &new_ns));
          EXPECT_GE(new_ns, old_ns) << i;
        }
      }
    }
    previous = v;
  }
  EXPECT_GT(published, 110);
}

// The daemon's loop was late (a stalled host): the point lies beyond the
// mapping's range but on its line, so the mapping goes on.
TEST(TscCalibratorTest, ALateCheckIsNoJump) {
  FakeHost host;
  host.step_ns = 500'000'000;
  TscCalibrator calibrator(TestOptions(), [&] { return host.Next(); });
  TscValues v;
  for (int i = 0; i < 10; ++i) v = calibrator.Update();
  ASSERT_GT(v.max_ticks, 0u);
  host.raw_ns += 30'000'000'000;  // 30 s without a check.
  v = calibrator.Update();
  EXPECT_GT(v.max_ticks, 0u) << calibrator.problem();
  EXPECT_EQ(calibrator.jumps(), 0u);
  ExpectWithinError(host, v);
}

// A TSC that stops for 2 s while the raw clock runs on (then runs on 2 s
// behind), or that goes back: withdrawn at the first point after.
TEST(TscCalibratorTest, AStoppedCounterIsCaught) {
  FakeHost host;
  host.step_ns = 500'000'000;
  host.freeze_from_ns = host.raw_ns + 10 * host.step_ns + 100'000'000;
  host.freeze_to_ns = host.freeze_from_ns + 2'000'000'000;
  TscCalibrator calibrator(TestOptions(), [&] { return host.Next(); });
  TscValues v;
  for (int i = 0; i < 10; ++i) v = calibrator.Update();
  ASSERT_GT(v.max_ticks, 0u);
  v = calibrator.Update();  // 0.4 s into the stop.
  EXPECT_EQ(v.max_ticks, 0u);
  EXPECT_EQ(calibrator.jumps(), 1u);
}

TEST(TscCalibratorTest, ACounterThatGoesBackIsCaught) {
  FakeHost host;
  host.step_ns = 500'000'000;
  host.jump_at = 12;
  host.jump_ticks = -2'900'000'000;  // 1 s back (as uint64: wraps).
  TscCalibrator calibrator(TestOptions(), [&] { return host.Next(); });
  TscValues v;
  for (int i = 0; i < 11; ++i) v = calibrator.Update();
  ASSERT_GT(v.max_ticks, 0u);
  v = calibrator.Update();
  EXPECT_EQ(v.max_ticks, 0u);
  EXPECT_EQ(calibrator.jumps(), 1u);
  EXPECT_NE(calibrator.problem().find("-1000000"), std::string::npos)
      << calibrator.problem();
}

// A rate that keeps growing (200 ppb per s): the fit over the window lags
// behind the counter more and more, until a point is off by more than the
// tolerance (after about 5 s of window); the mapping is withdrawn then, and
// again after each recalibration.
TEST(TscCalibratorTest, ABendingCounterIsCaught) {
  FakeHost host;
  host.step_ns = 62'500'000;  // 1 s per Update().
  host.bend_per_ns2 = 2.9e-16;  // d(rate)/dt = 2 * 2.9e-16 ticks/ns^2.
  TscCalibrator calibrator(TscCalibrator::Options{},
                           [&] { return host.Next(); });
  TscValues v;
  int withdrawn = 0;
  for (int i = 0; i < 200; ++i) {
    const TscValues next = calibrator.Update();
    if (v.max_ticks > 0 && next.max_ticks == 0) ++withdrawn;
    v = next;
  }
  EXPECT_GE(calibrator.jumps(), 10u);
  EXPECT_GE(withdrawn, 10);
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
