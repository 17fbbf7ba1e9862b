// probe/raw_clock.h: the daemon's raw clock (CLOCK_MONOTONIC_RAW) and
// the conversion of kernel CLOCK_REALTIME packet timestamps into it.
//
// The kernel stamps received packets (SO_TIMESTAMPNS) with CLOCK_REALTIME,
// which NTP slews and steps; the daemon works in CLOCK_MONOTONIC_RAW, which
// nothing adjusts. RealtimeToRaw pairs the two clocks by "sandwiching": read
// raw, realtime, raw; the realtime reading happened at a raw time inside
// [raw_before, raw_after]. Of a few sandwiches it keeps the tightest.
//
// Conversion is biased LATE (ToRaw), or EARLY (ToRawEarly), on purpose: ToRaw() never returns a raw time
// earlier than the true one (within the assumptions below). For the probe
// timestamps that use it (t2 at the parent, t4 at the child), a late error
// only looks like extra network delay, which keeps the estimator's bound
// valid; an early error could break it.
//
// Error of ToRaw(realtime_ns), for a timestamp taken `age` before (or after)
// the calibration:
//   0 <= ToRaw − true raw <= sandwich_width_ns() + 2 · kMaxRateDiffPpm · age
// assuming CLOCK_REALTIME and CLOCK_MONOTONIC_RAW differ in rate by at most
// kMaxRateDiffPpm (1000 ppm: the kernel's NTP frequency range of ±500 ppm
// plus adjtime()'s 500 ppm slew) between the timestamp and the calibration,
// and that CLOCK_REALTIME is not stepped in between. The sandwich width is
// two vDSO clock reads, typically 20–60 ns. The rate term is why callers
// calibrate next to the timestamps they convert (the probe transport does so
// once per receive batch, so `age` is the packet's queueing time, µs: 1 ns
// per µs) rather than every 100 ms (NTP's typical 10–100 ppm would cost
// 1–10 µs at 100 ms). A tick-based slew faster than kMaxRateDiffPpm (chrony
// allows up to 8.3%) can make a conversion early by the excess rate times
// `age`; callers clamp results to a raw reading taken after the packet
// arrived, which bounds the late side, and fall back to that reading when a
// timestamp is implausibly old (a realtime step).
//
// Thread safety: none; one RealtimeToRaw per thread (each is small).
#ifndef CLOCKSYNC_PROBE_RAW_CLOCK_H_
#define CLOCKSYNC_PROBE_RAW_CLOCK_H_

#include <cstdint>

namespace clocksync::probe {

// CLOCK_MONOTONIC_RAW now, ns (vDSO; no system call on x86-64 Linux).
int64_t RawNowNs();

// CLOCK_REALTIME now, ns since the Unix epoch.
int64_t RealtimeNowNs();

class RealtimeToRaw {
 public:
  // Largest rate difference between CLOCK_REALTIME and CLOCK_MONOTONIC_RAW
  // that the late bias covers, ppm.
  static constexpr int64_t kMaxRateDiffPpm = 1000;
  // Sandwiches per Calibrate() by default.
  static constexpr int kDefaultSandwiches = 3;

  // Calibrates once. `sandwiches` >= 1 (smaller values are treated as 1).
  explicit RealtimeToRaw(int sandwiches = kDefaultSandwiches);

  // Takes `sandwiches` (raw, realtime, raw) readings and keeps the one with
  // the smallest raw_after − raw_before. Costs 3 clock reads per sandwich.
  void Calibrate();

  // Calibrates when the current calibration is older than `max_age_ns` at
  // raw time `raw_now_ns`. Returns true when it did.
  bool MaybeRecalibrate(int64_t raw_now_ns, int64_t max_age_ns);

  // Raw time of the CLOCK_REALTIME instant `realtime_ns`, biased late (see
  // the file comment for the error).
  int64_t ToRaw(int64_t realtime_ns) const;
  // The same, biased EARLY: never later than the true raw time, by at most
  // the same error. For transmit stamps (t1 at the child, t3 at the parent),
  // where an early error only looks like extra network delay.
  int64_t ToRawEarly(int64_t realtime_ns) const;

  // The middle of [ToRawEarly, ToRaw] and, in *uncertainty_ns, how far the
  // true raw time may be from it either way (half that range, rounded up).
  // Unbiased where the one-sided conversions are biased by the rate margin
  // (1000 ppm of the stamp's age: 100 ns for a receiver that woke up 100 µs
  // after its packet came).
  int64_t ToRawCentered(int64_t realtime_ns, int64_t* uncertainty_ns) const;
  // Width of the kept sandwich, ns (the conversion's error at age 0).
  int64_t sandwich_width_ns() const { return raw_after_ns_ - raw_before_ns_; }
  // Raw time at the end of the kept sandwich, ns.
  int64_t calibrated_raw_ns() const { return raw_after_ns_; }
  // CLOCK_REALTIME − CLOCK_MONOTONIC_RAW at the calibration, ns (taking the
  // late end of the sandwich).
  int64_t offset_ns() const { return realtime_ns_ - raw_after_ns_; }

 private:
  int sandwiches_;
  int64_t raw_before_ns_ = 0;
  int64_t realtime_ns_ = 0;
  int64_t raw_after_ns_ = 0;
};

}  // namespace clocksync::probe

#endif  // CLOCKSYNC_PROBE_RAW_CLOCK_H_
