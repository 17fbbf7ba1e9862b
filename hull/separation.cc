// Exact separation of the request and response hulls; see separation.h.
//
// Notation: for a slope b, the support of the lower side is the request
// vertex minimizing y - b*x, the support of the upper side the response
// vertex maximizing it. At a kink two vertices tie; `Tie` picks the one with
// the smaller or larger x, which gives the one-sided derivatives:
//   L'(b+) = -x(lower support, max x)   U'(b+) = -x(upper support, min x)
//   L'(b-) = -x(lower support, min x)   U'(b-) = -x(upper support, max x)

#include "hull/separation.h"

#include <algorithm>
#include <cassert>

namespace clocksync::hull {
namespace {

enum class Tie { kMinX, kMaxX };

Slope MakeSlope(int64_t num, int64_t den) {
  assert(den != 0);
  return den > 0 ? Slope{num, den} : Slope{-num, -den};
}

Slope EdgeSlope(const ChainView& c, int k) {
  const Point& a = c.vertex(k);
  const Point& b = c.vertex(k + 1);
  return Slope{b.y - a.y, b.x - a.x};  // x strictly increases: den > 0.
}

// q*y - p*x: the intercept y - b*x scaled by the (positive) denominator.
__int128 ScaledIntercept(const Point& v, const Slope& b) {
  return static_cast<__int128>(b.den) * v.y -
         static_cast<__int128>(b.num) * v.x;
}

// Number of leading indices in [0, n) for which `cond` holds, for a
// condition that holds on a prefix.
template <typename Cond>
int CountPrefix(int n, Cond cond) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (cond(mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Index of the support vertex of one chain at slope b.
int ChainSupport(const ChainView& c, bool lower, const Slope& b, Tie tie) {
  const int edges = c.size() - 1;
  if (lower) {
    // Edge slopes increase left to right; the minimizer follows the edges
    // whose slope is below b (or equal, for the right-hand tie).
    return CountPrefix(edges, [&](int k) {
      const int cmp = CompareSlopes(EdgeSlope(c, k), b);
      return tie == Tie::kMinX ? cmp < 0 : cmp <= 0;
    });
  }
  // Upper chain: edge slopes decrease left to right.
  return CountPrefix(edges, [&](int k) {
    const int cmp = CompareSlopes(EdgeSlope(c, k), b);
    return tie == Tie::kMinX ? cmp > 0 : cmp >= 0;
  });
}

// Support vertex of one side (one or two chains) at slope b.
Point SideSupport(const std::array<ChainView, 2>& chains, bool lower,
                  const Slope& b, Tie tie) {
  bool have = false;
  Point best{0, 0};
  __int128 best_value = 0;
  for (const ChainView& c : chains) {
    if (c.empty()) continue;
    const Point& v = c.vertex(ChainSupport(c, lower, b, tie));
    const __int128 value = ScaledIntercept(v, b);
    bool better;
    if (!have) {
      better = true;
    } else if (value != best_value) {
      better = lower ? value < best_value : value > best_value;
    } else {
      better = tie == Tie::kMinX ? v.x < best.x : v.x > best.x;
    }
    if (better) {
      have = true;
      best = v;
      best_value = value;
    }
  }
  assert(have);
  return best;
}

// Sign of g(b) = L(b) - U(b).
int SignOfGap(const HullChains& h, const Slope& b) {
  const Point a = SideSupport(h.lower, true, b, Tie::kMinX);
  const Point u = SideSupport(h.upper, false, b, Tie::kMinX);
  const __int128 g = ScaledIntercept(a, b) - ScaledIntercept(u, b);
  return (g > 0) - (g < 0);
}

// g'(b+) and g'(b-) as integers (x differences).
int64_t GapSlopeRight(const HullChains& h, const Slope& b) {
  return SideSupport(h.upper, false, b, Tie::kMinX).x -
         SideSupport(h.lower, true, b, Tie::kMaxX).x;
}
int64_t GapSlopeLeft(const HullChains& h, const Slope& b) {
  return SideSupport(h.upper, false, b, Tie::kMaxX).x -
         SideSupport(h.lower, true, b, Tie::kMinX).x;
}

// An open interval of slopes with no kink of the searched functions inside.
struct Interval {
  bool has_lo = false;
  bool has_hi = false;
  Slope lo;
  Slope hi;

  bool Contains(const Slope& b) const {
    return (!has_lo || CompareSlopes(lo, b) < 0) &&
           (!has_hi || CompareSlopes(b, hi) < 0);
  }
  // A slope strictly inside.
  Slope Interior() const {
    if (has_lo && has_hi) return Slope{lo.num + hi.num, lo.den + hi.den};
    if (has_lo) return Slope{lo.num + lo.den, lo.den};
    if (has_hi) return Slope{hi.num - hi.den, hi.den};
    return Slope{0, 1};
  }
  void Split(const Slope& b, bool pred_at_b) {
    if (pred_at_b) {
      if (!has_hi || CompareSlopes(b, hi) < 0) {
        hi = b;
        has_hi = true;
      }
    } else if (!has_lo || CompareSlopes(lo, b) < 0) {
      lo = b;
      has_lo = true;
    }
  }
};

// Narrows to the piece (lo, hi) of the piecewise-linear functions of the
// chosen sides where a predicate, monotone in the slope (false then true),
// switches: pred(lo) is false, pred(hi) is true, and neither a chain edge
// nor a bridge between two chains of a side has its slope inside.
template <typename Pred>
Interval Narrow(const HullChains& h, bool use_lower, bool use_upper,
                Pred pred) {
  Interval iv;
  auto scan_chain = [&](const ChainView& c, bool lower) {
    const int edges = c.size() - 1;
    if (edges <= 0) return;
    // Ascending slope order: lower chains left to right, upper right to left.
    auto slope_at = [&](int j) {
      return EdgeSlope(c, lower ? j : edges - 1 - j);
    };
    const int first_true = CountPrefix(edges, [&](int j) {
      return !pred(slope_at(j));
    });
    if (first_true > 0) iv.Split(slope_at(first_true - 1), false);
    if (first_true < edges) iv.Split(slope_at(first_true), true);
  };
  auto scan_bridge = [&](const std::array<ChainView, 2>& chains, bool lower) {
    if (chains[0].empty() || chains[1].empty()) return;
    const Slope inside = iv.Interior();
    const Point& l = chains[0].vertex(ChainSupport(chains[0], lower, inside,
                                                   Tie::kMinX));
    const Point& r = chains[1].vertex(ChainSupport(chains[1], lower, inside,
                                                   Tie::kMinX));
    const Slope bridge = MakeSlope(r.y - l.y, r.x - l.x);
    if (iv.Contains(bridge)) iv.Split(bridge, pred(bridge));
  };
  if (use_lower) {
    for (const ChainView& c : h.lower) scan_chain(c, true);
  }
  if (use_upper) {
    for (const ChainView& c : h.upper) scan_chain(c, false);
  }
  if (use_lower) scan_bridge(h.lower, true);
  if (use_upper) scan_bridge(h.upper, false);
  return iv;
}

// The slope b where a + b*x through supports l (lower) and u (upper) meet:
// the root of g on a linear piece.
Slope RootThrough(const Point& l, const Point& u) {
  return MakeSlope(l.y - u.y, l.x - u.x);
}

void MinMaxX(const std::array<ChainView, 2>& chains, int64_t* min_x,
             int64_t* max_x) {
  bool have = false;
  for (const ChainView& c : chains) {
    if (c.empty()) continue;
    const int64_t lo = c.vertex(0).x;
    const int64_t hi = c.vertex(c.size() - 1).x;
    *min_x = have ? std::min(*min_x, lo) : lo;
    *max_x = have ? std::max(*max_x, hi) : hi;
    have = true;
  }
}

bool HasPoints(const std::array<ChainView, 2>& chains) {
  return !chains[0].empty() || !chains[1].empty();
}

}  // namespace

Separation Separate(const HullChains& h) {
  Separation sep;
  if (!HasPoints(h.lower) || !HasPoints(h.upper)) return sep;
  int64_t lower_min_x = 0, lower_max_x = 0, upper_min_x = 0, upper_max_x = 0;
  MinMaxX(h.lower, &lower_min_x, &lower_max_x);
  MinMaxX(h.upper, &upper_min_x, &upper_max_x);
  // g'(+inf) = upper_min_x - lower_max_x and g'(-inf) = upper_max_x -
  // lower_min_x: g must fall on both sides for its maximum to exist.
  sep.bounded = upper_min_x < lower_max_x && upper_max_x > lower_min_x;
  if (!sep.bounded) return sep;

  // The maximum of g: the first kink where g'(b+) < 0. On the piece just
  // before it g rises (or is flat: then find where the flat top starts).
  const Interval top_right = Narrow(h, true, true, [&](const Slope& b) {
    return GapSlopeRight(h, b) < 0;
  });
  assert(top_right.has_hi);
  Slope best = top_right.hi;
  if (GapSlopeRight(h, top_right.Interior()) == 0) {
    const Interval top_left = Narrow(h, true, true, [&](const Slope& b) {
      return GapSlopeLeft(h, b) <= 0;
    });
    assert(top_left.has_lo);
    best = Slope{top_left.lo.num + best.num, top_left.lo.den + best.den};
  }
  const Point l = SideSupport(h.lower, true, best, Tie::kMinX);
  const Point u = SideSupport(h.upper, false, best, Tie::kMinX);
  sep.feasible = ScaledIntercept(l, best) >= ScaledIntercept(u, best);
  if (!sep.feasible) return sep;

  sep.mid_slope = best;
  const double slope = best.value();
  sep.margin = (static_cast<double>(l.y - u.y) -
                slope * static_cast<double>(l.x - u.x)) /
               2;
  sep.mid = Line{l, -sep.margin, slope};

  // Largest feasible slope: where g falls through 0 right of the top.
  const Interval right = Narrow(h, true, true, [&](const Slope& b) {
    return CompareSlopes(b, best) > 0 && SignOfGap(h, b) < 0;
  });
  {
    const Slope inside = right.Interior();
    const Point rl = SideSupport(h.lower, true, inside, Tie::kMinX);
    const Point ru = SideSupport(h.upper, false, inside, Tie::kMinX);
    sep.max_slope = rl.x == ru.x ? best : RootThrough(rl, ru);
    sep.max_line = Line{rl, 0, sep.max_slope.value()};
  }
  // Smallest feasible slope: where g rises through 0 left of the top.
  const Interval left = Narrow(h, true, true, [&](const Slope& b) {
    return CompareSlopes(b, best) >= 0 || SignOfGap(h, b) >= 0;
  });
  {
    const Slope inside = left.Interior();
    const Point ll = SideSupport(h.lower, true, inside, Tie::kMinX);
    const Point lu = SideSupport(h.upper, false, inside, Tie::kMinX);
    sep.min_slope = ll.x == lu.x ? best : RootThrough(ll, lu);
    sep.min_line = Line{ll, 0, sep.min_slope.value()};
  }
  return sep;
}

OffsetRange FeasibleRangeAt(const HullChains& h, const Separation& sep,
                            int64_t x) {
  assert(sep.bounded && sep.feasible);
  // Evaluates a + b*x for the line of slope b through a side's support.
  auto through_support = [&](bool lower, const Slope& b) {
    const Point v = lower ? SideSupport(h.lower, true, b, Tie::kMinX)
                          : SideSupport(h.upper, false, b, Tie::kMinX);
    return static_cast<double>(v.y) +
           b.value() * static_cast<double>(x - v.x);
  };
  // Clamps the optimizing slope into [min_slope, max_slope]; returns the
  // value there (the extreme lines pass through both hulls' supports).
  auto clamped = [&](bool lower, bool at_minus_inf, bool at_plus_inf,
                     const Slope& b) {
    if (at_minus_inf) return sep.min_line.At(x);
    if (at_plus_inf) return sep.max_line.At(x);
    if (CompareSlopes(b, sep.min_slope) <= 0) return sep.min_line.At(x);
    if (CompareSlopes(b, sep.max_slope) >= 0) return sep.max_line.At(x);
    return through_support(lower, b);
  };

  // High end: maximize the concave h(b) = L(b) + b*x, h'(b+) = x - x_L.
  double high;
  {
    const Interval iv = Narrow(h, true, false, [&](const Slope& b) {
      return SideSupport(h.lower, true, b, Tie::kMaxX).x > x;
    });
    const bool falling_everywhere =
        SideSupport(h.lower, true, iv.Interior(), Tie::kMaxX).x > x;
    high = clamped(true, falling_everywhere, !iv.has_hi, iv.hi);
  }
  // Low end: minimize the convex k(b) = U(b) + b*x, k'(b+) = x - x_U.
  double low;
  {
    const Interval iv = Narrow(h, false, true, [&](const Slope& b) {
      return SideSupport(h.upper, false, b, Tie::kMinX).x <= x;
    });
    const bool rising_everywhere =
        SideSupport(h.upper, false, iv.Interior(), Tie::kMinX).x <= x;
    low = clamped(false, rising_everywhere, !iv.has_hi, iv.hi);
  }
  return OffsetRange{low, high};
}

}  // namespace clocksync::hull
