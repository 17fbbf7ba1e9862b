// clocksyncd/daemon.h
//
// Daemon: one clocksyncd node. A master publishes its own clock as global
// time; any other node probes its parent continuously, feeds the samples to
// the adaptive two-hull estimator, slews the result into the mapping it
// publishes in shared memory, and answers its own children's probes with
// that mapping (so global time and its bound flow down the tree). A
// candidate (master_priority) that takes over when the master is lost, or
// is handed mastership, switches its loop to the master's role and keeps
// publishing its synchronized mapping, with no step (sync_loop.cc).
//
// Lifecycle (chrony's main.c order): Start() opens the shared-memory
// segment, the probe responder and, for a non-master, the probe requester;
// Run() loops until Stop() (from a signal handler thread or a test) and then
// shuts everything down in reverse order, removing the segment.
//
// Threads: the responder serves in its own thread; the sync loop runs in the
// caller's. They share only the published mapping (through shared memory,
// read back with the client library) and atomics. The gRPC service and the
// metrics endpoint read a status snapshot under its mutex.
//
// Under a service manager (set_service_notifier) every pass of the sync
// loop pings the watchdog and refreshes STATUS= (service_notifier.h), so a
// hung loop stops pinging. Reload() hands a new configuration to the loop,
// which applies the live settings at its next pass (config_reload.h).

#ifndef CLOCKSYNC_CLOCKSYNCD_DAEMON_H_
#define CLOCKSYNC_CLOCKSYNCD_DAEMON_H_

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "shm/mapping_slewer.h"
#include "clocksyncd/service_notifier.h"
#include "client/clock.h"
#include "clocksyncd/membership_agent.h"
#include "metrics/http_server.h"
#include "probe/delay_injection.h"
#include "probe/requester.h"
#include "probe/responder.h"
#include "shm/path_lock.h"
#include "shm/shm_publisher.h"
#include "clocksyncd/status_service.h"
#include "shm/tsc_calibrator.h"
#include "hull/estimator.h"
#include "hull/sim/clock_model.h"

namespace clocksync {

// The daemon's configuration, in the units the code uses. Filled only by
// ValidateConfig() (clocksyncd/config.h) from the schema proto/config.proto,
// which holds every key's default, range and documentation; the fields are
// named after the keys (durations get _ns). No defaults here on purpose.
// The `timestamping` key.
enum class Timestamping {
  kKernel,    // Kernel software stamps, interleaved (protocol version 2).
  kHardware,  // Asked for NIC stamps; reported, kernel stamps used.
  kUser,      // Readings before the send calls, version-1 probes.
};

struct DaemonConfig {
  std::string node_id;
  bool master = false;
  // Membership (docs/MEMBERSHIP.md). A non-master has --join seeds (gRPC
  // addresses), or a pinned --parent (probe address), optionally with the
  // pinned parent's gRPC address (then it joins it as a pinned child).
  std::vector<std::string> join;
  std::string parent;                    // host:port of the parent's probes.
  std::string parent_grpc;               // host:port of its gRPC service.
  int max_children = 0;
  // How others reach this node; empty: the host of `listen`, or the host
  // name when that is a wildcard.
  std::string advertise_host;
  int64_t heartbeat_interval_ns = 0;
  int64_t lease_ns = 0;
  int missed_probes_for_loss = 0;
  // On Stop(): longest wait for the children to re-attach elsewhere.
  int64_t leave_grace_ns = 0;
  // Standby masters: 0 never; 1..255 a candidate (lower first).
  int master_priority = 0;
  // A candidate without a master this long takes over.
  int64_t takeover_after_ns = 0;
  std::string listen;                    // Where this node answers probes.
  // gRPC status service (clocksyncctl); empty = none.
  std::string grpc_listen;
  // Optional Unix socket for the same service (admin RPCs).
  std::string admin_socket;
  // Prometheus metrics over HTTP (GET /metrics); empty = none.
  std::string metrics_listen;
  std::string shm_path;
  std::string status_file;               // Optional key=value status, 1 Hz.
  int64_t probe_interval_ns = 0;
  double probe_jitter = 0.1;             // ± fraction of the interval; not a key.
  // window, window_levels, wander_ppb_per_sqrt_s, max_round_trip; the
  // estimator's other parameters keep hull's defaults.
  hull::AdaptiveConfig estimator;
  // What the clock has shown of its wander, across restarts
  // (clocksyncd/wander_state.h); empty: none.
  std::string wander_state_file;
  SlewConfig slew;                       // max_slew_ppm, slew_time, step_threshold.
  // No answered probe for this long: holdover.
  int64_t holdover_after_ns = 0;
  int64_t log_interval_ns = 0;
  // Test features: refused unless enable_test_features is set.
  bool enable_test_features = false;
  std::string clock_model;   // hull/clock_model.h spec: this node's local clock.
  std::string inject_delay;  // probe/delay_injection.h spec: delays probes.
  // The tree's shared probe key (clocksyncd/probe_auth.h); empty: probes
  // are not authenticated.
  std::string probe_key_file;
  // Where probe timestamps come from (the `timestamping` key).
  Timestamping timestamping = Timestamping::kKernel;
  // Optional CSV of every answered probe (deploy/error_budget.sh).
  std::string sample_log;
  // Publish a TSC -> raw mapping where the TSC is invariant (`tsc` key).
  bool tsc = true;
  // Test feature: the master's segment, for truth_ns in sample_log.
  std::string truth_shm;
};

// "synced", "recovering", "holdover", "unsynced": for the log and the
// status file.
const char* MappingStateName(clocksync_state state);

struct DaemonStats {
  std::atomic<uint64_t> samples_used{0};
  std::atomic<uint64_t> samples_from_unsynced_parent{0};
  std::atomic<uint64_t> publishes{0};
};

class Daemon {
 public:
  explicit Daemon(const DaemonConfig& config);
  ~Daemon();

