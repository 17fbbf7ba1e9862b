// hull/direction_spread.h: DirectionSpread, the delay noise of each
// direction of the probes near its floor, for the adaptive window
// estimator's home window W* (adaptive_estimator.h, step 3).
//
// W* balances the wander's error against the delay noise of a window's
// estimate, which rests on each direction's lowest delays: their spacing
// goes with the density of the delays at their floor. The round trips'
// median excess (round_trips.h) measures the bulk instead. For
// exponential delays the two agree up to a constant; for heavy tails the
// median lies far out (Pareto with α 1.1 each way: 1.75 times the
// exponential's ratio of median to floor density), and W* came out too
// long (`pareto-10hz/alpha=1.1/scale=50us`, the 150 s level blended in
// where the 75 s one is the best).
//
// Each direction's points, the request offsets (θ + forward delay) and
// the negated response offsets (−θ + backward delay) of the last kSize
// samples, are read as heights above their own lower convex hull
// (ConvexChain, convex_chain.h): θ's line, and its bends where they are
// convex, cancel. The first quartile of the heights gives the
// direction's scale (exponential delays of mean μ: −ln(0.75) μ, less by
// about kHullHugging because the hull passes through the lowest points
// and hugs the rest), and the two directions' scales give the median
// round trip's excess that exponential delays of those scales would have
// both ways (0.839 × their sum), the unit the round trips' spread is in.
// A bend that is concave in a direction lifts the hull's chords off that
// direction's floor (a steep swing on quiet delays: several times the
// round trips' spread): the home uses the lesser of the two measures, so
// the directions only ever shorten W*.
//
// Thread safety: none; one owner.

#ifndef CLOCKSYNC_HULL_DIRECTION_SPREAD_H_
#define CLOCKSYNC_HULL_DIRECTION_SPREAD_H_

#include <array>
#include <cstdint>

namespace clocksync::hull {

class DirectionSpread {
 public:
  // Points held per direction (as RoundTrips holds round trips).
  static constexpr int kSize = 127;
  // Points needed before a spread is recorded.
  static constexpr int kMinPoints = 64;
  // The spread is the smallest of this many recorded (as
  // RoundTrips::kSpreadFloorCheckpoints).
  static constexpr int kFloorRecords = 4;
  // The first quartile of the heights above the lower hull of kSize
  // points of exponential delays is about 0.85 times the quartile's
  // excess over the floor itself (the hull hugs the points; 0.83–0.87 on
  // 102's delays, 0.86 in this file's test). The scale divides by 0.80
  // instead: for exponential delays the directions then read about 7 %
  // above the round trips' spread and the home keeps that, so their own
  // noise does not shorten W* by chance (at 0.87 the lesser of the two
  // was often below the round trips': linear random clocks 1–8 % worse).
  static constexpr double kHullHugging = 0.80;

  // A sample at local time x (ns): its request offset and its negated
  // response offset (ns, relative to any fixed origin).
  void Add(int64_t x, double request_offset, double negated_response_offset);

  // At a checkpoint: records the spread of the points held (unless
  // `skip`, e.g. while they include congestion, or fewer than kMinPoints
  // are held) and returns the smallest of the last kFloorRecords
  // recorded, 0 before any.
  double SpreadFloor(bool skip);

 private:
  // The first quartile of one direction's heights above its lower hull,
  // the points taken oldest first.
  double QuartileHeight(const std::array<double, kSize>& y) const;

  std::array<int64_t, kSize> x_{};
  std::array<double, kSize> request_{};
  std::array<double, kSize> negated_response_{};
  int count_ = 0;
  int next_ = 0;
  std::array<double, kFloorRecords> records_{};
  int records_count_ = 0;
  int records_next_ = 0;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_DIRECTION_SPREAD_H_
