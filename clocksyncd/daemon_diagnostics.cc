// clocksyncd/daemon_diagnostics.cc: what the daemon says about its probes
// beside synchronizing: drop counts by reason (status and log), how its
// timestamps are taken, the sample log, the TSC mapping it publishes, and
// its metrics endpoint (see clocksyncd/daemon.h).

#include <cerrno>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "clocksyncd/atomic_file.h"
#include "clocksyncd/daemon.h"
#include "metrics/exposition.h"
#include "probe/address.h"
#include "probe/raw_clock.h"
#include "spdlog/spdlog.h"

namespace clocksync {
namespace {

void AddMalformed(
    const std::array<std::atomic<uint64_t>, probe::kDecodeStatusCount>& counts,
    std::map<std::string, uint64_t>* out) {
  for (size_t i = 1; i < counts.size(); ++i) {
    const uint64_t n = counts[i].load(std::memory_order_relaxed);
    if (n > 0) {
      (*out)[probe::DecodeStatusName(static_cast<probe::DecodeStatus>(i))] += n;
    }
  }
}

void AddIfAny(const char* reason, uint64_t n,
              std::map<std::string, uint64_t>* out) {
  if (n > 0) (*out)[reason] += n;
}

// "27 bad_mac, 3 duplicate": what grew since `logged`, which is updated.
std::string Growth(const std::map<std::string, uint64_t>& now,
                   std::map<std::string, uint64_t>* logged) {
  std::vector<std::string> parts;
  for (const auto& [reason, count] : now) {
    uint64_t& before = (*logged)[reason];
    if (count > before) parts.push_back(absl::StrCat(count - before, " ", reason));
    before = count;
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

Daemon::DropCounts Daemon::DroppedOnProbePort() const {
  DropCounts out;
  if (!responder_) return out;
  const probe::ResponderCounters& c = responder_->counters();
  AddMalformed(c.malformed, &out);
  // A well-formed reply sent to our probe port: we answer requests only.
  AddIfAny("reply_sent_to_a_parent", c.unexpected_type.load(), &out);
  AddIfAny("receive_buffer_full", c.receive_buffer_drops.load(), &out);
  // Over its source host's budget (probe/source_rate_limiter.h).
  AddIfAny("rate_limited", c.rate_limited.load(), &out);
  AddIfAny("delay_queue_full", c.delay_queue_drops.load(), &out);
  return out;
}

Daemon::DropCounts Daemon::DroppedFromParent() const {
  DropCounts out = dropped_from_earlier_parents_;
  if (!requester_) return out;
  const probe::RequesterCounters& c = requester_->counters();
  AddMalformed(c.malformed, &out);
  AddIfAny("request_from_the_parent", c.unexpected_type.load(), &out);
  AddIfAny("duplicate", c.duplicate.load(), &out);
  AddIfAny("unknown", c.unknown.load(), &out);
  AddIfAny("late", c.late.load(), &out);
  AddIfAny("echo_mismatch", c.echo_mismatch.load(), &out);
  AddIfAny("receive_buffer_full", c.receive_buffer_drops.load(), &out);
  AddIfAny("delay_queue_full", c.delay_queue_drops.load(), &out);
  return out;
}

void Daemon::LogDroppedProbes() {
  const std::string on_port =
      Growth(DroppedOnProbePort(), &logged_drops_on_probe_port_);
  if (!on_port.empty()) {
    spdlog::warn("{}: dropped probes on the probe port: {}", config_.node_id,
                 on_port);
  }
  const std::string from_parent =
      Growth(DroppedFromParent(), &logged_drops_from_parent_);
  if (!from_parent.empty()) {
    spdlog::warn("{}: dropped probe replies from the parent: {}",
                 config_.node_id, from_parent);
  }
}

absl::Status Daemon::WriteStatusFile(const std::string& path,
                                     const std::string& text) {
  // Written aside and renamed: a reader never sees half a file.
  return WriteFileAtomically(path, text);
}

void Daemon::MaybeUpdateTsc(int64_t raw_ns) {
  if (!tsc_calibrator_ || raw_ns < next_tsc_raw_ns_) return;
  next_tsc_raw_ns_ = raw_ns + 1'000'000'000;
  const TscValues v = tsc_calibrator_->Update();
  const absl::Status published = publisher_->PublishTsc(v);
  if (!published.ok()) return;
  const bool valid = v.max_ticks > 0;
  tsc_published_error_ns_ = valid ? v.error_ns : -1;
  if (valid && !tsc_published_valid_) {
    spdlog::info("{}: TSC mapping published for clients (error {} ns)",
                 config_.node_id, v.error_ns);
  } else if (!valid && tsc_published_valid_) {
    spdlog::warn("{}: TSC mapping withdrawn: {}", config_.node_id,
                 tsc_calibrator_->problem());
  }
  tsc_published_valid_ = valid;
}

std::string Daemon::TimestampingSummary() const {
  if (config_.timestamping == Timestamping::kUser) {
    return "user (timestamping=user: readings before the send calls)";
  }
  std::string summary;
  if (!delay_.enabled && responder_ != nullptr &&
      !responder_->kernel_tx_stamps()) {
    summary = "user: the kernel refused transmit stamps";
  } else if (delay_.enabled) {
    summary = "user (delay injection: the injected delay is the wire)";
  } else if (anchored_master_ || requester_ == nullptr) {
    summary = "kernel";
  } else if (!requester_->kernel_tx_stamps()) {
    summary = "user: the kernel refused transmit stamps";
  } else if (requester_->sending_version2()) {
    summary = "kernel, interleaved";
  } else {
    summary = "kernel, basic (the parent speaks probe version 1)";
  }
  if (config_.timestamping == Timestamping::kHardware) {
    absl::StrAppend(&summary, "; hardware asked: ",
                    hardware_summary_.empty() ? "no parent yet"
                                              : hardware_summary_,
                    "; kernel stamps used");
  }
  return summary;
}

void Daemon::LogSample(const probe::ProbeResult& reply, bool accepted) {
  const hull::ProbeSample& s = reply.sample;
  // The raw instant of t4: the local clock is the raw clock unless
  // modeled (truth_shm is refused with a clock model).
  const int64_t raw_t4_ns = model_ ? probe::RawNowNs() : s.t4_ns;
  const hull::TimeEstimate e = estimator_->Estimate(s.t4_ns);
  std::string truth;
  if (truth_clock_) {
    const TimeReading t = truth_clock_->At(raw_t4_ns);
    truth = absl::StrCat(",", t.global_ns);
  }
  const bool synced = e.state != hull::SyncState::kUnsynced;
  std::fprintf(sample_log_, "%lld,%lld,%lld,%lld%s,%lld,%d,%d,%d,%s,%s,%s,%s\n",
               static_cast<long long>(s.t1_ns), static_cast<long long>(s.t2_ns),
               static_cast<long long>(s.t3_ns), static_cast<long long>(s.t4_ns),
               truth.c_str(), static_cast<long long>(s.parent_bound_ns),
               reply.kernel_t1 ? 1 : 0, reply.kernel_t3 ? 1 : 0,
               accepted ? 1 : 0,
               synced ? absl::StrCat(e.global_ns).c_str() : "",
               synced ? absl::StrCat(e.earliest_ns).c_str() : "",
               synced ? absl::StrCat(e.latest_ns).c_str() : "",
               slewer_.synchronized()
                   ? absl::StrCat(slewer_.PublishedAt(raw_t4_ns)).c_str()
                   : "");
  std::fflush(sample_log_);
}


absl::Status Daemon::StartMetricsServer() {
  // The page is the snapshot the gRPC service serves too (refreshed every
  // 100 ms by the sync loop), formatted as `clocksyncctl metrics` does.
  UpdateSnapshot(probe::RawNowNs());
  metrics::HttpServerOptions options;
  options.log_name = "metrics endpoint " + config_.metrics_listen;
  metrics::HttpPage page;
  page.content_type = metrics::kExpositionContentType;
  page.body = [this] {
    NodeStatus status;
    {
      std::lock_guard<std::mutex> lock(snapshot_mu_);
      status = snapshot_;
    }
    return metrics::FormatNodeMetrics(status);
  };
  metrics_server_ = std::make_unique<metrics::HttpServer>(
      std::move(options),
      std::map<std::string, metrics::HttpPage>{{"/metrics", std::move(page)}});
  const absl::Status started = metrics_server_->Start(config_.metrics_listen);
  if (!started.ok()) return started;
  spdlog::info("{}: metrics on http://{}/metrics", config_.node_id,
               probe::JoinHostPort(probe::HostOf(config_.metrics_listen),
                                   metrics_server_->port()));
  return absl::OkStatus();
}

}  // namespace clocksync
