// client/clock.h: clocksync::Clock, the C++ API that reads cluster-global
// time from clocksyncd's shared-memory segment (layout: client/shm_layout.h).
//
// Example:
//   absl::StatusOr<clocksync::Clock> clock = clocksync::Clock::Open();
//   if (!clock.ok()) { /* e.g. NotFound: no daemon publishes at the path */ }
//   clocksync::TimeReading t = clock->Now();
//   if (t.ok()) Record(t.global_ns, t.earliest_ns, t.latest_ns);
//
// Now() and At() are the hot path: inline, no system call beyond the vDSO
// clock read, no allocation, no exception, no lock. They read the seqlocked
// mapping with a bounded number of attempts and evaluate
//   global = anchor_global + dt + dt * rate_adj,   dt = raw - anchor_raw
//   bound  = bound_at_anchor + |dt| * bound_growth_ppb / 1e9 + 2 ns
// (the 2 ns cover rounding the growth term up and truncating the rate term,
// so the true global time is always inside [earliest, latest]).
//
// Unusual mappings take an out-of-line slow path:
//  - stale (the mapping's last update lies more than stale_limit_ns before
//    the reading): the reading is still computed, with its bound widened by
//    stale_growth_ppb per ns since the update, the CLOCKSYNC_STATUS_STALE
//    flag and error CLOCKSYNC_ESTALE;
//  - not synchronized (state UNSYNCED/UNSPECIFIED): error
//    CLOCKSYNC_ENOTSYNCED, fields as the daemon published them;
//  - closed by its writer (CLOCKSYNC_STATUS_CLOSED): a normal reading.
// In all three cases the slow path also looks at the path (at most once per
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

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/clocksync.h"
#include "client/shm_layout.h"

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

// The mapping evaluated at raw_ns, with `extra_bound_ns` added to the bound.
// Pure arithmetic; error is left 0.
inline TimeReading Evaluate(const MappingValues& v, int64_t raw_ns,
                            double extra_bound_ns) noexcept {
  const int64_t dt_ns = WrapSub(raw_ns, v.anchor_raw_ns);
  const double dt = static_cast<double>(dt_ns);
  // Truncation of the rate term loses < 1 ns; the bound's +2 covers it.
  const int64_t rate_term_ns = static_cast<int64_t>(dt * v.rate_adj);
  const int64_t global_ns = static_cast<int64_t>(
      static_cast<uint64_t>(v.anchor_global_ns) +
      static_cast<uint64_t>(dt_ns) + static_cast<uint64_t>(rate_term_ns));
  double growth_ns =
      std::fabs(dt) * static_cast<double>(v.bound_growth_ppb) * 1e-9 +
      extra_bound_ns;
  // Also maps NaN (a broken writer) to the maximum.
  if (!(growth_ns < static_cast<double>(kMaxBoundNs))) {
    growth_ns = static_cast<double>(kMaxBoundNs);
  }
  const int64_t at_anchor_ns =
      v.bound_at_anchor_ns < kMaxBoundNs ? v.bound_at_anchor_ns : kMaxBoundNs;
  // Truncating growth_ns and adding 1 rounds it up; 1 more covers the
  // truncated rate term of global_ns.
  const int64_t bound_ns = at_anchor_ns + static_cast<int64_t>(growth_ns) + 2;
  TimeReading reading;
  reading.global_ns = global_ns;
  reading.earliest_ns = SaturatingSub(global_ns, bound_ns);
  reading.latest_ns = SaturatingAdd(global_ns, bound_ns);
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

  // Global time now.
  TimeReading Now() const noexcept { return At(RawNowNs()); }

  // Global time at a host CLOCK_MONOTONIC_RAW reading raw_ns. Staleness is
  // judged by how far raw_ns lies after the mapping's last update.
  TimeReading At(int64_t raw_ns) const noexcept {
    MappingValues v;
    if (__builtin_expect(!shm::TryReadSection(section_, &v), 0)) {
      if (!ReadSectionRetrying(&v)) return BusyReading();
    }
    const bool stale =
        internal::WrapSub(raw_ns, v.update_raw_ns) > stale_limit_ns_;
    // Slow path for: stale, closed, or a state below SYNCED (0 or 1).
    const bool unusual =
        (v.status & CLOCKSYNC_STATUS_CLOSED) != 0 ||
        (v.status & CLOCKSYNC_STATUS_STATE_MASK) < CLOCKSYNC_STATE_SYNCED;
    if (__builtin_expect(stale | unusual, 0)) return AtSlow(raw_ns);
    return internal::Evaluate(v, raw_ns, 0.0);
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

  // Retries a read up to max_read_attempts_ - 1 more times.
  bool ReadSectionRetrying(MappingValues* out) const noexcept;
  // The reading for a stale, closed or unsynced mapping.
  TimeReading AtSlow(int64_t raw_ns) const noexcept;
  // Looks at the path (rate-limited) and maps a new segment in place.
  void MaybeRemap() const noexcept;
  static TimeReading BusyReading() noexcept;

  // The seqlocked section inside the mapping. Its address never changes
  // while the Clock lives: a re-map replaces the pages underneath.
  const clocksync_shm_mapping* section_ = nullptr;
  int64_t stale_limit_ns_ = 0;
  double stale_growth_ppb_ = 0.0;
  int max_read_attempts_ = 1;
  std::unique_ptr<Remapper> remapper_;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_CLIENT_CLOCK_H_
