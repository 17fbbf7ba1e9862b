// client/clock_test.cc: clocksync::Clock against segments written by
// ShmPublisher (and by hand, for broken files): open errors, the mapping
// arithmetic against a slow long-double reference, bound growth, staleness,
// sync states, and surviving a daemon restart.

#include "client/clock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "shm/shm_publisher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace clocksync {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSecondNs = 1'000'000'000;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// A publisher whose update_raw_ns is always `update_raw_ns`.
ShmPublisher OpenPublisherAt(const std::string& path, int64_t update_raw_ns) {
  ShmPublisher::Options options;
  options.raw_clock_ns = [update_raw_ns] { return update_raw_ns; };
  absl::StatusOr<ShmPublisher> publisher =
      ShmPublisher::Open(path, std::move(options));
  EXPECT_TRUE(publisher.ok()) << publisher.status();
  return std::move(*publisher);
}

Clock OpenClock(const std::string& path, const ClockOptions& options = {}) {
  absl::StatusOr<Clock> clock = Clock::Open(path, options);
  EXPECT_TRUE(clock.ok()) << clock.status();
  return std::move(*clock);
}

Mapping SyncedMapping(int64_t anchor_raw_ns, int64_t anchor_global_ns) {
  Mapping mapping;
  mapping.anchor_raw_ns = anchor_raw_ns;
  mapping.anchor_global_ns = anchor_global_ns;
  mapping.bound_at_anchor_ns = 1000;
  mapping.state = CLOCKSYNC_STATE_SYNCED;
  return mapping;
}

// Writes `size` bytes of `shm` to `path` (for hand-made, broken segments).
void WriteFile(const std::string& path, const clocksync_shm& shm, size_t size) {
  FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(std::fwrite(&shm, 1, size, file), size);
  ASSERT_EQ(std::fclose(file), 0);
}

clocksync_shm ValidSegment() {
  clocksync_shm shm = {};
  shm.header.magic = CLOCKSYNC_SHM_MAGIC;
  shm.header.layout_version = CLOCKSYNC_SHM_LAYOUT_VERSION;
  shm.header.segment_size = sizeof(clocksync_shm);
  shm.header.mapping_offset = offsetof(clocksync_shm, mapping);
  return shm;
}

