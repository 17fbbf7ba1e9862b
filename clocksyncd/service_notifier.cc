// clocksyncd/service_notifier.cc: ServiceNotifier: see service_notifier.h.

#include "clocksyncd/service_notifier.h"

#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "systemd/sd-daemon.h"

namespace clocksync {
namespace {

const char* StateWord(ServiceStatus::State state) {
  switch (state) {
    case ServiceStatus::State::kSynchronized:
      return "synchronized";
    case ServiceStatus::State::kRecovering:
      return "recovering";
    case ServiceStatus::State::kHoldover:
      return "holdover";
    case ServiceStatus::State::kUnsynchronized:
      break;
  }
  return "unsynchronized";
}

// What makes a new STATUS= worth sending at once: all but the bound.
bool SameHeadline(const ServiceStatus& a, const ServiceStatus& b) {
  return a.state == b.state && a.master == b.master &&
         a.parent_id == b.parent_id && a.parent_address == b.parent_address &&
         a.depth == b.depth;
}

}  // namespace

std::string FormatBound(int64_t bound_ns) {
  if (bound_ns < 1'000) return absl::StrCat(bound_ns, " ns");
  if (bound_ns < 1'000'000) return absl::StrFormat("%.1f µs", bound_ns * 1e-3);
  if (bound_ns < 1'000'000'000) return absl::StrFormat("%.1f ms", bound_ns * 1e-6);
  return absl::StrFormat("%.2f s", bound_ns * 1e-9);
}

std::string FormatServiceStatus(const ServiceStatus& s) {
  std::string out = StateWord(s.state);
  if (s.master) {
    absl::StrAppend(&out, ", master (its clock is global time)");
    return out;
  }
  if (s.state != ServiceStatus::State::kUnsynchronized) {
    absl::StrAppend(&out, ", bound ", FormatBound(s.bound_ns));
  }
  if (s.parent_address.empty()) {
    // Never had one, or lost it and rejoining.
    absl::StrAppend(&out, s.state == ServiceStatus::State::kUnsynchronized
                              ? ", no parent yet"
                              : ", no parent (rejoining)");
    if (s.state == ServiceStatus::State::kUnsynchronized) return out;
  } else if (s.parent_id.empty()) {
    absl::StrAppend(&out, ", parent ", s.parent_address);
  } else {
    absl::StrAppend(&out, ", parent ", s.parent_id, " (", s.parent_address, ")");
  }
  absl::StrAppend(&out, ", depth ", s.depth);
  return out;
}

ServiceNotifier::ServiceNotifier(Sender send, int64_t watchdog_ns, bool status)
    : send_(std::move(send)),
      watchdog_ns_(send_ ? watchdog_ns : 0),
      status_(send_ && status) {}

ServiceNotifier ServiceNotifier::FromEnvironment() {
  if (std::getenv("NOTIFY_SOCKET") == nullptr) return ServiceNotifier();
  uint64_t watchdog_us = 0;
  // > 0: WATCHDOG_USEC is set (and WATCHDOG_PID, if set, is ours).
  if (sd_watchdog_enabled(/*unset_environment=*/0, &watchdog_us) <= 0) {
    watchdog_us = 0;
  }
  return ServiceNotifier(
      [](const std::string& message) { sd_notify(0, message.c_str()); },
      static_cast<int64_t>(watchdog_us) * 1000, /*status=*/true);
}

void ServiceNotifier::OnLoopIteration(
    int64_t raw_ns, absl::FunctionRef<ServiceStatus()> status) {
  if (!send_) return;
  if (watchdog_ns_ > 0 &&
      (!pinged_ || raw_ns - last_ping_raw_ns_ >= ping_period_ns())) {
    send_("WATCHDOG=1");
    pinged_ = true;
    last_ping_raw_ns_ = raw_ns;
  }
  if (!status_ || (!force_status_ && raw_ns < next_status_poll_raw_ns_)) return;
  next_status_poll_raw_ns_ = raw_ns + kStatusPollNs;
  const ServiceStatus now = status();
  const std::string text = FormatServiceStatus(now);
  const bool send =
      !status_sent_ || force_status_ || !SameHeadline(now, last_status_) ||
      (text != last_status_text_ && raw_ns - last_status_raw_ns_ >= kStatusRefreshNs);
  if (!send) return;
  send_("STATUS=" + text);
  status_sent_ = true;
  force_status_ = false;
  last_status_raw_ns_ = raw_ns;
  last_status_ = now;
  last_status_text_ = text;
}

int64_t ServiceNotifier::NsUntilPing(int64_t raw_ns) const {
  if (watchdog_ns_ <= 0) return std::numeric_limits<int64_t>::max();
  if (!pinged_) return 0;
  const int64_t left = last_ping_raw_ns_ + ping_period_ns() - raw_ns;
  return left > 0 ? left : 0;
}

}  // namespace clocksync
