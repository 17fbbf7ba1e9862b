// clocksyncd/service_notifier_test.cc: watchdog pings follow the loop's
// passes (regular while it runs, none while it hangs, no burst after), the
// STATUS= line and when it is sent, and the real sd_notify glue against a
// socket of the test's own.

#include "clocksyncd/service_notifier.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace clocksync {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kStart = 1000 * kS;

// Records every message with the raw instant of the pass that sent it.
struct Recorder {
  int64_t now_ns = 0;
  std::vector<std::pair<int64_t, std::string>> sent;
  ServiceNotifier::Sender Sender() {
    return [this](const std::string& m) { sent.emplace_back(now_ns, m); };
  }
  std::vector<int64_t> Pings() const {
    std::vector<int64_t> at;
    for (const auto& [t, m] : sent) {
      if (m == "WATCHDOG=1") at.push_back(t);
    }
    return at;
  }
  int64_t LastStatusAt() const {
    int64_t at = -1;
    for (const auto& [t, m] : sent) {
      if (m.rfind("STATUS=", 0) == 0) at = t;
    }
    return at;
  }
  std::vector<std::string> Statuses() const {
    std::vector<std::string> out;
    for (const auto& [t, m] : sent) {
      if (m.rfind("STATUS=", 0) == 0) out.push_back(m.substr(7));
    }
    return out;
  }
};

ServiceStatus Synced(int64_t bound_ns) {
  ServiceStatus s;
  s.state = ServiceStatus::State::kSynchronized;
  s.bound_ns = bound_ns;
  s.parent_id = "n3";
  s.parent_address = "10.0.0.3:3190";
  s.depth = 2;
  return s;
}

// Passes of the loop every `step` in [from, to).
void Passes(ServiceNotifier* n, Recorder* r, int64_t from, int64_t to,
           int64_t step, const ServiceStatus& status) {
  for (int64_t t = from; t < to; t += step) {
    r->now_ns = t;
    n->OnLoopIteration(t, [&] { return status; });
  }
}

