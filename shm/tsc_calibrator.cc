// shm/tsc_calibrator.cc: invariant-TSC detection and the TSC -> raw
// fit (see shm/tsc_calibrator.h).

#include "shm/tsc_calibrator.h"

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
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

TscValues TscCalibrator::Restart(const Point& p, const std::string& why) {
  points_.clear();
  if (p.half_ns > 0) points_.push_back(p);
  line_ = TscValues{};
  problem_ = why;
  return TscValues{};
}

TscValues TscCalibrator::Update() {
  Point p = Measure();
  last_residual_ns_ = -1;
  if (p.half_ns == 0) {  // No sandwich had raw_after >= raw_before.
    return Restart(p, "the raw clock went backwards around every TSC read");
  }
  // Check the point against the last line, extrapolated either way (a
  // late check is no jump; a TSC behind the anchor is one unless within
  // the tolerance).
  __int128 predicted_ns = 0;
  int64_t residual_ns = 0;
  const bool checked = line_.max_ticks > 0;
  if (checked) {
    const int64_t ticks = static_cast<int64_t>(p.tsc - line_.anchor_tsc);
    predicted_ns =
        line_.anchor_raw_ns +
        ((static_cast<__int128>(ticks) * line_.raw_ns_per_tick_q32) >> 32);
    const __int128 residual = predicted_ns - p.raw_ns;
    const __int128 magnitude = residual < 0 ? -residual : residual;
    if (magnitude > options_.max_residual_ns + p.half_ns) {
      ++jumps_;
      const int64_t shown_ns =
          magnitude > INT64_MAX ? (residual < 0 ? INT64_MIN : INT64_MAX)
                                : static_cast<int64_t>(residual);
      return Restart(p, absl::StrCat("the TSC disagreed with its mapping by ",
                                     shown_ns,
                                     " ns (it jumped, stopped, went back or "
                                     "changed rate): calibrating again"));
    }
    residual_ns = static_cast<int64_t>(residual);
    last_residual_ns_ = static_cast<int64_t>(magnitude);
    p.residual_ns = last_residual_ns_;
  } else if (!points_.empty() && p.tsc <= points_.back().tsc) {
    return Restart(p, "the TSC did not advance");
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
    return TscValues{};
  }
  const uint64_t ticks = p.tsc - first.tsc;
  if (ticks == 0 || ticks >= (uint64_t{1} << 62)) {
    return Restart(p, "the TSC did not advance");
  }
  const uint64_t fit_q32 = static_cast<uint64_t>(
      ((static_cast<unsigned __int128>(baseline_ns) << 32) + ticks / 2) /
      ticks);
  if (fit_q32 == 0) {
    return Restart(p, "the TSC runs faster than 2^32 ticks per ns");
  }
  TscValues v;
  v.anchor_tsc = p.tsc;
  v.anchor_raw_ns = p.raw_ns;
  v.raw_ns_per_tick_q32 = fit_q32;
  if (checked) {
    // Start where the last line stands at this TSC (readers switching
    // lines never step back) and reach the fit validity_ns later:
    // rate = fit * (1 - residual / validity).
    v.anchor_raw_ns = static_cast<int64_t>(predicted_ns);
    const __int128 slewed_q32 =
        static_cast<__int128>(fit_q32) -
        static_cast<__int128>(fit_q32) * residual_ns / options_.validity_ns;
    if (slewed_q32 > 0 && slewed_q32 < (static_cast<__int128>(1) << 64)) {
      v.raw_ns_per_tick_q32 = static_cast<uint64_t>(slewed_q32);
    }
  }
  v.max_ticks = static_cast<uint64_t>(
      (static_cast<unsigned __int128>(options_.validity_ns) << 32) /
      v.raw_ns_per_tick_q32);
  // Error within validity_ns of the anchor: the sandwich's half-width, the
  // rate's uncertainty (both points' half-widths over the baseline) times
  // the span, the distance from the fit still to slew (|residual|, shrinking
  // to 0), the largest residual of the points kept (what the line does not
  // model), and 2 ns of rounding.
  int64_t kept_residual_ns = 0;
  for (const Point& kept : points_) {
    kept_residual_ns = std::max(kept_residual_ns, kept.residual_ns);
  }
  const int64_t rate_error_ns = static_cast<int64_t>(
      (static_cast<__int128>(first.half_ns + p.half_ns) * options_.validity_ns +
       baseline_ns - 1) /
      baseline_ns);
  const int64_t to_slew_ns = residual_ns < 0 ? -residual_ns : residual_ns;
  v.error_ns =
      p.half_ns + rate_error_ns + to_slew_ns + kept_residual_ns + 2;
  line_ = v;
  if (!checked) {
    problem_ = "calibrating (a line, waiting for a point to confirm it)";
    return TscValues{};
  }
  problem_.clear();
  return v;
}

}  // namespace clocksync
