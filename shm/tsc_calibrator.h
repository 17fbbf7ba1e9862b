// shm/tsc_calibrator.h: the TSC -> CLOCK_MONOTONIC_RAW mapping the
// daemon publishes (shm/shm_layout.h, clocksync_shm_tsc) so that clients
// read global time with one rdtsc instead of clock_gettime().
//
// The kernel's choice of clocksource is not trusted either way (on a VM the
// TSC may be marked unstable yet run steadily, or kvm-clock may sit on top
// of it): the calibrator measures. Each Update() takes the tightest of a
// few (raw, rdtsc, raw) sandwiches and checks it against the line fitted
// last: a point off by more than max_residual_ns (plus its sandwich) means
// the TSC jumped, stopped, went back or changed rate, so the mapping is
// withdrawn and calibration starts over. A line is published only once a
// later point has agreed with it (so never from two points alone), and
// only while the checks keep coming: readers stop using it validity_ns
// after its anchor.
//
// The rate is fitted through the oldest point of the last fit_span_ns (at
// least min_baseline_ns back) and the newest. A new line starts where the
// previous one stood at its anchor and reaches the fit validity_ns later,
// so that raw time read through successive mappings never steps back
// (beyond 1 ns of rounding). The published error covers the sandwich, the
// rate's uncertainty over the validity span, the distance still to slew
// and the largest residual of the points kept (the last fit_span_ns).
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
    int64_t max_residual_ns = 500;                // Beyond: withdrawn.
  };

  explicit TscCalibrator(const Options& options, Source source = ReadClocks);

  // Takes a point and returns the mapping to publish: max_ticks 0 until a
  // line over min_baseline_ns has been confirmed by a later point, and
  // after a jump.
  TscValues Update();

  // Why the last Update() returned no mapping ("" when it returned one).
  const std::string& problem() const { return problem_; }
  // Lines dropped because a point disagreed with them.
  uint64_t jumps() const { return jumps_; }
  // |residual| of the last point checked against a line, in ns (-1 when
  // the last Update() checked none).
  int64_t last_residual_ns() const { return last_residual_ns_; }

 private:
  struct Point {
    uint64_t tsc = 0;
    int64_t raw_ns = 0;   // Middle of the sandwich.
    int64_t half_ns = 0;  // Half its width, rounded up.
    int64_t residual_ns = 0;  // |Its distance from the line before it|.
  };
  Point Measure();
  // Forgets every point and line (keeping `p` as the first point of a new
  // calibration when it has a sandwich) and returns the invalid mapping.
  TscValues Restart(const Point& p, const std::string& why);

  Options options_;
  Source source_;
  std::deque<Point> points_;
  // The line fitted last (max_ticks 0: none yet), published or not.
  TscValues line_;
  int64_t last_residual_ns_ = -1;
  std::string problem_;
  uint64_t jumps_ = 0;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_SHM_TSC_CALIBRATOR_H_
