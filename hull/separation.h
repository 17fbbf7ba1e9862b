// hull/separation.h
//
// Lines that separate a lower hull (of request points, which lie above every
// consistent line) from an upper hull (of response points, which lie below).
//
// In the (x, y) plane a line is y = a + b*x. For a slope b define
//   L(b) = min over request points  (y - b*x)   (highest intercept allowed)
//   U(b) = max over response points (y - b*x)   (lowest intercept allowed)
// A line with slope b separates the points iff U(b) <= a <= L(b), so the
// set of separating lines is non-empty iff the concave function
// g(b) = L(b) - U(b) reaches 0. This file finds, exactly:
//   - the max-margin line: b* maximizing g, a = (L + U) / 2 (equal vertical
//     room to both hulls; the middle of the feasible band);
//   - the extreme lines: the largest and smallest b with g(b) = 0; they give
//     the bound of the offset at any x beyond (or before) the data;
//   - the bound at any x inside the data (max / min of a + b*x over the
//     feasible set).
// L, U and g are piecewise linear; their kinks are edge slopes of the hulls.
// Separate() merges each side's chains into one hull and walks the kinks in
// slope order (O(h) for h vertices, few and cheap steps: hulls of random
// delays hold tens of vertices). FeasibleRangeAt() narrows an interval of
// slopes by binary search over each chain's edges and the bridge between a
// side's two chains (O(log^2 h)). Slopes are exact rationals and every
// comparison is exact (128-bit integers).

#ifndef CLOCKSYNC_HULL_SEPARATION_H_
#define CLOCKSYNC_HULL_SEPARATION_H_

#include <array>
#include <cstdint>

#include "hull/sliding_hull.h"

namespace clocksync::hull {

// An exact slope num/den with den > 0.
struct Slope {
  int64_t num = 0;
  int64_t den = 1;
  double value() const { return static_cast<double>(num) / den; }
};

// -1, 0, +1 as a < b, a == b, a > b.
inline int CompareSlopes(const Slope& a, const Slope& b) {
  const __int128 l = static_cast<__int128>(a.num) * b.den;
  const __int128 r = static_cast<__int128>(b.num) * a.den;
  return (l > r) - (l < r);
}

// The chains of one window: up to two lower chains (request points) and two
// upper chains (response points). Empty chains are allowed.
struct HullChains {
  std::array<ChainView, 2> lower;
  std::array<ChainView, 2> upper;
};

// A line through an integer point (shifted vertically by `shift`) with a
// slope; evaluation keeps precision by working with the offset from that
// point.
struct Line {
  Point through{0, 0};
  double shift = 0;
  double slope = 0;
  double At(int64_t x) const {
    return static_cast<double>(through.y) + shift +
           slope * static_cast<double>(x - through.x);
  }
};

struct Separation {
  // False while the points leave the slope unbounded on either side (too
  // few samples, or none spanning time): no line can be estimated yet.
  bool bounded = false;
  // False when no line separates the hulls (they cross).
  bool feasible = false;
  // Everything below is set only when bounded && feasible.
  Slope mid_slope;
  Line mid;                 // The max-margin line.
  double margin = 0;        // g(b*) / 2: vertical room on each side.
  Slope max_slope;          // Largest feasible slope ...
  Line max_line;            // ... and its (unique) line.
  Slope min_slope;
  Line min_line;
  // The points the three lines rest on (x of request and response
  // vertices): removing any other point leaves every line optimal (it is
  // not in the lines' basis), so a sliding window only recomputes when one
  // of these leaves. Valid when supports_known.
  bool supports_known = false;
  std::array<int64_t, 4> request_support_x{};
  std::array<int64_t, 4> response_support_x{};
};

// Solves for the max-margin and extreme lines.
Separation Separate(const HullChains& chains);

// For chains whose max-margin line is known to be `sep`'s still (a point
// entered or left that is neither on it nor between it and the hulls: see
// TwoHullEstimator), recomputes only the smallest (update_min) and largest
// (update_max) feasible slopes' lines, with the same results as Separate.
// Needs sep bounded, feasible and supports_known. False when the chains
// turn out not to fit that (then call Separate).
bool UpdateExtremeLines(const HullChains& chains, bool update_min,
                        bool update_max, Separation* sep);

// Largest and smallest a + b*x over separating lines, for any x; needs a
// bounded, feasible separation of the same chains.
struct OffsetRange {
  double low;
  double high;
};
OffsetRange FeasibleRangeAt(const HullChains& chains, const Separation& sep,
                            int64_t x);

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_SEPARATION_H_
