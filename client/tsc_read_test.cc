// client/tsc_read_test.cc: Clock::Now() through the TSC: with a valid
// published TSC mapping it reads the TSC and agrees with the clock_gettime
// path within the mapping's error, which its bound includes; with none, an
// invalid one, a version-1 segment, the option off or CLOCKSYNC_TSC=off it
// takes the clock_gettime path; and the fixed-point mapping matches a
// double-precision reference.

#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "client/clock.h"
#include "gtest/gtest.h"
#include "shm/shm_layout.h"
#include "shm/shm_publisher.h"
#include "shm/tsc_calibrator.h"

namespace clocksync {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

Mapping SyncedNow() {
  Mapping mapping;
  mapping.anchor_raw_ns = Clock::RawNowNs();
  mapping.anchor_global_ns = mapping.anchor_raw_ns + 1'000'000'000'000;
  mapping.bound_at_anchor_ns = 1000;
  mapping.state = CLOCKSYNC_STATE_SYNCED;
  return mapping;
}

// A TSC mapping of this machine's clocks (the daemon's calibration, with a
// short baseline), or none where the TSC is not invariant.
bool CalibrateRealTsc(TscValues* out, std::string* why) {
  if (!HasInvariantTsc(why)) return false;
  TscCalibrator::Options options;
  options.min_baseline_ns = 100'000'000;
  TscCalibrator calibrator(options);
  for (int i = 0; i < 10; ++i) {
    timespec pause = {0, 30'000'000};
    nanosleep(&pause, nullptr);
    *out = calibrator.Update();
    if (out->max_ticks > 0) return true;
  }
  *why = calibrator.problem();
  return false;
}

TEST(TscMappingTest, FixedPointMatchesADoubleReference) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100'000; ++i) {
    TscValues v;
    v.anchor_tsc = rng();
    v.anchor_raw_ns = static_cast<int64_t>(rng() >> 2);
    const double ns_per_tick = 0.2 + (rng() % 1'000'000) / 1e6;  // 0.2..1.2
    v.raw_ns_per_tick_q32 =
        static_cast<uint64_t>(std::llround(ns_per_tick * 4294967296.0));
    v.max_ticks = static_cast<uint64_t>(10e9 / ns_per_tick);  // 10 s.
    const uint64_t ticks = rng() % v.max_ticks;
    int64_t raw_ns = 0;
    ASSERT_TRUE(shm::TscToRaw(v, v.anchor_tsc + ticks, &raw_ns));
    const double exact =
        static_cast<double>(ticks) *
        (static_cast<double>(v.raw_ns_per_tick_q32) / 4294967296.0);
    // Floor of the exact product: within 1 ns (plus double rounding).
    EXPECT_NEAR(static_cast<double>(raw_ns - v.anchor_raw_ns), exact, 1.5)
        << i;
    EXPECT_FALSE(shm::TscToRaw(v, v.anchor_tsc + v.max_ticks, &raw_ns));
  }
}

TEST(TscReadTest, NowReadsTheTscWithinItsErrorAndBound) {
  TscValues tsc;
  std::string why;
  if (!CalibrateRealTsc(&tsc, &why)) GTEST_SKIP() << why;
  const std::string path = TempPath("tsc_valid.shm");
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  ASSERT_TRUE(publisher->Publish(SyncedNow()).ok());
  ASSERT_TRUE(publisher->PublishTsc(tsc).ok());
  absl::StatusOr<Clock> clock = Clock::Open(path);
  ASSERT_TRUE(clock.ok()) << clock.status();
  ASSERT_TRUE(clock->UsesTsc());
  int bad = 0;
  for (int i = 0; i < 10'000; ++i) {
    const TimeReading before = clock->At(Clock::RawNowNs());
    const TimeReading now = clock->Now();
    const TimeReading after = clock->At(Clock::RawNowNs());
    ASSERT_TRUE(now.ok());
    // Between the two clock_gettime readings, give or take the error.
    if (now.global_ns < before.global_ns - tsc.error_ns ||
        now.global_ns > after.global_ns + tsc.error_ns) {
      ++bad;
    }
    // The bound includes the TSC mapping's error.
    EXPECT_GE(now.latest_ns - now.earliest_ns,
              2 * (1000 + tsc.error_ns));
  }
  EXPECT_EQ(bad, 0) << "error_ns " << tsc.error_ns;
  int64_t error_ns = -1;
  clock->FastRawNowNs(&error_ns);
  EXPECT_EQ(error_ns, tsc.error_ns);
}

