// clocksyncd/config_reload.h: what a reload of clocksyncd (SIGHUP, systemctl
// reload) changes. The configuration is read again exactly as at start-up
// (the --config file, then the same flags over it) and validated whole; an
// invalid one changes nothing. Of the keys that differ from the running
// configuration, the live ones are applied to the running daemon and every
// other one is logged by name as needing a restart and keeps its running
// value.
//
// Live keys (kLiveKeys): probe_key_file (whose keys are read again at every
// reload, changed or not), log_interval, max_slew_ppm, slew_time,
// step_threshold, holdover_after, status_file. Each is read afresh by the
// sync loop or its component (the slewer, the probe ends, the membership
// calls). The others shape sockets, the segment, the estimator's window or
// the tree (node_id, listen, probe_interval, window, ...) and take a restart.
//
// Example (clocksyncd/main.cc):
//   absl::StatusOr<ReloadPlan> plan = PlanReload(args, running);
//   if (!plan.ok()) { log plan.status(); keep going as before; }
//   for (const std::string& line : DescribeChanges(plan->changes)) log line;
//   daemon.Reload(plan->daemon_config, plan->probe_keys);
//   running = plan->config;
//
// Thread safety: functions only; all are safe from any thread.

#ifndef CLOCKSYNC_CLOCKSYNCD_CONFIG_RELOAD_H_
#define CLOCKSYNC_CLOCKSYNCD_CONFIG_RELOAD_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clocksyncd/daemon.h"
#include "probe/auth.h"
#include "proto/config.pb.h"

namespace clocksync {

// The keys a reload applies to the running daemon, in schema order.
inline constexpr const char* kLiveKeys[] = {
    "status_file",    "max_slew_ppm", "slew_time",      "step_threshold",
    "holdover_after", "log_interval", "probe_key_file",
};
bool IsLiveKey(absl::string_view key);

// One key whose value differs.
struct ConfigChange {
  std::string key;
  std::string before;  // As a flag spells it, strings quoted.
  std::string after;
  bool live = false;   // IsLiveKey(key).
};

// The keys whose values differ, in schema order. Durations are compared as
// durations ("1s" is "1000ms"), lists as lists.
std::vector<ConfigChange> DiffConfig(const config::DaemonConfig& before,
                                     const config::DaemonConfig& after);

// `running` with the values of the live keys taken from `next`.
config::DaemonConfig MergeLiveKeys(const config::DaemonConfig& running,
                                   const config::DaemonConfig& next);

// What a reload does.
struct ReloadPlan {
  // The configuration from now on: the running one with the new values of
  // the live keys; validated into daemon_config.
  config::DaemonConfig config;
  DaemonConfig daemon_config;
  // The keys of config's probe_key_file, read now; none without one.
  std::optional<probe::ProbeKeys> probe_keys;
  // Every key whose new value differs from the running one (live or not).
  std::vector<ConfigChange> changes;
};

// Reads the configuration as the command line `args` (argv without the
// program name) says, validates it, merges its live keys into `running`,
// validates the result and reads its probe key file. Errors say why in the
// validation's words (naming the flag, or the file, line and key).
absl::StatusOr<ReloadPlan> PlanReload(const std::vector<std::string>& args,
                                      const config::DaemonConfig& running);

// One log line per change:
//   log_interval changed ("10s" -> "5s"): applied
//   node_id changed ("n1" -> "n2"): needs a restart, keeping "n1"
std::vector<std::string> DescribeChanges(const std::vector<ConfigChange>& changes);

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_CONFIG_RELOAD_H_
