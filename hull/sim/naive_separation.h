// hull/sim/naive_separation.h
//
// A slow, obvious reference for separation.h, for tests only: it treats the
// window as a linear program over every point (no hulls) and enumerates all
// candidate slopes (every pairwise slope of all points). O(n^3).

#ifndef CLOCKSYNC_HULL_SIM_NAIVE_SEPARATION_H_
#define CLOCKSYNC_HULL_SIM_NAIVE_SEPARATION_H_

#include <vector>

#include "hull/sliding_hull.h"

namespace clocksync::hull {

struct NaiveSeparation {
  bool bounded = false;
  bool feasible = false;
  long double margin = 0;     // max over slopes of g(b) / 2
  long double mid_slope = 0;  // argmax (any maximizer)
  long double max_slope = 0;  // largest b with g(b) >= 0
  long double min_slope = 0;
  // Line values at x: a + b*x with a = (L(b) + U(b)) / 2 at the argmax.
  long double MidAt(long double x) const { return mid_a + mid_slope * x; }
  long double mid_a = 0;
  std::vector<Point> requests;
  std::vector<Point> responses;
};

NaiveSeparation NaiveSeparate(const std::vector<Point>& requests,
                              const std::vector<Point>& responses);

// Largest and smallest a + b*x over all lines separating the points.
void NaiveRangeAt(const NaiveSeparation& sep, long double x, long double* low,
                  long double* high);

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_SIM_NAIVE_SEPARATION_H_