TEST(TscReadTest, NoValidMappingMeansClockGettime) {
  const std::string path = TempPath("tsc_invalid.shm");
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  ASSERT_TRUE(publisher->Publish(SyncedNow()).ok());
  absl::StatusOr<Clock> clock = Clock::Open(path);
  ASSERT_TRUE(clock.ok()) << clock.status();
  EXPECT_FALSE(clock->UsesTsc());  // Never published: zeros.
  TscValues invalid;
  invalid.anchor_tsc = 1;
  invalid.raw_ns_per_tick_q32 = 1u << 30;
  invalid.max_ticks = 0;  // Withdrawn.
  ASSERT_TRUE(publisher->PublishTsc(invalid).ok());
  EXPECT_FALSE(clock->UsesTsc());
  const TimeReading now = clock->Now();
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now.latest_ns - now.earliest_ns, 2 * 1000 + 1);
  int64_t error_ns = -1;
  clock->FastRawNowNs(&error_ns);
  EXPECT_EQ(error_ns, 0);
}

TEST(TscReadTest, OptionAndEnvironmentTurnItOff) {
  TscValues tsc;
  std::string why;
  if (!CalibrateRealTsc(&tsc, &why)) GTEST_SKIP() << why;
  const std::string path = TempPath("tsc_off.shm");
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  ASSERT_TRUE(publisher->Publish(SyncedNow()).ok());
  ASSERT_TRUE(publisher->PublishTsc(tsc).ok());
  ClockOptions options;
  options.use_tsc = false;
  absl::StatusOr<Clock> off = Clock::Open(path, options);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->UsesTsc());
  setenv("CLOCKSYNC_TSC", "off", 1);
  absl::StatusOr<Clock> env_off = Clock::Open(path);
  ASSERT_TRUE(env_off.ok());
  EXPECT_FALSE(env_off->UsesTsc());
  setenv("CLOCKSYNC_TSC", "auto", 1);
  absl::StatusOr<Clock> env_auto = Clock::Open(path);
  ASSERT_TRUE(env_auto.ok());
  EXPECT_TRUE(env_auto->UsesTsc());
  // A typo is an error naming the variable, not a silent default.
  setenv("CLOCKSYNC_TSC", "on", 1);
  absl::StatusOr<Clock> env_bad = Clock::Open(path);
  unsetenv("CLOCKSYNC_TSC");
  EXPECT_EQ(env_bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(env_bad.status().message().find("CLOCKSYNC_TSC='on'"),
            std::string::npos)
      << env_bad.status();
  absl::StatusOr<Clock> on = Clock::Open(path);
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->UsesTsc());
}

// A segment of layout version 1 (an older daemon): 128 bytes, no TSC
// section; it opens and Now() takes the clock_gettime path.
TEST(TscReadTest, VersionOneSegmentOpensWithoutTsc) {
  const std::string path = TempPath("version1.shm");
  clocksync_shm shm = {};
  shm.header.magic = CLOCKSYNC_SHM_MAGIC;
  shm.header.layout_version = CLOCKSYNC_SHM_LAYOUT_VERSION_1;
  shm.header.segment_size = CLOCKSYNC_SHM_SIZE_VERSION_1;
  shm.header.mapping_offset = offsetof(clocksync_shm, mapping);
  shm.mapping.seq = 2;
  shm.mapping.anchor_raw_ns = Clock::RawNowNs();
  shm.mapping.anchor_global_ns = 5;
  shm.mapping.bound_at_anchor_ns = 10;
  shm.mapping.status = CLOCKSYNC_STATE_SYNCED;
  shm.mapping.update_raw_ns = shm.mapping.anchor_raw_ns + 3'600'000'000'000;
  FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(std::fwrite(&shm, 1, CLOCKSYNC_SHM_SIZE_VERSION_1, file),
            CLOCKSYNC_SHM_SIZE_VERSION_1);
  ASSERT_EQ(std::fclose(file), 0);
  absl::StatusOr<Clock> clock = Clock::Open(path);
  ASSERT_TRUE(clock.ok()) << clock.status();
  EXPECT_FALSE(clock->UsesTsc());
  EXPECT_EQ(clock->Now().error, CLOCKSYNC_OK);
}

}  // namespace
}  // namespace clocksync
