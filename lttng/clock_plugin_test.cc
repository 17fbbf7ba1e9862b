// lttng/clock_plugin_test.cc: ClockPlugin against segments written by
// ShmPublisher: the fallback (no daemon, unsynchronized) said once, the
// move to global time, global values against the client library's, the
// session daemon's CLOCK_REALTIME, extrapolation across a daemon restart,
// uuids (golden values, tree and host apart) and descriptions, and threads
// that never see their values decrease.

#include "lttng/clock_plugin.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/shm_publisher.h"

namespace clocksync::lttng {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

int64_t NowNs(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Global time = raw time + kOffsetNs, a synced mapping anchored now.
constexpr int64_t kOffsetNs = 1'700'000'000'000'000'000;

Mapping SyncedMapping() {
  Mapping m;
  m.anchor_raw_ns = NowNs(CLOCK_MONOTONIC_RAW);
  m.anchor_global_ns = m.anchor_raw_ns + kOffsetNs;
  m.bound_at_anchor_ns = 500;
  m.state = CLOCKSYNC_STATE_SYNCED;
  m.depth = 1;
  return m;
}

// A plugin whose messages are collected.
struct Harness {
  explicit Harness(const std::string& shm_path,
                   ProcessRole role = ProcessRole::kTraced) {
    PluginOptions options;
    options.shm_path = shm_path;
    options.role = role;
    options.boot_id_path = TempPath("boot_id");
    {
      std::ofstream boot_id(options.boot_id_path);
      boot_id << "0f3c1b2a-1111-4222-8333-944455556666\n";
    }
    options.say = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu);
      said.push_back(line);
    };
    plugin = std::make_unique<ClockPlugin>(std::move(options));
  }
  std::vector<std::string> Said() {
    std::lock_guard<std::mutex> lock(mu);
    return said;
  }
  std::mutex mu;
  std::vector<std::string> said;
  std::unique_ptr<ClockPlugin> plugin;
};

TEST(ClockPluginTest, WithoutADaemonFallsBackToTheRawClockAndSaysSoOnce) {
  const std::string path = TempPath("absent.shm");
  unlink(path.c_str());
  Harness h(path);
  h.plugin->Decide();
  EXPECT_EQ(h.plugin->CurrentMode(), Mode::kRaw);
  for (int i = 0; i < 1000; ++i) {
    const int64_t before = NowNs(CLOCK_MONOTONIC_RAW);
    const int64_t value = static_cast<int64_t>(h.plugin->Read64());
    const int64_t after = NowNs(CLOCK_MONOTONIC_RAW);
    ASSERT_GE(value, before);
    ASSERT_LE(value, after);
  }
  const std::vector<std::string> said = h.Said();
  ASSERT_EQ(said.size(), 1u);
  EXPECT_THAT(said[0], HasSubstr(path));
  EXPECT_THAT(said[0], HasSubstr("CLOCK_MONOTONIC_RAW"));
  EXPECT_THAT(h.plugin->Description(), HasSubstr("CLOCK_MONOTONIC_RAW"));
  EXPECT_THAT(h.plugin->Description(), HasSubstr(path));
  char uuid[kUuidStringSize];
  ASSERT_EQ(h.plugin->Uuid(uuid), 0);
  EXPECT_EQ(std::string(uuid),
            RawClockUuid("0f3c1b2a-1111-4222-8333-944455556666"));
  EXPECT_STREQ(h.plugin->Name(), "clocksync");
  // A daemon appearing later does not move a traced program (it opens the
  // segment only at its start).
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  ASSERT_TRUE(publisher->Publish(SyncedMapping()).ok());
  usleep(1'100'000);
  EXPECT_EQ(h.plugin->CurrentMode(), Mode::kRaw);
}

