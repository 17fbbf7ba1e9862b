// clocksyncd/daemon_wander.cc: a node's wander_state_file as a user meets
// it: a saved wander becomes the estimator's prior at start, a missing or
// corrupt file is left out (the start goes on), a directory it cannot
// write in stops the start naming the key, and what the run has learnt is
// written when the loop ends. Tagged tsan: the loop runs on its own thread.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "clocksyncd/config.h"
#include "clocksyncd/daemon.h"
#include "clocksyncd/wander_state.h"
#include "gtest/gtest.h"
#include "probe/raw_clock.h"
#include "probe/responder.h"

namespace clocksync {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name, ".",
                      getpid());
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

// A parent answering on its own thread.
class Parent {
 public:
  Parent() {
    probe::ProbeResponder::Options options;
    options.listen_address = "127.0.0.1:0";
    options.time_source = &time_;
    responder_ = *probe::ProbeResponder::Create(options);
    thread_ = std::thread([this] { responder_->Serve(stop_).IgnoreError(); });
  }
  ~Parent() {
    stop_.store(true);
    thread_.join();
  }
  std::string address() const {
    return absl::StrCat("127.0.0.1:", responder_->port());
  }

 private:
  RawTime time_;
  std::unique_ptr<probe::ProbeResponder> responder_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A node pinned to `parent` with short windows (8 s and 4 s), so that its
// drifts and references bound the wander within seconds.
DaemonConfig NodeConfig(const std::string& parent, const std::string& state) {
  const absl::StatusOr<CommandLine> line = ParseCommandLine(
      {"--node_id=n", "--parent=" + parent, "--listen=127.0.0.1:0",
       "--grpc_listen=", "--shm_path=" + TmpPath("wander_node.shm"),
       "--probe_interval=10ms", "--tsc=off", "--window=8s",
       "--window_levels=2", "--wander_state_file=" + state});
  EXPECT_TRUE(line.ok()) << line.status();
  const absl::StatusOr<DaemonConfig> config =
      ValidateConfig(line->config, line->origins);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

TEST(DaemonWanderTest, ASavedWanderIsThePriorAtStart) {
  Parent parent;
  const std::string state = TmpPath("wander_saved");
  ASSERT_TRUE(WriteWanderState(state, {0.04, 1764650000}).ok());
  Daemon daemon(NodeConfig(parent.address(), state));
  ASSERT_TRUE(daemon.Start().ok());
  EXPECT_DOUBLE_EQ(daemon.wander_prior_ppb(), 0.04);
  std::remove(state.c_str());
}

TEST(DaemonWanderTest, MissingOrCorruptFilesAreLeftOut) {
  Parent parent;
  const std::string state = TmpPath("wander_corrupt");
  std::remove(state.c_str());
  {
    Daemon daemon(NodeConfig(parent.address(), state));
    ASSERT_TRUE(daemon.Start().ok());
    EXPECT_EQ(daemon.wander_prior_ppb(), 0);
  }
  std::ofstream(state, std::ios::trunc) << "wander_ppb_per_sqrt_s -3\n";
  Daemon daemon(NodeConfig(parent.address(), state));
  ASSERT_TRUE(daemon.Start().ok());
  EXPECT_EQ(daemon.wander_prior_ppb(), 0);
  std::remove(state.c_str());
}

TEST(DaemonWanderTest, AnUnwritableDirectoryStopsTheStart) {
  Parent parent;
  Daemon daemon(NodeConfig(parent.address(), "/proc/no/such/dir/wander"));
  const absl::Status started = daemon.Start();
  ASSERT_FALSE(started.ok());
  EXPECT_TRUE(absl::StrContains(
      started.message(),
      "--wander_state_file=/proc/no/such/dir/wander: its directory "
      "/proc/no/such/dir is not writable"))
      << started;
}

TEST(DaemonWanderTest, WhatTheRunLearntIsSavedWhenItEnds) {
  Parent parent;
  const std::string state = TmpPath("wander_learnt");
  std::remove(state.c_str());
  Daemon daemon(NodeConfig(parent.address(), state));
  ASSERT_TRUE(daemon.Start().ok());
  std::thread loop([&] { daemon.Run(); });
  // The 4 s level's drifts have 2 differences after about 4 × (1.5 + 2)
  // s; the references count sooner. Give it 25 s of probes at 100/s.
  std::this_thread::sleep_for(std::chrono::seconds(25));
  daemon.StopNow();
  loop.join();
  ASSERT_GT(daemon.stats().samples_used.load(), 1000u);
  const absl::StatusOr<WanderState> saved = ReadWanderState(state);
  ASSERT_TRUE(saved.ok()) << saved.status();
  // An upper bound from 8 s windows of loopback stamps: loose (a few
  // ppb/√s), but a bound; the file's value is what the next start reads.
  EXPECT_GT(saved->wander_ppb_per_sqrt_s, 0);
  EXPECT_TRUE(std::isfinite(saved->wander_ppb_per_sqrt_s));
  const int64_t now_s = probe::RealtimeNowNs() / 1'000'000'000;
  EXPECT_NEAR(static_cast<double>(saved->saved_unix_s),
              static_cast<double>(now_s), 60);
  std::remove(state.c_str());
}

}  // namespace
}  // namespace clocksync
