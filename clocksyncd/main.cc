// clocksyncd — the per-node clock synchronization daemon. main() parses and
// validates the flags, then runs a Daemon until SIGINT or SIGTERM.

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <iostream>
#include <string>
#include <vector>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/time.h"
#include "clocksyncd/daemon.h"
#include "spdlog/spdlog.h"
#include "systemd/sd-daemon.h"

ABSL_FLAG(std::string, node_id, "", "This node's name (unique in the tree).");
ABSL_FLAG(bool, master, false, "This node's clock defines global time.");
ABSL_FLAG(std::vector<std::string>, join, {},
          "HOST:PORT[,HOST:PORT...]: gRPC addresses of nodes already in the "
          "tree (the master is enough); the node asks them to place it.");
ABSL_FLAG(std::string, parent, "",
          "HOST:PORT of a pinned parent's probe port (a static tree; no "
          "membership unless --parent_grpc is given too).");
ABSL_FLAG(std::string, parent_grpc, "",
          "HOST:PORT of the pinned parent's gRPC service: the node joins it "
          "as a pinned child (listed in its tree, never redirected).");
ABSL_FLAG(int, max_children, 16,
          "Children accepted before newcomers are sent further down.");
ABSL_FLAG(std::string, advertise_host, "",
          "Host name or address other nodes use to reach this one (default: "
          "the host of --listen, or this machine's host name when that is a "
          "wildcard).");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Milliseconds(200),
          "Time between two heartbeats to the parent (lease renewals).");
ABSL_FLAG(absl::Duration, lease, absl::Seconds(3),
          "Attachment lease granted by the master; also how long a node with "
          "children waits before rejoining after losing its parent.");
ABSL_FLAG(int, missed_probes_for_loss, 10,
          "Probe intervals without an answer after which the parent is lost.");
ABSL_FLAG(absl::Duration, leave_grace, absl::Seconds(5),
          "On shutdown, longest wait for the children to re-attach elsewhere.");
ABSL_FLAG(std::string, listen, "0.0.0.0:3190",
          "HOST:PORT where this node answers its children's probes.");
ABSL_FLAG(std::string, grpc_listen, "0.0.0.0:3191",
          "HOST:PORT of the gRPC status service (clocksyncctl); empty: none.");
ABSL_FLAG(std::string, admin_socket, "",
          "Optional Unix socket path serving the same gRPC service.");
ABSL_FLAG(std::string, shm_path, CLOCKSYNC_DEFAULT_SHM_PATH,
          "Where to publish the local->global mapping (its directory must "
          "exist).");
ABSL_FLAG(std::string, status_file, "",
          "Optional file rewritten every second with key=value status.");
ABSL_FLAG(absl::Duration, probe_interval, absl::Milliseconds(100),
          "Time between two probes to the parent (jittered by ±10%).");
ABSL_FLAG(absl::Duration, window, absl::Seconds(300),
          "Longest sliding window of samples.");
ABSL_FLAG(int, window_levels, 4,
          "Adaptive window: windows window/2^k for k < levels; 1 = fixed.");
ABSL_FLAG(double, wander_ppb_per_sqrt_s, 1.0,
          "Frequency random walk the error bound tolerates.");
ABSL_FLAG(absl::Duration, max_round_trip, absl::Seconds(1),
          "Probes with a longer round trip are discarded.");
ABSL_FLAG(double, max_slew_ppm, 500, "Largest rate correction when slewing.");
ABSL_FLAG(absl::Duration, slew_time, absl::Seconds(1),
          "Time over which an offset correction is spread.");
ABSL_FLAG(absl::Duration, step_threshold, absl::Milliseconds(1),
          "After a detected jump, larger offsets are stepped.");
ABSL_FLAG(absl::Duration, holdover_after, absl::Seconds(1),
          "No answered probe for this long: holdover.");
ABSL_FLAG(absl::Duration, log_interval, absl::Seconds(10),
          "Time between two status lines in the log.");
ABSL_FLAG(bool, enable_test_features, false,
          "Allow --clock_model and --inject_delay (never in production).");
