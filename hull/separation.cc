// hull/separation.cc
//
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
#include <vector>

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
// chosen sides (used for bounds at x inside the data) where a predicate, monotone in the slope (false then true),
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

bool HasPoints(const std::array<ChainView, 2>& chains) {
  return !chains[0].empty() || !chains[1].empty();
}

}  // namespace

namespace {

// The hull of a side's (up to two) chains as one vertex list, left to
// right: the chains are x-separated, so one monotone-chain pass over their
// vertices in order merges them. Each chain is strictly convex already, so
// the pass can only pop around the bridge between them: the first chain is
// copied as it is, and once two consecutive vertices of the second chain
// stand at the end, the rest of it is copied as it is too (the pass would
// pop nothing more).
// Returns the merged hull's size; `out` has room for both chains.
int MergeSide(const std::array<ChainView, 2>& chains, bool lower, Point* out) {
  const ChainView& first = chains[0];
  const ChainView& second = chains[1];
  Point* v = out;
  first.CopyTo(v);
  int n = first.size();
  int k = 0;
  // Vertices of the second chain at the end of the list.
  int from_second = 0;
  for (; k < second.size() && from_second < 2; ++k) {
    const Point& p = second.vertex(k);
    while (n >= 2) {
      const __int128 turn = Cross(v[n - 2], v[n - 1], p);
      if (lower ? turn > 0 : turn < 0) break;
      --n;
      if (from_second > 0) --from_second;
    }
    v[n++] = p;
    ++from_second;
  }
  for (; k < second.size(); ++k) v[n++] = second.vertex(k);
  return n;
}

// Walks the kinks of g in increasing slope order. The lower support moves
// right across lower edges (ascending slopes, left to right); the upper
// support moves left across upper edges (ascending slopes, right to left).
class KinkWalk {
 public:
  KinkWalk(const Point* lower, int lower_size, const Point* upper,
           int upper_size)
      : lower_(lower), upper_(upper), lower_size_(lower_size), i_(0),
        j_(upper_size - 1) {}

  // Places the walk on the piece whose supports are lower vertex i and
  // upper vertex j.
  void MoveTo(int i, int j) {
    i_ = i;
    j_ = j;
  }
  const Point& lower_support() const { return lower_[i_]; }
  const Point& upper_support() const { return upper_[j_]; }
  // g'(b) on the current piece: x difference of the supports.
  int64_t gap_slope() const { return upper_[j_].x - lower_[i_].x; }

  // The next kink's slope; false when none is left. Remembers which
  // side(s) have their next edge at that slope, for Advance.
  bool Peek(Slope* next) {
    const bool has_lower = i_ + 1 < lower_size_;
    const bool has_upper = j_ > 0;
    if (!has_lower && !has_upper) return false;
    if (has_lower && has_upper) {
      const Slope l = LowerEdge(), u = UpperEdge();
      const int cmp = CompareSlopes(l, u);
      *next = cmp <= 0 ? l : u;
      step_lower_ = cmp <= 0;
      step_upper_ = cmp >= 0;
    } else {
      *next = has_lower ? LowerEdge() : UpperEdge();
      step_lower_ = has_lower;
      step_upper_ = has_upper;
    }
    return true;
  }
  // Steps over every kink at the slope the last Peek returned. Each side's
  // hull is strictly convex (its edge slopes strictly increase along the
  // walk), so a side has at most one edge at that slope.
  void Advance() {
    if (step_lower_) ++i_;
    if (step_upper_) --j_;
  }
  // Sign of g(b) for b on the closure of the current piece.
  int GapSign(const Slope& b) const {
    const __int128 g = ScaledIntercept(lower_[i_], b) -
                       ScaledIntercept(upper_[j_], b);
    return (g > 0) - (g < 0);
  }

 private:
  Slope LowerEdge() const {
    return Slope{lower_[i_ + 1].y - lower_[i_].y,
                 lower_[i_ + 1].x - lower_[i_].x};
  }
  Slope UpperEdge() const {
    return Slope{upper_[j_].y - upper_[j_ - 1].y,
                 upper_[j_].x - upper_[j_ - 1].x};
  }

