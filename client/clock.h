// client/clock.h: clocksync::Clock, the C++ API that reads cluster-global
// time from clocksyncd's shared-memory segment (layout: shm/shm_layout.h).
//
// Example:
//   absl::StatusOr<clocksync::Clock> clock = clocksync::Clock::Open();
//   if (!clock.ok()) { /* e.g. NotFound: no daemon publishes at the path */ }
//   clocksync::TimeReading t = clock->Now();
//   if (t.ok()) Record(t.global_ns, t.earliest_ns, t.latest_ns);
//
// Now() and At() are the hot path: inline, no system call beyond the vDSO
// clock read, no allocation, no exception, no lock. Where the daemon
// publishes a TSC mapping (x86-64 with an invariant TSC that it checks
// against CLOCK_MONOTONIC_RAW every second; shm/shm_layout.h), Now() reads
// the raw clock as one rdtsc through that mapping instead of clock_gettime,
// and widens the bound by the mapping's error_ns; it falls back to
// clock_gettime when there is none, when it has expired or been withdrawn,
// when a read of it overlaps the daemon's write, and when
// ClockOptions::use_tsc or CLOCKSYNC_TSC=off say so. Raw time read through
// successive TSC mappings does not step back (the daemon makes each start
// where the last stood); switching between the two paths may, by up to
// error_ns. They read the seqlocked mapping with a bounded number of
// attempts and evaluate
//   global = anchor_global + dt + dt * rate_adj,   dt = raw - anchor_raw
//   bound  = bound_at_anchor + |dt| * bound_growth
// in integer fixed point (internal::Evaluate), rounding earliest down and
// latest up, so the exact interval [global - bound, global + bound] is
// always inside [earliest, latest] (at most 1 ns wider on each side).
//
// Unusual mappings take an out-of-line slow path:
//  - stale (the mapping's last update lies more than stale_limit_ns before
//    the reading): the reading is still computed, with its bound widened by
//    stale_growth_ppb per ns since the update, the CLOCKSYNC_STATUS_STALE
//    flag and error CLOCKSYNC_ESTALE;
//  - not synchronized (state UNSYNCED/UNSPECIFIED): error
//    CLOCKSYNC_ENOTSYNCED, fields as the daemon published them;
//  - closed by its writer (CLOCKSYNC_STATUS_CLOSED): a normal reading;
//  - a raw time 2^61 ns (73 years) or more from the mapping's anchor (a
//    garbage argument to At()), or values no daemon writes (a broken or
//    hostile writer; internal::OutOfRange): error CLOCKSYNC_EINVAL and no
//    time (found by client/segment_fuzzer: the arithmetic wrapped).
// In all these cases the slow path also looks at the path (at most once per
// recheck_interval_ns): when it names a new file (a restarted daemon), the
// new segment is validated and mapped in place of the old one (mmap
// MAP_FIXED at the same address, so concurrent readers never fault; the
// seqlock makes a read that straddles the swap retry). A fresh, synced
// mapping never costs a system call.
//
// Thread safety: Now(), At() and ReadMapping() may be called concurrently
// from any number of threads. Moving or destroying a Clock must not overlap
// with other calls on it.
#ifndef CLOCKSYNC_CLIENT_CLOCK_H_
#define CLOCKSYNC_CLIENT_CLOCK_H_

#include <time.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/clocksync.h"
#include "shm/shm_layout.h"

namespace clocksync {

// Tuning of a Clock. The same defaults as clocksync_options_init.
struct ClockOptions {
  // A mapping updated longer ago than this is stale, in ns.
  int64_t stale_limit_ns = 5'000'000'000;
  // Extra bound growth of a stale mapping per ns since its update, in ppb.
  double stale_growth_ppb = 10'000.0;
  // Least time between two looks at the path for a new segment, in ns.
  int64_t recheck_interval_ns = 100'000'000;
  // Seqlock read attempts before CLOCKSYNC_EBUSY.
  int max_read_attempts = 1000;
  // Now() reads the TSC (x86-64) through the daemon's published TSC->raw
  // mapping where it has one (shm/shm_layout.h), instead of
  // clock_gettime(CLOCK_MONOTONIC_RAW). The environment variable
  // CLOCKSYNC_TSC=off turns it off for every Clock of the process
  // (CLOCKSYNC_TSC=auto leaves this option to decide; any other value makes
  // Open() fail with InvalidArgument naming the variable).
  bool use_tsc = true;
};

// One reading of global time.
struct TimeReading {
  // Estimate of global time, in ns.
  int64_t global_ns = 0;
  // Lower and upper bound of global time, in ns.
  int64_t earliest_ns = 0;
  int64_t latest_ns = 0;
  // clocksync_state in bits 0..7 and CLOCKSYNC_STATUS_* flags.
  uint32_t status = 0;
  // CLOCKSYNC_OK (0) or a negative CLOCKSYNC_E* code. The time fields are
  // meaningful for 0, CLOCKSYNC_ESTALE and CLOCKSYNC_ENOTSYNCED only.
  int error = CLOCKSYNC_OK;

