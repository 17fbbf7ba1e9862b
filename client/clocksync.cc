// client/clocksync.cc: the C API (client/clocksync.h) over clocksync::Clock.

#include "client/clocksync.h"

#include <memory>
#include <new>
#include <string>
#include <utility>

#include "client/clock.h"
#include "clocksync_version.h"

// The handle owns one Clock.
struct clocksync_handle {
  clocksync::Clock clock;
};

namespace {

// Message of the last failed open on this thread.
thread_local std::string open_error;

clocksync::ClockOptions ToClockOptions(const clocksync_options& options) {
  clocksync::ClockOptions clock_options;
  clock_options.stale_limit_ns = options.stale_limit_ns;
  clock_options.stale_growth_ppb = options.stale_growth_ppb;
  clock_options.recheck_interval_ns = options.recheck_interval_ns;
  clock_options.max_read_attempts = options.max_read_attempts;
  clock_options.use_tsc = options.disable_tsc == 0;
  return clock_options;
}

// Copies a reading into *out when its time fields are meaningful.
int Deliver(const clocksync::TimeReading& reading, clocksync_time* out) {
  if (reading.error == CLOCKSYNC_OK || reading.error == CLOCKSYNC_ESTALE ||
      reading.error == CLOCKSYNC_ENOTSYNCED) {
    out->global_ns = reading.global_ns;
    out->earliest_ns = reading.earliest_ns;
    out->latest_ns = reading.latest_ns;
    out->status = reading.status;
    out->reserved = 0;
  }
  return reading.error;
}

}  // namespace

extern "C" {

void clocksync_options_init(clocksync_options* options) {
  if (options == nullptr) return;
  const clocksync::ClockOptions defaults;
  options->stale_limit_ns = defaults.stale_limit_ns;
  options->stale_growth_ppb = defaults.stale_growth_ppb;
  options->recheck_interval_ns = defaults.recheck_interval_ns;
  options->max_read_attempts = defaults.max_read_attempts;
  options->disable_tsc = defaults.use_tsc ? 0 : 1;
}

int clocksync_open(const char* path, clocksync_handle** out) {
  return clocksync_open_with_options(path, nullptr, out);
}

int clocksync_open_with_options(const char* path,
                                const clocksync_options* options,
                                clocksync_handle** out) {
  open_error.clear();
  if (out == nullptr) {
    open_error = "CLOCKSYNC_EINVAL: clocksync_open: out is NULL";
    return CLOCKSYNC_EINVAL;
  }
  *out = nullptr;
  clocksync_options effective;
  clocksync_options_init(&effective);
  if (options != nullptr) effective = *options;
  try {
    std::unique_ptr<clocksync::Clock> clock;
    const int code = clocksync::Clock::OpenWithCode(
        path != nullptr ? path : CLOCKSYNC_DEFAULT_SHM_PATH,
        ToClockOptions(effective), &clock, &open_error);
    if (code != CLOCKSYNC_OK) return code;
    *out = new clocksync_handle{std::move(*clock)};
    return CLOCKSYNC_OK;
  } catch (const std::bad_alloc&) {
    open_error = "CLOCKSYNC_ENOMEM: clocksync_open: out of memory";
    return CLOCKSYNC_ENOMEM;
  }
}

void clocksync_close(clocksync_handle* handle) { delete handle; }

int clocksync_now(const clocksync_handle* handle, clocksync_time* out) {
  if (handle == nullptr || out == nullptr) return CLOCKSYNC_EINVAL;
  return Deliver(handle->clock.Now(), out);
}

int clocksync_at(const clocksync_handle* handle, int64_t raw_ns,
                 clocksync_time* out) {
  if (handle == nullptr || out == nullptr) return CLOCKSYNC_EINVAL;
  return Deliver(handle->clock.At(raw_ns), out);
}

int64_t clocksync_raw_now_ns(void) { return clocksync::Clock::RawNowNs(); }

const char* clocksync_open_error(void) { return open_error.c_str(); }

const char* clocksync_version(void) { return CLOCKSYNC_VERSION; }

}  // extern "C"
