// probe/raw_clock.cc: raw clock reads and the late-biased
// CLOCK_REALTIME → CLOCK_MONOTONIC_RAW conversion (see raw_clock.h).

#include "probe/raw_clock.h"

#include <time.h>

#include <cstdint>

namespace clocksync::probe {
namespace {

int64_t ReadClockNs(clockid_t clock_id) {
  struct timespec ts;
  clock_gettime(clock_id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

int64_t RawNowNs() { return ReadClockNs(CLOCK_MONOTONIC_RAW); }

int64_t RealtimeNowNs() { return ReadClockNs(CLOCK_REALTIME); }

RealtimeToRaw::RealtimeToRaw(int sandwiches)
    : sandwiches_(sandwiches < 1 ? 1 : sandwiches) {
  Calibrate();
}

void RealtimeToRaw::Calibrate() {
  int64_t best_width_ns = -1;
  for (int i = 0; i < sandwiches_; ++i) {
    const int64_t before_ns = RawNowNs();
    const int64_t realtime_ns = RealtimeNowNs();
    const int64_t after_ns = RawNowNs();
    const int64_t width_ns = after_ns - before_ns;
    if (best_width_ns < 0 || width_ns < best_width_ns) {
      best_width_ns = width_ns;
      raw_before_ns_ = before_ns;
      realtime_ns_ = realtime_ns;
      raw_after_ns_ = after_ns;
    }
  }
}

bool RealtimeToRaw::MaybeRecalibrate(int64_t raw_now_ns, int64_t max_age_ns) {
  if (raw_now_ns - raw_after_ns_ <= max_age_ns) return false;
  Calibrate();
  return true;
}

int64_t RealtimeToRaw::ToRaw(int64_t realtime_ns) const {
  // The realtime reading happened no later than raw_after_ns_. Moving by the
  // realtime distance, plus the largest rate difference on top, keeps the
  // result no earlier than the true raw time. Absurd inputs (distances that
  // overflow) saturate to the latest time, which callers clamp.
  int64_t distance_ns = 0;
  if (__builtin_sub_overflow(realtime_ns, realtime_ns_, &distance_ns) ||
      distance_ns == INT64_MIN) {
    return INT64_MAX;
  }
  const int64_t magnitude_ns = distance_ns < 0 ? -distance_ns : distance_ns;
  const int64_t rate_margin_ns =
      magnitude_ns / (1'000'000 / kMaxRateDiffPpm) + 1;
  int64_t raw_ns = 0;
  if (__builtin_add_overflow(raw_after_ns_, distance_ns, &raw_ns) ||
      __builtin_add_overflow(raw_ns, rate_margin_ns, &raw_ns)) {
    return INT64_MAX;
  }
  return raw_ns;
}

int64_t RealtimeToRaw::ToRawEarly(int64_t realtime_ns) const {
  // Mirror of ToRaw: the realtime reading happened no earlier than
  // raw_before_ns_; moving by the distance, minus the largest rate
  // difference, keeps the result no later than the true raw time. Absurd
  // inputs saturate to the earliest time, which callers clamp.
  int64_t distance_ns = 0;
  if (__builtin_sub_overflow(realtime_ns, realtime_ns_, &distance_ns) ||
      distance_ns == INT64_MIN) {
    return INT64_MIN;
  }
  const int64_t magnitude_ns = distance_ns < 0 ? -distance_ns : distance_ns;
  const int64_t rate_margin_ns =
      magnitude_ns / (1'000'000 / kMaxRateDiffPpm) + 1;
  int64_t raw_ns = 0;
  if (__builtin_add_overflow(raw_before_ns_, distance_ns, &raw_ns) ||
      __builtin_sub_overflow(raw_ns, rate_margin_ns, &raw_ns)) {
    return INT64_MIN;
  }
  return raw_ns;
}

int64_t RealtimeToRaw::ToRawCentered(int64_t realtime_ns,
                                     int64_t* uncertainty_ns) const {
  const int64_t early_ns = ToRawEarly(realtime_ns);
  const int64_t late_ns = ToRaw(realtime_ns);
  if (early_ns == INT64_MIN || late_ns == INT64_MAX) {
    *uncertainty_ns = INT64_MAX;
    return late_ns == INT64_MAX ? early_ns : late_ns;
  }
  const int64_t half_ns = (late_ns - early_ns + 1) / 2;
  *uncertainty_ns = half_ns;
  return late_ns - half_ns;
}

}  // namespace clocksync::probe