  bool ok() const { return error == CLOCKSYNC_OK; }
  clocksync_state state() const {
    return static_cast<clocksync_state>(status & CLOCKSYNC_STATUS_STATE_MASK);
  }
};

// A consistent copy of the published mapping plus the writer's identity
// (diagnostics and tests).
struct MappingSnapshot {
  MappingValues values;
  int32_t writer_pid = 0;
  int64_t writer_start_raw_ns = 0;
  // The header's tree_id: the node's tree, 0 while unknown (shm_layout.h).
  uint64_t tree_id = 0;
};

namespace internal {

// Largest bound component the reader computes with, in ns (~73 years), so
// that sums stay far from int64 overflow.
inline constexpr int64_t kMaxBoundNs = int64_t{1} << 61;

// a - b with two's-complement wrap-around instead of undefined overflow.
inline int64_t WrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) -
                              static_cast<uint64_t>(b));
}

inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_expect(__builtin_add_overflow(a, b, &sum), 0)) {
    return b > 0 ? INT64_MAX : INT64_MIN;
  }
  return sum;
}

inline int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t difference;
  if (__builtin_expect(__builtin_sub_overflow(a, b, &difference), 0)) {
    return b > 0 ? INT64_MIN : INT64_MAX;
  }
  return difference;
}

// High 64 bits of the signed 128-bit product a * b, i.e. floor(a * b / 2^64):
// one imul on x86-64.
inline int64_t MulHigh(int64_t a, int64_t b) {
  return static_cast<int64_t>((static_cast<__int128>(a) * b) >> 64);
}

// The mapping evaluated at raw_ns, with `extra_bound_ns` (0..2^61) added to
// the bound. Pure arithmetic; error is left 0.
//
// Only one multiply lies between the clock reading and each result (the next
// vDSO clock read waits for them); everything else is independent of raw_ns
// and runs while the CPU waits for the clock:
//   global   = anchor_global + dt + floor(dt * rate)
//   earliest = anchor_global - b0 + dt + floor(dt * (rate -+ growth))
//   latest   = anchor_global + b0 + 1 + dt + floor(dt * (rate +- growth))
// with b0 = bound_at_anchor, rate = rate_adj_q64 / 2^64 and growth =
// bound_growth_q36 / 2^36 (the sign of the growth term by the sign of dt,
// so it widens both sides). All
// of it is exact integer arithmetic: global is the exact value rounded down,
// earliest the exact lower edge rounded down, latest the exact upper edge
// rounded down plus 1 ns (so at least rounded up). Arithmetic wraps (never
// undefined) for garbage from a broken writer; the edges saturate at the
// int64 range. |dt| must stay below 2^61 ns (73 years).
// Whether Evaluate() could wrap: raw_ns 2^61 ns (73 years) or more from the
// anchor, or a mapping no writer of ours publishes (|rate_adj| of 25 % or
// more, an anchor within 2^62 ns of the int64 edges, a negative bound). Within these limits
// every sum in Evaluate() stays in range and earliest <= global <= latest.
inline bool OutOfRange(const MappingValues& v, int64_t raw_ns) noexcept {
  // Nonzero iff |x| >= 2^bits (x = -2^bits excepted); no branches.
  const auto beyond = [](int64_t x, int bits) -> uint64_t {
    return (static_cast<uint64_t>(x) + (uint64_t{1} << bits)) >> (bits + 1);
  };
  return (beyond(WrapSub(raw_ns, v.anchor_raw_ns), 61) | beyond(v.rate_adj_q64, 62) |
          beyond(v.anchor_global_ns, 62) |
          (static_cast<uint64_t>(v.bound_at_anchor_ns) >> 63)) != 0;
}