  // Opens the segment and sockets; errors name the path or address.
  absl::Status Start();
  // Runs the sync loop until Stop(); then shuts down in reverse order.
  void Run();
  // Leave the tree cleanly (hand the children to our parent, tell it),
  // then end Run(). Safe from any thread.
  void Stop() { stop_.store(true); }
  // End Run() at once, without telling anyone. Safe from any thread.
  void StopNow() {
    stop_.store(true);
    stop_now_.store(true);
  }

  // Where the loop reports to the service manager (systemd); call before
  // Run(). Default: nowhere.
  void set_service_notifier(ServiceNotifier notifier) {
    notifier_ = std::move(notifier);
  }

  // Applies the live settings of `config` (config_reload.h: status_file,
  // log_interval, the slewer's, holdover_after, probe_key_file) and `keys`
  // (those of its probe_key_file, read by the caller) at the sync loop's
  // next pass, and returns once it has: OK, or why nothing was applied (a
  // status_file that cannot be written; Cancelled once Run() has left its
  // loop; DeadlineExceeded when the loop did not pass within 5 s, and then
  // it applies it when it does). Other fields of `config` are ignored.
  // Safe from any thread but the loop's.
  absl::Status Reload(const DaemonConfig& config,
                      const std::optional<probe::ProbeKeys>& keys);

  // The UDP port probes are answered on (after Start()).
  int probe_port() const;
  // The wander prior the estimator started from (wander_state_file),
  // ppb/√s; 0 = none.
  double wander_prior_ppb() const {
    return config_.estimator.wander_prior_ppb_per_sqrt_s;
  }
  const DaemonStats& stats() const { return stats_; }

 private:
  class PublishedTime;   // GlobalTimeSource over our own segment.
  class ModelClock;      // LocalClock of a modeled clock.
  class View;            // NodeView for the gRPC status service.

  // The sync loop (sync_loop.cc): each pass a master's or a node's, by
  // the role membership gives the node now.
  void UpdateRole();
  void MasterPass();
  void NodePass(std::mt19937_64& rng, int64_t& next_probe);
  void PublishMaster(int64_t raw_ns);
  // `as_master`: a node that took over (no holdover, depth 0).
  void PublishNode(int64_t raw_ns, bool as_master);
  // Writes the tree's id (from the master's name, the first ancestor) into
  // the segment's header; false while not attached.
  bool UpdateTreeId();
  void WriteStatus(int64_t raw_ns);
  void UpdateSnapshot(int64_t raw_ns);
  void Shutdown();
  // The end of every pass of the sync loop: a pending reload, then the
  // service manager's pings and status.
  void FinishPass(int64_t raw_ns);
  absl::Status ApplyReload(const DaemonConfig& next,
                           const std::optional<probe::ProbeKeys>& keys,
                           int64_t raw_ns);
  ServiceStatus CurrentServiceStatus() const;
  // How long a loop may wait from `raw_ns`: at most `limit_ns`, and never
  // past the next watchdog ping.
  int64_t WaitNs(int64_t raw_ns, int64_t limit_ns) const;
  int64_t LocalAt(int64_t raw_ns);
  uint64_t NodeIdHash() const;

