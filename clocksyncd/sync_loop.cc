// clocksyncd/sync_loop.cc: the daemon's sync loop (daemon.h): one loop
// whose every pass is a master's or a node's, by the role membership gives
// the node now. A master started as such publishes its own clock anchored
// to Unix time; a node probes its parent, feeds the estimator and slews
// the result into its mapping; a node that took over as master
// (docs/MEMBERSHIP.md, "Terms, takeover and handover") goes on publishing
// its synchronized mapping, extrapolated by the estimator with no new
// samples, so global time continues without a step and the bound grows
// with the holdover allowance.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "clocksyncd/daemon.h"
#include "probe/raw_clock.h"
#include "spdlog/spdlog.h"

namespace clocksync {
const char* MappingStateName(clocksync_state s) {
  switch (s) {
    case CLOCKSYNC_STATE_SYNCED:
      return "synced";
    case CLOCKSYNC_STATE_RECOVERING:
      return "recovering";
    case CLOCKSYNC_STATE_HOLDOVER:
      return "holdover";
    default:
      return "unsynced";
  }
}

bool Daemon::ShouldEnd() {
  if (stop_now_.load()) return true;
  if (!stop_.load()) return false;
  if (!agent_) return true;
  if (!leave_thread_.joinable()) {
    // Leave in another thread: our children keep probing us meanwhile (a
    // master first hands mastership over).
    leave_thread_ = std::thread([this] {
      agent_->LeaveAndStop(config_.leave_grace_ns);
      leave_done_.store(true);
    });
  }
  return leave_done_.load();
}

void Daemon::Run() {
  std::mt19937_64 rng(NodeIdHash() ^ static_cast<uint64_t>(start_raw_ns_));
  int64_t next_probe = probe::RawNowNs();
  while (!ShouldEnd()) {
    UpdateRole();
    if (master_now_) {
      MasterPass();
    } else {
      NodePass(rng, next_probe);
    }
  }
  {
    // A reload handed over too late is not applied: say so.
    std::lock_guard<std::mutex> lock(reload_mu_);
    loop_ended_ = true;
    if (pending_reload_) {
      pending_reload_.reset();
      reload_result_ = absl::CancelledError("the daemon is stopping");
      reload_done_.notify_all();
    }
  }
  SaveWanderState(/*at_stop=*/true);
  Shutdown();
}

// The role membership gives the node now; kept while the node leaves (a
// leaving master serves its children as before until they have moved).
void Daemon::UpdateRole() {
  if (!agent_ || stop_.load()) return;
  const bool master = agent_->is_master();
  if (master == master_now_) return;
  const int64_t raw = probe::RawNowNs();
  master_now_ = master;
  if (master) {
    depth_ = 0;
    depth_for_children_.store(0);
    // The tree is named after its master: ours now.
    publisher_->SetTreeId(ShmPublisher::TreeIdOfMaster(config_.node_id));
    const int64_t bound = slewer_.synchronized() ? published_bound_ns_ : -1;
    spdlog::warn("{}: master now: global time continues from its "
                 "synchronized mapping (bound ±{} ns, {} samples in the "
                 "window, last answer {} ms ago), no step",
                 config_.node_id, bound, estimator_->window_samples(),
                 last_reply_raw_ns_ > 0 ? (raw - last_reply_raw_ns_) / 1'000'000 : -1);
  } else {
    depth_ = 1;
    depth_for_children_.store(1);
    spdlog::warn("{}: a node now{}", config_.node_id,
                 anchored_master_
                     ? ": its own clock no longer defines global time (its "
                       "segment steps once, at its first synchronization)"
                     : "");
    anchored_master_ = false;
    // Probe whatever parent membership finds next.
    target_generation_ = 0;
  }
}

bool Daemon::UpdateTreeId() {
  const MembershipAgent::Snapshot m = agent_->snapshot();
  if (m.state != MembershipState::kAttached || m.ancestors.empty()) return false;
  const uint64_t id = ShmPublisher::TreeIdOfMaster(m.ancestors.front().node_id);
  if (id != publisher_->tree_id()) publisher_->SetTreeId(id);
  return true;
}

void Daemon::MasterPass() {
  const int64_t raw = probe::RawNowNs();
  if (anchored_master_) {
    PublishMaster(raw);
  } else {
    PublishNode(raw, /*as_master=*/true);
  }
  MaybeUpdateTsc(raw);
  WriteStatus(raw);
  FinishPass(raw);
  std::this_thread::sleep_for(std::chrono::nanoseconds(
      WaitNs(raw, std::min<int64_t>(config_.probe_interval_ns, 50'000'000))));
}

void Daemon::PublishMaster(int64_t raw_ns) {
  // The master's global time is its local clock, anchored to Unix time.
  const int64_t global = LocalAt(raw_ns) + realtime_offset_ns_;
  const int64_t ahead = LocalAt(raw_ns + 1'000'000'000) + realtime_offset_ns_;
  SlewTarget t;
  t.raw_ns = raw_ns;
  t.global_ns = global;
  t.rate_adj = static_cast<double>(ahead - global) / 1e9 - 1;
  t.earliest_ns = t.latest_ns = global;
  t.state = CLOCKSYNC_STATE_SYNCED;
  t.depth = 0;
  const Mapping m = slewer_.Update(t);
  const absl::Status status = publisher_->Publish(m);
  if (!status.ok()) spdlog::error("publish failed: {}", status.ToString());
  published_state_ = m.state;
  published_bound_ns_ = m.bound_at_anchor_ns;
  if (agent_) agent_->SetSynchronized(true);
  ++stats_.publishes;
}

void Daemon::NodePass(std::mt19937_64& rng, int64_t& next_probe) {
  std::uniform_real_distribution<double> jitter(-config_.probe_jitter,
                                                config_.probe_jitter);
  if (agent_) {
    const MembershipAgent::ProbeTarget target = agent_->probe_target();
    if (target.generation != target_generation_ && target.parent) {
      const absl::Status retargeted =
          RetargetRequester(target.parent->probe_address);
      if (retargeted.ok()) {
        target_generation_ = target.generation;
        next_probe = probe::RawNowNs();
      } else if (raw_error_logs_++ < 10) {
        spdlog::warn("{}: cannot probe {}: {}", config_.node_id,
                     target.parent->probe_address, retargeted.ToString());
      }
    }
    if (tree_id_generation_ != target_generation_ && UpdateTreeId()) {
      tree_id_generation_ = target_generation_;
    }
  }
  const int64_t now = probe::RawNowNs();
  if (!requester_) {
    // Not attached yet: nothing to probe.
    std::this_thread::sleep_for(std::chrono::nanoseconds(WaitNs(now, 20'000'000)));
    PublishNode(now, /*as_master=*/false);
    MaybeUpdateTsc(now);
    WriteStatus(now);
    FinishPass(now);
    return;
  }
  if (now >= next_probe) {
    const absl::Status sent = requester_->SendProbe();
    if (sent.ok() && agent_) agent_->OnProbeSent(now);
    if (!sent.ok() && raw_error_logs_++ < 10) {
      spdlog::warn("{}: probe to {} not sent: {}", config_.node_id,
                   requester_->parent_address(), sent.ToString());
    }
    next_probe = now + static_cast<int64_t>(config_.probe_interval_ns *
                                            (1 + jitter(rng)));
  }
  // Woken at least every 100 ms (and by each watchdog ping due) however
  // rarely it probes.
  const int timeout_ms = static_cast<int>(
      WaitNs(now, std::clamp<int64_t>(next_probe - now, 0, 100'000'000)) /
      1'000'000);
  const absl::StatusOr<int> polled =
      requester_->Poll(timeout_ms, [&](const probe::ProbeResult& reply) {
    if (agent_) agent_->OnProbeAnswered(probe::RawNowNs());
    parent_state_ = reply.parent_state;
    if (reply.parent_state == CLOCKSYNC_STATE_UNSYNCED ||
        reply.parent_state == CLOCKSYNC_STATE_UNSPECIFIED) {
      // The parent has no global time yet: its stamps mean nothing.
      ++stats_.samples_from_unsynced_parent;
      return;
    }
    const bool accepted = hull::IsAccepted(estimator_->Add(reply.sample));
    if (accepted) {
      ++stats_.samples_used;
      last_reply_raw_ns_ = probe::RawNowNs();
      depth_ = reply.parent_depth + 1u;
      depth_for_children_.store(depth_);
    }
    if (sample_log_ != nullptr) LogSample(reply, accepted);
  });
  if (agent_) {
    const int64_t rtt = estimator_->stats().min_round_trip_ns;
    agent_->SetParentRoundTripNs(rtt > 0 ? rtt : -1);
  }
  if (!polled.ok() && raw_error_logs_++ < 10) {
    spdlog::warn("{}: receiving replies failed: {}", config_.node_id,
                 polled.status().ToString());
  }
  const int64_t raw = probe::RawNowNs();
  PublishNode(raw, /*as_master=*/false);
  MaybeUpdateTsc(raw);
  WriteStatus(raw);
  MaybeSaveWanderState(raw);
  FinishPass(raw);
}

void Daemon::PublishNode(int64_t raw_ns, bool as_master) {
  SlewTarget t = NodeSlewTarget(
      *estimator_, raw_ns, LocalAt(raw_ns), LocalAt(raw_ns + 1'000'000'000),
      LocalAt(raw_ns + 10'000'000'000), as_master ? 0 : depth_);
  if (t.state != CLOCKSYNC_STATE_UNSYNCED) {
    // A master answers to nobody: no holdover, whatever its last sample.
    if (!as_master && (raw_ns - last_reply_raw_ns_ > config_.holdover_after_ns ||
                       parent_state_ == CLOCKSYNC_STATE_HOLDOVER)) {
      t.state = CLOCKSYNC_STATE_HOLDOVER;
    }
    const uint64_t inconsistencies = estimator_->stats().inconsistencies;
    t.jump_detected = inconsistencies != inconsistencies_seen_;
    inconsistencies_seen_ = inconsistencies;
  }
  if (agent_) agent_->SetSynchronized(t.state != CLOCKSYNC_STATE_UNSYNCED);
  const Mapping m = slewer_.Update(t);
  const absl::Status status = publisher_->Publish(m);
  if (!status.ok()) spdlog::error("publish failed: {}", status.ToString());
  if (m.state != published_state_) {
    const bool parent_holds_over = m.state == CLOCKSYNC_STATE_HOLDOVER &&
                                   parent_state_ == CLOCKSYNC_STATE_HOLDOVER &&
                                   raw_ns - last_reply_raw_ns_ <= config_.holdover_after_ns;
    spdlog::info("{}: state {} -> {}{}{}", config_.node_id,
                 MappingStateName(published_state_), MappingStateName(m.state),
                 m.stepped ? " (stepped)" : "",
                 parent_holds_over ? " (the parent is in holdover)" : "");
  }
  published_state_ = m.state;
  published_bound_ns_ = m.bound_at_anchor_ns;
  ++stats_.publishes;
}

}  // namespace clocksync