  const Point* lower_;
  const Point* upper_;
  int lower_size_;
  int i_;
  int j_;
  bool step_lower_ = false;
  bool step_upper_ = false;
};

// True when the slope is bounded (see Separation), from the ends of the
// sides' chains (no merging needed): g'(+inf) = upper_min_x - lower_max_x
// and g'(-inf) = upper_max_x - lower_min_x, and g must fall on both sides
// for its maximum to exist. Needs points on both sides.
bool BoundedFromEnds(const HullChains& h) {
  const ChainView& lower_left = h.lower[0].empty() ? h.lower[1] : h.lower[0];
  const ChainView& lower_right = h.lower[1].empty() ? h.lower[0] : h.lower[1];
  const ChainView& upper_left = h.upper[0].empty() ? h.upper[1] : h.upper[0];
  const ChainView& upper_right = h.upper[1].empty() ? h.upper[0] : h.upper[1];
  const int64_t lower_min_x = lower_left.vertex(0).x;
  const int64_t lower_max_x = lower_right.vertex(lower_right.size() - 1).x;
  const int64_t upper_min_x = upper_left.vertex(0).x;
  const int64_t upper_max_x = upper_right.vertex(upper_right.size() - 1).x;
  return upper_min_x < lower_max_x && upper_max_x > lower_min_x;
}

// Both sides' chains merged into one hull each (thread-local scratch space
// that only grows, reused across calls).
struct MergedHulls {
  const Point* lower;
  int lower_size;
  const Point* upper;
  int upper_size;
};

// Merges the sides; false when the slope is unbounded (see Separation).
bool MergeBounded(const HullChains& h, MergedHulls* m) {
  if (!HasPoints(h.lower) || !HasPoints(h.upper) || !BoundedFromEnds(h)) {
    return false;
  }
  thread_local std::vector<Point> lower, upper;
  const size_t lower_room =
      static_cast<size_t>(h.lower[0].size() + h.lower[1].size());
  const size_t upper_room =
      static_cast<size_t>(h.upper[0].size() + h.upper[1].size());
  if (lower.size() < lower_room) lower.resize(lower_room);
  if (upper.size() < upper_room) upper.resize(upper_room);
  m->lower = lower.data();
  m->upper = upper.data();
  m->lower_size = MergeSide(h.lower, true, lower.data());
  m->upper_size = MergeSide(h.upper, false, upper.data());
  return true;
}

// Index of the vertex at x in a hull (x strictly increasing), or -1.
int FindX(const Point* v, int n, int64_t x) {
  const int k = CountPrefix(n, [&](int i) { return v[i].x < x; });
  return k < n && v[k].x == x ? k : -1;
}

// The walk up from -inf to the smallest feasible slope: stops at the first
// kink where g >= 0 and records the root on the piece before it (the same
// steps as Separate's).
void FindMinLine(KinkWalk* walk, Separation* sep) {
  Slope kink;
  while (walk->Peek(&kink)) {
    if (walk->GapSign(kink) >= 0) {
      sep->min_slope =
          RootThrough(walk->lower_support(), walk->upper_support());
      sep->min_line = Line{walk->lower_support(), 0, sep->min_slope.value()};
      sep->request_support_x[0] = walk->lower_support().x;
      sep->response_support_x[0] = walk->upper_support().x;
      return;
    }
    walk->Advance();
  }
  assert(false);  // Feasible and bounded: g >= 0 at the top's kink.
}

// The walk on from just right of the top to the largest feasible slope.
void FindMaxLine(KinkWalk* walk, Separation* sep) {
  Slope kink;
  while (walk->Peek(&kink) && walk->GapSign(kink) >= 0) walk->Advance();
  sep->max_slope = RootThrough(walk->lower_support(), walk->upper_support());
  sep->max_line = Line{walk->lower_support(), 0, sep->max_slope.value()};
  sep->request_support_x[3] = walk->lower_support().x;
  sep->response_support_x[3] = walk->upper_support().x;
}

// One side's vertices for a walk, in `buffer`: the merged side, or, when
// `chain` is 0 or 1 and the walk only meets vertices of that chain, the
// chain alone (a merged side keeps every vertex of its first chain left of
// a kept one, and of its second chain right of a kept one; the bridge
// between the chains is what costs). Returns the count.
int SideVertices(const std::array<ChainView, 2>& chains, bool lower,
                 int chain, std::vector<Point>* buffer) {
  const size_t room = static_cast<size_t>(
      chain < 0 ? chains[0].size() + chains[1].size() : chains[chain].size());
  if (buffer->size() < room) buffer->resize(room);
  if (chain < 0) return MergeSide(chains, lower, buffer->data());
  chains[chain].CopyTo(buffer->data());
  return chains[chain].size();
}

}  // namespace