TEST(FormatServiceStatus, SaysStateBoundParentAndDepth) {
  EXPECT_EQ(FormatServiceStatus(Synced(1'234)),
            "synchronized, bound 1.2 µs, parent n3 (10.0.0.3:3190), depth 2");
  ServiceStatus pinned = Synced(850);
  pinned.parent_id.clear();
  EXPECT_EQ(FormatServiceStatus(pinned),
            "synchronized, bound 850 ns, parent 10.0.0.3:3190, depth 2");
  ServiceStatus lost = Synced(35'000);
  lost.state = ServiceStatus::State::kHoldover;
  lost.parent_id.clear();
  lost.parent_address.clear();
  EXPECT_EQ(FormatServiceStatus(lost),
            "holdover, bound 35.0 µs, no parent (rejoining), depth 2");
  EXPECT_EQ(FormatServiceStatus(ServiceStatus{}), "unsynchronized, no parent yet");
  ServiceStatus unsynced_with_parent = Synced(0);
  unsynced_with_parent.state = ServiceStatus::State::kUnsynchronized;
  EXPECT_EQ(FormatServiceStatus(unsynced_with_parent),
            "unsynchronized, parent n3 (10.0.0.3:3190), depth 2");
  ServiceStatus master;
  master.state = ServiceStatus::State::kSynchronized;
  master.master = true;
  EXPECT_EQ(FormatServiceStatus(master),
            "synchronized, master (its clock is global time)");
}

TEST(FormatBound, PicksTheUnit) {
  EXPECT_EQ(FormatBound(0), "0 ns");
  EXPECT_EQ(FormatBound(999), "999 ns");
  EXPECT_EQ(FormatBound(1'000), "1.0 µs");
  EXPECT_EQ(FormatBound(1'500'000), "1.5 ms");
  EXPECT_EQ(FormatBound(2'000'000'000), "2.00 s");
}

TEST(ServiceNotifier, PingsAtMostHalfTheWatchdogApartWhileTheLoopRuns) {
  Recorder r;
  ServiceNotifier n(r.Sender(), 10 * kS, /*status=*/false);
  // A pass every 100 ms, with one slow pass of 2 s in the middle.
  Passes(&n, &r, kStart, kStart + 30 * kS, 100 * kMs, ServiceStatus{});
  Passes(&n, &r, kStart + 32 * kS, kStart + 60 * kS, 100 * kMs, ServiceStatus{});
  const std::vector<int64_t> pings = r.Pings();
  ASSERT_FALSE(pings.empty());
  EXPECT_EQ(pings.front(), kStart);  // The first pass pings.
  for (size_t i = 1; i < pings.size(); ++i) {
    EXPECT_LE(pings[i] - pings[i - 1], 5 * kS) << "ping " << i;
    EXPECT_GE(pings[i] - pings[i - 1], 2'500 * kMs) << "ping " << i;
  }
  EXPECT_GE(pings.size(), 60u / 3);
  EXPECT_TRUE(r.Statuses().empty());
}

TEST(ServiceNotifier, AHungLoopStopsPingingAndResumesWithOnePing) {
  Recorder r;
  ServiceNotifier n(r.Sender(), 2 * kS, /*status=*/false);
  Passes(&n, &r, kStart, kStart + 5 * kS, 100 * kMs, ServiceStatus{});
  const size_t before = r.Pings().size();
  // The loop hangs for 20 s: nothing else pings for it, so systemd (after
  // WatchdogSec=2s) would have killed it; here it resumes.
  Passes(&n, &r, kStart + 25 * kS, kStart + 25 * kS + 1, 1, ServiceStatus{});
  const std::vector<int64_t> pings = r.Pings();
  ASSERT_EQ(pings.size(), before + 1) << "one ping on resuming, no catch-up";
  EXPECT_EQ(pings.back(), kStart + 25 * kS);
  EXPECT_LT(pings[before - 1], kStart + 5 * kS);
}

TEST(ServiceNotifier, SaysHowLongTheLoopMaySleep) {
  Recorder r;
  ServiceNotifier n(r.Sender(), 4 * kS, /*status=*/false);
  EXPECT_EQ(n.ping_period_ns(), 1 * kS);
  EXPECT_EQ(n.NsUntilPing(kStart), 0);  // Not pinged yet: now.
  Passes(&n, &r, kStart, kStart + 1, 1, ServiceStatus{});
  EXPECT_EQ(n.NsUntilPing(kStart + 300 * kMs), 700 * kMs);
  EXPECT_EQ(n.NsUntilPing(kStart + 5 * kS), 0);
}

TEST(ServiceNotifier, NoWatchdogNoPings) {
  Recorder r;
  ServiceNotifier n(r.Sender(), 0, /*status=*/true);
  Passes(&n, &r, kStart, kStart + 10 * kS, 100 * kMs, Synced(1000));
  EXPECT_TRUE(r.Pings().empty());
  EXPECT_EQ(r.Statuses().size(), 1u);
  EXPECT_EQ(n.NsUntilPing(kStart), std::numeric_limits<int64_t>::max());
}

TEST(ServiceNotifier, DisabledSendsNothingAndBuildsNoStatus) {
  ServiceNotifier n;
  int built = 0;
  n.OnLoopIteration(kStart, [&] {
    ++built;
    return ServiceStatus{};
  });
  EXPECT_FALSE(n.enabled());
  EXPECT_EQ(built, 0);
}

TEST(ServiceNotifier, StatusOnChangeAndEveryFewSecondsNotPerPass) {
  Recorder r;
  ServiceNotifier n(r.Sender(), 10 * kS, /*status=*/true);
  int built = 0;
  ServiceStatus status = Synced(1'000);
  int64_t t = kStart;
  const auto run_until = [&](int64_t end) {
    for (; t < end; t += 10 * kMs) {
      r.now_ns = t;
      n.OnLoopIteration(t, [&] {
        ++built;
        return status;
      });
    }
  };
  run_until(kStart + 2 * kS);
  EXPECT_EQ(r.Statuses(), std::vector<std::string>{
                              "synchronized, bound 1.0 µs, parent n3 (10.0.0.3:3190), depth 2"});
  // 200 passes, the status built once per kStatusPollNs only.
  EXPECT_LE(built, 5);
  // The bound moves every pass: sent again only kStatusRefreshNs later.
  for (int i = 0; i < 800; ++i) {
    status.bound_ns = 1'000 + 100 * (i % 7);
    run_until(t + 10 * kMs);
  }
  const std::vector<std::string> after = r.Statuses();
  ASSERT_EQ(after.size(), 2u);
  // The state changes: sent within one poll.
  status.state = ServiceStatus::State::kHoldover;
  const int64_t changed = t;
  run_until(t + ServiceNotifier::kStatusPollNs + 10 * kMs);
  ASSERT_EQ(r.Statuses().size(), 3u);
  EXPECT_EQ(r.Statuses().back().rfind("holdover, bound", 0), 0u);
  EXPECT_LE(r.LastStatusAt() - changed, ServiceNotifier::kStatusPollNs);
  // Nothing changes: nothing sent; a forced one is sent at the next pass.
  run_until(t + 3 * kS);
  EXPECT_EQ(r.Statuses().size(), 3u);
  n.ForceStatus();
  run_until(t + 10 * kMs);
  EXPECT_EQ(r.Statuses().size(), 4u);
}

// The real glue: sd_notify datagrams on a socket the test owns, the
// watchdog interval from WATCHDOG_USEC.
TEST(ServiceNotifier, FromEnvironmentTalksToNotifySocket) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_FALSE(ServiceNotifier::FromEnvironment().enabled());

  // Bazel's TEST_TMPDIR is too long for a socket path.
  char dir[] = "/tmp/notify_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/notify.sock";
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(address.sun_path));
  std::strcpy(address.sun_path, path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const timeval timeout{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));

  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  setenv("WATCHDOG_USEC", "400000", 1);
  unsetenv("WATCHDOG_PID");
  ServiceNotifier n = ServiceNotifier::FromEnvironment();
  EXPECT_TRUE(n.enabled());
  EXPECT_EQ(n.watchdog_ns(), 400 * kMs);
  n.OnLoopIteration(kStart, [] { return Synced(1'234); });
  std::vector<std::string> got;
  for (int i = 0; i < 2; ++i) {
    char buffer[512];
    const ssize_t size = recv(fd, buffer, sizeof(buffer), 0);
    ASSERT_GT(size, 0) << "no datagram " << i;
    got.emplace_back(buffer, static_cast<size_t>(size));
  }
  EXPECT_EQ(got[0], "WATCHDOG=1");
  EXPECT_EQ(got[1], "STATUS=synchronized, bound 1.2 µs, parent n3 (10.0.0.3:3190), depth 2");

  // Another process's watchdog (WATCHDOG_PID not ours): no pings.
  setenv("WATCHDOG_PID", "1", 1);
  EXPECT_EQ(ServiceNotifier::FromEnvironment().watchdog_ns(), 0);
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
  close(fd);
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace clocksync
