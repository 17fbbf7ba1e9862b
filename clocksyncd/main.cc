// clocksyncd/main.cc: the per-node clock synchronization daemon. main()
// reads the configuration (clocksyncd/config.h: --config=FILE, flags over
// it, validated), then runs a Daemon until SIGINT or SIGTERM.

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <iostream>
#include <string>
#include <vector>
#include <thread>

#include "clocksync_version.h"
#include "clocksyncd/config.h"
#include "clocksyncd/config_schema.h"
#include "clocksyncd/daemon.h"
#include "spdlog/spdlog.h"
#include "systemd/sd-daemon.h"

namespace {

constexpr char kUsage[] =
    "clocksyncd: keeps a global timescale across a tree of nodes and "
    "publishes it in shared memory.\n"
    "  master:  clocksyncd --master --node_id=m --listen=0.0.0.0:3190\n"
    "  node:    clocksyncd --node_id=n1 --join=10.0.0.1:3191\n"
    "  static:  clocksyncd --node_id=n1 --parent=10.0.0.1:3190\n"
    "  file:    clocksyncd --config=/etc/clocksync/clocksyncd.conf\n"
    "SIGINT/SIGTERM leave the tree cleanly (children are handed to this "
    "node's parent first); a second signal stops at once.\n"
    "Exit status: 0 after a clean stop; 2 for an invalid configuration (bad "
    "flag, key or value: the message names it); 1 when a valid "
    "configuration cannot start (a port or path in use, a file that cannot "
    "be written: the message names the flag and value).\n";

}  // namespace

int main(int argc, char** argv) {
  const absl::StatusOr<clocksync::CommandLine> command_line =
      clocksync::ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  if (!command_line.ok()) {
    std::cerr << "clocksyncd: " << command_line.status().message() << "\n";
    return 2;
  }
  switch (command_line->action) {
    case clocksync::CommandLine::Action::kHelp:
      std::cout << clocksync::ConfigHelpText(kUsage);
      return 0;
    case clocksync::CommandLine::Action::kVersion:
      std::cout << "clocksyncd " CLOCKSYNC_VERSION "\n";
      return 0;
    case clocksync::CommandLine::Action::kRun:
      break;
  }
  const absl::StatusOr<clocksync::DaemonConfig> valid =
      clocksync::ValidateConfig(command_line->config, command_line->origins);
  if (!valid.ok()) {
    std::cerr << "clocksyncd: " << valid.status().message() << "\n";
    return 2;
  }
  const clocksync::DaemonConfig& config = *valid;
  if (config.enable_test_features) {
    spdlog::warn("test features enabled (clock_model '{}', inject_delay '{}'): "
                 "not for production", config.clock_model, config.inject_delay);
  }
  // SIGINT and SIGTERM are taken by a dedicated thread (sigwait), so the
  // daemon's threads never run signal handlers.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  clocksync::Daemon daemon(config);
  const absl::Status started = daemon.Start();
  if (!started.ok()) {
    std::cerr << "clocksyncd: cannot start: " << started.message() << "\n";
    return 1;
  }
  // Under systemd (Type=notify) this tells it we are up; elsewhere a no-op.
  sd_notify(0, "READY=1");
  std::atomic<bool> stopping{false};
  std::thread signal_thread([&daemon, &stopping, signals] {
    for (int received = 0;; ++received) {
      int signal = 0;
      sigwait(&signals, &signal);
      if (stopping.load()) return;
      if (received == 0) {
        spdlog::info("signal {}: leaving the tree, then shutting down (a "
                     "second signal stops at once)", signal);
        daemon.Stop();
      } else {
        spdlog::warn("signal {}: shutting down at once", signal);
        daemon.StopNow();
      }
    }
  });
  daemon.Run();
  sd_notify(0, "STOPPING=1");
  // Wake the signal thread if Run() ended on its own (the signal stays
  // blocked, so it only ends the sigwait).
  if (!stopping.exchange(true)) kill(getpid(), SIGTERM);
  signal_thread.join();
  return 0;
}