TEST(ClockPluginTest, SynchronizedDaemonGivesGlobalTimeLessTheBias) {
  const std::string path = TempPath("synced.shm");
  ShmPublisher::Options options;
  options.tree_id = ShmPublisher::TreeIdOfMaster("m0");
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path, options);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  ASSERT_TRUE(publisher->Publish(SyncedMapping()).ok());
  absl::StatusOr<Clock> clock = Clock::Open(path);
  ASSERT_TRUE(clock.ok()) << clock.status();

  Harness h(path);
  h.plugin->Decide();
  EXPECT_EQ(h.plugin->CurrentMode(), Mode::kGlobal);
  int64_t last = 0;
  for (int i = 0; i < 10000; ++i) {
    const TimeReading before = clock->Now();
    const int64_t value = static_cast<int64_t>(h.plugin->Read64());
    const TimeReading after = clock->Now();
    ASSERT_TRUE(before.ok() && after.ok());
    // Within the two readings, up to the TSC's error either way.
    ASSERT_GE(value + kValueBiasNs, before.earliest_ns - 1000);
    ASSERT_LE(value + kValueBiasNs, after.latest_ns + 1000);
    ASSERT_GE(value, last);
    last = value;
  }
  EXPECT_TRUE(h.Said().empty());
  char uuid[kUuidStringSize];
  ASSERT_EQ(h.plugin->Uuid(uuid), 0);
  EXPECT_EQ(std::string(uuid), TreeClockUuid(ShmPublisher::TreeIdOfMaster("m0")));
  EXPECT_THAT(h.plugin->Description(), HasSubstr("tree 8a310f55694741b8"));
  EXPECT_THAT(h.plugin->Description(), HasSubstr("less 1000000 ns"));
  EXPECT_EQ(h.plugin->TreeId(), ShmPublisher::TreeIdOfMaster("m0"));
  // The node learns another tree: the uuid follows.
  publisher->SetTreeId(ShmPublisher::TreeIdOfMaster("m1"));
  ASSERT_EQ(h.plugin->Uuid(uuid), 0);
  EXPECT_EQ(std::string(uuid), TreeClockUuid(ShmPublisher::TreeIdOfMaster("m1")));
}

TEST(ClockPluginTest, UnsynchronizedDaemonFallsBackThenMovesToGlobalTime) {
  const std::string path = TempPath("unsynced.shm");
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  Harness h(path);
  h.plugin->Decide();
  EXPECT_EQ(h.plugin->CurrentMode(), Mode::kRaw);
  ASSERT_EQ(h.Said().size(), 1u);
  EXPECT_THAT(h.Said()[0], HasSubstr("not synchronized"));
  const int64_t raw_value = static_cast<int64_t>(h.plugin->Read64());
  EXPECT_LT(raw_value, int64_t{1} << 60);  // a raw reading, not global time

  ASSERT_TRUE(publisher->Publish(SyncedMapping()).ok());
  // Within a second (the recheck interval), global time.
  const int64_t deadline = NowNs(CLOCK_MONOTONIC_RAW) + 3'000'000'000;
  while (h.plugin->CurrentMode() != Mode::kGlobal &&
         NowNs(CLOCK_MONOTONIC_RAW) < deadline) {
    usleep(10'000);
  }
  ASSERT_EQ(h.plugin->CurrentMode(), Mode::kGlobal);
  EXPECT_GT(static_cast<int64_t>(h.plugin->Read64()), kOffsetNs - kValueBiasNs);
  ASSERT_EQ(h.Said().size(), 2u);
  EXPECT_THAT(h.Said()[1], HasSubstr("synchronized now"));
}

TEST(ClockPluginTest, SessionDaemonAnswersRealtimeLessTheBiasWhileSynchronized) {
  const std::string path = TempPath("sessiond.shm");
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  Harness h(path, ProcessRole::kSessionDaemon);
  // Unsynchronized: the raw clock (LTTng's offset is then REALTIME - raw).
  const int64_t raw_before = NowNs(CLOCK_MONOTONIC_RAW);
  const int64_t raw_value = static_cast<int64_t>(h.plugin->Read64());
  EXPECT_GE(raw_value, raw_before);
  EXPECT_LE(raw_value, NowNs(CLOCK_MONOTONIC_RAW));
  // Synchronized: CLOCK_REALTIME - bias, whatever global time says, so the
  // offset LTTng measures is the bias.
  ASSERT_TRUE(publisher->Publish(SyncedMapping()).ok());
  usleep(1'100'000);
  ASSERT_EQ(h.plugin->CurrentMode(), Mode::kGlobal);
  const int64_t before = NowNs(CLOCK_REALTIME);
  const int64_t value = static_cast<int64_t>(h.plugin->Read64());
  const int64_t after = NowNs(CLOCK_REALTIME);
  EXPECT_GE(value + kValueBiasNs, before);
  EXPECT_LE(value + kValueBiasNs, after);
  // A session daemon started before any daemon finds one that appears.
  const std::string late_path = TempPath("sessiond_late.shm");
  unlink(late_path.c_str());
  Harness late(late_path, ProcessRole::kSessionDaemon);
  late.plugin->Decide();
  EXPECT_EQ(late.plugin->CurrentMode(), Mode::kRaw);
  absl::StatusOr<ShmPublisher> late_publisher = ShmPublisher::Open(late_path);
  ASSERT_TRUE(late_publisher.ok());
  ASSERT_TRUE(late_publisher->Publish(SyncedMapping()).ok());
  usleep(1'100'000);
  EXPECT_EQ(late.plugin->CurrentMode(), Mode::kGlobal);
}

TEST(ClockPluginTest, DaemonRestartIsBridgedWithoutGoingBack) {
  const std::string path = TempPath("restart.shm");
  absl::StatusOr<ShmPublisher> first = ShmPublisher::Open(path);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->Publish(SyncedMapping()).ok());
  Harness h(path, ProcessRole::kConsumerDaemon);
  h.plugin->Decide();
  ASSERT_EQ(h.plugin->CurrentMode(), Mode::kGlobal);
  const int64_t before = static_cast<int64_t>(h.plugin->Read64());
  // A new daemon, not synchronized yet, replaces the file.
  absl::StatusOr<ShmPublisher> second = ShmPublisher::Open(path);
  ASSERT_TRUE(second.ok());
  first->Close();
  usleep(200'000);  // past the client's recheck interval: it re-maps
  int64_t last = before;
  for (int i = 0; i < 1000; ++i) {
    const int64_t value = static_cast<int64_t>(h.plugin->Read64());
    ASSERT_GE(value, last);
    last = value;
  }
  // Extrapolated at the raw rate: about 200 ms later than before.
  EXPECT_GT(last - before, 150'000'000);
  EXPECT_LT(last - before, 5'000'000'000);
  EXPECT_EQ(h.plugin->CurrentMode(), Mode::kGlobal);
}

TEST(ClockPluginTest, ThreadsDecidingAtOnceSeeNonDecreasingGlobalValues) {
  const std::string path = TempPath("threads.shm");
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok());
  ASSERT_TRUE(publisher->Publish(SyncedMapping()).ok());
  Harness h(path);
  std::atomic<bool> go{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) {
      }
      uint64_t last = 0;
      for (int i = 0; i < 20000; ++i) {
        const uint64_t value = h.plugin->Read64();
        if (value < last || value < uint64_t{kOffsetNs} - kValueBiasNs) ++bad;
        last = value;
      }
    });
  }
  go = true;
  // Meanwhile the daemon publishes new mappings (slewed: continuous).
  for (int i = 0; i < 50; ++i) {
    Mapping m = SyncedMapping();
    m.rate_adj = 1e-6;
    ASSERT_TRUE(publisher->Publish(m).ok());
    usleep(1000);
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_TRUE(h.Said().empty());
}

