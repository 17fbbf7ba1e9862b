// clocksyncd/service_notifier.h: what the daemon tells its service manager
// (systemd's sd_notify protocol) while it runs: WATCHDOG=1 pings and a
// one-line STATUS=.
//
// The pings are driven by the sync loop: the loop calls OnLoopIteration()
// once per pass, and only that sends WATCHDOG=1 (when a ping is due). A loop
// that hangs (a blocked write, a deadlock) stops pinging and systemd
// restarts the daemon after WatchdogSec=; a healthy loop pings every
// ping_period_ns = watchdog / 4, so even with a pass up to a quarter of the
// watchdog late the gap stays within half of it. The loop must therefore
// pass at least every NsUntilPing() (clocksyncd's loops wake every 50 to
// 100 ms whatever the probe interval).
//
// STATUS= says the state, the error bound, the parent and the depth:
//   "synchronized, bound 1.2 µs, parent n3 (10.0.0.3:3190), depth 2"
// It is sent at once when the state, the parent or the depth changes, and
// otherwise at most every kStatusRefreshNs when only the bound moved (not
// per probe: systemd keeps every message).
//
// Pure logic: time comes in as arguments and messages go out through the
// Sender given; FromEnvironment() makes the real one (sd_notify, the
// watchdog interval from sd_watchdog_enabled()).
//
// Thread safety: one caller at a time (the sync loop).

#ifndef CLOCKSYNC_CLOCKSYNCD_SERVICE_NOTIFIER_H_
#define CLOCKSYNC_CLOCKSYNCD_SERVICE_NOTIFIER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/functional/function_ref.h"

namespace clocksync {

// The node as STATUS= describes it.
struct ServiceStatus {
  enum class State { kUnsynchronized, kSynchronized, kRecovering, kHoldover };
  State state = State::kUnsynchronized;
  bool master = false;
  // Half-width of the published bound, ns (meaningless when unsynchronized).
  int64_t bound_ns = 0;
  // The parent's node id (empty when unknown: a pinned parent) and probe
  // address (empty: no parent now).
  std::string parent_id;
  std::string parent_address;
  uint32_t depth = 0;
  friend bool operator==(const ServiceStatus&, const ServiceStatus&) = default;
};

// "synchronized, bound 1.2 µs, parent n3 (10.0.0.3:3190), depth 2";
// "synchronized, master (its clock is global time)"; "unsynchronized, no
// parent yet"; "holdover, bound 35.0 µs, no parent (rejoining), depth 2".
std::string FormatServiceStatus(const ServiceStatus& status);
// 850 ns, 1.2 µs, 35.0 µs, 1.5 ms, 2.00 s.
std::string FormatBound(int64_t bound_ns);

class ServiceNotifier {
 public:
  // Sends one sd_notify message ("WATCHDOG=1", "STATUS=...").
  using Sender = std::function<void(const std::string& message)>;

  // Without the status line, STATUS= is refreshed at most this often.
  static constexpr int64_t kStatusRefreshNs = 5'000'000'000;
  // The status is looked at this often (the callback builds it).
  static constexpr int64_t kStatusPollNs = 500'000'000;

  // watchdog_ns: systemd's WatchdogSec (0: no watchdog, no pings).
  // status: whether to send STATUS= at all. An empty `send` sends nothing.
  ServiceNotifier(Sender send, int64_t watchdog_ns, bool status);
  // Disabled: no service manager listening.
  ServiceNotifier() : ServiceNotifier(nullptr, 0, false) {}

  // Under systemd (NOTIFY_SOCKET set): sd_notify, with the watchdog
  // interval sd_watchdog_enabled() reports (WATCHDOG_USEC, WATCHDOG_PID).
  // Elsewhere: disabled.
  static ServiceNotifier FromEnvironment();

  bool enabled() const { return static_cast<bool>(send_); }
  int64_t watchdog_ns() const { return watchdog_ns_; }
  int64_t ping_period_ns() const { return watchdog_ns_ / 4; }

  // One pass of the sync loop at raw instant `raw_ns`: pings the watchdog
  // when due and refreshes STATUS= (calling `status` at most every
  // kStatusPollNs).
  void OnLoopIteration(int64_t raw_ns,
                       absl::FunctionRef<ServiceStatus()> status);
  // How long the loop may sleep from `raw_ns` before the next ping is due;
  // INT64_MAX without a watchdog.
  int64_t NsUntilPing(int64_t raw_ns) const;
  // The next OnLoopIteration() sends STATUS= whatever changed (after a
  // reload, say).
  void ForceStatus() { force_status_ = true; }

 private:
  Sender send_;
  int64_t watchdog_ns_ = 0;
  bool status_ = false;
  bool pinged_ = false;
  int64_t last_ping_raw_ns_ = 0;
  bool status_sent_ = false;
  bool force_status_ = false;
  int64_t next_status_poll_raw_ns_ = 0;
  int64_t last_status_raw_ns_ = 0;
  ServiceStatus last_status_;
  std::string last_status_text_;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_SERVICE_NOTIFIER_H_
