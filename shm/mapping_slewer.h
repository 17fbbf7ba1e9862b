// shm/mapping_slewer.h
//
// MappingSlewer: turns the estimator's successive answers into the mapping
// the daemon publishes, so that global time read from shared memory stays
// continuous and monotonic: corrections are slewed in at a bounded rate (as
// chrony slews a clock) and stepped only at the first synchronization or
// after a detected jump.
//
// Each update gives the target: the estimated global time at raw instant
// `raw_ns`, its rate (global ns per raw ns − 1) and its bound. The slewer
// anchors the new mapping at `raw_ns` on the value the previous mapping has
// there (continuity) and adds to the target rate a correction that removes
// the remaining offset Δ = target − published over `slew_time_ns`, clamped to
// ±`max_slew_ppm`. The published bound covers the target's bound plus |Δ|
// and grows by the target's growth plus |correction|, so it stays valid while
// the correction runs on between updates.
//
// NodeSlewTarget builds a node's target from its estimator (as the daemon's
// sync loop and the cluster simulator, tools/simulate_cluster, both do);
// ToShmState maps the estimator's state to the segment's.
//
// Pure logic (no clock read); one owner (the sync loop).

#ifndef CLOCKSYNC_SHM_MAPPING_SLEWER_H_
#define CLOCKSYNC_SHM_MAPPING_SLEWER_H_

#include <cstdint>

#include "hull/estimator.h"
#include "shm/shm_publisher.h"

namespace clocksync {

struct SlewConfig {
  // Largest rate correction, ppm (chrony's maxslewrate is 83333 ppm; a
  // smaller one keeps tracer timestamps closer to the true rate).
  double max_slew_ppm = 500;
  // Time over which a correction is spread (exponential convergence).
  int64_t slew_time_ns = 1'000'000'000;
  // After a detected jump, offsets larger than this are stepped, not slewed.
  int64_t step_threshold_ns = 1'000'000;
};

// Returns an empty string when valid, else "key: reason".
const char* ValidateSlewConfig(const SlewConfig& config);

struct SlewTarget {
  int64_t raw_ns = 0;          // The instant of this update.
  int64_t global_ns = 0;       // Estimated global time at raw_ns.
  double rate_adj = 0;         // d(global)/d(raw) − 1 of the estimate.
  int64_t earliest_ns = 0;     // The estimate's bound at raw_ns.
  int64_t latest_ns = 0;
  double bound_growth_ppb = 0; // How fast that bound widens (per ns of |dt|).
  clocksync_state state = CLOCKSYNC_STATE_UNSYNCED;
  bool jump_detected = false;  // The estimator saw an inconsistency.
  uint32_t depth = 0;
};

// The segment's state for an estimator state.
clocksync_state ToShmState(hull::SyncState state);

// A node's slew target at raw instant `raw_ns` from its estimator, given the
// local clock's readings at raw_ns, raw_ns + 1 s and raw_ns + 10 s (the
// same for a node whose local clock is its raw clock). Rate and bound
// growth come from the estimates 1 s and 10 s ahead (the bound's growth is
// convex: the secant over 10 s is an upper envelope up to then). The
// parent's bound is already in the estimate (each sample was widened by
// it), so bounds add up down the tree. Unsynced: only raw_ns, depth and the
// state are set. Holdover and jump detection are the caller's.
SlewTarget NodeSlewTarget(const hull::Estimator& estimator, int64_t raw_ns,
                          int64_t local_now, int64_t local_in_1s,
                          int64_t local_in_10s, uint32_t depth);

class MappingSlewer {
 public:
  explicit MappingSlewer(const SlewConfig& config = {}) : config_(config) {}

  // The mapping to publish for this update.
  Mapping Update(const SlewTarget& target);
  // Slews with `config` from the next update on (a reload). Safe at any
  // time: each update sizes its correction and bound afresh.
  void set_config(const SlewConfig& config) { config_ = config; }

  // Global time of the last mapping at raw instant `raw_ns` (exact, ns).
  int64_t PublishedAt(int64_t raw_ns) const;
  bool synchronized() const { return have_mapping_; }
  // Offset left to slew at the last update: target − published, ns.
  int64_t last_correction_ns() const { return last_delta_ns_; }
  uint64_t steps() const { return steps_; }

 private:
  SlewConfig config_;
  bool have_mapping_ = false;
  Mapping last_;
  int64_t last_delta_ns_ = 0;
  uint64_t steps_ = 0;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_SHM_MAPPING_SLEWER_H_
