// shm/tsc_calibrator.h: the TSC -> CLOCK_MONOTONIC_RAW mapping the
// daemon publishes (shm/shm_layout.h, clocksync_shm_tsc) so that clients
// read global time with one rdtsc instead of clock_gettime().
//
// The kernel's choice of clocksource is not trusted either way (on a VM the
// TSC may be marked unstable yet run steadily, or kvm-clock may sit on top
// of it): the calibrator measures. Each Update() takes the tightest of a
// few (raw, rdtsc, raw) sandwiches, checks it against the mapping it
// published last (a point off by more than max_residual_ns: the TSC jumped,
// stopped or changed rate; the mapping is withdrawn and calibration starts
// over), and fits the rate through the oldest point of the last
// fit_span_ns, at least min_baseline_ns before. The published error covers
// the two points' sandwich half-widths, the rate's uncertainty over the
// validity span, and the largest residual of the points kept (the last
// fit_span_ns).
//
// Used only where /proc/cpuinfo shows an invariant TSC (constant_tsc and
// nonstop_tsc) on x86-64, unless the daemon's `tsc` key is off.
//
// Thread safety: none; the daemon's sync loop owns it.
#ifndef CLOCKSYNC_SHM_TSC_CALIBRATOR_H_
#define CLOCKSYNC_SHM_TSC_CALIBRATOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>

#include "shm/shm_layout.h"

namespace clocksync {

// Whether this CPU has an invariant TSC, from /proc/cpuinfo's flags (or
// `cpuinfo_text`, for tests); if not, *why says what is missing.
bool HasInvariantTsc(std::string* why);
bool HasInvariantTscIn(const std::string& cpuinfo_text, std::string* why);

class TscCalibrator {
 public:
  // One sandwich: raw clock before and after a TSC read.
  struct Sandwich {
    int64_t raw_before_ns = 0;
    uint64_t tsc = 0;
    int64_t raw_after_ns = 0;
  };
  // Where sandwiches come from (the real clocks by default; tests inject
  // counters that jump or bend).
  using Source = std::function<Sandwich()>;
  static Sandwich ReadClocks();

  struct Options {
    int sandwiches = 16;                          // Per Update(); tightest kept.
    int64_t min_baseline_ns = 1'000'000'000;      // Before a first rate.
    int64_t fit_span_ns = 60'000'000'000;         // Oldest point kept.
    int64_t validity_ns = 4'000'000'000;          // max_ticks covers this.
    int64_t max_residual_ns = 1'000;              // Beyond: withdrawn.
  };

  explicit TscCalibrator(const Options& options, Source source = ReadClocks);

  // Takes a point and returns the mapping to publish: max_ticks 0 until
  // two points min_baseline_ns apart agree, and after a jump.
  TscValues Update();

  // Why the last Update() returned no mapping ("" when it returned one).
  const std::string& problem() const { return problem_; }
  // Mappings withdrawn because a point disagreed with the last one.
  uint64_t jumps() const { return jumps_; }

 private:
  struct Point {
    uint64_t tsc = 0;
    int64_t raw_ns = 0;   // Middle of the sandwich.
    int64_t half_ns = 0;  // Half its width, rounded up.
    int64_t residual_ns = 0;  // |Its distance from the mapping before it|.
  };
  Point Measure();
  void Restart(const Point& p, const std::string& why);

  Options options_;
  Source source_;
  std::deque<Point> points_;
  TscValues last_;
  std::string problem_;
  uint64_t jumps_ = 0;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_SHM_TSC_CALIBRATOR_H_