TEST(ClockOpenTest, MissingFileMeansNoDaemonAndNamesThePath) {
  const std::string path = TempPath("absent.shm");
  absl::StatusOr<Clock> clock = Clock::Open(path);
  ASSERT_FALSE(clock.ok());
  EXPECT_EQ(clock.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(clock.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(clock.status().message()),
              HasSubstr("CLOCKSYNC_ENODAEMON"));

  std::unique_ptr<Clock> out;
  std::string message;
  EXPECT_EQ(Clock::OpenWithCode(path, {}, &out, &message), CLOCKSYNC_ENODAEMON);
  EXPECT_EQ(out, nullptr);
  EXPECT_THAT(message, HasSubstr(path));
}

TEST(ClockOpenTest, HandMadeValidSegmentOpens) {
  // The control for the broken-file tests below.
  const std::string path = TempPath("valid.shm");
  WriteFile(path, ValidSegment(), sizeof(clocksync_shm));
  EXPECT_TRUE(Clock::Open(path).ok());
}

TEST(ClockOpenTest, WrongMagicIsRejected) {
  const std::string path = TempPath("bad_magic.shm");
  clocksync_shm shm = ValidSegment();
  shm.header.magic ^= 1;
  WriteFile(path, shm, sizeof(shm));
  absl::StatusOr<Clock> clock = Clock::Open(path);
  ASSERT_FALSE(clock.ok());
  EXPECT_EQ(clock.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(clock.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(clock.status().message()),
              HasSubstr("CLOCKSYNC_EBADMAGIC"));
  std::unique_ptr<Clock> out;
  std::string message;
  EXPECT_EQ(Clock::OpenWithCode(path, {}, &out, &message), CLOCKSYNC_EBADMAGIC);
}

TEST(ClockOpenTest, WrongLayoutVersionIsRejected) {
  const std::string path = TempPath("bad_version.shm");
  clocksync_shm shm = ValidSegment();
  shm.header.layout_version = CLOCKSYNC_SHM_LAYOUT_VERSION + 1;
  WriteFile(path, shm, sizeof(shm));
  std::unique_ptr<Clock> out;
  std::string message;
  EXPECT_EQ(Clock::OpenWithCode(path, {}, &out, &message), CLOCKSYNC_EVERSION);
  EXPECT_THAT(message, HasSubstr(path));
  EXPECT_THAT(message, HasSubstr("version 3"));
  EXPECT_EQ(Clock::Open(path).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ClockOpenTest, TruncatedFileIsRejected) {
  const std::string path = TempPath("short.shm");
  WriteFile(path, ValidSegment(), 100);
  std::unique_ptr<Clock> out;
  std::string message;
  EXPECT_EQ(Clock::OpenWithCode(path, {}, &out, &message), CLOCKSYNC_EBADSIZE);
  EXPECT_THAT(message, HasSubstr("100 bytes"));
}

TEST(ClockOpenTest, InconsistentDeclaredSizeIsRejected) {
  const std::string path = TempPath("bad_size.shm");
  clocksync_shm shm = ValidSegment();
  shm.header.segment_size = 256;
  WriteFile(path, shm, sizeof(shm));
  std::unique_ptr<Clock> out;
  std::string message;
  EXPECT_EQ(Clock::OpenWithCode(path, {}, &out, &message), CLOCKSYNC_EBADSIZE);
}

TEST(ClockOpenTest, BadOptionsAreRejected) {
  const std::string path = TempPath("options.shm");
  ShmPublisher publisher = OpenPublisherAt(path, 0);
  ClockOptions options;
  options.max_read_attempts = 0;
  EXPECT_EQ(Clock::Open(path, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = ClockOptions();
  options.stale_limit_ns = 0;
  EXPECT_EQ(Clock::Open(path, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The mapping as documented, in long double, relative to anchor_global_ns
// (so that the reference keeps sub-ns precision): global - anchor_global and
// the bound, from the published (fixed-point) coefficients.
struct Reference {
  long double global_minus_anchor_ns;
  long double bound_ns;
};

Reference SlowReference(const MappingValues& v, int64_t raw_ns) {
  const long double dt = static_cast<long double>(raw_ns) -
                         static_cast<long double>(v.anchor_raw_ns);
  const long double rate_adj =
      std::ldexp(static_cast<long double>(v.rate_adj_q64), -64);
  const long double growth_ns_per_ns =
      std::ldexp(static_cast<long double>(v.bound_growth_q36), -36);
  Reference reference;
  reference.global_minus_anchor_ns = dt + dt * rate_adj;
  reference.bound_ns = static_cast<long double>(v.bound_at_anchor_ns) +
                       std::fabs(dt) * growth_ns_per_ns;
  return reference;
}

// Slack for the rounding of the long-double reference itself (~1e-9 ns).
constexpr long double kReferenceSlackNs = 1e-6L;

TEST(ClockMappingTest, RandomReadingsMatchTheSlowReference) {
  const unsigned seed = std::random_device()();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 random(seed);
  const std::string path = TempPath("round_trip.shm");
  ShmPublisher publisher = OpenPublisherAt(path, 0);
  ClockOptions options;
  options.stale_limit_ns = int64_t{1} << 62;  // arithmetic only here
  Clock clock = OpenClock(path, options);

  std::uniform_int_distribution<int64_t> anchor_raw(0, int64_t{1} << 50);
  std::uniform_int_distribution<int64_t> anchor_global(0, int64_t{1} << 61);
  std::uniform_real_distribution<double> rate_ppm(-500.0, 500.0);
  std::uniform_int_distribution<int64_t> bound(0, 10'000'000);
  std::uniform_real_distribution<double> growth_ppb(0.0, 20'000.0);
  std::uniform_int_distribution<int64_t> offset(-1000 * kSecondNs,
                                                1000 * kSecondNs);
  for (int trial = 0; trial < 200; ++trial) {
    Mapping mapping;
    mapping.anchor_raw_ns = anchor_raw(random);
    mapping.anchor_global_ns = anchor_global(random);
    mapping.rate_adj = rate_ppm(random) * 1e-6;
    mapping.bound_at_anchor_ns = bound(random);
    mapping.bound_growth_ppb = growth_ppb(random);
    mapping.state = CLOCKSYNC_STATE_SYNCED;
    ASSERT_TRUE(publisher.Publish(mapping).ok());
    MappingSnapshot snapshot;
    ASSERT_EQ(clock.ReadMapping(&snapshot), CLOCKSYNC_OK);
    const MappingValues& v = snapshot.values;
    ASSERT_EQ(v.generation, publisher.generation());
    // The published coefficients are the requested ones, the growth rounded
    // up (by less than two 2^-36 units), the rate to nearest.
    EXPECT_GE(shm::BoundGrowthQ36ToPpb(v.bound_growth_q36),
              mapping.bound_growth_ppb);
    EXPECT_LT(shm::BoundGrowthQ36ToPpb(v.bound_growth_q36),
              mapping.bound_growth_ppb + 0.03);
    EXPECT_NEAR(shm::RateAdjFromQ64(v.rate_adj_q64), mapping.rate_adj, 1e-18);

    for (int reading = 0; reading < 50; ++reading) {
      const int64_t raw_ns = mapping.anchor_raw_ns + offset(random);
      const TimeReading t = clock.At(raw_ns);
      ASSERT_EQ(t.error, CLOCKSYNC_OK);
      ASSERT_EQ(t.state(), CLOCKSYNC_STATE_SYNCED);
      const Reference reference = SlowReference(v, raw_ns);
      const long double global_minus_anchor =
          static_cast<long double>(t.global_ns - mapping.anchor_global_ns);
      // global is the exact value rounded down.
      const long double global_below =
          reference.global_minus_anchor_ns - global_minus_anchor;
      ASSERT_GE(global_below, -kReferenceSlackNs) << "raw " << raw_ns;
      ASSERT_LT(global_below, 1.0L + kReferenceSlackNs) << "raw " << raw_ns;
      // [earliest, latest] holds the exact interval and is less than 1 ns
      // wider on the earliest side, at most 1 ns on the latest side.
      const long double earliest =
          static_cast<long double>(t.earliest_ns - mapping.anchor_global_ns);
      const long double latest =
          static_cast<long double>(t.latest_ns - mapping.anchor_global_ns);
      const long double ref_earliest =
          reference.global_minus_anchor_ns - reference.bound_ns;
      const long double ref_latest =
          reference.global_minus_anchor_ns + reference.bound_ns;
      ASSERT_LE(earliest, ref_earliest + kReferenceSlackNs) << "raw " << raw_ns;
      ASSERT_GE(latest, ref_latest - kReferenceSlackNs) << "raw " << raw_ns;
      ASSERT_LT(ref_earliest - earliest, 1.0L + kReferenceSlackNs)
          << "raw " << raw_ns;
      ASSERT_LE(latest - ref_latest, 1.0L + kReferenceSlackNs)
          << "raw " << raw_ns;
    }
  }
}

TEST(ClockMappingTest, BoundGrowsWithDistanceFromTheAnchorBothWays) {
  const std::string path = TempPath("growth.shm");
  constexpr int64_t kAnchorRawNs = 1'000 * kSecondNs;
  constexpr int64_t kAnchorGlobalNs = 5'000 * kSecondNs;
  ShmPublisher publisher = OpenPublisherAt(path, kAnchorRawNs);
  Clock clock = OpenClock(path);
  Mapping mapping = SyncedMapping(kAnchorRawNs, kAnchorGlobalNs);
  mapping.bound_at_anchor_ns = 100;
  // Published as 3436 units of 2^-36 ns/ns = 50.00038 ppb.
  mapping.bound_growth_ppb = 50.0;
  // 2^-20 (~0.954 ppm) is exact in fixed point: global = anchor + dt +
  // floor(dt * 2^-20).
  mapping.rate_adj = std::ldexp(1.0, -20);
  ASSERT_TRUE(publisher.Publish(mapping).ok());

  struct Golden {
    int64_t dt_ns, global_ns, below_ns, above_ns;
  };
  // earliest = floor(global* - bound), latest = floor(global* + bound) + 1
  // with bound = 100 + |dt| * 50.00038e-9.
  for (const Golden& g : {
           Golden{0, kAnchorGlobalNs, 100, 101},
           // 1e9 * 2^-20 = 953.67..., growth 50.0004
           Golden{kSecondNs, kAnchorGlobalNs + kSecondNs + 953, 150, 151},
           Golden{-kSecondNs, kAnchorGlobalNs - kSecondNs - 954, 150, 151},
           // 2000000010 * 2^-20 = 1907.35..., growth 100.0008
           Golden{2 * kSecondNs + 10, kAnchorGlobalNs + 2 * kSecondNs + 1917,
                  200, 201},
           // -1e11 * 2^-20 = -95367.43..., growth 5000.04
           Golden{-100 * kSecondNs, kAnchorGlobalNs - 100 * kSecondNs - 95368,
                  5100, 5101},
       }) {
    const TimeReading t = clock.At(kAnchorRawNs + g.dt_ns);
    SCOPED_TRACE(::testing::Message() << "dt " << g.dt_ns);
    EXPECT_EQ(t.error, CLOCKSYNC_OK);
    EXPECT_EQ(t.global_ns, g.global_ns);
    EXPECT_EQ(t.earliest_ns, g.global_ns - g.below_ns);
    EXPECT_EQ(t.latest_ns, g.global_ns + g.above_ns);
  }
}

TEST(ClockMappingTest, HugeBoundSaturatesInsteadOfOverflowing) {
  const std::string path = TempPath("huge_bound.shm");
  ShmPublisher publisher = OpenPublisherAt(path, 0);
  // The largest anchor the client evaluates (2^62 ns, year 2116), the
  // largest bound and growth, 2^61 - 1 ns (73 years) after the anchor.
  const int64_t anchor = (int64_t{1} << 62) - 1;
  Mapping mapping = SyncedMapping(0, anchor);
  mapping.bound_at_anchor_ns = ShmPublisher::kUnknownBoundNs;
  mapping.bound_growth_ppb = ShmPublisher::kMaxBoundGrowthPpb;
  ASSERT_TRUE(publisher.Publish(mapping).ok());
  ClockOptions options;
  options.stale_limit_ns = int64_t{1} << 62;
  Clock clock = OpenClock(path, options);
  TimeReading t = clock.At(100);
  EXPECT_EQ(t.error, CLOCKSYNC_OK);
  EXPECT_EQ(t.global_ns, anchor + 100);
  EXPECT_LT(t.earliest_ns, t.global_ns);
  EXPECT_GT(t.latest_ns, t.global_ns);
  const int64_t far = (int64_t{1} << 61) - 1;
  t = clock.At(far);
  EXPECT_EQ(t.error, CLOCKSYNC_OK);
  EXPECT_LE(t.earliest_ns, t.global_ns);
  EXPECT_LE(t.global_ns, t.latest_ns);
  EXPECT_EQ(t.latest_ns, INT64_MAX);  // Saturated.
  // 2^61 ns from the anchor, or an anchor past 2^62: no time.
  EXPECT_EQ(clock.At(far + 1).error, CLOCKSYNC_EINVAL);
  EXPECT_EQ(clock.At(-far - 2).error, CLOCKSYNC_EINVAL);
  mapping = SyncedMapping(0, INT64_MAX - kSecondNs);
  ASSERT_TRUE(publisher.Publish(mapping).ok());
  EXPECT_EQ(clock.At(100).error, CLOCKSYNC_EINVAL);
}

TEST(ClockStateTest, NotSyncedUntilTheDaemonPublishesASyncedMapping) {
  const std::string path = TempPath("states.shm");
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  Clock clock = OpenClock(path);

  TimeReading t = clock.Now();
  EXPECT_EQ(t.error, CLOCKSYNC_ENOTSYNCED);
  EXPECT_EQ(t.state(), CLOCKSYNC_STATE_UNSYNCED);
  EXPECT_GE(t.latest_ns - t.earliest_ns, ShmPublisher::kUnknownBoundNs)
      << "nothing is known before the first mapping";

  const int64_t now_ns = Clock::RawNowNs();
  Mapping mapping = SyncedMapping(now_ns, now_ns + 42 * kSecondNs);
  mapping.stepped = true;
  mapping.depth = 2;
  ASSERT_TRUE(publisher->Publish(mapping).ok());
  t = clock.Now();
  EXPECT_EQ(t.error, CLOCKSYNC_OK);
  EXPECT_EQ(t.state(), CLOCKSYNC_STATE_SYNCED);
  EXPECT_NE(t.status & CLOCKSYNC_STATUS_STEPPED, 0u);
  EXPECT_GE(t.global_ns, now_ns + 42 * kSecondNs);

  mapping.state = CLOCKSYNC_STATE_HOLDOVER;
  mapping.stepped = false;
  ASSERT_TRUE(publisher->Publish(mapping).ok());
  t = clock.Now();
  EXPECT_EQ(t.error, CLOCKSYNC_OK);
  EXPECT_EQ(t.state(), CLOCKSYNC_STATE_HOLDOVER);
  EXPECT_EQ(t.status & CLOCKSYNC_STATUS_STEPPED, 0u);

  mapping.state = CLOCKSYNC_STATE_RECOVERING;
  ASSERT_TRUE(publisher->Publish(mapping).ok());
  EXPECT_EQ(clock.Now().state(), CLOCKSYNC_STATE_RECOVERING);
  EXPECT_TRUE(clock.Now().ok());
}

TEST(ClockStalenessTest, OldUpdateIsStaleWithAWidenedBound) {
  const std::string path = TempPath("stale.shm");
  const int64_t update_raw_ns = Clock::RawNowNs() - 6 * kSecondNs;
  ShmPublisher publisher = OpenPublisherAt(path, update_raw_ns);
  ASSERT_TRUE(
      publisher.Publish(SyncedMapping(update_raw_ns, 7 * kSecondNs)).ok());
  Clock clock = OpenClock(path);  // default limit: 5 s, 10000 ppb

  // At the update itself the mapping is fresh.
  const TimeReading fresh = clock.At(update_raw_ns);
  EXPECT_EQ(fresh.error, CLOCKSYNC_OK);
  EXPECT_EQ(fresh.latest_ns - fresh.global_ns, 1001);
  EXPECT_EQ(fresh.global_ns - fresh.earliest_ns, 1000);
  // Within the limit: fine; beyond it: stale.
  EXPECT_EQ(clock.At(update_raw_ns + 5 * kSecondNs).error, CLOCKSYNC_OK);
  const TimeReading past_limit = clock.At(update_raw_ns + 5 * kSecondNs + 1);
  EXPECT_EQ(past_limit.error, CLOCKSYNC_ESTALE);
  EXPECT_NE(past_limit.status & CLOCKSYNC_STATUS_STALE, 0u);

  // Now() is 6 s after the update: stale, state still SYNCED, bound widened
  // by 10000 ppb * 6 s = 60 us (plus the time this test takes).
  const TimeReading now = clock.Now();
  EXPECT_EQ(now.error, CLOCKSYNC_ESTALE);
  EXPECT_EQ(now.state(), CLOCKSYNC_STATE_SYNCED);
  EXPECT_NE(now.status & CLOCKSYNC_STATUS_STALE, 0u);
  const int64_t widening_ns = (now.latest_ns - now.global_ns) - 1001;
  EXPECT_GE(widening_ns, 60'000);
  EXPECT_LT(widening_ns, 70'000);
  EXPECT_LE(now.earliest_ns, now.global_ns - 61'000);

  // A looser limit accepts the same mapping.
  ClockOptions loose;
  loose.stale_limit_ns = 10 * kSecondNs;
  Clock loose_clock = OpenClock(path, loose);
  const TimeReading loose_now = loose_clock.Now();
  EXPECT_EQ(loose_now.error, CLOCKSYNC_OK);
  EXPECT_EQ(loose_now.status & CLOCKSYNC_STATUS_STALE, 0u);
}

TEST(ClockRestartTest, FreshMappingNeverLooksAtThePath) {
  const std::string path = TempPath("hot_path.shm");
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok());
  const int64_t now_ns = Clock::RawNowNs();
  ASSERT_TRUE(publisher->Publish(SyncedMapping(now_ns, now_ns)).ok());
  ClockOptions options;
  options.recheck_interval_ns = 0;  // would look on every slow-path call
  Clock clock = OpenClock(path, options);
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(clock.Now().ok());
  EXPECT_EQ(clock.path_check_count(), 0u);
  EXPECT_EQ(clock.remap_count(), 0u);
}

TEST(ClockRestartTest, ClosedSegmentLooksAtThePathAtMostOncePerInterval) {
  const std::string path = TempPath("closed.shm");
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok());
  const int64_t now_ns = Clock::RawNowNs();
  ASSERT_TRUE(publisher->Publish(SyncedMapping(now_ns, now_ns)).ok());
  ClockOptions options;
  options.recheck_interval_ns = 3600 * kSecondNs;
  Clock clock = OpenClock(path, options);
  publisher->Close();  // daemon stopped: file removed, segment closed

  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0) << "Close() removes its own file";
  for (int i = 0; i < 1000; ++i) {
    const TimeReading t = clock.Now();
    ASSERT_EQ(t.error, CLOCKSYNC_OK) << "the last mapping is still fresh";
    ASSERT_NE(t.status & CLOCKSYNC_STATUS_CLOSED, 0u);
  }
  // The first look is one interval after Open(): none yet.
  EXPECT_EQ(clock.path_check_count(), 0u);
  EXPECT_EQ(clock.remap_count(), 0u);
  // A new client now finds no daemon.
  EXPECT_EQ(Clock::Open(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(ClockRestartTest, RestartedDaemonIsRemappedAfterClose) {
  const std::string path = TempPath("restart_close.shm");
  absl::StatusOr<ShmPublisher> first = ShmPublisher::Open(path);
  ASSERT_TRUE(first.ok());
  const int64_t now_ns = Clock::RawNowNs();
  ASSERT_TRUE(first->Publish(SyncedMapping(now_ns, 1 * kSecondNs)).ok());
  ASSERT_TRUE(first->Publish(SyncedMapping(now_ns, 1 * kSecondNs)).ok());
  ClockOptions options;
  options.recheck_interval_ns = 0;
  Clock clock = OpenClock(path, options);
  MappingSnapshot before;
  ASSERT_EQ(clock.ReadMapping(&before), CLOCKSYNC_OK);
  EXPECT_EQ(before.values.generation, 2u);

  // The new daemon renames its file over the path, then the old one stops:
  // it must not remove its successor's file.
  absl::StatusOr<ShmPublisher> second = ShmPublisher::Open(path);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->Publish(SyncedMapping(now_ns, 1000 * kSecondNs)).ok());
  EXPECT_TRUE(clock.Now().global_ns < 2 * kSecondNs) << "still the old map";
  first->Close();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0) << "successor's file kept";

  const TimeReading t = clock.Now();  // sees CLOSED, looks, re-maps
  EXPECT_EQ(t.error, CLOCKSYNC_OK);
  EXPECT_GE(t.global_ns, 1000 * kSecondNs);
  EXPECT_EQ(t.status & CLOCKSYNC_STATUS_CLOSED, 0u);
  EXPECT_EQ(clock.remap_count(), 1u);
  MappingSnapshot after;
  ASSERT_EQ(clock.ReadMapping(&after), CLOCKSYNC_OK);
  EXPECT_EQ(after.values.generation, 1u) << "the new segment's generation";
  EXPECT_GT(after.writer_start_raw_ns, before.writer_start_raw_ns);

  // The new segment keeps updating through the same Clock.
  ASSERT_TRUE(second->Publish(SyncedMapping(now_ns, 2000 * kSecondNs)).ok());
  EXPECT_GE(clock.Now().global_ns, 2000 * kSecondNs);
  EXPECT_EQ(clock.remap_count(), 1u);
}

TEST(ClockRestartTest, CrashedDaemonIsRemappedWhenItsMappingGoesStale) {
  const std::string path = TempPath("restart_crash.shm");
  // The "crashed" daemon's last update was 10 s ago; it never closes.
  ShmPublisher crashed =
      OpenPublisherAt(path, Clock::RawNowNs() - 10 * kSecondNs);
  ASSERT_TRUE(crashed.Publish(SyncedMapping(0, 1 * kSecondNs)).ok());
  ClockOptions options;
  options.recheck_interval_ns = 0;
  Clock clock = OpenClock(path, options);
  EXPECT_EQ(clock.Now().error, CLOCKSYNC_ESTALE) << "no successor yet";
  EXPECT_EQ(clock.remap_count(), 0u);

  absl::StatusOr<ShmPublisher> successor = ShmPublisher::Open(path);
  ASSERT_TRUE(successor.ok());
  const int64_t now_ns = Clock::RawNowNs();
  ASSERT_TRUE(successor->Publish(SyncedMapping(now_ns, 500 * kSecondNs)).ok());
  const TimeReading t = clock.Now();
  EXPECT_EQ(t.error, CLOCKSYNC_OK);
  EXPECT_GE(t.global_ns, 500 * kSecondNs);
  EXPECT_EQ(clock.remap_count(), 1u);
}

TEST(ClockTest, MovedClockKeepsWorking) {
  const std::string path = TempPath("move.shm");
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok());
  const int64_t now_ns = Clock::RawNowNs();
  ASSERT_TRUE(publisher->Publish(SyncedMapping(now_ns, now_ns)).ok());
  Clock first = OpenClock(path);
  Clock second = std::move(first);
  EXPECT_TRUE(second.Now().ok());
  Clock third = OpenClock(path);
  third = std::move(second);
  EXPECT_TRUE(third.Now().ok());
  EXPECT_EQ(third.path(), path);
}

}  // namespace
}  // namespace clocksync
