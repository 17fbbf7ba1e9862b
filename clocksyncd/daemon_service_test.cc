// clocksyncd/daemon_service_test.cc: a Daemon (a node pinned to a parent
// on loopback, no gRPC) as its service manager sees it: watchdog pings and
// STATUS= from its sync loop, and Reload() handed from another thread to
// the loop: new probe keys used at once, a bad status file refusing the
// whole reload. Tagged tsan: the hand-over crosses threads.

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "clocksyncd/config.h"
#include "clocksyncd/daemon.h"
#include "clocksyncd/service_notifier.h"
#include "gtest/gtest.h"
#include "probe/packet.h"
#include "probe/raw_clock.h"
#include "probe/responder.h"

namespace clocksync {
namespace {

constexpr char kKeyA[] = "000102030405060708090a0b0c0d0e0f";
constexpr char kKeyB[] = "f0e0d0c0b0a090807060504030201000";

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string WriteKey(const std::string& name, const char* hex) {
  const std::string path = TmpPath(name);
  std::ofstream(path, std::ios::trunc) << hex << "\n";
  chmod(path.c_str(), 0600);
  return path;
}

// The parent's time: the raw clock, synchronized, bound 100 ns.
class RawTime : public probe::GlobalTimeSource {
 public:
  probe::ParentTime GlobalAt(int64_t raw_ns) const override {
    probe::ParentTime t;
    t.global_ns = raw_ns;
    t.state = probe::kProbeStateSynced;
    t.bound_ns = 100;
    return t;
  }
};

// A keyed parent answering on its own thread.
class Parent {
 public:
  explicit Parent(const probe::ProbeKeys& keys) {
    probe::ProbeResponder::Options options;
    options.listen_address = "127.0.0.1:0";
    options.time_source = &time_;
    options.key = keys;
    responder_ = *probe::ProbeResponder::Create(options);
    thread_ = std::thread([this] { responder_->Serve(stop_).IgnoreError(); });
  }
  ~Parent() {
    stop_.store(true);
    thread_.join();
  }
  probe::ProbeResponder& responder() { return *responder_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", responder_->port()); }

 private:
  RawTime time_;
  std::unique_ptr<probe::ProbeResponder> responder_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// What the daemon sends to the service manager, from its loop's thread.
class Messages {
 public:
  ServiceNotifier::Sender Sender() {
    return [this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mu_);
      sent_.push_back({probe::RawNowNs(), m});
    };
  }
  std::vector<int64_t> PingTimes() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int64_t> at;
    for (const auto& [t, m] : sent_) {
      if (m == "WATCHDOG=1") at.push_back(t);
    }
    return at;
  }
  std::vector<std::string> Statuses() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [t, m] : sent_) {
      if (absl::StartsWith(m, "STATUS=")) out.push_back(m.substr(7));
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<int64_t, std::string>> sent_;
};

DaemonConfig NodeConfig(const std::string& parent, const std::string& key_file) {
  const absl::StatusOr<CommandLine> line = ParseCommandLine(
      {"--node_id=n", "--parent=" + parent, "--listen=127.0.0.1:0", "--grpc_listen=",
       "--shm_path=" + TmpPath("n.shm"), "--probe_interval=10ms", "--tsc=off",
       "--probe_key_file=" + key_file});
  EXPECT_TRUE(line.ok()) << line.status();
  const absl::StatusOr<DaemonConfig> config = ValidateConfig(line->config, line->origins);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

// Waits up to `wait_ms` for samples_used to grow past `from`.
bool SamplesGrow(const Daemon& daemon, uint64_t from, int wait_ms = 5000) {
  for (int i = 0; i < wait_ms / 10; ++i) {
    if (daemon.stats().samples_used.load() > from) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(DaemonServiceTest, LoopPingsAndReloadsApplyInTheLoop) {
  const probe::ProbeKey key_a = *probe::ParseProbeKey(kKeyA);
  const probe::ProbeKey key_b = *probe::ParseProbeKey(kKeyB);
  Parent parent{probe::ProbeKeys(key_a)};
  const std::string key_file = WriteKey("n.key", kKeyA);
  const DaemonConfig config = NodeConfig(parent.address(), key_file);
  Messages messages;
  Daemon daemon(config);
  daemon.set_service_notifier(
      ServiceNotifier(messages.Sender(), /*watchdog_ns=*/400'000'000, /*status=*/true));
  ASSERT_TRUE(daemon.Start().ok());
  std::thread loop([&] { daemon.Run(); });

  ASSERT_TRUE(SamplesGrow(daemon, 3)) << "never synchronized with key A";
  // A reload with key B: the parent (key A) no longer answers.
  DaemonConfig next = config;
  next.log_interval_ns = 2'000'000'000;
  ASSERT_TRUE(daemon.Reload(next, probe::ProbeKeys(key_b)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::atomic<uint64_t>& bad_macs =
      parent.responder().counters().malformed[static_cast<size_t>(probe::DecodeStatus::kBadMac)];
  const uint64_t bad_before = bad_macs.load();
  const uint64_t after_b = daemon.stats().samples_used.load();
  // (At most the exchange held for its successor's transmit stamp comes.)
  EXPECT_FALSE(SamplesGrow(daemon, after_b + 1, 1000)) << "answered under another key";
  EXPECT_GE(bad_macs.load(), bad_before + 10) << "the node's probes are not signed with B";
  // The parent takes B too: answered again.
  parent.responder().SetKey(probe::ProbeKeys(key_b));
  EXPECT_TRUE(SamplesGrow(daemon, after_b + 2)) << "not answered after both took key B";

  // A status file that cannot be written: refused, nothing applied (the
  // keys stay B: still answered).
  next.status_file = "/proc/no/such/dir/status";
  const absl::Status refused = daemon.Reload(next, probe::ProbeKeys(key_a));
  EXPECT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.message(), "--status_file=/proc/no/such/dir/status"))
      << refused;
  EXPECT_TRUE(SamplesGrow(daemon, daemon.stats().samples_used.load() + 2));

  // A writable one: written at once.
  next.status_file = TmpPath("n.status");
  ASSERT_TRUE(daemon.Reload(next, probe::ProbeKeys(key_b)).ok());
  std::ifstream status(next.status_file);
  std::string line;
  std::getline(status, line);
  EXPECT_TRUE(absl::StartsWith(line, "node_id=n state=")) << line;

  daemon.StopNow();
  loop.join();
  // The loop pinged every 100 ms (400 ms / 4), give or take a pass.
  const std::vector<int64_t> pings = messages.PingTimes();
  ASSERT_GE(pings.size(), 5u);
  for (size_t i = 1; i < pings.size(); ++i) {
    EXPECT_LE(pings[i] - pings[i - 1], 200'000'000) << "ping " << i;
  }
  const std::vector<std::string> statuses = messages.Statuses();
  ASSERT_FALSE(statuses.empty());
  EXPECT_TRUE(absl::StrContains(
      absl::StrJoin(statuses, "\n"),
      absl::StrCat("parent ", parent.address(), ", depth 1")))
      << absl::StrJoin(statuses, "\n");
  // After the loop ended, a reload is refused at once.
  EXPECT_EQ(daemon.Reload(next, std::nullopt).code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace clocksync
