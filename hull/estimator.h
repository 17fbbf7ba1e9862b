// TwoHullEstimator: the online estimate of a parent's global time from probe
// samples, with a hard error bound, over a sliding window.
//
// Sign convention (used everywhere in clocksync):
//   x      local time (this node's clock), ns
//   θ(x)   offset = global − local at local time x, ns; global = x + θ(x)
//   drift  dθ/dx in parts per billion: POSITIVE when the local clock runs
//          SLOW (global time advances faster than local time).
//
// A probe sample (t1, t2, t3, t4; hull/probe_sample.h): t1 local send, t2
// parent receive (global), t3 parent send (global), t4 local receive. The
// sample is widened by its parent_bound_ns. With non-negative delays
//   request  point (t1, t2 − t1) lies on or above θ: lower hull;
//   response point (t4, t3 − t4) lies on or below θ: upper hull.
// Every line between the hulls is consistent with the window. The estimate is
// the max-margin line; the bound at x is the range of all consistent lines at
// x, widened by a wander allowance (see EstimatorConfig) so that it stays
// valid while the frequency wanders and while no samples arrive (holdover).
//
// Window: samples whose t4 is older than the newest t4 minus `window_ns`
// leave. Insertion and removal are amortized O(1) (sliding_hull.h); the lines
// are recomputed (O(log^2 h)) only when a sample that enters or leaves
// touches one of them, which for random delays is rare.
//
// Inconsistency: when the hulls cross (the clock stepped, or bent more than
// the delays allow) the estimator notices at the sample that causes it,
// keeps the longest run of newest samples that is still consistent (so a
// bending clock shortens the window; a step restarts it after the step),
// reports it, and stays `kRecovering` for `recovery_hold_ns`.
//
// Numerics: points are stored relative to an anchor (the first sample of a
// window) as exact 64-bit integers; hull and slope tests are exact (128-bit);
// only line values are doubles, evaluated as offsets from a nearby vertex.
// Unix-epoch timestamps (~1.8e18 ns) and offsets of hours lose nothing.
//
// Thread safety: none; one owner (the daemon's sync loop).

#ifndef CLOCKSYNC_HULL_ESTIMATOR_H_
#define CLOCKSYNC_HULL_ESTIMATOR_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "hull/probe_sample.h"
#include "hull/separation.h"
#include "hull/sliding_hull.h"

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
  // that time. 0 gives the exact bound for a linear clock.
  double wander_ppb_per_sqrt_s = 1.0;
  // How long the state stays kRecovering after an inconsistency.
  int64_t recovery_hold_ns = 10'000'000'000;
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

class TwoHullEstimator {
 public:
  // `config` must be valid (see ValidateConfig).
  explicit TwoHullEstimator(const EstimatorConfig& config = {});

  TwoHullEstimator(const TwoHullEstimator&) = delete;
  TwoHullEstimator& operator=(const TwoHullEstimator&) = delete;

  // Feeds one sample; implausible samples are counted and dropped.
  AddResult Add(const ProbeSample& sample);

  // Global time at local instant `local_ns`, from the samples seen so far.
  TimeEstimate Estimate(int64_t local_ns) const;

  // Forgets every sample (state back to kUnsynced); keeps the stats.
  void Reset();

  const EstimatorStats& stats() const { return stats_; }
  const EstimatorConfig& config() const { return config_; }
  size_t window_samples() const { return requests_.size(); }
  // Span of the window, newest t4 − oldest t4, ns.
  int64_t window_span_ns() const;
  size_t lower_hull_vertices() const { return requests_.chain_vertices(); }
  size_t upper_hull_vertices() const { return responses_.chain_vertices(); }
  // Bytes held by the window and hulls.
  size_t memory_bytes() const;

 private:
  HullChains Chains() const;
  void Recompute();
  // True when adding / removing these points could move a cached line.
  bool Touches(const Point& request, const Point& response) const;
  // Cuts the window to its longest consistent run of newest samples.
  void Recover();
  void PushPoints(const Point& request, const Point& response);
  void PopOldest();
  double AllowanceNs(int64_t x_rel) const;

  EstimatorConfig config_;
  EstimatorStats stats_;
  // Anchor of the relative coordinates: x_rel = local − anchor_x_,
  // y_rel = offset − anchor_y_.
  int64_t anchor_x_ = 0;
  int64_t anchor_y_ = 0;
  bool have_anchor_ = false;
  int64_t last_t1_ = 0;
  int64_t last_t4_ = 0;
  bool have_last_ = false;
  SlidingHull requests_{HullSide::kLower};
  SlidingHull responses_{HullSide::kUpper};
  Separation sep_;
  bool sep_dirty_ = true;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_ESTIMATOR_H_