inline TimeReading Evaluate(const MappingValues& v, int64_t raw_ns,
                            int64_t extra_bound_ns) noexcept {
  const uint64_t rate_q64 = static_cast<uint64_t>(v.rate_adj_q64);
  const uint64_t growth_q64 = uint64_t{v.bound_growth_q36} << 28;
  const int64_t bound_ns =
      (v.bound_at_anchor_ns < kMaxBoundNs ? v.bound_at_anchor_ns
                                          : kMaxBoundNs) +
      extra_bound_ns;
  const int64_t earliest_base_ns = SaturatingSub(v.anchor_global_ns, bound_ns);
  const int64_t latest_base_ns =
      SaturatingAdd(v.anchor_global_ns, bound_ns + 1);

  const int64_t dt_ns = WrapSub(raw_ns, v.anchor_raw_ns);
  uint64_t earliest_coef_q64;
  uint64_t latest_coef_q64;
  if (__builtin_expect(dt_ns >= 0, 1)) {
    earliest_coef_q64 = rate_q64 - growth_q64;
    latest_coef_q64 = rate_q64 + growth_q64;
  } else {
    earliest_coef_q64 = rate_q64 + growth_q64;
    latest_coef_q64 = rate_q64 - growth_q64;
  }
  // base + dt runs beside each multiply, so one add follows it.
  TimeReading reading;
  reading.global_ns = static_cast<int64_t>(
      static_cast<uint64_t>(v.anchor_global_ns) + static_cast<uint64_t>(dt_ns) +
      static_cast<uint64_t>(MulHigh(dt_ns, v.rate_adj_q64)));
  reading.earliest_ns =
      SaturatingAdd(SaturatingAdd(earliest_base_ns, dt_ns),
                    MulHigh(dt_ns, static_cast<int64_t>(earliest_coef_q64)));
  reading.latest_ns =
      SaturatingAdd(SaturatingAdd(latest_base_ns, dt_ns),
                    MulHigh(dt_ns, static_cast<int64_t>(latest_coef_q64)));
  reading.status = v.status;
  return reading;
}

}  // namespace internal

class Clock {
 public:
  // Maps the segment at `path` read-only. Errors name the path:
  //   NotFound            no file: no daemon publishes there (ENODAEMON)
  //   Unavailable         open/fstat/mmap failed, with errno text (EIO)
  //   FailedPrecondition  wrong magic, layout version or size
  //   InvalidArgument     bad options
  static absl::StatusOr<Clock> Open(
      const std::string& path = CLOCKSYNC_DEFAULT_SHM_PATH,
      const ClockOptions& options = ClockOptions());

  // As Open(), with a CLOCKSYNC_E* code: returns 0 and sets *out, or returns
  // a negative code and sets *message (naming the path). For the C API.
  static int OpenWithCode(const std::string& path, const ClockOptions& options,
                          std::unique_ptr<Clock>* out, std::string* message);

  Clock(Clock&& other) noexcept;
  Clock& operator=(Clock&& other) noexcept;
  Clock(const Clock&) = delete;
  Clock& operator=(const Clock&) = delete;
  ~Clock();

  // Host CLOCK_MONOTONIC_RAW now, in ns (vDSO, no system call).
  static int64_t RawNowNs() noexcept {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }

  // Global time now: one TSC read and two seqlocked sections where the
  // daemon publishes a valid TSC mapping (the bound then includes its
  // error_ns), else At(RawNowNs()). A TSC section read that overlaps a
  // write falls back at once (cheaper than a retry, once a second at most).
  // Always inlined, with one evaluation for both paths: out of line, the
  // reading returned through memory cost the clock_gettime path 10%.
  __attribute__((always_inline)) TimeReading Now() const noexcept {
    int64_t raw_ns;
    int64_t extra_bound_ns;
    if (__builtin_expect(!TscRawNow(&raw_ns, &extra_bound_ns), 0)) {
      raw_ns = RawNowNs();
      extra_bound_ns = 0;
    }
    return AtWithExtraBound(raw_ns, extra_bound_ns);
  }

  // Host CLOCK_MONOTONIC_RAW now, in ns, through the TSC where the daemon
  // publishes a valid TSC mapping (within its error_ns, which is returned
  // in *error_ns if not null), else clock_gettime (error 0).
  int64_t FastRawNowNs(int64_t* error_ns = nullptr) const noexcept {
    int64_t raw_ns, tsc_error_ns;
    if (!TscRawNow(&raw_ns, &tsc_error_ns)) {
      raw_ns = RawNowNs();
      tsc_error_ns = 0;
    }
    if (error_ns != nullptr) *error_ns = tsc_error_ns;
    return raw_ns;
  }

  // Whether Now() would read the TSC at this moment (diagnostics,
  // benchmarks): the option, the environment, a valid published mapping.
  bool UsesTsc() const noexcept;

  // Global time at a host CLOCK_MONOTONIC_RAW reading raw_ns. Staleness is
  // judged by how far raw_ns lies after the mapping's last update.
  TimeReading At(int64_t raw_ns) const noexcept {
    // `v` never leaves this function, so it lives in registers.
    MappingValues v;
    if (__builtin_expect(!shm::TryReadSectionForEvaluation(section_, &v), 0)) {
      return AtRetrying(raw_ns);
    }
    if (__builtin_expect(NeedsSlowPath(v, raw_ns), 0)) return AtSlow(raw_ns);
    return internal::Evaluate(v, raw_ns, 0);
  }

