// hull/trace_stamp.cc: the 51+13-bit stamper, stamp conversions and the
// order-keeping local-to-global stamp converter (see trace_stamp.h).

#include "hull/trace_stamp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/base/internal/raw_logging.h"

namespace clocksync::hull {
namespace {

constexpr uint64_t kMaxStamp = PackStamp(kStampMaxTick, kStampMaxEvent);

// a + b, saturated to the int64_t range.
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b < 0 ? std::numeric_limits<int64_t>::min()
                 : std::numeric_limits<int64_t>::max();
  }
  return sum;
}

}  // namespace

double StampToSeconds(uint64_t stamp, double tick_period_s) {
  // The tick has at most 51 bits: exact in a double.
  return static_cast<double>(StampTick(stamp)) * tick_period_s;
}

double StampToSecondsLegacy(uint64_t stamp, double tick_period_s) {
  return static_cast<double>(stamp) *
         std::ldexp(tick_period_s, -kStampEventBits);
}

int64_t StampClock::TickToNs(uint64_t tick) const {
  // long double: 64-bit mantissa, exact for 51-bit ticks times the period
  // to well below a ns. Clamped so that the conversion stays defined.
  const long double offset = std::min<long double>(
      std::round(static_cast<long double>(tick) * tick_period_ns), 9.2e18L);
  return SaturatingAdd(origin_ns, static_cast<int64_t>(offset));
}

uint64_t StampClock::NsToTick(int64_t time_ns, bool* clamped) const {
  const long double ticks = std::floor(
      static_cast<long double>(static_cast<__int128>(time_ns) - origin_ns) /
      tick_period_ns);
  bool out_of_range = false;
  uint64_t tick;
  if (ticks < 0) {
    tick = 0;
    out_of_range = true;
  } else if (ticks > static_cast<long double>(kStampMaxTick)) {
    tick = kStampMaxTick;
    out_of_range = true;
  } else {
    tick = static_cast<uint64_t>(ticks);
  }
  if (clamped != nullptr) *clamped = out_of_range;
  return tick;
}

uint64_t TraceStamper::Stamp(uint64_t clock_tick) {
  if (clock_tick > kStampMaxTick) {
    overflowed_ = true;
    clock_tick = kStampMaxTick;
  }
  if (started_ && clock_tick < last_tick_) ++backward_ticks_;
  last_tick_ = clock_tick;
  uint64_t stamp = PackStamp(clock_tick, 0);
  if (started_ && stamp <= last_stamp_) {
    // Same (or an earlier) tick: the next event number. +1 on the word
    // carries into the tick when the counter is full.
    if (last_stamp_ == kMaxStamp) {
      overflowed_ = true;
      stamp = kMaxStamp;
    } else {
      stamp = last_stamp_ + 1;
      if (StampEvent(stamp) == 0) ++artificial_ticks_;
    }
  }
  max_event_count_ = std::max(max_event_count_, StampEvent(stamp));
  last_stamp_ = stamp;
  started_ = true;
  return stamp;
}

int64_t ChooseGlobalTickPeriodNs(double local_tick_period_ns, double min_rate) {
  const double limit = local_tick_period_ns * min_rate;
  int64_t best = 1;
  // 1, 2, 5, 10, 20, 50, ... up to the limit (and far from overflow).
  for (int64_t decade = 1; decade <= 1'000'000'000'000; decade *= 10) {
    for (int64_t step : {1, 2, 5}) {
      if (static_cast<double>(decade * step) <= limit) best = decade * step;
    }
  }
  return best;
}

GlobalStampConverter::GlobalStampConverter(const Correction& correction,
                                           StampClock local, StampClock global)
    : correction_(correction), local_(local), global_(global) {
  ABSL_RAW_CHECK(local_.tick_period_ns > 0 && global_.tick_period_ns > 0,
                 "GlobalStampConverter: tick periods must be positive");
}

uint64_t GlobalStampConverter::Finish(uint64_t local_stamp, int64_t global_ns) {
  if (started_ && local_stamp <= last_local_) ++unordered_inputs_;
  bool clamped = false;
  const uint64_t tick = global_.NsToTick(global_ns, &clamped);
  if (clamped) ++clamped_;
  uint64_t stamp = PackStamp(tick, 0);
  if (started_ && stamp <= last_global_) {
    // At or below the previous stamp: just above it (the next event number
    // on its tick, or the next tick when the counter is full).
    if (last_global_ == kMaxStamp) {
      ++clamped_;
      stamp = kMaxStamp;
    } else {
      stamp = last_global_ + 1;
    }
    if (StampTick(stamp) > tick) {
      ++raised_;
      max_raise_ticks_ = std::max(max_raise_ticks_, StampTick(stamp) - tick);
    }
  }
  started_ = true;
  last_local_ = local_stamp;
  last_global_ = stamp;
  return stamp;
}

uint64_t GlobalStampConverter::Convert(uint64_t local_stamp) {
  const int64_t local_ns = local_.TickToNs(StampTick(local_stamp));
  return Finish(local_stamp, correction_.ToGlobalNs(local_ns));
}

void GlobalStampConverter::ConvertAll(absl::Span<const uint64_t> local_stamps,
                                      absl::Span<uint64_t> global_stamps) {
  ABSL_RAW_CHECK(local_stamps.size() == global_stamps.size(),
                 "ConvertAll: input and output sizes differ");
  constexpr size_t kChunk = 4096;
  std::vector<int64_t> local_ns(std::min(kChunk, local_stamps.size()));
  std::vector<int64_t> global_ns(local_ns.size());
  for (size_t begin = 0; begin < local_stamps.size(); begin += kChunk) {
    const size_t n = std::min(kChunk, local_stamps.size() - begin);
    for (size_t i = 0; i < n; ++i) {
      local_ns[i] = local_.TickToNs(StampTick(local_stamps[begin + i]));
    }
    correction_.ToGlobalSorted(absl::MakeConstSpan(local_ns.data(), n),
                               absl::MakeSpan(global_ns.data(), n));
    for (size_t i = 0; i < n; ++i) {
      global_stamps[begin + i] = Finish(local_stamps[begin + i], global_ns[i]);
    }
  }
}

}  // namespace clocksync::hull
