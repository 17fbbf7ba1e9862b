// clocksyncd/daemon.cc: Daemon: see daemon.h.

#include "clocksyncd/daemon.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "client/clock.h"
#include "clocksync_version.h"
#include "probe/address.h"
#include "shm/path_lock.h"
#include "probe/hw_timestamping.h"
#include "probe/raw_clock.h"
#include "shm/model_file.h"
#include "spdlog/spdlog.h"

namespace clocksync {
// Global time of this node as its children see it: our own published
// mapping, read back through the client library (the same numbers our
// local applications read).
class Daemon::PublishedTime : public probe::GlobalTimeSource {
 public:
  PublishedTime(Clock clock, const std::atomic<uint32_t>* depth)
      : clock_(std::move(clock)), depth_(depth) {}
  probe::ParentTime GlobalAt(int64_t raw_ns) const override {
    const TimeReading r = clock_.At(raw_ns);
    probe::ParentTime t;
    t.global_ns = r.global_ns;
    t.depth = static_cast<uint8_t>(std::min<uint32_t>(depth_->load(), 255));
    const bool usable = r.error == CLOCKSYNC_OK || r.error == CLOCKSYNC_ESTALE;
    t.state = usable ? static_cast<uint8_t>(r.state())
                     : static_cast<uint8_t>(CLOCKSYNC_STATE_UNSYNCED);
    t.bound_ns = std::max(r.latest_ns - r.global_ns, r.global_ns - r.earliest_ns);
    return t;
  }

 private:
  Clock clock_;
  const std::atomic<uint32_t>* depth_;
};

// This node's local clock: a model on top of the host's raw clock (tests),
// local = raw + (model(raw − start) − (raw − start)).
class Daemon::ModelClock : public probe::LocalClock {
 public:
  ModelClock(hull::ModeledClock* model, int64_t start_raw_ns)
      : model_(model), start_raw_ns_(start_raw_ns) {}
  int64_t LocalAt(int64_t raw_ns) override {
    return start_raw_ns_ + model_->LocalAt(raw_ns - start_raw_ns_);
  }

 private:
  hull::ModeledClock* model_;
  int64_t start_raw_ns_;
};

// The gRPC service's window on this node: a snapshot the sync loop refreshes
// (thread-safe by the mutex), and the membership agent once it runs.
class Daemon::View : public NodeView {
 public:
  explicit View(const Daemon* daemon) : daemon_(daemon) {}
  void SetAgent(MembershipAgent* agent) { agent_.store(agent); }
  NodeStatus Status() const override {
    std::lock_guard<std::mutex> lock(daemon_->snapshot_mu_);
    return daemon_->snapshot_;
  }
  std::vector<NodeAddress> Children() const override {
    MembershipAgent* agent = agent_.load();
    if (agent == nullptr) return {};
    return agent->Children();
  }
  absl::StatusOr<JoinResponse> Join(const JoinRequest& request,
                                    absl::Time) override {
    MembershipAgent* agent = agent_.load();
    if (agent == nullptr) return NoMembership();
    return agent->HandleJoin(request);
  }
  absl::Status Leave(const LeaveRequest& request) override {
    MembershipAgent* agent = agent_.load();
    if (agent == nullptr) return NoMembership();
    return agent->HandleLeave(request);
  }
  absl::StatusOr<HeartbeatResponse> Heartbeat(
      const HeartbeatRequest& request) override {
    MembershipAgent* agent = agent_.load();
    if (agent == nullptr) return NoMembership();
    return agent->HandleHeartbeat(request);
  }
  absl::StatusOr<PeerResponse> Peer(const PeerRequest& request) override {
    MembershipAgent* agent = agent_.load();
    if (agent == nullptr) return NoMembership();
    return agent->HandlePeer(request);
  }
  absl::Status Handover(const HandoverRequest& request) override {
    MembershipAgent* agent = agent_.load();
    if (agent == nullptr) return NoMembership();
    return agent->HandleHandover(request);
  }

