// hull/estimator.cc: the estimator's configuration checks, names and
// factory (see estimator.h); the estimators are in their own files.

#include "hull/estimator.h"

#include <cmath>

#include "hull/adaptive_estimator.h"
#include "hull/two_hull_estimator.h"

namespace clocksync::hull {

std::string ValidateConfig(const EstimatorConfig& c) {
  if (c.window_ns <= 0) return "window_ns: must be positive";
  if (c.max_round_trip_ns <= 0) return "max_round_trip_ns: must be positive";
  if (c.max_parent_bound_ns < 0) return "max_parent_bound_ns: must be >= 0";
  if (c.max_samples < 2) return "max_samples: must be at least 2";
  if (c.max_samples > (size_t{1} << 30)) {
    return "max_samples: must be at most 2^30";
  }
  if (!(c.wander_ppb_per_sqrt_s >= 0) || !std::isfinite(c.wander_ppb_per_sqrt_s)) {
    return "wander_ppb_per_sqrt_s: must be finite and non-negative";
  }
  if (c.recovery_hold_ns < 0) return "recovery_hold_ns: must be >= 0";
  if (!(c.max_drift_ppm > 0 && c.max_drift_ppm <= 100'000)) {
    return "max_drift_ppm: must be in (0, 100000]";
  }
  return "";
}

const char* SyncStateName(SyncState state) {
  switch (state) {
    case SyncState::kUnsynced:
      return "unsynced";
    case SyncState::kSynced:
      return "synced";
    case SyncState::kRecovering:
      return "recovering";
  }
  return "?";
}

const char* AddResultName(AddResult result) {
  switch (result) {
    case AddResult::kAccepted:
      return "accepted";
    case AddResult::kAcceptedAfterInconsistency:
      return "accepted after inconsistency";
    case AddResult::kRejectedReceiveBeforeSend:
      return "rejected: t4 before t1";
    case AddResult::kRejectedReplyBeforeRequest:
      return "rejected: t3 before t2";
    case AddResult::kRejectedRoundTrip:
      return "rejected: round trip negative or over the maximum";
    case AddResult::kRejectedTimeBackwards:
      return "rejected: local time did not advance";
    case AddResult::kRejectedParentBound:
      return "rejected: parent bound negative or over the maximum";
  }
  return "?";
}

std::string ValidateAdaptiveConfig(const AdaptiveConfig& c) {
  const std::string base = ValidateConfig(c.base);
  if (!base.empty()) return base;
  if (c.levels < 1 || c.levels > 8) return "levels: must be in [1, 8]";
  if ((c.base.window_ns >> (c.levels - 1)) < 1'000'000'000) {
    return "levels: the shortest window (window / 2^(levels-1)) must be at "
           "least 1 s";
  }
  if (c.score_time_constant_ns <= 0) {
    return "score_time_constant_ns: must be positive";
  }
  if (!(c.wander_prior_ppb_per_sqrt_s >= 0) ||
      !std::isfinite(c.wander_prior_ppb_per_sqrt_s)) {
    return "wander_prior_ppb_per_sqrt_s: must be a finite number >= 0";
  }
  return "";
}

int LevelsDownTo(int64_t window_ns, int64_t shortest_ns) {
  int levels = 1;
  while (levels < 8 && shortest_ns > 0 &&
         (window_ns >> levels) >= shortest_ns) {
    ++levels;
  }
  return levels;
}

std::unique_ptr<Estimator> MakeEstimator(const AdaptiveConfig& config) {
  if (config.levels == 1) {
    return std::make_unique<TwoHullEstimator>(config.base);
  }
  return std::make_unique<AdaptiveWindowEstimator>(config);
}

}  // namespace clocksync::hull