ABSL_FLAG(std::string, clock_model, "",
          "TEST ONLY: model this node's local clock on the host's raw clock, "
          "e.g. offset=2s,frequency_ppm=-40,wander=1,step=120s:+2ms,seed=7.");
ABSL_FLAG(std::string, probe_key_file, "",
          "File with the tree's shared probe key (32 hex digits, not "
          "readable by others): every probe is then authenticated "
          "(SipHash-2-4) and unauthenticated ones are dropped. All nodes of "
          "a tree, and tracers' sync sessions, need the same key. A second "
          "key on the next line is accepted too (the first signs): for "
          "changing keys node by node. Empty: probes are not "
          "authenticated.");
ABSL_FLAG(std::string, inject_delay, "",
          "TEST ONLY: delay outgoing probes and replies, e.g. "
          "min=50us,mean=20us,seed=3.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "clocksyncd: keeps a global timescale across a tree of nodes and "
      "publishes it in shared memory.\n"
      "  master:  clocksyncd --master --node_id=m --listen=0.0.0.0:3190\n"
      "  node:    clocksyncd --node_id=n1 --join=10.0.0.1:3191\n"
      "  static:  clocksyncd --node_id=n1 --parent=10.0.0.1:3190\n"
      "SIGINT/SIGTERM leave the tree cleanly (children are handed to this "
      "node's parent first); a second signal stops at once.\n");
  absl::ParseCommandLine(argc, argv);
  clocksync::DaemonConfig config;
  config.node_id = absl::GetFlag(FLAGS_node_id);
  config.master = absl::GetFlag(FLAGS_master);
  config.parent = absl::GetFlag(FLAGS_parent);
  config.join = absl::GetFlag(FLAGS_join);
  config.parent_grpc = absl::GetFlag(FLAGS_parent_grpc);
  config.max_children = absl::GetFlag(FLAGS_max_children);
  config.advertise_host = absl::GetFlag(FLAGS_advertise_host);
  config.heartbeat_interval_ns =
      absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_heartbeat_interval));
  config.lease_ns = absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_lease));
  config.missed_probes_for_loss = absl::GetFlag(FLAGS_missed_probes_for_loss);
  config.leave_grace_ns =
      absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_leave_grace));
  config.listen = absl::GetFlag(FLAGS_listen);
  config.shm_path = absl::GetFlag(FLAGS_shm_path);
  config.grpc_listen = absl::GetFlag(FLAGS_grpc_listen);
  config.admin_socket = absl::GetFlag(FLAGS_admin_socket);
  config.status_file = absl::GetFlag(FLAGS_status_file);
  config.probe_interval_ns =
      absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_probe_interval));
  config.estimator.base.window_ns =
      absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_window));
  config.estimator.levels = absl::GetFlag(FLAGS_window_levels);
  config.estimator.base.wander_ppb_per_sqrt_s =
      absl::GetFlag(FLAGS_wander_ppb_per_sqrt_s);
  config.estimator.base.max_round_trip_ns =
      absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_max_round_trip));
  config.slew.max_slew_ppm = absl::GetFlag(FLAGS_max_slew_ppm);
  config.slew.slew_time_ns = absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_slew_time));
  config.slew.step_threshold_ns =
      absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_step_threshold));
  config.holdover_after_ns =
      absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_holdover_after));
  config.log_interval_ns = absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_log_interval));
  config.enable_test_features = absl::GetFlag(FLAGS_enable_test_features);
  config.clock_model = absl::GetFlag(FLAGS_clock_model);
  config.inject_delay = absl::GetFlag(FLAGS_inject_delay);
  config.probe_key_file = absl::GetFlag(FLAGS_probe_key_file);
  if (config.node_id.empty()) config.node_id = config.master ? "master" : "";
  const std::string invalid = clocksync::ValidateDaemonConfig(config);
  if (!invalid.empty()) {
    std::cerr << "clocksyncd: bad flag --" << invalid << "\n";
    return 2;
  }
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
    std::cerr << "clocksyncd: " << started.ToString() << "\n";
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
