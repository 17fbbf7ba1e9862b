// tracer/sync_session.h: sync sessions with the master: bursts of probe
// exchanges (probe/requester.h's ProbeRequester, t1/t4 on the tracer's
// local clock) at init, finalize, Timesync() and every sync period, which
// the post-mortem corrections fit (hull/postmortem.h).
#ifndef CLOCKSYNC_TRACER_SYNC_SESSION_H_
#define CLOCKSYNC_TRACER_SYNC_SESSION_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "absl/status/status.h"
#include "probe/requester.h"
#include "trace/trace.h"
#include "tracer/local_clock.h"
#include "tracer/tracer.h"

namespace clocksync {
namespace tracer {

// Runs sessions against options.master_probe: one request at a time, each
// waited for up to sync_reply_timeout_ns, until sync_max_messages
// exchanges or sync_max_duration_ns. Warns on stderr when the master stops
// answering and when it answers again (not at every empty session).
// Thread-safe: sessions run one at a time.
class SyncSessionRunner {
 public:
  // `key`: the master's probe key, when it authenticates probes.
  SyncSessionRunner(const TracerOptions& options,
                    const std::optional<ClockModel>& model,
                    const std::optional<probe::ProbeKeys>& key);
  ~SyncSessionRunner();

  // Runs one session into *session (its kind set; its exchanges empty when
  // the master did not answer). Unavailable, naming the master, when no
  // exchange succeeded.
  absl::Status Run(trace::SyncSessionKind kind, trace::SyncSession* session);

 private:
  // The probe requester's view of the local clock.
  class ProbeClock final : public probe::LocalClock {
   public:
    explicit ProbeClock(const std::optional<ClockModel>& model)
        : clock_(model) {}
    int64_t LocalAt(int64_t raw_ns) override { return clock_.At(raw_ns); }

   private:
    tracer::LocalClock clock_;  // not probe::LocalClock, the base
  };

  absl::Status RunLocked(trace::SyncSession* session);
  absl::Status Unreachable(const std::string& why) const;

  const TracerOptions options_;
  const std::optional<probe::ProbeKeys> key_;
  std::mutex mutex_;  // the members below
  ProbeClock clock_;
  std::unique_ptr<probe::ProbeRequester> requester_;  // created at first use
  bool master_reachable_ = true;
  uint64_t sessions_run_ = 0;
};

}  // namespace tracer
}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_SYNC_SESSION_H_