bool UpdateExtremeLines(const HullChains& h, bool update_min, bool update_max,
                        Separation* sep) {
  assert(sep->bounded && sep->feasible && sep->supports_known);
  if (!HasPoints(h.lower) || !HasPoints(h.upper) || !BoundedFromEnds(h)) {
    return false;
  }
  // The largest slope's walk starts at the max-margin line's supports just
  // right of its kink, l (lower) and u (upper), and moves right from l and
  // left from u: when l is a vertex of the lower side's second chain, that
  // chain is all the lower walk meets; likewise u and the upper side's
  // first chain. The smallest slope's walk starts at the ends: it needs
  // the merged sides.
  const int64_t l_x = sep->request_support_x[2];
  const int64_t u_x = sep->response_support_x[2];
  const bool lower_in_second = !update_min && !h.lower[1].empty() &&
                               l_x >= h.lower[1].vertex(0).x;
  const bool upper_in_first =
      !update_min && !h.upper[0].empty() &&
      u_x <= h.upper[0].vertex(h.upper[0].size() - 1).x;
  thread_local std::vector<Point> lower_buffer, upper_buffer;
  const int lower_size =
      SideVertices(h.lower, true, lower_in_second ? 1 : -1, &lower_buffer);
  const int upper_size =
      SideVertices(h.upper, false, upper_in_first ? 0 : -1, &upper_buffer);
  const Point* lower = lower_buffer.data();
  const Point* upper = upper_buffer.data();
  KinkWalk walk(lower, lower_size, upper, upper_size);
  if (update_min) FindMinLine(&walk, sep);
  if (update_max) {
    // The max-margin line is unchanged, so are the supports just right of
    // its kink, where Separate's walk stands when it turns to the largest
    // slope.
    const int i = FindX(lower, lower_size, l_x);
    const int j = FindX(upper, upper_size, u_x);
    if (i < 0 || j < 0) return false;
    walk.MoveTo(i, j);
    FindMaxLine(&walk, sep);
  }
  return true;
}

Separation Separate(const HullChains& h) {
  Separation sep;
  MergedHulls m;
  sep.bounded = MergeBounded(h, &m);
  if (!sep.bounded) return sep;

  // The smallest feasible slope: walk up from -inf (where g rises) to the
  // first kink where g >= 0; the root is on the piece before it.
  KinkWalk walk(m.lower, m.lower_size, m.upper, m.upper_size);
  Slope kink;
  bool found_min = false;
  Slope min_slope;
  Point min_through{0, 0};
  // The maximum of g: the first kink after which g falls (g'(b+) < 0).
  bool have_flat = false;
  Slope flat_start;
  Slope best;
  for (;;) {
    const bool more = walk.Peek(&kink);
    assert(more);  // Bounded: g falls after the last kink at the latest.
    if (!more) return sep;
    if (!found_min && walk.GapSign(kink) >= 0) {
      found_min = true;
      min_slope = RootThrough(walk.lower_support(), walk.upper_support());
      min_through = walk.lower_support();
      sep.request_support_x[0] = walk.lower_support().x;
      sep.response_support_x[0] = walk.upper_support().x;
    }
    // Before the top's kink these are the other ends of its edge(s).
    sep.request_support_x[1] = walk.lower_support().x;
    sep.response_support_x[1] = walk.upper_support().x;
    walk.Advance();
    const int64_t d = walk.gap_slope();
    if (d < 0) {
      best = have_flat ? Slope{flat_start.num + kink.num,
                               flat_start.den + kink.den}
                       : kink;
      break;
    }
    if (d == 0 && !have_flat) {
      have_flat = true;
      flat_start = kink;
    }
  }
  // The walk now stands just right of the top's last kink. The mid line
  // and the margin use the supports at the top (the value of g is the same
  // for either support of a kink).
  const Point l = walk.lower_support();
  const Point u = walk.upper_support();
  sep.request_support_x[2] = l.x;
  sep.response_support_x[2] = u.x;
  // On a flat top the chosen slope is inside the flat: its line rests on
  // more points than these.
  sep.supports_known = !have_flat;
  sep.feasible = ScaledIntercept(l, best) >= ScaledIntercept(u, best);
  if (!sep.feasible) return sep;
  assert(found_min);
  sep.mid_slope = best;
  const double slope = best.value();
  sep.margin = (static_cast<double>(l.y - u.y) -
                slope * static_cast<double>(l.x - u.x)) /
               2;
  sep.mid = Line{l, -sep.margin, slope};
  sep.min_slope = min_slope;
  sep.min_line = Line{min_through, 0, min_slope.value()};

  // The largest feasible slope: walk on while g stays >= 0 at each kink.
  FindMaxLine(&walk, &sep);
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
