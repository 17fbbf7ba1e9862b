// tracer/sync_session.cc: running one sync session with the master
// (sync_session.h).

#include "tracer/sync_session.h"

#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/clock.h"
#include "tracer/options.h"
#include "tracer/warn.h"

namespace clocksync {
namespace tracer {

SyncSessionRunner::SyncSessionRunner(const TracerOptions& options,
                                     const std::optional<ClockModel>& model,
                                     const std::optional<probe::ProbeKeys>& key)
    : options_(options), key_(key), clock_(model) {}

SyncSessionRunner::~SyncSessionRunner() = default;

absl::Status SyncSessionRunner::Run(trace::SyncSessionKind kind,
                                    trace::SyncSession* session) {
  std::lock_guard<std::mutex> lock(mutex_);
  session->kind = kind;
  session->exchanges.clear();
  absl::Status status = RunLocked(session);
  if (!status.ok()) {
    // Warn when the master goes away, not at every periodic session.
    if (master_reachable_) {
      Warn(absl::StrCat(status.message(), "; kind ",
                        trace::SyncSessionKindName(kind),
                        ": empty session recorded"));
    }
    master_reachable_ = false;
  } else {
    if (!master_reachable_ && sessions_run_ > 0) {
      Warn(absl::StrCat("master ", options_.master_probe, " answers again"));
    }
    master_reachable_ = true;
  }
  ++sessions_run_;
  return status;
}

absl::Status SyncSessionRunner::RunLocked(trace::SyncSession* session) {
  if (options_.sync_max_messages <= 0) return absl::OkStatus();
  if (requester_ == nullptr) {
    probe::ProbeRequester::Options requester_options;
    requester_options.parent_address = options_.master_probe;
    requester_options.node_id = static_cast<uint64_t>(getpid());
    requester_options.clock = &clock_;
    requester_options.expiry_ns = options_.sync_reply_timeout_ns;
    requester_options.key = key_;
    absl::StatusOr<std::unique_ptr<probe::ProbeRequester>> requester =
        probe::ProbeRequester::Create(requester_options);
    if (!requester.ok()) return Unreachable(requester.status().ToString());
    requester_ = std::move(*requester);
  }
  const int64_t start_ns = Clock::RawNowNs();
  const int64_t deadline_ns = start_ns + options_.sync_max_duration_ns;
  int consecutive_failures = 0;
  bool answered_any = false;
  std::string last_problem = "no reply";
  const auto add_exchange = [&](const probe::ProbeResult& result) {
    hull::ProbeSample exchange = result.sample;
    exchange.parent_bound_ns = 0;  // the master
    session->exchanges.push_back(exchange);
  };
  for (int32_t sent = 0; sent < options_.sync_max_messages; ++sent) {
    const int64_t sent_ns = Clock::RawNowNs();
    if (sent_ns >= deadline_ns) break;
    bool answered = false;
    if (absl::Status status = requester_->SendProbe(); !status.ok()) {
      last_problem = status.ToString();
    } else {
      const int64_t wait_until_ns =
          std::min(deadline_ns, sent_ns + options_.sync_reply_timeout_ns);
      // Interleaved: a reply delivers the previous exchange (with the
      // master's kernel transmit stamp), so "answered" is the reply itself.
      const uint64_t answered_before = requester_->counters().answered.load();
      while (!answered) {
        const int64_t left_ns = wait_until_ns - Clock::RawNowNs();
        if (left_ns <= 0) break;
        const int timeout_ms = static_cast<int>(
            std::max<int64_t>(1, (left_ns + kNsPerMs - 1) / kNsPerMs));
        absl::StatusOr<int> delivered =
            requester_->Poll(timeout_ms, add_exchange);
        if (!delivered.ok()) {
          last_problem = delivered.status().ToString();
          break;
        }
        answered = requester_->counters().answered.load() > answered_before;
      }
    }
    // A master that does not answer three requests in a row is not there:
    // do not spend the whole session waiting for it.
    consecutive_failures = answered ? 0 : consecutive_failures + 1;
    answered_any = answered_any || answered;
    if (consecutive_failures >= 3 && !answered_any) break;
  }
  // The last exchange, held for a transmit stamp no further reply brings.
  requester_->Flush(add_exchange);
  if (session->exchanges.empty()) return Unreachable(last_problem);
  return absl::OkStatus();
}

absl::Status SyncSessionRunner::Unreachable(const std::string& why) const {
  return absl::UnavailableError(
      absl::StrCat("sync session: master ", options_.master_probe,
                   " unreachable (", why, ")"));
}

}  // namespace tracer
}  // namespace clocksync
