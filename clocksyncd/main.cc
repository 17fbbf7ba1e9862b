// clocksyncd/main.cc: the per-node clock synchronization daemon. main()
// reads the configuration (clocksyncd/config.h: --config=FILE, flags over
// it, validated), then runs a Daemon until SIGINT or SIGTERM; SIGHUP reloads
// the configuration (clocksyncd/config_reload.h). Under systemd
// (Type=notify) it says READY=1, RELOADING=1 and STOPPING=1; the sync loop
// pings the watchdog and sets STATUS= (clocksyncd/service_notifier.h).

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include <iostream>
#include <string>
#include <vector>
#include <thread>

#include "clocksync_version.h"
#include "clocksyncd/config.h"
#include "clocksyncd/config_reload.h"
#include "clocksyncd/config_schema.h"
#include "clocksyncd/daemon.h"
#include "clocksyncd/service_notifier.h"
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
    "node's parent first); a second signal stops at once. SIGHUP reads the "
    "configuration again (the same file and flags) and applies what can "
    "change while running (probe_key_file and its keys, log_interval, "
    "max_slew_ppm, slew_time, step_threshold, holdover_after, status_file); "
    "the log names every other change as needing a restart.\n"
    "Exit status: 0 after a clean stop; 2 for an invalid configuration (bad "
    "flag, key or value: the message names it); 1 when a valid "
    "configuration cannot start (a port or path in use, a file that cannot "
    "be written: the message names the flag and value).\n";

// SIGHUP: reads the configuration again as `args` say and hands the live
// settings to the daemon; `running` follows what runs. An invalid
// configuration or key file changes nothing and says why.
void Reload(const std::vector<std::string>& args,
            clocksync::config::DaemonConfig* running, clocksync::Daemon& daemon) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
             static_cast<unsigned long long>(now.tv_sec) * 1'000'000ULL +
                 static_cast<unsigned long long>(now.tv_nsec / 1000));
  spdlog::info("SIGHUP: reloading the configuration");
  const absl::StatusOr<clocksync::ReloadPlan> plan = clocksync::PlanReload(args, *running);
  if (!plan.ok()) {
    spdlog::error("reload refused, running on as before: {}",
                  std::string(plan.status().message()));
  } else {
    for (const clocksync::ConfigChange& change : plan->changes) {
      const std::string line = clocksync::DescribeChanges({change}).front();
      if (change.live) {
        spdlog::info("reload: {}", line);
      } else {
        spdlog::warn("reload: {}", line);
      }
    }
    const absl::Status applied = daemon.Reload(plan->daemon_config, plan->probe_keys);
    if (applied.ok()) {
      *running = plan->config;
      spdlog::info("reload: done{}",
                   plan->changes.empty() ? " (no configuration key changed)" : "");
    } else {
      spdlog::error("reload not applied, running on as before: {}",
                    std::string(applied.message()));
    }
  }
  sd_notify(0, "READY=1");
}

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
  // SIGINT, SIGTERM and SIGHUP are taken by a dedicated thread (sigwait),
  // so the daemon's threads never run signal handlers.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  clocksync::Daemon daemon(config);
  daemon.set_service_notifier(clocksync::ServiceNotifier::FromEnvironment());
  const absl::Status started = daemon.Start();
  if (!started.ok()) {
    std::cerr << "clocksyncd: cannot start: " << started.message() << "\n";
    return 1;
  }
  // Under systemd (Type=notify) this tells it we are up; elsewhere a no-op.
  sd_notify(0, "READY=1");
  std::atomic<bool> stopping{false};
  std::atomic<bool> stop_notified{false};  // STOPPING=1 sent.
  const std::vector<std::string> args(argv + 1, argv + argc);
  clocksync::config::DaemonConfig running = command_line->config;
  std::thread signal_thread([&daemon, &stopping, &stop_notified, &args, &running, signals] {
    for (int stops = 0;;) {
      int signal = 0;
      sigwait(&signals, &signal);
      if (stopping.load()) return;
      if (signal == SIGHUP) {
        if (stops == 0) Reload(args, &running, daemon);
        continue;
      }
      if (stops++ == 0) {
        spdlog::info("signal {}: leaving the tree, then shutting down (a "
                     "second signal stops at once)", signal);
        sd_notify(0, "STOPPING=1");
        stop_notified.store(true);
        daemon.Stop();
      } else {
        spdlog::warn("signal {}: shutting down at once", signal);
        daemon.StopNow();
      }
    }
  });
  daemon.Run();
  if (!stop_notified.load()) sd_notify(0, "STOPPING=1");
  // Wake the signal thread if Run() ended on its own (the signal stays
  // blocked, so it only ends the sigwait).
  if (!stopping.exchange(true)) kill(getpid(), SIGTERM);
  signal_thread.join();
  return 0;
}
