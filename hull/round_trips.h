// hull/round_trips.h: RoundTrips, what the adaptive window estimator
// (adaptive_estimator.h) reads from its samples' round trips
// (t4 − t1) − (t3 − t2), apart from the hulls: the probe rate, the delay
// spread its home window W* is computed from, and congestion episodes.
//
// - Spread: the median round trip's excess over the minimum, over the last
//   kSize round trips, recorded at each checkpoint; the home uses the
//   smallest of the last kSpreadFloorCheckpoints recorded, and none is
//   recorded while the round trips held include a congested run, so that
//   an episode's round trips do not move the home.
// - Congestion: a round trip above the clean limit (the minimum + 2 × the
//   clean spread, the median of the last kCleanSpreads spreads recorded)
//   is congested; a run of kCongestedRun of them opens a congested
//   interval, from the last clean round trip to the first one at or below
//   the limit again. Intervals older than the longest window are dropped;
//   one open for half of it is a longer route, the new normal: the
//   intervals are dropped and the limit is learnt afresh.
//
// Thread safety: none; one owner.

#ifndef CLOCKSYNC_HULL_ROUND_TRIPS_H_
#define CLOCKSYNC_HULL_ROUND_TRIPS_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace clocksync::hull {

class RoundTrips {
 public:
  // The round trips held for the median, rate and span.
  static constexpr int kSize = 127;
  // The home's spread is the smallest over this many checkpoints (D/2
  // apart: over 28 s with a 37.5 s shortest window).
  static constexpr int kSpreadFloorCheckpoints = 4;
  // The clean spread is the median of this many recorded spreads.
  static constexpr int kCleanSpreads = 15;
  // Round trips above the clean limit in a row that open an interval.
  static constexpr int kCongestedRun = 8;
  // An interval open for this fraction of the longest window is a longer
  // route, not an episode (the adaptive estimator judges its levels'
  // ranges afresh after a blow-up as long).
  static constexpr double kNewNormalFraction = 0.5;

  // `longest_window_ns`: how long intervals are kept; half of it makes a
  // longer route the new normal.
  explicit RoundTrips(int64_t longest_window_ns);

  // The round trip (ns) of the sample whose t4 is x (non-decreasing).
  void Add(double round_trip_ns, int64_t x);

  // Round trips held (at most kSize), and newest − oldest t4 of them.
  int count() const { return count_; }
  int64_t SpanNs() const;

  // At a checkpoint at x: records the spread of the round trips held
  // (unless they include a congested run, or it is the first) and returns
  // the smallest of the last kSpreadFloorCheckpoints recorded, at least
  // 1 ns. Needs count() > 0.
  double SpreadFloor(int64_t x);

  // Whether the round trips held at x include a congested run.
  bool CongestionHeld(int64_t x) const {
    return have_last_congested_ && x - last_congested_x_ <= SpanNs();
  }

  // How long [from, to] lies in congested intervals, ns.
  double CongestedNs(int64_t from, int64_t to) const;
  // Intervals held (within the longest window), and whether the newest
  // round trip is in one.
  int congested_intervals() const {
    return static_cast<int>(congested_.size());
  }
  bool congested() const { return open_; }
  // A round trip above this (ns) counts as congested; 0 before it is known.
  double clean_limit_ns() const { return have_limit_ ? limit_ : 0; }

 private:
  // The median (the n/2-th smallest of n) and the minimum of the round
  // trips held; records the median for the next call.
  void Median(double* median, double* minimum);
  // Classifies the newest round trip and updates the intervals.
  void TrackCongestion(double round_trip_ns, int64_t x);
  // Records a spread measured outside congestion and sets the limit.
  void RecordCleanSpread(double spread_ns, double minimum_ns);

  int64_t longest_window_ns_;
  // The last round trips (ring) and their t4.
  std::array<double, kSize> values_{};
  std::array<int64_t, kSize> x_{};
  int count_ = 0;
  int next_ = 0;
  // The median at the last checkpoint, from which the next one is found
  // by counting (see Median).
  double last_median_ = 0;
  bool have_last_median_ = false;
  // The spreads recorded at the last checkpoints (ring), for the home.
  std::array<double, kSpreadFloorCheckpoints> spreads_{};
  int spreads_count_ = 0;
  int spreads_next_ = 0;
  // The spreads recorded outside congestion (ring; their median is the
  // clean spread), and the limit above which a round trip is congested.
  std::array<double, kCleanSpreads> clean_spreads_{};
  int clean_spreads_count_ = 0;
  int clean_spreads_next_ = 0;
  double limit_ = 0;
  bool have_limit_ = false;
  // Round trips above the limit in a row, and the last one's t4 once a
  // run was long enough to count.
  int run_ = 0;
  int64_t last_congested_x_ = 0;
  bool have_last_congested_ = false;
  int64_t last_clean_x_ = 0;  // The last round trip at or below the limit.
  // Congested intervals [begin, end] of t4, oldest first; the last one is
  // open while open_. A vector: empty (no allocation) on a clean network,
  // and a few entries at most otherwise (a cluster simulator holds one per
  // node).
  std::vector<std::pair<int64_t, int64_t>> congested_;
  bool open_ = false;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_ROUND_TRIPS_H_
