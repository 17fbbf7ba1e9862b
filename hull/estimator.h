// hull/estimator.h: the online estimator interface (Estimator), its
// configuration, results and counters, and the one factory (MakeEstimator),
// as linuxptp's servo.h: the daemon holds an Estimator and knows no
// implementation. Implementations, one per file:
//   TwoHullEstimator          the two-hull estimate and hard bound over a
//                             sliding window (two_hull_estimator.h);
//   AdaptiveWindowEstimator   several two-hull windows side by side,
//                             answering from the one (or the mean of two
//                             neighbours) that later low-delay samples show
//                             significantly better (adaptive_estimator.h).
//
// Sign convention (used everywhere in clocksync):
//   x      local time (this node's clock), ns
//   θ(x)   offset = global − local at local time x, ns; global = x + θ(x)
//   drift  dθ/dx in parts per billion: POSITIVE when the local clock runs
//          SLOW (global time advances faster than local time).
// Samples are probe exchanges (t1, t2, t3, t4), hull/probe_sample.h.
//
// Thread safety: none; one owner (the daemon's sync loop).
//
// Example:
//   std::unique_ptr<Estimator> estimator = MakeEstimator(AdaptiveConfig{});
//   if (IsAccepted(estimator->Add(sample))) ...
//   TimeEstimate now = estimator->Estimate(local_ns);
//   if (now.state != SyncState::kUnsynced) {
//     Publish(now.global_ns, now.latest_ns - now.earliest_ns);
//   }

#ifndef CLOCKSYNC_HULL_ESTIMATOR_H_
#define CLOCKSYNC_HULL_ESTIMATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hull/probe_sample.h"

namespace clocksync::hull {

struct EstimatorConfig {
  // Samples older than this (by t4, against the newest t4) leave the window.
  int64_t window_ns = 300'000'000'000;
  // Samples whose round trip (t4 − t1) − (t3 − t2) exceeds this are dropped.
  int64_t max_round_trip_ns = 1'000'000'000;
  // Samples whose parent bound exceeds this are dropped.
  int64_t max_parent_bound_ns = 1'000'000'000;
  // Hard cap on samples kept, whatever their age (memory bound).
  size_t max_samples = size_t{1} << 22;
  // Frequency wander the bound tolerates: the standard deviation of a
  // random walk of the frequency, in ppb per sqrt(second). The bound is
  // widened by wander * (S + D)^1.5 ns, where S is the window's span and D
  // the time since the newest sample, both in seconds: about three standard
  // deviations of how far a randomly walking clock strays from a line over
  // that time. 0 gives the exact bound for a linear clock. The adaptive
  // estimator widens its answer's bound further where its references show
  // the clock wandering faster (adaptive_estimator.h).
  double wander_ppb_per_sqrt_s = 1.0;
  // How long the state stays kRecovering after an inconsistency.
  int64_t recovery_hold_ns = 10'000'000'000;
  // The largest plausible frequency error of the local clock against
  // global time, ppm (chrony's maxdrift). A window whose consistent lines
  // are all steeper holds samples from both sides of a step (this clock's,
  // or a parent's served time off for a moment before the parent noticed
  // its own): it is cut like an inconsistency, instead of answering with a
  // line that turns the step into a drift.
  double max_drift_ppm = 500;
};

// Returns an empty string when valid, else "key: reason".
std::string ValidateConfig(const EstimatorConfig& config);

enum class SyncState {
  kUnsynced,    // No bounded estimate yet.
  kSynced,      // Estimate and bound from a consistent window.
  kRecovering,  // Synced, but an inconsistency was seen within the last
                // recovery_hold_ns; the window was cut.
};
const char* SyncStateName(SyncState state);

// What happened to a sample passed to Add().
enum class AddResult {
  kAccepted,
  kAcceptedAfterInconsistency,  // Accepted; the window was cut to recover.
  kRejectedReceiveBeforeSend,   // t4 < t1.
  kRejectedReplyBeforeRequest,  // t3 < t2.
  kRejectedRoundTrip,           // Round trip negative or over the maximum.
  kRejectedTimeBackwards,       // t1 or t4 not after the previous sample's.
  kRejectedParentBound,         // parent_bound_ns negative or over the max.
};
const char* AddResultName(AddResult result);
inline bool IsAccepted(AddResult r) {
  return r == AddResult::kAccepted ||
         r == AddResult::kAcceptedAfterInconsistency;
}

// The estimate of global time at a local instant.
struct TimeEstimate {
  SyncState state = SyncState::kUnsynced;
  // The fields below are meaningful only when state != kUnsynced.
  int64_t global_ns = 0;    // Best estimate of global time.
  int64_t earliest_ns = 0;  // Global time is in [earliest_ns, latest_ns].
  int64_t latest_ns = 0;
  double drift_ppb = 0;     // dθ/dx of the estimate; + = local clock slow.
  int64_t offset_ns = 0;    // global_ns − local instant.
};

struct EstimatorStats {
  uint64_t accepted = 0;
  uint64_t rejected_receive_before_send = 0;
  uint64_t rejected_reply_before_request = 0;
  uint64_t rejected_round_trip = 0;
  uint64_t rejected_time_backwards = 0;
  uint64_t rejected_parent_bound = 0;
  uint64_t inconsistencies = 0;
  int64_t last_inconsistency_local_ns = 0;  // t4 of the sample; 0 if none.
  uint64_t line_recomputations = 0;
  int64_t min_round_trip_ns = 0;  // Over the window's life (0 if none).

