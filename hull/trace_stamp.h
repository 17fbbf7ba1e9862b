// hull/trace_stamp.h: 64-bit trace timestamps in the Intel Trace Collector
// layout, and their conversion to seconds and to global time.
//
// A stamp holds a clock tick in its high 51 bits and an event counter in its
// low 13 bits:
//
//   63                                              13 12          0
//   +-------------------------------------------------+-------------+
//   |                 clock tick (51)                 |  event (13) |
//   +-------------------------------------------------+-------------+
//
// so that events on one tick stay unique and ordered. TraceStamper makes
// such stamps from a stream of clock ticks; GlobalStampConverter rewrites a
// process's stamps on the global timescale through a Correction without
// ever swapping or merging two events. Pure math: no clock is read.

#ifndef CLOCKSYNC_HULL_TRACE_STAMP_H_
#define CLOCKSYNC_HULL_TRACE_STAMP_H_

#include <cstdint>

#include "absl/types/span.h"
#include "hull/postmortem.h"

namespace clocksync::hull {

inline constexpr int kStampEventBits = 13;
inline constexpr int kStampTickBits = 64 - kStampEventBits;  // 51
inline constexpr uint64_t kStampMaxEvent = (uint64_t{1} << kStampEventBits) - 1;
inline constexpr uint64_t kStampMaxTick = (uint64_t{1} << kStampTickBits) - 1;

// The stamp of event number `event` (<= kStampMaxEvent) on `tick`
// (<= kStampMaxTick).
constexpr uint64_t PackStamp(uint64_t tick, uint64_t event) {
  return (tick << kStampEventBits) | (event & kStampMaxEvent);
}
constexpr uint64_t StampTick(uint64_t stamp) {
  return stamp >> kStampEventBits;
}
constexpr uint64_t StampEvent(uint64_t stamp) { return stamp & kStampMaxEvent; }

// Seconds since the clock's origin: the tick times the nominal clock period.
// The event counter orders events within a tick; it is not time.
double StampToSeconds(uint64_t stamp, double tick_period_s);

// The legacy approximation: the raw 64-bit word times period · 2^-13. It
// places event c of a tick c/8192 of a tick late (up to a whole tick), and
// rounds the word to a double's 53 bits (1/8 tick for ticks near 2^50).
// Kept to show and test the difference; use StampToSeconds.
double StampToSecondsLegacy(uint64_t stamp, double tick_period_s);

// Ties a stamp's ticks to ns on some clock: tick t is at
// origin_ns + t · tick_period_ns.
struct StampClock {
  int64_t origin_ns = 0;
  double tick_period_ns = 1.0;  // > 0

  // The time of `tick`, rounded to the nearest ns. Non-decreasing in tick.
  int64_t TickToNs(uint64_t tick) const;
  // The tick containing `time_ns` (floor), clamped to [0, kStampMaxTick];
  // sets *clamped when clamping happened (if clamped is not null).
  // Non-decreasing in time_ns.
  uint64_t NsToTick(int64_t time_ns, bool* clamped = nullptr) const;
};

// Turns a stream of clock ticks into unique, strictly increasing stamps:
// - a tick above the last stamp's tick gets event number 0;
// - an equal (or earlier) tick gets the next event number on the last
//   stamp's tick;
// - when the event number would pass kStampMaxEvent, the tick advances
//   artificially by one (the +1 on the 64-bit word carries into the tick).
// A non-zero max_event_count() means the clock resolution was too coarse for
// the event rate. Not thread-safe: one stamper per event stream.
//
// Example:
//   TraceStamper stamper;
//   uint64_t a = stamper.Stamp(1000);  // PackStamp(1000, 0)
//   uint64_t b = stamper.Stamp(1000);  // PackStamp(1000, 1)
class TraceStamper {
 public:
  // The stamp for an event at `clock_tick` (ticks of the trace clock since
  // its origin). Ticks above kStampMaxTick are clamped and set overflowed().
  uint64_t Stamp(uint64_t clock_tick);

  // The largest event number given (0 if no two events shared a tick).
  uint64_t max_event_count() const { return max_event_count_; }
  // How often an event counter overflow advanced the tick artificially.
  uint64_t artificial_ticks() const { return artificial_ticks_; }
  // Inputs below the previous input: the clock went backwards.
  uint64_t backward_ticks() const { return backward_ticks_; }
  // A tick beyond kStampMaxTick was given, or the last possible stamp was
  // reached: from then on stamps may repeat.
  bool overflowed() const { return overflowed_; }

 private:
  bool started_ = false;
  uint64_t last_stamp_ = 0;
  uint64_t last_tick_ = 0;  // last input
  uint64_t max_event_count_ = 0;
  uint64_t artificial_ticks_ = 0;
  uint64_t backward_ticks_ = 0;
  bool overflowed_ = false;
};

// A global tick period fine enough for a correction: the largest of
// 1, 2, 5, 10, 20, 50, ... ns that is at most local_tick_period_ns ·
// min_rate (and at least 1 ns, the corrections' resolution). Two local
// ticks then stay at least one global tick apart (up to ns rounding), so the
// event counter only carries events that already shared a local tick.
int64_t ChooseGlobalTickPeriodNs(double local_tick_period_ns, double min_rate);

// Rewrites one process's stamps on the global timescale:
//   local stamp -> local ns (local clock) -> Correction -> global ns
//   -> global tick (global clock) -> global stamp,
// raising a stamp just above the previous one whenever it would not be
// above it. So stamps given in increasing order come out strictly
// increasing: two events ordered locally are never swapped or merged,
// whatever the correction does (a coarse global tick, a correction that
// rounds two times together, even a non-monotonic one). Not thread-safe: one
// converter per process stream. `correction` must outlive the converter.
//
// Example:
//   const StampClock global{origin_ns, static_cast<double>(
//       ChooseGlobalTickPeriodNs(local.tick_period_ns, spline->MinRate()))};
//   GlobalStampConverter converter(*spline, local, global);
//   converter.ConvertAll(local_stamps, absl::MakeSpan(global_stamps));
class GlobalStampConverter {
 public:
  GlobalStampConverter(const Correction& correction, StampClock local,
                       StampClock global);

  // The global stamp of the next local stamp of the stream.
  uint64_t Convert(uint64_t local_stamp);
  // Converts the next stamps of the stream: the same as Convert on each in
  // turn, faster (one batched correction call). Sizes must match.
  void ConvertAll(absl::Span<const uint64_t> local_stamps,
                  absl::Span<uint64_t> global_stamps);

  // Stamps that had to move to a later global tick than their time's to stay
  // above their predecessor (more than kStampMaxEvent + 1 events on a tick).
  uint64_t raised() const { return raised_; }
  // The largest such move, in global ticks.
  uint64_t max_raise_ticks() const { return max_raise_ticks_; }
  // Local stamps not above the previous one (the input was out of order).
  uint64_t unordered_inputs() const { return unordered_inputs_; }
  // Global times outside the global stamp range [origin, origin + 2^51
  // ticks), clamped to it.
  uint64_t clamped() const { return clamped_; }

 private:
  // Orders and records a stamp for the local stamp `local_stamp` at global
  // time `global_ns`.
  uint64_t Finish(uint64_t local_stamp, int64_t global_ns);

  const Correction& correction_;
  StampClock local_;
  StampClock global_;
  bool started_ = false;
  uint64_t last_local_ = 0;
  uint64_t last_global_ = 0;
  uint64_t raised_ = 0;
  uint64_t max_raise_ticks_ = 0;
  uint64_t unordered_inputs_ = 0;
  uint64_t clamped_ = 0;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_TRACE_STAMP_H_
