// shm/tsc_calibrator.cc: invariant-TSC detection and the TSC -> raw
// fit (see shm/tsc_calibrator.h).

#include "shm/tsc_calibrator.h"

#include <time.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace clocksync {
namespace {

int64_t RawNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

bool HasInvariantTscIn(const std::string& cpuinfo_text, std::string* why) {
  for (absl::string_view line : absl::StrSplit(cpuinfo_text, '\n')) {
    if (!absl::StartsWith(line, "flags")) continue;
    bool constant = false, nonstop = false, tsc = false;
    for (absl::string_view flag : absl::StrSplit(line, ' ')) {
      tsc = tsc || flag == "tsc";
      constant = constant || flag == "constant_tsc";
      nonstop = nonstop || flag == "nonstop_tsc";
    }
    if (tsc && constant && nonstop) return true;
    *why = absl::StrCat("the CPU flags lack",
                        tsc ? "" : " tsc", constant ? "" : " constant_tsc",
                        nonstop ? "" : " nonstop_tsc");
    return false;
  }
  *why = "no CPU flags in /proc/cpuinfo";
  return false;
}

bool HasInvariantTsc(std::string* why) {
#if defined(__x86_64__)
  std::ifstream in("/proc/cpuinfo");
  if (!in) {
    *why = "cannot read /proc/cpuinfo";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  return HasInvariantTscIn(text.str(), why);
#else
  *why = "not x86-64";
  return false;
#endif
}

TscCalibrator::Sandwich TscCalibrator::ReadClocks() {
  Sandwich s;
#if defined(__x86_64__)
  s.raw_before_ns = RawNs();
  __builtin_ia32_lfence();
  s.tsc = __builtin_ia32_rdtsc();
  __builtin_ia32_lfence();
  s.raw_after_ns = RawNs();
#endif
  return s;
}

TscCalibrator::TscCalibrator(const Options& options, Source source)
    : options_(options), source_(std::move(source)) {}

TscCalibrator::Point TscCalibrator::Measure() {
  Point best;
  int64_t best_width_ns = INT64_MAX;
  for (int i = 0; i < std::max(options_.sandwiches, 1); ++i) {
    const Sandwich s = source_();
    const int64_t width_ns = s.raw_after_ns - s.raw_before_ns;
    if (width_ns >= 0 && width_ns < best_width_ns) {
      best_width_ns = width_ns;
      best.tsc = s.tsc;
      best.raw_ns = s.raw_before_ns + width_ns / 2;
      best.half_ns = (width_ns + 1) / 2 + 1;
    }
  }
  return best;
}

void TscCalibrator::Restart(const Point& p, const std::string& why) {
  points_.clear();
  points_.push_back(p);
  last_ = TscValues{};
  problem_ = why;
}

TscValues TscCalibrator::Update() {
  Point p = Measure();
  if (p.half_ns == 0) {  // No sandwich had raw_after >= raw_before.
    Restart(Point{}, "the raw clock went backwards around every TSC read");
    points_.clear();
    return last_;
  }
  if (last_.max_ticks > 0) {
    int64_t predicted_ns = 0;
    const bool in_range = shm::TscToRaw(last_, p.tsc, &predicted_ns);
    const int64_t residual_ns = predicted_ns - p.raw_ns;
    const int64_t magnitude_ns = residual_ns < 0 ? -residual_ns : residual_ns;
    if (!in_range || magnitude_ns > options_.max_residual_ns + p.half_ns) {
      ++jumps_;
      Restart(p, in_range
                     ? absl::StrCat("the TSC disagreed with its mapping by ",
                                    residual_ns, " ns: calibrating again")
                     : "the TSC left its mapping's range (stopped, jumped "
                       "or was late to be checked): calibrating again");
      return last_;
    }
    p.residual_ns = magnitude_ns;
  } else if (!points_.empty() && p.tsc <= points_.back().tsc) {
    Restart(p, "the TSC did not advance");
    return last_;
  }
  points_.push_back(p);
  // Keep the oldest point within fit_span_ns (and at least two points).
  while (points_.size() > 2 &&
         p.raw_ns - points_[1].raw_ns >= options_.fit_span_ns) {
    points_.pop_front();
  }
  const Point& first = points_.front();
  const int64_t baseline_ns = p.raw_ns - first.raw_ns;
  if (baseline_ns < options_.min_baseline_ns) {
    problem_ = "calibrating";
    return last_;
  }
  const uint64_t ticks = p.tsc - first.tsc;
  if (ticks == 0) {
    Restart(p, "the TSC did not advance");
    return last_;
  }
  TscValues v;
  v.anchor_tsc = p.tsc;
  v.anchor_raw_ns = p.raw_ns;
  v.raw_ns_per_tick_q32 = static_cast<uint64_t>(
      ((static_cast<unsigned __int128>(baseline_ns) << 32) + ticks / 2) /
      ticks);
  if (v.raw_ns_per_tick_q32 == 0) {
    Restart(p, "the TSC runs faster than 2^32 ticks per ns");
    return last_;
  }
  v.max_ticks = static_cast<uint64_t>(
      (static_cast<unsigned __int128>(options_.validity_ns) << 32) /
      v.raw_ns_per_tick_q32);
  // Error within validity_ns of the anchor: the anchor's half-width, the
  // rate's uncertainty (both points' half-widths over the baseline) times
  // the span, the largest residual of the points kept, and 2 ns of
  // rounding.
  int64_t residual_ns = 0;
  for (const Point& kept : points_) {
    residual_ns = std::max(residual_ns, kept.residual_ns);
  }
  const int64_t rate_error_ns = static_cast<int64_t>(
      (static_cast<__int128>(first.half_ns + p.half_ns) * options_.validity_ns +
       baseline_ns - 1) /
      baseline_ns);
  v.error_ns = p.half_ns + rate_error_ns + residual_ns + 2;
  last_ = v;
  problem_.clear();
  return last_;
}

}  // namespace clocksync
