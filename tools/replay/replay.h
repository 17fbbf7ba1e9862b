// tools/replay/replay.h
//
// Replay of recorded probe samples through the TwoHullEstimator: the CSV
// format, its parser (errors name the line), and the accuracy summary when
// the samples carry their truth. The //tools/replay:replay tool is a thin main()
// over this.
//
// Input CSV: header `t1,t2,t3,t4` (integer ns), optionally a column
// `truth_ns` after them: the true global time at local instant t4
// (simulations know it); other columns are ignored (a daemon's
// sample_log). Lines starting with '#' are comments. Output CSV:
// header `t4,estimate_ns,earliest_ns,latest_ns`, one row per input sample,
// fields after t4 empty until synchronized.

#ifndef CLOCKSYNC_TOOLS_REPLAY_REPLAY_H_
#define CLOCKSYNC_TOOLS_REPLAY_REPLAY_H_

#include <cstdint>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "hull/adaptive_estimator.h"
#include "hull/estimator.h"

namespace clocksync::hull {

struct ReplaySample {
  ProbeSample sample;
  std::optional<int64_t> truth_ns;
};

// Parses the whole CSV. On error returns false and sets `error` to
// "<name>:<line>: <what is wrong>".
bool ParseSamplesCsv(std::istream& in, const std::string& name,
                     std::vector<ReplaySample>* out, std::string* error);

struct ReplaySummary {
  uint64_t samples = 0;
  uint64_t rejected = 0;
  uint64_t inconsistencies = 0;
  uint64_t synced_rows = 0;
  // Against truth, over synced rows after the warm-up (0 if no truth).
  uint64_t checks = 0;
  double rms_error_ns = 0;
  int64_t max_abs_error_ns = 0;
  uint64_t bound_violations = 0;
  double mean_bound_half_width_ns = 0;
};

// Feeds the samples in order to an AdaptiveWindowEstimator (levels = 1: a
// fixed window); after each writes the estimate at its t4 to `out` (if not
// null). Accuracy counts rows whose t4 is at least `warmup_ns` after the
// first sample's t4.
ReplaySummary Replay(const std::vector<ReplaySample>& samples,
                     const AdaptiveConfig& config, int64_t warmup_ns,
                     std::ostream* out);

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_TOOLS_REPLAY_REPLAY_H_