TEST(ClockPluginTest, UuidsAreStableVersion8AndKeepTreesAndHostsApart) {
  // Golden values: every node of a tree, whatever its version, must write
  // the same uuid for the same tree.
  EXPECT_EQ(TreeClockUuid(0x8a310f55694741b8u), TreeClockUuid(0x8a310f55694741b8u));
  const std::string tree = TreeClockUuid(0x8a310f55694741b8u);
  ASSERT_EQ(tree.size(), kUuidStringSize - 1);
  EXPECT_EQ(tree[14], '8');  // version 8
  EXPECT_THAT(std::string("89ab"), HasSubstr(std::string(1, tree[19])));
  EXPECT_EQ(tree, "82f11712-15a9-862c-9f31-a5b7fc20dd0c");
  EXPECT_NE(TreeClockUuid(1), TreeClockUuid(2));
  EXPECT_NE(TreeClockUuid(0), TreeClockUuid(1));
  EXPECT_NE(RawClockUuid("a"), RawClockUuid("b"));
  EXPECT_NE(RawClockUuid("x"), TreeClockUuid(0));
}

TEST(ClockPluginTest, RoleComesFromTheExecutableName) {
  EXPECT_EQ(RoleOfExecutable("/usr/bin/lttng-sessiond"), ProcessRole::kSessionDaemon);
  EXPECT_EQ(RoleOfExecutable("/usr/lib/x86_64-linux-gnu/lttng/libexec/lttng-consumerd"),
            ProcessRole::kConsumerDaemon);
  EXPECT_EQ(RoleOfExecutable("lttng-sessiond"), ProcessRole::kSessionDaemon);
  EXPECT_EQ(RoleOfExecutable("/usr/bin/my-app"), ProcessRole::kTraced);
  EXPECT_EQ(RoleOfExecutable("/opt/lttng-sessiond-wrapper"), ProcessRole::kTraced);
  EXPECT_EQ(RoleOfExecutable(""), ProcessRole::kTraced);
}

}  // namespace
}  // namespace clocksync::lttng