 private:
  absl::Status NoMembership() const {
    return absl::UnimplementedError(absl::StrCat(
        daemon_->config_.node_id,
        " runs a static tree (--parent without --parent_grpc) and takes no "
        "children through membership"));
  }
  const Daemon* daemon_;
  std::atomic<MembershipAgent*> agent_{nullptr};
};

Daemon::Daemon(const DaemonConfig& config)
    : config_(config),
      estimator_(hull::MakeEstimator(config.estimator)),
      slewer_(config.slew) {}

Daemon::~Daemon() {
  Stop();
  Shutdown();
}

int Daemon::probe_port() const { return responder_ ? responder_->port() : 0; }

int64_t Daemon::LocalAt(int64_t raw_ns) {
  return local_clock_->LocalAt(raw_ns);
}

absl::Status Daemon::Start() {
  // Every failure names the key and value it came from: "--listen=...: why".
  const auto failed = [](absl::string_view key, absl::string_view value,
                         const absl::Status& status) {
    return absl::Status(status.code(),
                        absl::StrCat("--", key, "=", value, ": ", status.message()));
  };
  start_raw_ns_ = probe::RawNowNs();
  // Global time is Unix-epoch ns: anchor the master's raw clock to
  // CLOCK_REALTIME once, at start.
  realtime_offset_ns_ = probe::RealtimeNowNs() - start_raw_ns_;
  if (!config_.clock_model.empty()) {
    hull::ClockModelParams params;
    hull::ParseClockModel(config_.clock_model, &params);
    model_.emplace(params);
    local_clock_ = std::make_unique<ModelClock>(&*model_, start_raw_ns_);
  } else {
    local_clock_ = std::make_unique<probe::IdentityClock>();
  }
  probe::DelayInjection delay;
  if (!config_.inject_delay.empty()) {
    std::string error;
    probe::ParseDelayInjection(config_.inject_delay, &delay, &error);
  }

  // One daemon per segment: a second one would replace ours and remove it.
  absl::StatusOr<ShmPathLock> lock = ShmPathLock::Acquire(config_.shm_path);
  if (!lock.ok()) return failed("shm_path", config_.shm_path, lock.status());
  shm_lock_.emplace(std::move(*lock));
  // Without the TSC, layout version 1: older client libraries read it too.
  ShmPublisher::Options publisher_options;
  publisher_options.layout_version =
      config_.tsc ? CLOCKSYNC_SHM_LAYOUT_VERSION : CLOCKSYNC_SHM_LAYOUT_VERSION_1;
  // A master names its tree; a node learns the name when it attaches.
  if (config_.master) {
    publisher_options.tree_id = ShmPublisher::TreeIdOfMaster(config_.node_id);
  }
  absl::StatusOr<ShmPublisher> publisher =
      ShmPublisher::Open(config_.shm_path, std::move(publisher_options));
  if (!publisher.ok()) return failed("shm_path", config_.shm_path, publisher.status());
  publisher_.emplace(std::move(*publisher));
  if (model_) {
    // Test feature: local tracers stamp their events on this node's modeled
    // clock, so they need its spec and origin (shm/model_file.h).
    absl::Status written = shm::WriteModelFile(
        shm::ModelFilePath(config_.shm_path),
        shm::ModelFile{start_raw_ns_, config_.clock_model});
    if (!written.ok()) return failed("clock_model", config_.clock_model, written);
  }
  absl::StatusOr<Clock> self = Clock::Open(config_.shm_path);
  if (!self.ok()) return failed("shm_path", config_.shm_path, self.status());
  master_now_ = anchored_master_ = config_.master;
  depth_ = config_.master ? 0 : 1;
  depth_for_children_.store(depth_);
  published_time_ =
      std::make_unique<PublishedTime>(std::move(*self), &depth_for_children_);

  if (!config_.probe_key_file.empty()) {
    absl::StatusOr<probe::ProbeKeys> key =
        probe::ReadProbeKeyFile(config_.probe_key_file);
    if (!key.ok()) return failed("probe_key_file", config_.probe_key_file, key.status());
    probe_key_ = *key;
    spdlog::info("{}: probes authenticated with the key in {}{}",
                 config_.node_id, config_.probe_key_file,
                 key->other.has_value()
                     ? " (a second key there is accepted too: a change of "
                       "keys is under way)"
                     : "");
  }
  probe::ProbeResponder::Options responder_options;
  responder_options.listen_address = config_.listen;
  responder_options.node_id = NodeIdHash();
  responder_options.time_source = published_time_.get();
  responder_options.delay = delay;
  responder_options.key = probe_key_;
  responder_options.kernel_tx_stamps =
      config_.timestamping != Timestamping::kUser;
  absl::StatusOr<std::unique_ptr<probe::ProbeResponder>> responder =
      probe::ProbeResponder::Create(responder_options);
  if (!responder.ok()) return failed("listen", config_.listen, responder.status());
  responder_ = std::move(*responder);

  delay_ = delay;
  if (config_.tsc) {
    std::string why;
    if (HasInvariantTsc(&why)) {
      tsc_calibrator_.emplace(TscCalibrator::Options{});
    } else {
      spdlog::info("{}: no TSC mapping for clients ({}): they read "
                   "clock_gettime()", config_.node_id, why);
    }
  }
  if (!config_.sample_log.empty()) {
    sample_log_ = std::fopen(config_.sample_log.c_str(), "a");
    if (sample_log_ == nullptr) {
      return failed("sample_log", config_.sample_log,
                    absl::ErrnoToStatus(errno, "cannot open for appending"));
    }
    std::fprintf(sample_log_,
                 "t1,t2,t3,t4%s,parent_bound_ns,kernel_t1,kernel_t3,accepted,"
                 "estimate_ns,earliest_ns,latest_ns,published_ns\n",
                 config_.truth_shm.empty() ? "" : ",truth_ns");
    std::fflush(sample_log_);
  }
  if (!config_.truth_shm.empty()) {
    absl::StatusOr<Clock> truth = Clock::Open(config_.truth_shm);
    if (!truth.ok()) {
      return failed("truth_shm", config_.truth_shm, truth.status());
    }
    truth_clock_.emplace(std::move(*truth));
  }
  if (!config_.parent.empty()) {
    // A pinned parent: probe it from the start.
    const absl::Status created = RetargetRequester(config_.parent);
    if (!created.ok()) return failed("parent", config_.parent, created);
  }
  if (!config_.status_file.empty()) {
    // Written every second from now on: a path that cannot be written is
    // a start-up error, not a silent loss.
    const absl::Status writable = WriteStatusFile(
        config_.status_file, "node_id=" + config_.node_id + " state=starting\n");
    if (!writable.ok()) return failed("status_file", config_.status_file, writable);
  }
  if (!config_.wander_state_file.empty()) {
    const absl::Status loaded = LoadWanderState();
    if (!loaded.ok()) {
      return failed("wander_state_file", config_.wander_state_file, loaded);
    }
  }
  if (!config_.metrics_listen.empty()) {
    const absl::Status served = StartMetricsServer();
    if (!served.ok()) return failed("metrics_listen", config_.metrics_listen, served);
  }
  if (!config_.grpc_listen.empty()) {
    // gRPC would log three lines of its own before failing: say it first.
    const absl::Status free = CheckTcpListenAddressFree(config_.grpc_listen);
    if (!free.ok()) return failed("grpc_listen", config_.grpc_listen, free);
  }
  if (!config_.grpc_listen.empty() || !config_.admin_socket.empty()) {
    UpdateSnapshot(probe::RawNowNs());
    view_ = std::make_unique<View>(this);
    StatusServerOptions server_options;
    server_options.membership_key = probe_key_;
    status_server_ = std::make_unique<StatusServer>(std::move(server_options));
    const absl::Status served = status_server_->Start(
        config_.grpc_listen, config_.admin_socket, view_.get());
    if (!served.ok()) {
      const bool socket = !config_.admin_socket.empty() &&
                          absl::StrContains(served.message(), config_.admin_socket);
      return socket ? failed("admin_socket", config_.admin_socket, served)
                    : failed("grpc_listen", config_.grpc_listen, served);
    }
  }
  if (config_.master || !config_.join.empty() || !config_.parent_grpc.empty()) {
    MembershipConfig m;
    m.self.node_id = config_.node_id;
    m.self.probe_address = AdvertisedAddress(config_.listen, responder_->port());
    m.self.grpc_address =
        AdvertisedAddress(config_.grpc_listen, status_server_->tcp_port());
    m.master = config_.master;
    m.max_children = config_.max_children;
    m.lease_ns = config_.lease_ns;
    m.missed_probes_for_loss = config_.missed_probes_for_loss;
    m.master_priority = config_.master_priority;
    m.takeover_after_ns = config_.takeover_after_ns;
    // A peer's answer is news for two poll rounds.
    m.peer_answer_valid_ns = 4 * config_.heartbeat_interval_ns + 500'000'000;
    for (const std::string& seed : config_.join) m.seeds.push_back({"", "", seed});
    if (!config_.parent_grpc.empty()) {
      m.pinned_parent = NodeRef{"", config_.parent, config_.parent_grpc};
    }
    MembershipAgentOptions o;
    o.heartbeat_interval_ns = config_.heartbeat_interval_ns;
    o.child_timeout_ns =
        std::max<int64_t>(3'000'000'000, 10 * config_.heartbeat_interval_ns);
    ParentLossOptions& loss = o.parent_loss.emplace();
    loss.missed_probes_for_loss = config_.missed_probes_for_loss;
    loss.probe_interval_ns = config_.probe_interval_ns;
    // An answered heartbeat is recent while the next could still be on its
    // way: one interval, its deadline, and one interval of slack.
    loss.heartbeat_alive_ns = 2 * o.heartbeat_interval_ns + o.rpc_timeout_ns;
    o.probe_sender_id = NodeIdHash();
    o.probe_key = probe_key_;
    o.peer_poll_interval_ns = 2 * config_.heartbeat_interval_ns;
    o.peer_rpc_timeout_ns = std::min<int64_t>(o.rpc_timeout_ns, o.peer_poll_interval_ns);
    spdlog::info("{}: membership as {} (probes {}, gRPC {}), max {} children{}",
                 config_.node_id, config_.master ? "master" : "node",
                 m.self.probe_address, m.self.grpc_address, m.max_children,
                 config_.join.empty()
                     ? ""
                     : absl::StrCat(", seeds ", absl::StrJoin(config_.join, ",")));
    agent_ = std::make_unique<MembershipAgent>(std::move(m), o);
    view_->SetAgent(agent_.get());
    agent_->Start();
    if (config_.master && !agent_->is_master()) {
      // A returning master: another one took over meanwhile (the agent
      // found it through the seeds and joins it).
      master_now_ = anchored_master_ = false;
      depth_ = 1;
      depth_for_children_.store(depth_);
    }
  }
  responder_thread_ = std::thread([this] {
    const absl::Status served = responder_->Serve(responder_stop_);
    if (!served.ok()) {
      spdlog::error("probe responder stopped: {}", served.ToString());
    }
  });
  spdlog::info("clocksyncd {}: {}, probes answered on port {}, mapping in {}",
               config_.node_id,
               master_now_ ? "master (its clock is global time)"
               : config_.parent.empty()
                   ? "node joining through " + absl::StrJoin(config_.join, ",")
                   : "node, pinned parent " + config_.parent,
               responder_->port(), config_.shm_path);
  return absl::OkStatus();
}

uint64_t Daemon::NodeIdHash() const {
  return std::hash<std::string>()(config_.node_id);
}

std::string Daemon::AdvertisedAddress(const std::string& listen,
                                      int port) const {
  std::string host = config_.advertise_host;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) {
    host = probe::HostOf(listen);
    if (host.empty() || host == "0.0.0.0" || host == "::") {
      char name[256] = {};
      gethostname(name, sizeof(name) - 1);
      host = name;
    }
  }
  return probe::JoinHostPort(host, port);
}

absl::Status Daemon::RetargetRequester(const std::string& probe_address) {
  if (requester_) {
    if (requester_->parent_address() == probe_address) return absl::OkStatus();
    probes_sent_before_ += requester_->counters().sent.load();
    probes_answered_before_ += requester_->counters().answered.load();
    probes_lost_before_ += requester_->counters().lost.load();
    dropped_from_earlier_parents_ = DroppedFromParent();
  }
  probe::ProbeRequester::Options options;
  options.parent_address = probe_address;
  options.node_id = NodeIdHash();
  options.clock = local_clock_.get();
  options.delay = delay_;
  options.key = probe_key_;
  options.kernel_tx_stamps = config_.timestamping != Timestamping::kUser;
  options.interleaved = config_.timestamping != Timestamping::kUser;
  // A reply later than a few intervals is as good as lost.
  options.expiry_ns = std::max<int64_t>(3 * config_.probe_interval_ns, 1'000'000'000);
  absl::StatusOr<std::unique_ptr<probe::ProbeRequester>> requester =
      probe::ProbeRequester::Create(options);
  if (!requester.ok()) return requester.status();
  requester_ = std::move(*requester);
  parent_state_ = 0;
  if (config_.timestamping == Timestamping::kHardware) {
    hardware_summary_ =
        probe::ProbeHardwareTimestampingOfSocket(requester_->socket_fd())
            .summary;
  }
  // The estimator keeps its window: every sample bounds global time,
  // whichever parent it came from (each is widened by that parent's bound).
  spdlog::info("{}: probing {} (timestamps: {})", config_.node_id,
               probe_address, TimestampingSummary());
  return absl::OkStatus();
}

void Daemon::UpdateSnapshot(int64_t raw_ns) {
  NodeStatus st;
  st.set_node_id(config_.node_id);
  st.set_role(master_now_ ? ROLE_MASTER : ROLE_NODE);
  st.set_depth(depth_);
  st.set_parent(master_now_ ? "" : requester_ ? requester_->parent_address() : config_.parent);
  st.set_mapping_steps(slewer_.steps());
  st.set_has_master(master_now_);
  if (agent_) {
    const MembershipAgent::Snapshot m = agent_->snapshot();
    if (m.state == MembershipState::kAttached) st.set_depth(m.depth);
    st.set_term(m.term);
    if (m.master) st.set_master_id(m.master->node_id);
    for (const Candidate& c : m.candidates) *st.add_candidates() = ToProto(c);
    st.set_master_priority(static_cast<uint32_t>(m.master_priority));
    st.set_takeovers(m.takeovers);
    st.set_masterless_ns(m.masterless_ns);
    st.set_has_master(m.has_master);
    for (const NodeRef& a : m.ancestors) *st.add_ancestors() = ToProto(a);
    st.set_children_count(m.children);
    st.set_joins(m.joins);
    st.set_parent_losses(m.parent_losses);
    st.set_probe_address(agent_->self().probe_address);
    st.set_grpc_address(agent_->self().grpc_address);
  }
  st.set_state(static_cast<SyncState>(published_state_));
  st.set_holdover(published_state_ == CLOCKSYNC_STATE_HOLDOVER);
  st.set_error_bound_ns(published_bound_ns_);
  st.set_uptime_ns(raw_ns - start_raw_ns_);
  st.set_version(CLOCKSYNC_VERSION);
  st.set_timestamping(TimestampingSummary());
  for (const auto& [reason, count] : DroppedOnProbePort()) {
    (*st.mutable_dropped_on_probe_port())[reason] = count;
  }
  for (const auto& [reason, count] : DroppedFromParent()) {
    (*st.mutable_dropped_from_parent())[reason] = count;
  }
  if (!agent_) {
    st.set_probe_address(config_.listen);
    st.set_grpc_address(config_.grpc_listen);
  }
  if (publisher_ && slewer_.synchronized()) {
    st.set_global_time_ns(slewer_.PublishedAt(raw_ns));
  }
  if (!anchored_master_) {
    const hull::TimeEstimate e = estimator_->Estimate(LocalAt(raw_ns));
    const hull::EstimatorStats& stats = estimator_->stats();
    const hull::Estimator& est = *estimator_;
    st.set_offset_to_parent_ns(e.offset_ns);
    st.set_drift_ppb(e.drift_ppb);
    st.set_min_round_trip_ns(stats.min_round_trip_ns);
    st.set_samples_in_window(est.window_samples());
    st.set_lower_hull_size(est.lower_hull_vertices());
    st.set_upper_hull_size(est.upper_hull_vertices());
    st.set_probes_rejected(stats.rejected() +
                           stats_.samples_from_unsynced_parent.load());
    st.set_inconsistencies(stats.inconsistencies);
    if (stats.inconsistencies > 0) {
      st.set_last_inconsistency_age_ns(LocalAt(raw_ns) -
                                       stats.last_inconsistency_local_ns);
      st.set_last_inconsistency("samples contradicted every line (a clock "
                                "step or bend); the window was cut");
    }
    uint64_t sent = probes_sent_before_, answered = probes_answered_before_,
             lost = probes_lost_before_;
    if (requester_) {
      sent += requester_->counters().sent.load();
      answered += requester_->counters().answered.load();
      lost += requester_->counters().lost.load();
    }
    st.set_probes_sent(sent);
    st.set_probes_answered(answered);
    st.set_probes_lost(lost);
    if (last_reply_raw_ns_ > 0) {
      st.set_last_answer_age_ns(raw_ns - last_reply_raw_ns_);
    }
  }
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  snapshot_ = std::move(st);
}

// Says which malformed probes were dropped since the last log line, by
// reason: a wrong or missing key (unauthenticated, bad_mac, unexpected_mac)
// shows up here first.

void Daemon::WriteStatus(int64_t raw_ns) {
  if (raw_ns >= next_snapshot_raw_ns_) {
    next_snapshot_raw_ns_ = raw_ns + 100'000'000;
    UpdateSnapshot(raw_ns);
  }
  if (raw_ns >= next_log_raw_ns_) {
    next_log_raw_ns_ = raw_ns + config_.log_interval_ns;
    LogDroppedProbes();
    if (!master_now_ && !requester_) {
      spdlog::info("{}: not attached yet, joining through {}", config_.node_id,
                   absl::StrJoin(config_.join, ","));
    } else if (!anchored_master_) {
      const hull::TimeEstimate e = estimator_->Estimate(LocalAt(raw_ns));
      const hull::Estimator& est = *estimator_;
      spdlog::info(
          "{}: {}{} depth {} offset {} ns drift {:.1f} ppb bound ±{} ns window "
          "{} samples ({:.0f} s) sent {} answered {} lost {}",
          config_.node_id, master_now_ ? "master by takeover, " : "",
          MappingStateName(published_state_), depth_, e.offset_ns,
          e.drift_ppb, published_bound_ns_, est.window_samples(),
          est.window_span_ns() * 1e-9,
          probes_sent_before_ + (requester_ ? requester_->counters().sent.load() : 0),
          probes_answered_before_ +
              (requester_ ? requester_->counters().answered.load() : 0),
          probes_lost_before_ + (requester_ ? requester_->counters().lost.load() : 0));
    }
  }
  if (config_.status_file.empty() || raw_ns < next_status_raw_ns_) return;
  next_status_raw_ns_ = raw_ns + 1'000'000'000;
  const absl::Status written =
      WriteStatusFile(config_.status_file, StatusFileText(raw_ns));
  if (!written.ok() && status_file_failures_++ == 0) {
    spdlog::warn("{}: --status_file={}: {} (said once)", config_.node_id,
                 config_.status_file, std::string(written.message()));
  }
}

std::string Daemon::StatusFileText(int64_t raw_ns) const {
  const double drift_ppb =
      anchored_master_ ? 0 : estimator_->Estimate(local_clock_->LocalAt(raw_ns)).drift_ppb;
  // The parent by id when membership knows it ("-" for the master, "?"
  // while detached), else the pinned parent's probe address.
  std::string parent = master_now_ ? "-" : config_.parent;
  uint32_t depth = master_now_ ? 0 : depth_;
  uint64_t term = 0;
  std::string master = master_now_ ? config_.node_id : "?";
  if (agent_) {
    const MembershipAgent::Snapshot m = agent_->snapshot();
    if (!master_now_) parent = m.parent ? m.parent->node_id : "?";
    if (m.state == MembershipState::kAttached) depth = m.depth;
    term = m.term;
    if (m.master && !m.master->node_id.empty()) master = m.master->node_id;
  }
  return absl::StrFormat(
      "node_id=%s state=%s depth=%u parent=%s samples=%zu bound_ns=%lld "
      "drift_ppb=%.1f tsc_error_ns=%lld role=%s term=%llu master=%s "
      "steps=%llu\n",
      config_.node_id.c_str(), MappingStateName(published_state_), depth,
      parent.c_str(), anchored_master_ ? size_t{0} : estimator_->window_samples(),
      static_cast<long long>(published_bound_ns_), drift_ppb,
      static_cast<long long>(tsc_published_error_ns_),
      master_now_ ? "master" : "node", static_cast<unsigned long long>(term),
      master.c_str(), static_cast<unsigned long long>(slewer_.steps()));
}

void Daemon::Shutdown() {
  if (leave_thread_.joinable()) leave_thread_.join();
  if (agent_) agent_->Stop();
  metrics_server_.reset();
  if (status_server_) {
    status_server_->Shutdown(absl::Now() + absl::Seconds(1));
    status_server_.reset();
  }
  if (responder_thread_.joinable()) {
    responder_stop_.store(true);
    responder_thread_.join();
  }
  requester_.reset();
  responder_.reset();
  published_time_.reset();
  agent_.reset();
  if (sample_log_ != nullptr) {
    std::fclose(sample_log_);
    sample_log_ = nullptr;
  }
  if (publisher_) {
    publisher_->Close();
    publisher_.reset();
    if (model_) std::remove(shm::ModelFilePath(config_.shm_path).c_str());
    if (!config_.status_file.empty()) std::remove(config_.status_file.c_str());
    spdlog::info("clocksyncd {}: stopped, {} removed", config_.node_id,
                 config_.shm_path);
  }
  shm_lock_.reset();
}

}  // namespace clocksync