  DaemonConfig config_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stop_now_{false};
  // True once Run() may end: Stop() seen and the leave (if any) done.
  bool ShouldEnd();
  std::thread leave_thread_;
  std::atomic<bool> leave_done_{false};
  DaemonStats stats_;
  int64_t start_raw_ns_ = 0;
  int64_t realtime_offset_ns_ = 0;  // Master: global = raw + offset.
  // Master now (by configuration, or by takeover or handover since).
  bool master_now_ = false;
  // A master by configuration that has never been a node: it publishes
  // its own clock anchored to Unix time (a master by takeover publishes
  // its synchronized mapping instead).
  bool anchored_master_ = false;
  std::optional<hull::ModeledClock> model_;
  std::unique_ptr<probe::LocalClock> local_clock_;
  std::optional<ShmPathLock> shm_lock_;  // Held while we publish.
  std::optional<ShmPublisher> publisher_;
  std::unique_ptr<PublishedTime> published_time_;
  std::unique_ptr<probe::ProbeResponder> responder_;
  std::unique_ptr<probe::ProbeRequester> requester_;
  // Counters of requesters replaced after a parent change.
  uint64_t probes_sent_before_ = 0;
  uint64_t probes_answered_before_ = 0;
  uint64_t probes_lost_before_ = 0;
  uint64_t target_generation_ = 0;
  // The probe target generation whose tree id the segment holds.
  uint64_t tree_id_generation_ = ~uint64_t{0};
  std::unique_ptr<MembershipAgent> agent_;
  probe::DelayInjection delay_;
  std::optional<probe::ProbeKeys> probe_key_;
  // Dropped packets (per DecodeStatus) already reported in the log.
  // Drops by reason (docs: NodeStatus.dropped_*), and what the log has
  // said of them so far.
  using DropCounts = std::map<std::string, uint64_t>;
  DropCounts DroppedOnProbePort() const;
  DropCounts DroppedFromParent() const;
  DropCounts dropped_from_earlier_parents_;
  DropCounts logged_drops_on_probe_port_;
  DropCounts logged_drops_from_parent_;
  void LogDroppedProbes();
  absl::Status RetargetRequester(const std::string& probe_address);
  std::string AdvertisedAddress(const std::string& listen, int port) const;
  std::unique_ptr<View> view_;
  std::unique_ptr<StatusServer> status_server_;
  // GET /metrics (metrics_listen), served from snapshot_ in its own thread.
  absl::Status StartMetricsServer();
  std::unique_ptr<metrics::HttpServer> metrics_server_;
  // What the gRPC threads read: a copy refreshed by the sync loop.
  mutable std::mutex snapshot_mu_;
  NodeStatus snapshot_;
  int64_t next_snapshot_raw_ns_ = 0;
  std::thread responder_thread_;
  std::atomic<bool> responder_stop_{false};
  std::unique_ptr<hull::Estimator> estimator_;
  MappingSlewer slewer_;
  // Parent's side of the latest samples.
  int64_t last_reply_raw_ns_ = 0;
  // The parent's state in its last reply (kProbeState*, 0: none yet): a
  // parent in holdover holds its subtree in holdover too, so that a node's
  // state reflects its whole path to the master.
  uint8_t parent_state_ = 0;
  // How probes are stamped, for status and the log ("kernel, interleaved",
  // ...); refreshed by the sync loop.
  std::string TimestampingSummary() const;
  // The status file's line at `raw_ns`.
  std::string StatusFileText(int64_t raw_ns) const;
  // Replaces the file at `path` with `text` (written aside, then renamed).
  static absl::Status WriteStatusFile(const std::string& path,
                                      const std::string& text);
  uint64_t status_file_failures_ = 0;
  // wander_state_file (wander_state.h): read at start, written every
  // kWanderSaveIntervalNs and when the loop ends.
  absl::Status LoadWanderState();
  void MaybeSaveWanderState(int64_t raw_ns);
  void SaveWanderState(bool at_stop);
  int64_t next_wander_save_raw_ns_ = 0;
  uint64_t wander_save_failures_ = 0;
  std::string hardware_summary_;  // With timestamping=hardware only.
  // sample_log (null: none) and, with truth_shm, the master's time.
  FILE* sample_log_ = nullptr;
  std::optional<clocksync::Clock> truth_clock_;
  void LogSample(const probe::ProbeResult& reply, bool accepted);
  // Once a second: a TSC point, and the mapping (or its withdrawal)
  // published.
  void MaybeUpdateTsc(int64_t raw_ns);
  std::optional<TscCalibrator> tsc_calibrator_;
  int64_t next_tsc_raw_ns_ = 0;
  bool tsc_published_valid_ = false;
  // error_ns of the TSC mapping published last; -1: none (status file).
  int64_t tsc_published_error_ns_ = -1;
  uint32_t depth_ = 0;
  std::atomic<uint32_t> depth_for_children_{0};
  uint64_t inconsistencies_seen_ = 0;
  clocksync_state published_state_ = CLOCKSYNC_STATE_UNSYNCED;
  int64_t published_bound_ns_ = 0;
  int64_t next_log_raw_ns_ = 0;
  int64_t next_status_raw_ns_ = 0;
  int raw_error_logs_ = 0;  // Transport errors logged so far (first 10).
  ServiceNotifier notifier_;
  // A reload handed over by Reload() and its outcome (reload_mu_).
  struct PendingReload {
    DaemonConfig config;
    std::optional<probe::ProbeKeys> keys;
  };
  std::mutex reload_mu_;
  std::condition_variable reload_done_;
  std::optional<PendingReload> pending_reload_;
  std::optional<absl::Status> reload_result_;
  std::atomic<bool> reload_pending_{false};
  bool loop_ended_ = false;  // Run() has left its loop (reload_mu_).
};

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_DAEMON_H_
