// clocksyncd/daemon_service.cc: the daemon as a service: what its sync loop
// tells the service manager after every pass (watchdog pings, STATUS=) and
// how a reload reaches the loop and is applied there (see
// clocksyncd/daemon.h and clocksyncd/config_reload.h).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "clocksyncd/daemon.h"
#include "spdlog/spdlog.h"

namespace clocksync {
namespace {

// Longest wait of Reload() for the loop (which passes every 100 ms at
// most): a hung loop is the watchdog's to handle.
constexpr auto kReloadWait = std::chrono::seconds(5);

ServiceStatus::State ServiceState(clocksync_state state) {
  switch (state) {
    case CLOCKSYNC_STATE_SYNCED:
      return ServiceStatus::State::kSynchronized;
    case CLOCKSYNC_STATE_RECOVERING:
      return ServiceStatus::State::kRecovering;
    case CLOCKSYNC_STATE_HOLDOVER:
      return ServiceStatus::State::kHoldover;
    default:
      return ServiceStatus::State::kUnsynchronized;
  }
}

}  // namespace

absl::Status Daemon::Reload(const DaemonConfig& config,
                            const std::optional<probe::ProbeKeys>& keys) {
  std::unique_lock<std::mutex> lock(reload_mu_);
  if (loop_ended_) return absl::CancelledError("the daemon is stopping");
  pending_reload_ = PendingReload{config, keys};
  reload_result_.reset();
  reload_pending_.store(true);
  if (!reload_done_.wait_for(lock, kReloadWait,
                             [this] { return reload_result_.has_value(); })) {
    return absl::DeadlineExceededError(
        "the sync loop did not take the new configuration within 5 s; it "
        "applies it when it passes again");
  }
  return *reload_result_;
}

void Daemon::FinishPass(int64_t raw_ns) {
  if (reload_pending_.load()) {
    std::optional<PendingReload> pending;
    {
      std::lock_guard<std::mutex> lock(reload_mu_);
      pending.swap(pending_reload_);
      reload_pending_.store(false);
    }
    if (pending) {
      const absl::Status applied = ApplyReload(pending->config, pending->keys, raw_ns);
      std::lock_guard<std::mutex> lock(reload_mu_);
      reload_result_ = applied;
      reload_done_.notify_all();
    }
  }
  notifier_.OnLoopIteration(raw_ns, [this] { return CurrentServiceStatus(); });
}

int64_t Daemon::WaitNs(int64_t raw_ns, int64_t limit_ns) const {
  return std::max<int64_t>(0, std::min(limit_ns, notifier_.NsUntilPing(raw_ns)));
}

absl::Status Daemon::ApplyReload(const DaemonConfig& next,
                                 const std::optional<probe::ProbeKeys>& keys,
                                 int64_t raw_ns) {
  // The status file first: the one setting that can fail, and then nothing
  // else is applied either.
  if (next.status_file != config_.status_file) {
    if (!next.status_file.empty()) {
      const absl::Status written =
          WriteStatusFile(next.status_file, StatusFileText(raw_ns));
      if (!written.ok()) {
        return absl::Status(written.code(),
                            absl::StrCat("--status_file=", next.status_file,
                                         ": ", written.message()));
      }
    }
    if (!config_.status_file.empty()) std::remove(config_.status_file.c_str());
    config_.status_file = next.status_file;
    status_file_failures_ = 0;
    next_status_raw_ns_ = raw_ns + 1'000'000'000;
  }
  config_.slew = next.slew;
  slewer_.set_config(next.slew);
  config_.holdover_after_ns = next.holdover_after_ns;
  config_.log_interval_ns = next.log_interval_ns;
  next_log_raw_ns_ = std::min(next_log_raw_ns_, raw_ns + next.log_interval_ns);
  // The keys: read again at every reload, applied to every end that
  // uses them (this node's probes and their answers, membership calls
  // made and answered).
  const bool keys_changed = keys != probe_key_;
  config_.probe_key_file = next.probe_key_file;
  if (keys_changed) {
    probe_key_ = keys;
    if (responder_) responder_->SetKey(keys);
    if (requester_) requester_->SetKey(keys);
    if (agent_) agent_->SetProbeKey(keys);
    if (status_server_) status_server_->SetMembershipKey(keys);
    spdlog::info("{}: reload: probes {}", config_.node_id,
                 !keys ? "no longer authenticated (no probe_key_file)"
                       : absl::StrCat("authenticated with the keys now in ",
                                      config_.probe_key_file,
                                      keys->other ? " (and a second key accepted)" : ""));
  }
  notifier_.ForceStatus();
  return absl::OkStatus();
}

ServiceStatus Daemon::CurrentServiceStatus() const {
  ServiceStatus s;
  s.state = ServiceState(published_state_);
  s.master = master_now_;
  s.bound_ns = published_bound_ns_;
  s.depth = depth_;
  if (master_now_) return s;
  if (agent_) {
    const MembershipAgent::Snapshot m = agent_->snapshot();
    if (m.state == MembershipState::kAttached) s.depth = m.depth;
    if (m.parent) {
      s.parent_id = m.parent->node_id;
      s.parent_address = m.parent->probe_address;
    }
  } else if (requester_) {
    s.parent_address = requester_->parent_address();
  }
  return s;
}

}  // namespace clocksync