  // As At(), with `extra_bound_ns` (>= 0) added to the bound: the error of
  // a raw reading derived from the TSC.
  __attribute__((always_inline)) TimeReading AtWithExtraBound(
      int64_t raw_ns, int64_t extra_bound_ns) const noexcept {
    MappingValues v;
    if (__builtin_expect(!shm::TryReadSectionForEvaluation(section_, &v), 0) ||
        __builtin_expect(NeedsSlowPath(v, raw_ns), 0)) {
      return Widened(At(raw_ns), extra_bound_ns);
    }
    return internal::Evaluate(v, raw_ns, extra_bound_ns);
  }

  // A consistent copy of the mapping and the writer's identity. Returns 0 or
  // CLOCKSYNC_EBUSY. Takes a lock: not for the hot path.
  int ReadMapping(MappingSnapshot* out) const noexcept;

  // The path this Clock maps.
  const std::string& path() const;
  // How often the slow path looked at the path, and how often it re-mapped
  // a new segment (diagnostics; tests check the hot path never looks).
  uint64_t path_check_count() const;
  uint64_t remap_count() const;

 private:
  struct Remapper;  // slow-path state at a stable address; see clock.cc

  Clock(const clocksync_shm_mapping* section, const ClockOptions& options,
        std::unique_ptr<Remapper> remapper);

  // Stale, closed, a state below SYNCED (0 or 1), or out of Evaluate()'s
  // range (internal::OutOfRange).
  // Computed without short-circuit branches: one branch in the caller.
  bool NeedsSlowPath(const MappingValues& v, int64_t raw_ns) const noexcept {
    const bool stale =
        internal::WrapSub(raw_ns, v.update_raw_ns) > stale_limit_ns_;
    const bool closed = (v.status & CLOCKSYNC_STATUS_CLOSED) != 0;
    const bool unsynced =
        (v.status & CLOCKSYNC_STATUS_STATE_MASK) < CLOCKSYNC_STATE_SYNCED;
    const bool out_of_range = internal::OutOfRange(v, raw_ns);
    return stale | closed | unsynced | out_of_range;
  }
  // Retries a read up to max_read_attempts_ - 1 more times.
  bool ReadSectionRetrying(MappingValues* out) const noexcept;
  // At() after a first read attempt overlapped a write.
  TimeReading AtRetrying(int64_t raw_ns) const noexcept;
  // The reading for a stale, closed or unsynced mapping.
  TimeReading AtSlow(int64_t raw_ns) const noexcept;
  // Looks at the path (rate-limited) and maps a new segment in place.
  void MaybeRemap() const noexcept;
  static TimeReading BusyReading() noexcept;
  static TimeReading Widened(TimeReading r, int64_t extra_bound_ns) noexcept;
  // The raw clock now through the TSC and the published TSC mapping, with
  // the mapping's error; false when there is none to use (then call
  // RawNowNs()).
  __attribute__((always_inline)) bool TscRawNow(
      int64_t* raw_ns, int64_t* error_ns) const noexcept {
#if defined(__x86_64__)
    TscValues t;
    if (__builtin_expect(tsc_section_ != nullptr, 1) &&
        __builtin_expect(shm::TryReadTscSection(tsc_section_, &t), 1) &&
        // An error outside 0..2^40 ns (18 min) is no mapping a daemon
        // publishes: fall back rather than widen by garbage.
        __builtin_expect(static_cast<uint64_t>(t.error_ns) < (uint64_t{1} << 40), 1) &&
        __builtin_expect(shm::TscToRaw(t, ReadTsc(), raw_ns), 1)) {
      *error_ns = t.error_ns;
      return true;
    }
#endif
    return false;
  }
#if defined(__x86_64__)
  // The TSC. A plain rdtsc, as Abseil's CycleClock reads it: not fenced
  // against earlier instructions (the vDSO's lfence costs 7.7 ns here, a
  // third of a clock_gettime), so the reading may be taken up to a few
  // cycles before the instructions that precede the call have finished.
  static uint64_t ReadTsc() noexcept { return __builtin_ia32_rdtsc(); }
#endif

  // The seqlocked section inside the mapping. Its address never changes
  // while the Clock lives: a re-map replaces the pages underneath.
  const clocksync_shm_mapping* section_ = nullptr;
  // The TSC section of the same mapping; null when not used (option,
  // environment, not x86-64). A version-1 segment reads as zeros there:
  // invalid, so Now() falls back.
  const clocksync_shm_tsc* tsc_section_ = nullptr;
  int64_t stale_limit_ns_ = 0;
  double stale_growth_ppb_ = 0.0;
  int max_read_attempts_ = 1;
  std::unique_ptr<Remapper> remapper_;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_CLIENT_CLOCK_H_
