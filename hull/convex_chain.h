// hull/convex_chain.h: ConvexChain, the lower (or upper) convex hull of
// points added in order of t, and its extreme of y − slope t for any slope.
//
// The adaptive estimator's short references (adaptive_estimator.h, step 1)
// keep their samples' requests as a lower chain and responses as an upper
// one: the minimum of y − slope t over all the points is attained on the
// lower hull (the maximum on the upper), so a few vertices stand for all
// the samples, and the slope can be chosen when the reference is scored.
//
// Thread safety: none; one owner.

#ifndef CLOCKSYNC_HULL_CONVEX_CHAIN_H_
#define CLOCKSYNC_HULL_CONVEX_CHAIN_H_

#include <utility>
#include <vector>

namespace clocksync::hull {

class ConvexChain {
 public:
  // A lower chain answers minima, an upper one maxima.
  explicit ConvexChain(bool lower) : lower_(lower) {}

  // Adds (t, y); t must not be below the last point's.
  void Add(double t, double y);
  // The minimum (lower chain) or maximum (upper) of y − slope t over every
  // point added; ±infinity when empty.
  double Extreme(double slope) const;
  // The chain's y at t (linear between its vertices; the nearest end's
  // outside them); NaN when empty.
  double At(double t) const;
  bool empty() const { return points_.empty(); }
  // Drops the points and their memory.
  void Clear() { points_ = {}; }

 private:
  bool lower_;
  std::vector<std::pair<double, double>> points_;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_CONVEX_CHAIN_H_
