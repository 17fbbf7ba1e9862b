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
//   the limit again.
// - Floor rises: a standing queue smaller than the limit's margin (on a
//   path whose minimum round trip is many times its jitter, a queue of a
//   few jitter scales) leaves most round trips below the limit, yet moves
//   a short window's hulls by half the queue. It raises the floor
//   instead: the smallest of the last round trips (those of the floor
//   window, at least kFloorMinRoundTrips) more than kFloorRiseSpreads
//   clean spreads above the clean floor (the smallest minimum of the
//   checkpoints whose spreads were recorded clean) opens a floor-rise
//   interval, from the last round trip at or below that level to the
//   first floor below it again. Round trips are independent of the
//   clock: neither a wander nor a bend moves them.
// Intervals of either kind older than the longest window are dropped. A
// run open for half of it, or a floor risen for all of it (no window holds
// a round trip at the clean floor any more), is a longer route, the new
// normal: the intervals are dropped and the limits are learnt afresh. (A
// floor rise lasts through a whole episode, where the runs break up:
// after half of the daemon's 300 s it took a 177 s episode for a route
// and answered from a 75 s level full of it, random r11 of seed 3 4.1 →
// 12.6 × the best fixed window; 3.2 × now.)
//
// Thread safety: none; one owner.

#ifndef CLOCKSYNC_HULL_ROUND_TRIPS_H_
#define CLOCKSYNC_HULL_ROUND_TRIPS_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
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
  // A run interval open for this fraction of the longest window is a
  // longer route, not an episode, where the owner allows it (the adaptive
  // estimator judges its levels' ranges afresh after a blow-up as long).
  static constexpr double kNewNormalFraction = 0.5;
  // The floor is the smallest of the round trips of the floor window, and
  // of at least this many (fewer where the ring holds fewer).
  static constexpr int kFloorMinRoundTrips = 16;
  // The floor has risen when it lies this many clean spreads above the
  // clean floor. For exponential delays each way the smallest of 16 round
  // trips lies that far above by chance with probability 0.64^16, about
  // 10⁻³ (less over the 19 of a 18.75 s floor window at 1 probe/s, 10⁻⁴);
  // 0.5 to 1 moved no scenario's count by more than one
  // (docs/ACCURACY.md).
  static constexpr double kFloorRiseSpreads = 0.75;

  // Which intervals a query counts.
  enum class Intervals { kAll, kRunsOnly };

  // `longest_window_ns`: how long intervals are kept; half of it makes a
  // longer route the new normal. `floor_window_ns`: the stretch whose
  // smallest round trip is the floor (the adaptive estimator's D, half its
  // shortest window).
  RoundTrips(int64_t longest_window_ns, int64_t floor_window_ns);

  // The round trip (ns) of the sample whose t4 is x (non-decreasing).
  void Add(double round_trip_ns, int64_t x);

  // Whether a run open for kNewNormalFraction of the longest window may be
  // taken as a longer route now (the owner's judgement; true unless set).
  void set_new_normal_allowed(bool allowed) { new_normal_allowed_ = allowed; }

  // Round trips held (at most kSize), and newest − oldest t4 of them.
  int count() const { return count_; }
  int64_t SpanNs() const;

  // At a checkpoint at x: records the spread of the round trips held
  // (unless they include a congested run, or it is the first) and returns
  // the smallest of the last kSpreadFloorCheckpoints recorded, at least
  // 1 ns. Needs count() > 0.
  double SpreadFloor(int64_t x);

  // Whether the round trips held at x include a congested run or a risen
  // floor.
  bool CongestionHeld(int64_t x) const {
    return runs_.MarkedWithin(x, SpanNs()) || risen_.MarkedWithin(x, SpanNs());
  }

  // How long [from, to] lies in congested intervals (of either kind, or
  // runs only), ns.
  double CongestedNs(int64_t from, int64_t to,
                     Intervals which = Intervals::kAll) const;
  // Intervals held (within the longest window; of either kind, or runs
  // only), and whether the newest round trip is in one (of either kind).
  int congested_intervals(Intervals which = Intervals::kAll) const {
    return static_cast<int>(runs_.intervals.size()) +
           (which == Intervals::kAll ? static_cast<int>(risen_.intervals.size())
                                     : 0);
  }
  bool congested() const { return runs_.open || risen_.open; }
  // Calls f(begin, end) for each stretch (begin, end) of time up to end_x
  // outside the congested intervals (of either kind, or runs only),
  // newest first, until f returns false. None is empty; the oldest begins
  // at INT64_MIN: what lies before the oldest interval held counts as
  // clean.
  template <typename F>
  void ForEachCleanStretch(int64_t end_x, Intervals which, F f) const {
    // Newest first by their ends (each list is in time order and its
    // intervals do not overlap); an interval is clipped to what lies
    // before those walked already, so that the two kinds' overlaps count
    // once.
    const auto& runs = runs_.intervals;
    const auto& risen = risen_.intervals;
    size_t i = runs.size();
    size_t j = which == Intervals::kAll ? risen.size() : 0;
    int64_t reach = end_x;  // Walked back to here.
    while (i > 0 || j > 0) {
      const bool run =
          j == 0 || (i > 0 && runs[i - 1].second >= risen[j - 1].second);
      const auto& [begin, end] = run ? runs[--i] : risen[--j];
      const int64_t high = std::min(end, reach);
      if (high <= begin) continue;
      if (high < reach && !f(high, reach)) return;
      reach = begin;
    }
    f(std::numeric_limits<int64_t>::min(), reach);
  }
  // A round trip above this (ns) counts as congested; 0 before it is known.
  double clean_limit_ns() const { return have_limit_ ? limit_ : 0; }
  // A floor above this (ns) has risen; 0 before it is known.
  double floor_limit_ns() const { return have_limit_ ? floor_limit_ : 0; }
  // How far the floor (the smallest round trip of the floor window) lies
  // above the clean floor, ns: the depth of a standing queue, one way or
  // both; 0 before the limits are known.
  double FloorRiseNs() const;

 private:
  // Congested intervals [begin, end] of t4 of one kind, oldest first; the
  // last one is open while `open`. A vector: empty (no allocation) on a
  // clean network, and a few entries at most otherwise (a cluster
  // simulator holds one per node).
  struct IntervalList {
    std::vector<std::pair<int64_t, int64_t>> intervals;
    bool open = false;
    // The last round trip marked, once one was.
    int64_t last_marked_x = 0;
    bool marked = false;

    // Extends the open interval to x, or opens [begin, x].
    void Mark(int64_t begin, int64_t x) {
      last_marked_x = x;
      marked = true;
      if (open) {
        intervals.back().second = x;
      } else {
        intervals.emplace_back(begin, x);
        open = true;
      }
    }
    // How long the open interval has lasted at x (0 when none is open).
    int64_t OpenFor(int64_t x) const {
      return open ? x - intervals.back().first : 0;
    }
    bool MarkedWithin(int64_t x, int64_t span_ns) const {
      return marked && x - last_marked_x <= span_ns;
    }
    // Drops the intervals that ended before `oldest`.
    void Expire(int64_t oldest) {
      const auto expired =
          std::find_if(intervals.begin(), intervals.end(),
                       [&](const auto& i) { return i.second >= oldest; });
      intervals.erase(intervals.begin(), expired);
    }
    void Clear() { *this = IntervalList(); }
  };

  // The median (the n/2-th smallest of n) and the minimum of the round
  // trips held; records the median for the next call.
  void Median(double* median, double* minimum);
  // Classifies the newest round trip and updates the intervals.
  void TrackCongestion(double round_trip_ns, int64_t x);
  // Moves the floor window on to the newest round trip (at ring position
  // `newest`) and updates the floor-rise intervals.
  void TrackFloor(int newest, int64_t x);
  // Records a spread measured outside congestion and sets the limits.
  void RecordCleanSpread(double spread_ns, double minimum_ns);
  // Drops the intervals of both kinds; the limits are learnt afresh.
  void StartAfresh();

  int64_t longest_window_ns_;
  bool new_normal_allowed_ = true;
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
  // Round trips above the limit in a row, the last one at or below it, and
  // the intervals of runs long enough to count.
  int run_ = 0;
  int64_t last_clean_x_ = 0;
  IntervalList runs_;
  // The floor window: round trips added in all, the sequence number of the
  // oldest in the window, and the ring positions of its ascending minima
  // (a monotone queue, front = the floor; oldest first from `queue_head_`).
  int64_t floor_window_ns_;
  int64_t added_ = 0;
  int64_t window_begin_ = 0;
  std::array<uint8_t, kSize> queue_{};
  int queue_head_ = 0;
  int queue_size_ = 0;
  // The minima of the checkpoints whose spreads were recorded clean (as
  // clean_spreads_), and the floor limit: their smallest + kFloorRiseSpreads
  // clean spreads.
  std::array<double, kCleanSpreads> clean_minima_{};
  double clean_floor_ = 0;  // Their smallest.
  double floor_limit_ = 0;
  // The last round trip at or below the floor limit, and the floor-rise
  // intervals.
  int64_t last_low_x_ = 0;
  IntervalList risen_;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_ROUND_TRIPS_H_