  uint64_t rejected() const {
    return rejected_receive_before_send + rejected_reply_before_request +
           rejected_round_trip + rejected_time_backwards +
           rejected_parent_bound;
  }
};

struct AdaptiveConfig {
  // The longest window and everything else: see EstimatorConfig. The
  // library's default is 600 s × 5 levels (600 down to 37.5 s: the best
  // measured, docs/ACCURACY.md); the daemon's is 300 s × 4 (its
  // configuration's window and window_levels).
  EstimatorConfig base{.window_ns = 600'000'000'000};
  // Windows base.window_ns / 2^k for k in [0, levels); 1 = fixed window.
  int levels = 5;
  // Memory of the window scores (adaptive_estimator.h).
  int64_t score_time_constant_ns = 600'000'000'000;
  // What an earlier run learnt of this clock's wander (ppb/√s,
  // Estimator::LearntWanderPpb; 0 = nothing): the home window starts from
  // it where it is below base.wander_ppb_per_sqrt_s, as it would once the
  // drifts and the references had bounded the wander that low. The
  // references overrule it once they count, the bound keeps the allowance
  // (adaptive_estimator.h, step 5).
  double wander_prior_ppb_per_sqrt_s = 0;
};

// Returns an empty string when valid, else "key: reason".
std::string ValidateAdaptiveConfig(const AdaptiveConfig& config);

// The most levels (at most 8) whose shortest window, window_ns /
// 2^(levels − 1), is still at least shortest_ns; 1 when window_ns is
// shorter than 2 × shortest_ns. LevelsDownTo(600 s, 37.5 s) is 5 (the
// library's default), LevelsDownTo(300 s, 37.5 s) 4 (the daemon's).
int LevelsDownTo(int64_t window_ns, int64_t shortest_ns);

// The online estimate of a parent's global time from probe samples.
class Estimator {
 public:
  virtual ~Estimator() = default;

  // Feeds one sample; implausible samples are counted and dropped.
  virtual AddResult Add(const ProbeSample& sample) = 0;

  // Global time at local instant `local_ns`, from the samples seen so far.
  virtual TimeEstimate Estimate(int64_t local_ns) const = 0;

  // Sample counters (for several windows: those of the longest; the
  // sample counters are the same for all).
  virtual const EstimatorStats& stats() const = 0;

  // The window that answers Estimate() now: its samples, its span (newest
  // t4 − oldest t4, ns) and the vertices of its two hulls.
  virtual size_t window_samples() const = 0;
  virtual int64_t window_span_ns() const = 0;
  virtual size_t lower_hull_vertices() const = 0;
  virtual size_t upper_hull_vertices() const = 0;

  // An upper bound (about 95 %) of the clock's frequency wander, ppb/√s,
  // from what the samples have shown so far, for a later start's
  // AdaptiveConfig::wander_prior_ppb_per_sqrt_s; 0 while nothing bounds it
  // (and for a fixed window, which does not measure it).
  virtual double LearntWanderPpb() const { return 0; }
};

// The estimator for `config` (valid, see ValidateAdaptiveConfig): an
// AdaptiveWindowEstimator, or for levels = 1 a TwoHullEstimator over
// config.base, which answers the same (one window) at less cost.
std::unique_ptr<Estimator> MakeEstimator(const AdaptiveConfig& config);

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_ESTIMATOR_H_
