// hull/postmortem.cc: sync sessions to linear, spline and piecewise-linear
// corrections (see postmortem.h).
//
// Numerics. Timestamps are ~1.8e18 ns since the epoch, beyond a double's
// 2^53, so nothing is computed on absolute times in floating point:
// - sums over exchanges are exact (__int128), and means are kept as
//   SplitNs (integer ns + fraction), exact to ~1e-16 ns;
// - every piece is evaluated relative to its own anchor (a knot), where a
//   double keeps far better than 1e-3 ns over hours.
//
// Monotonicity. A correction must never reorder events: ToGlobalNs is
// non-decreasing. The real-valued mapping rises by at least MinRate() per
// local ns (>= kMinRate / 8 = 1/16, see SplineTangents). Linear pieces
// (linear fit, piecewise, the ends) are computed only with operations that
// are monotone in floating point (int->double, subtracting a constant,
// multiplying by c1 > 0, adding, floor), so they are monotone at any length.
// Cubic pieces are not monotone in floating point by construction, but
// their evaluation error (a few ulps of values below the piece's rise) stays
// under 1/64 ns for pieces shorter than 2^44 ns (~4.9 h between sessions),
// well below the 1/16 ns that one local ns moves the mapping, so the result
// never steps back (checked on random inputs in postmortem_test.cc). At
// piece joints the same bounds hold on both sides.

#include "hull/postmortem.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/internal/raw_logging.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hull/smoothing_spline.h"

namespace clocksync::hull {
namespace {

using int128 = __int128;

// floor(num / den) with the remainder as a fraction; den > 0.
SplitNs SplitRatio(int128 num, int128 den) {
  int128 whole = num / den;
  int128 rem = num % den;
  if (rem < 0) {
    --whole;
    rem += den;
  }
  return SplitNs{static_cast<int64_t>(whole),
                 static_cast<double>(rem) / static_cast<double>(den)};
}

// t + shift_ns, with the fraction kept in [0, 1).
SplitNs Shifted(SplitNs t, double shift_ns) {
  if (shift_ns == 0) return t;
  const double whole = std::floor(shift_ns);
  t.whole_ns += static_cast<int64_t>(whole);
  t.frac_ns += shift_ns - whole;
  if (t.frac_ns >= 1) {
    t.frac_ns -= 1;
    ++t.whole_ns;
  }
  return t;
}

// The first integer ns at or after `t`.
int64_t CeilNs(const SplitNs& t) {
  return t.whole_ns + (t.frac_ns > 0 ? 1 : 0);
}

// A usable exchange, in exact integers.
struct Kept {
  int128 two_x;          // s + r: twice the local midpoint
  int64_t m;             // master stamp
  size_t session_index;  // position of its session in the input
};

// Exact sums of one condensed session (or of several merged ones).
struct PointSums {
  int128 sum_two_x = 0;  // sum of s + r
  int128 sum_m = 0;      // sum of m
  int64_t n = 0;         // exchanges
  int64_t session_id = 0;
  size_t session_index = 0;  // position of its (first) session in the input
  // Added to the mean of m (spline only): moves the point's global time
  // from the mean to the middle of the session's feasible interval
  // (CenterOnIntervals).
  double global_shift_ns = 0;

  // local mean = sum_two_x / (2n); compares exactly by cross-multiplying.
  int Compare(const PointSums& other) const {
    const int128 a = sum_two_x * other.n;
    const int128 b = other.sum_two_x * n;
    return a < b ? -1 : (a > b ? 1 : 0);
  }
  CondensedPoint ToPoint() const {
    return CondensedPoint{SplitRatio(sum_two_x, 2 * static_cast<int128>(n)),
                          Shifted(SplitRatio(sum_m, n), global_shift_ns), n,
                          session_id};
  }
};

// Number of exchanges to drop as the slowest of `n`.
int64_t SlowCount(int64_t n, double slow_fraction) {
  if (n <= 1 || !(slow_fraction > 0)) return 0;
  // The epsilon keeps a product that rounds just below an integer (as
  // 0.1 is not exact in binary) from dropping one exchange too few.
  const auto drop = static_cast<int64_t>(
      std::floor(static_cast<double>(n) * slow_fraction + 1e-9));
  return std::clamp<int64_t>(drop, 0, n - 1);
}

// Appends the usable exchanges of `session` (r >= s) to `out`, counting the
// invalid ones in `report`. s = t1, r = t4, m = (t2 + t3) / 2.
void CollectValid(const SyncSession& session, size_t session_index,
                  CorrectionReport* report,
                  std::vector<std::pair<int128, Kept>>* out) {
  for (const ProbeSample& e : session.exchanges) {
    const int128 rtt = static_cast<int128>(e.t4_ns) - e.t1_ns;
    if (rtt < 0) {
      ++report->invalid_exchanges;
      continue;
    }
    out->push_back({rtt, Kept{static_cast<int128>(e.t1_ns) + e.t4_ns,
                              MasterMidpointNs(e), session_index}});
  }
}

// Keeps all but the slowest fraction of `valid` (by round trip; equal round
// trips in input order), counting the dropped ones in `report`.
std::vector<Kept> DropSlow(std::vector<std::pair<int128, Kept>> valid,
                           double slow_fraction, CorrectionReport* report) {
  const int64_t drop =
      SlowCount(static_cast<int64_t>(valid.size()), slow_fraction);
  std::stable_sort(
      valid.begin(), valid.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  valid.resize(valid.size() - static_cast<size_t>(drop));
  report->slow_exchanges_dropped += drop;
  std::vector<Kept> kept;
  kept.reserve(valid.size());
  for (const auto& v : valid) kept.push_back(v.second);
  return kept;
}

std::vector<PointSums> CondenseToSums(absl::Span<const SyncSession> sessions,
                                      const PostmortemOptions& options,
                                      CorrectionReport* report) {
  std::vector<PointSums> points;
  std::vector<std::pair<int128, Kept>> valid;
  for (size_t i = 0; i < sessions.size(); ++i) {
    const SyncSession& session = sessions[i];
    ++report->sessions;
    report->exchanges += static_cast<int64_t>(session.exchanges.size());
    valid.clear();
    CollectValid(session, i, report, &valid);
    if (valid.empty()) {
      report->empty_sessions.push_back(session.id);
      continue;
    }
    PointSums sums;
    sums.session_id = session.id;
    sums.session_index = i;
    for (const Kept& k : DropSlow(valid, options.slow_fraction, report)) {
      sums.sum_two_x += k.two_x;
      sums.sum_m += k.m;
      ++sums.n;
    }
    report->exchanges_used += sums.n;
    points.push_back(sums);
  }
  return points;
}

// Sorts the condensed points by local time, merges equal local times and
// keeps a longest chain along which global time rises faster than kMinRate
// times local time. Records every such case in `report`.
std::vector<CondensedPoint> CleanKnots(std::vector<PointSums> sums,
                                       CorrectionReport* report) {
  // Sessions whose local time is below an earlier session's.
  for (size_t i = 1, latest = 0; i < sums.size(); ++i) {
    if (sums[i].Compare(sums[latest]) < 0) {
      report->out_of_order_sessions.push_back(sums[i].session_id);
    } else {
      latest = i;
    }
  }
  std::stable_sort(
      sums.begin(), sums.end(),
      [](const PointSums& a, const PointSums& b) { return a.Compare(b) < 0; });
  std::vector<PointSums> merged;
  for (const PointSums& s : sums) {
    if (!merged.empty() && merged.back().Compare(s) == 0) {
      PointSums& into = merged.back();
      into.global_shift_ns =
          (into.global_shift_ns * static_cast<double>(into.n) +
           s.global_shift_ns * static_cast<double>(s.n)) /
          static_cast<double>(into.n + s.n);
      merged.back().sum_two_x += s.sum_two_x;
      merged.back().sum_m += s.sum_m;
      merged.back().n += s.n;
      ++report->merged_points;
    } else {
      merged.push_back(s);
    }
  }
  std::vector<CondensedPoint> points;
  points.reserve(merged.size());
  for (const PointSums& s : merged) points.push_back(s.ToPoint());

  // z = global - kMinRate * local, relative to the first point: the secant
  // rate between two points exceeds kMinRate exactly when z rises. A longest
  // strictly increasing subsequence of z (patience sorting, O(n log n)).
  std::vector<double> z(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    z[i] = DifferenceNs(points[i].global, points[0].global) -
           kMinRate * DifferenceNs(points[i].local, points[0].local);
  }
  std::vector<size_t>
      tails;  // tails[k]: last index of the best chain of length k+1
  std::vector<ptrdiff_t> previous(points.size(), -1);
  for (size_t i = 0; i < points.size(); ++i) {
    const auto pos =
        std::lower_bound(tails.begin(), tails.end(), z[i],
                         [&z](size_t t, double value) { return z[t] < value; });
    if (pos != tails.begin()) previous[i] = static_cast<ptrdiff_t>(*(pos - 1));
    if (pos == tails.end()) {
      tails.push_back(i);
    } else {
      *pos = i;
    }
  }
  std::vector<bool> keep(points.size(), false);
  for (ptrdiff_t i = tails.empty() ? -1 : static_cast<ptrdiff_t>(tails.back());
       i >= 0; i = previous[static_cast<size_t>(i)]) {
    keep[static_cast<size_t>(i)] = true;
  }
  std::vector<CondensedPoint> knots;
  for (size_t i = 0; i < points.size(); ++i) {
    if (keep[i]) {
      knots.push_back(points[i]);
    } else {
      report->inconsistent_sessions.push_back(points[i].session_id);
    }
  }
  return knots;
}

using Piece = PostmortemCorrection::Piece;

// A line through `anchor` with slope `rate`.
Piece Line(const CondensedPoint& anchor, double rate) {
  return Piece{anchor.local, anchor.global, rate, 0.0, 0.0};
}

// Pieces of the mapping through `knots` (>= 2, strictly increasing in both
// coordinates) given the tangent at each knot; lines with the end tangents
// beyond the ends.
std::vector<Piece> HermitePieces(const std::vector<CondensedPoint>& knots,
                                 const std::vector<double>& tangents) {
  std::vector<Piece> pieces;
  pieces.push_back(Line(knots.front(), tangents.front()));
  for (size_t k = 0; k + 1 < knots.size(); ++k) {
    const double h = DifferenceNs(knots[k + 1].local, knots[k].local);
    const double secant =
        DifferenceNs(knots[k + 1].global, knots[k].global) / h;
    const double m0 = tangents[k];
    const double m1 = tangents[k + 1];
    // p(u) = y + m0 u + c2 u² + c3 u³ with p(h) = y + secant·h, p'(h) = m1.
    pieces.push_back(Piece{knots[k].local, knots[k].global, m0,
                           (3 * secant - 2 * m0 - m1) / h,
                           (m0 + m1 - 2 * secant) / (h * h)});
  }
  pieces.push_back(Line(knots.back(), tangents.back()));
  return pieces;
}

std::vector<double> Secants(const std::vector<CondensedPoint>& knots) {
  std::vector<double> secants;
  for (size_t k = 0; k + 1 < knots.size(); ++k) {
    secants.push_back(DifferenceNs(knots[k + 1].global, knots[k].global) /
                      DifferenceNs(knots[k + 1].local, knots[k].local));
  }
  return secants;
}

// Tangents of the monotone C1 spline (Fritsch & Carlson 1980):
// - interior knots: Brodlie's weighted harmonic mean of the two secants
//   (as MATLAB's pchip), which lies in [min, 3·min] of the two secants;
// - end knots: the end secant (so the linear extension has it too);
// - then, per segment, if the tangent/secant ratios a + b exceed 3, both
//   tangents are scaled by 3 / (a + b). With a + b <= 3 the cubic's
//   Bernstein control points rise monotonically (no overshoot) and its
//   derivative is at least m0·m1 / (m0 + m1) > 0. Each tangent is scaled at
//   most twice by at least 1/2, so every rate stays above min secant / 8,
//   i.e. above kMinRate / 8. Smooth data (a, b near 1) is never scaled.
std::vector<double> SplineTangents(const std::vector<CondensedPoint>& knots) {
  const std::vector<double> secant = Secants(knots);
  const size_t n = knots.size();
  std::vector<double> m(n);
  m[0] = secant.front();
  m[n - 1] = secant.back();
  for (size_t k = 1; k + 1 < n; ++k) {
    const double h0 = DifferenceNs(knots[k].local, knots[k - 1].local);
    const double h1 = DifferenceNs(knots[k + 1].local, knots[k].local);
    const double w0 = 2 * h1 + h0;
    const double w1 = h1 + 2 * h0;
    m[k] = (w0 + w1) / (w0 / secant[k - 1] + w1 / secant[k]);
    m[k] = std::min(m[k], 3 * std::min(secant[k - 1], secant[k]));
  }
  for (size_t k = 0; k + 1 < n; ++k) {
    const double a = m[k] / secant[k];
    const double b = m[k + 1] / secant[k];
    if (a + b > 3) {
      const double scale = 3 / (a + b);
      m[k] *= scale;
      m[k + 1] *= scale;
    }
  }
  return m;
}

// The extreme slopes of `pieces` (cubics checked at their ends and their
// derivative's vertex).
std::pair<double, double> RateRange(const std::vector<Piece>& pieces,
                                    const std::vector<CondensedPoint>& knots) {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  auto take = [&](double rate) {
    lo = std::min(lo, rate);
    hi = std::max(hi, rate);
  };
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    take(p.c1);
    // Interior pieces of a knot mapping span knots[i-1]..knots[i].
    if (i == 0 || i + 1 == pieces.size() || i >= knots.size()) continue;
    const double h = DifferenceNs(knots[i].local, knots[i - 1].local);
    take(p.SlopeAt(h));
    if (p.c3 != 0) {
      const double vertex = -p.c2 / (3 * p.c3);
      if (vertex > 0 && vertex < h) take(p.SlopeAt(vertex));
    }
  }
  return {lo, hi};
}

std::unique_ptr<PostmortemCorrection> Build(std::vector<Piece> pieces,
                                            std::vector<CondensedPoint> knots,
                                            CorrectionReport report) {
  std::vector<int64_t> starts;
  // Piece i >= 1 starts at knot i-1 (knot mappings); a single line has none.
  if (pieces.size() > 1) {
    for (const CondensedPoint& k : knots) starts.push_back(CeilNs(k.local));
  }
  std::tie(report.min_rate, report.max_rate) = RateRange(pieces, knots);
  report.knots = static_cast<int64_t>(knots.size());
  return std::make_unique<PostmortemCorrection>(
      std::move(pieces), std::move(starts), std::move(knots),
      std::move(report));
}

std::unique_ptr<PostmortemCorrection> MakeLinear(
    absl::Span<const SyncSession> sessions, const PostmortemOptions& options,
    CorrectionReport report) {
  std::vector<std::pair<int128, Kept>> valid;
  for (size_t i = 0; i < sessions.size(); ++i) {
    ++report.sessions;
    report.exchanges += static_cast<int64_t>(sessions[i].exchanges.size());
    const size_t before = valid.size();
    CollectValid(sessions[i], i, &report, &valid);
    if (valid.size() == before) report.empty_sessions.push_back(sessions[i].id);
  }
  if (valid.empty()) return nullptr;
  const std::vector<Kept> kept =
      DropSlow(std::move(valid), options.slow_fraction, &report);
  report.exchanges_used = static_cast<int64_t>(kept.size());

  PointSums sums;
  size_t first_session = kept.front().session_index;
  bool several_sessions = false;
  for (const Kept& k : kept) {
    sums.sum_two_x += k.two_x;
    sums.sum_m += k.m;
    ++sums.n;
    first_session = std::min(first_session, k.session_index);
    several_sessions |= k.session_index != kept.front().session_index;
  }
  sums.session_id = sessions[first_session].id;
  const CondensedPoint centroid = sums.ToPoint();
  // Centred sums: deviations from the centroid are small, exact doubles.
  long double sxx = 0;
  long double sxy = 0;
  for (const Kept& k : kept) {
    const double dx =
        static_cast<double>(k.two_x -
                            2 * static_cast<int128>(centroid.local.whole_ns)) /
            2 -
        centroid.local.frac_ns;
    const double dy = static_cast<double>(k.m - centroid.global.whole_ns) -
                      centroid.global.frac_ns;
    sxx += static_cast<long double>(dx) * dx;
    sxy += static_cast<long double>(dx) * dy;
  }
  // One session (a burst) cannot tell a rate: offset only.
  double slope = 1.0;
  if (!several_sessions || sxx <= 0) {
    report.offset_only = true;
  } else {
    slope = static_cast<double>(sxy / sxx);
    if (!(slope > kMinRate)) {
      report.offset_only = true;
      report.slope_rejected = true;
      slope = 1.0;
    }
  }
  return Build({Line(centroid, slope)}, {centroid}, std::move(report));
}

// The spline's knots, in two steps.
//
// 1. An interval per session. An exchange (t1, t2, t3, t4) bounds the
// master's time G at the session's local time x̄ assuming only that delays
// are not negative:
//   G(x̄) <= t2 + rate·(x̄ − t1)   (the request cannot arrive before it left)
//   G(x̄) >= t3 + rate·(x̄ − t4)   (nor the answer leave after it arrived)
// where rate is the local clock's rate against the master near the session:
// the secant through its neighbours' mean points (within a session's
// milliseconds, 1 ppm of error moves a bound by a few ns). The session's
// interval is the intersection over its valid exchanges, the slow ones too
// (they bound loosely, never wrongly). Its middle is the offset under the
// one assumption every two-way estimate makes (the fastest trips take as
// long each way), and unlike the mean of the midpoints it carries neither
// the delays' mean asymmetry nor their spread. A session whose interval is
// empty (a clock that jumped within it, a rate far off) keeps its mean and
// is reported.
//
// 2. Smoothing. The middles still carry the noise of the fastest trips;
// the offset between sessions is a smooth curve. The cubic smoothing
// spline of the middles' offsets, its smoothing chosen by generalized
// cross-validation (hull/smoothing_spline.h), gives each knot its value,
// clamped into the session's interval: the knots are what the sessions
// support, never outside what any exchange allows.
void CenterOnIntervals(absl::Span<const SyncSession> sessions,
                       std::vector<PointSums>* sums, CorrectionReport* report) {
  // A secant beyond this means broken data: use rate 1 (the bounds then
  // move by at most the session's length times the true rate error).
  constexpr double kMaxRate = 2.0;
  // Shifts beyond this (about 11 days) come from broken data: keep the mean.
  constexpr double kMaxShiftNs = 1e15;
  // Integer ns stamps of exchanges with (near) zero round trips can make an
  // interval look empty by a rounding: up to this, it is its one point.
  constexpr double kStampSlackNs = 2.0;
  std::vector<size_t> order(sums->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return (*sums)[a].Compare((*sums)[b]) < 0;
  });
  std::vector<CondensedPoint> mean(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    mean[k] = (*sums)[order[k]].ToPoint();
  }
  // Step 1, in local-time order; lo/hi relative to the mean's global time.
  std::vector<double> lo(order.size());
  std::vector<double> hi(order.size());
  std::vector<bool> usable(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const CondensedPoint& p = mean[k];
    double rate = 1.0;
    if (order.size() >= 2) {
      const CondensedPoint& a = mean[k == 0 ? 0 : k - 1];
      const CondensedPoint& b = mean[k + 1 == order.size() ? k : k + 1];
      const double dx = DifferenceNs(b.local, a.local);
      const double secant = DifferenceNs(b.global, a.global) / dx;
      if (dx > 0 && secant > kMinRate && secant < kMaxRate) rate = secant;
    }
    lo[k] = -std::numeric_limits<double>::infinity();
    hi[k] = std::numeric_limits<double>::infinity();
    const SyncSession& session = sessions[(*sums)[order[k]].session_index];
    for (const ProbeSample& e : session.exchanges) {
      if (e.t4_ns < e.t1_ns) continue;
      hi[k] = std::min(hi[k], DifferenceNs(SplitNs{e.t2_ns, 0}, p.global) +
                                  rate * DifferenceNs(p.local,
                                                      SplitNs{e.t1_ns, 0}));
      lo[k] = std::max(lo[k], DifferenceNs(SplitNs{e.t3_ns, 0}, p.global) +
                                  rate * DifferenceNs(p.local,
                                                      SplitNs{e.t4_ns, 0}));
    }
    if (lo[k] > hi[k] && lo[k] - hi[k] <= kStampSlackNs) {
      lo[k] = hi[k] = (lo[k] + hi[k]) / 2;
    }
    usable[k] = lo[k] <= hi[k] && std::abs(lo[k]) < kMaxShiftNs &&
                std::abs(hi[k]) < kMaxShiftNs;
    if (!usable[k]) report->empty_interval_sessions.push_back(p.session_id);
  }
  // Step 2: offsets (global − local, relative to the first point) of the
  // middles, or of the means where the interval is empty; x in seconds.
  std::vector<double> x_s(order.size());
  std::vector<double> offset_ns(order.size());
  std::vector<double> shift_ns(order.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) {
    if (usable[k]) shift_ns[k] = (lo[k] + hi[k]) / 2;
    const double dx_ns = DifferenceNs(mean[k].local, mean[0].local);
    x_s[k] = dx_ns / 1e9;
    offset_ns[k] =
        DifferenceNs(mean[k].global, mean[0].global) - dx_ns + shift_ns[k];
  }
  if (const std::optional<SmoothedValues> smoothed =
          SmoothByGcv(x_s, offset_ns)) {
    for (size_t k = 0; k < order.size(); ++k) {
      if (!usable[k]) continue;
      shift_ns[k] = std::clamp(
          shift_ns[k] + (smoothed->values[k] - offset_ns[k]), lo[k], hi[k]);
    }
  }
  for (size_t k = 0; k < order.size(); ++k) {
    (*sums)[order[k]].global_shift_ns = shift_ns[k];
  }
}

std::unique_ptr<PostmortemCorrection> MakeFromKnots(
    CorrectionKind kind, absl::Span<const SyncSession> sessions,
    const PostmortemOptions& options, CorrectionReport report) {
  std::vector<PointSums> sums = CondenseToSums(sessions, options, &report);
  if (sums.empty()) return nullptr;
  if (kind == CorrectionKind::kSpline) {
    CenterOnIntervals(sessions, &sums, &report);
  }
  std::vector<CondensedPoint> knots = CleanKnots(std::move(sums), &report);
  if (knots.size() == 1) {
    report.offset_only = true;
    std::vector<Piece> line = {Line(knots[0], 1.0)};
    return Build(std::move(line), std::move(knots), std::move(report));
  }
  std::vector<Piece> pieces;
  if (kind == CorrectionKind::kSpline) {
    pieces = HermitePieces(knots, SplineTangents(knots));
  } else {
    const std::vector<double> secant = Secants(knots);
    pieces.push_back(Line(knots.front(), secant.front()));
    for (size_t k = 0; k + 1 < knots.size(); ++k) {
      pieces.push_back(Line(knots[k], secant[k]));
    }
    pieces.push_back(Line(knots.back(), secant.back()));
  }
  return Build(std::move(pieces), std::move(knots), std::move(report));
}

// Shows up to 5 session ids.
std::string Ids(const std::vector<int64_t>& ids) {
  constexpr size_t kShown = 5;
  std::string out = absl::StrJoin(
      ids.begin(),
      ids.begin() + static_cast<ptrdiff_t>(std::min(ids.size(), kShown)), " ");
  if (ids.size() > kShown) absl::StrAppend(&out, " ...");
  return out;
}

// Evaluates `p` at the integer local time `x`, rounded half up to an
// integer ns; defined (saturating) for every int64_t input.
inline int64_t Evaluate(const Piece& p, int64_t x) {
  // Results beyond this are saturated: the double -> int64_t conversion
  // must stay in range.
  constexpr double kLimit = 9.2e18;
  int64_t d;
  if (__builtin_sub_overflow(x, p.x_anchor.whole_ns, &d)) {
    d = x < 0 ? std::numeric_limits<int64_t>::min()
              : std::numeric_limits<int64_t>::max();
  }
  const double u = static_cast<double>(d) - p.x_anchor.frac_ns;
  double v = p.y_anchor.frac_ns + u * (p.c1 + u * (p.c2 + u * p.c3)) + 0.5;
  v = std::min(std::max(v, -kLimit), kLimit);
  int64_t rounded = static_cast<int64_t>(v);            // toward zero
  rounded -= v < static_cast<double>(rounded) ? 1 : 0;  // floor
  int64_t out;
  if (__builtin_add_overflow(p.y_anchor.whole_ns, rounded, &out)) {
    out = rounded < 0 ? std::numeric_limits<int64_t>::min()
                      : std::numeric_limits<int64_t>::max();
  }
  return out;
}

}  // namespace

double DifferenceNs(const SplitNs& a, const SplitNs& b) {
  return static_cast<double>(static_cast<int128>(a.whole_ns) - b.whole_ns) +
         (a.frac_ns - b.frac_ns);
}

bool CorrectionReport::clean() const {
  return empty_sessions.empty() && invalid_exchanges == 0 &&
         out_of_order_sessions.empty() && merged_points == 0 &&
         inconsistent_sessions.empty() && empty_interval_sessions.empty() &&
         !offset_only && !slope_rejected;
}

std::string CorrectionReport::ToString() const {
  std::string out = absl::StrFormat(
      "%s: %d sessions, %d exchanges (%d invalid, %d slow dropped, %d used), "
      "%d knots",
      CorrectionKindName(method), sessions, exchanges, invalid_exchanges,
      slow_exchanges_dropped, exchanges_used, knots);
  if (!empty_sessions.empty()) {
    absl::StrAppend(&out, "; ", empty_sessions.size(),
                    " sessions without usable exchange (", Ids(empty_sessions),
                    ")");
  }
  if (!out_of_order_sessions.empty()) {
    absl::StrAppend(&out, "; ", out_of_order_sessions.size(),
                    " sessions out of local-time order (",
                    Ids(out_of_order_sessions), ")");
  }
  if (merged_points > 0) {
    absl::StrAppend(&out, "; ", merged_points,
                    " points merged (equal local times)");
  }
  if (!inconsistent_sessions.empty()) {
    absl::StrAppend(&out, "; ", inconsistent_sessions.size(),
                    " non-monotonic points dropped (",
                    Ids(inconsistent_sessions), ")");
  }
  if (!empty_interval_sessions.empty()) {
    absl::StrAppend(&out, "; ", empty_interval_sessions.size(),
                    " sessions whose exchanges admit no common offset, kept "
                    "at their mean (",
                    Ids(empty_interval_sessions), ")");
  }
  if (slope_rejected) {
    absl::StrAppend(&out, "; fitted slope <= ", kMinRate, " rejected");
  }
  if (offset_only) absl::StrAppend(&out, "; OFFSET ONLY");
  absl::StrAppend(&out,
                  absl::StrFormat("; rate %.9f..%.9f", min_rate, max_rate));
  return out;
}

std::vector<CondensedPoint> CondenseSessions(
    absl::Span<const SyncSession> sessions, const PostmortemOptions& options,
    CorrectionReport* report) {
  std::vector<CondensedPoint> points;
  for (const PointSums& s : CondenseToSums(sessions, options, report)) {
    points.push_back(s.ToPoint());
  }
  return points;
}

double PostmortemCorrection::Piece::ValueAt(double u_ns) const {
  return y_anchor.frac_ns + u_ns * (c1 + u_ns * (c2 + u_ns * c3));
}

double PostmortemCorrection::Piece::SlopeAt(double u_ns) const {
  return c1 + u_ns * (2 * c2 + u_ns * 3 * c3);
}

PostmortemCorrection::PostmortemCorrection(std::vector<Piece> pieces,
                                           std::vector<int64_t> starts_ns,
                                           std::vector<CondensedPoint> knots,
                                           CorrectionReport report)
    : pieces_(std::move(pieces)),
      starts_ns_(std::move(starts_ns)),
      knots_(std::move(knots)),
      report_(std::move(report)) {
  ABSL_RAW_CHECK(pieces_.size() == starts_ns_.size() + 1,
                 "PostmortemCorrection: need one piece more than starts");
  ABSL_RAW_CHECK(std::is_sorted(starts_ns_.begin(), starts_ns_.end()),
                 "PostmortemCorrection: starts must be sorted");
}

size_t PostmortemCorrection::FindPiece(int64_t local_ns) const {
  return static_cast<size_t>(
      std::upper_bound(starts_ns_.begin(), starts_ns_.end(), local_ns) -
      starts_ns_.begin());
}

int64_t PostmortemCorrection::ToGlobalNs(int64_t local_ns) const {
  return Evaluate(pieces_[FindPiece(local_ns)], local_ns);
}

void PostmortemCorrection::ToGlobalSorted(absl::Span<const int64_t> local_ns,
                                          absl::Span<int64_t> global_ns) const {
  ABSL_RAW_CHECK(local_ns.size() == global_ns.size(),
                 "ToGlobalSorted: input and output sizes differ");
  if (local_ns.empty()) return;
  const int64_t* starts = starts_ns_.data();
  const size_t num_starts = starts_ns_.size();
  size_t piece = FindPiece(local_ns[0]);
  for (size_t i = 0; i < local_ns.size(); ++i) {
    const int64_t x = local_ns[i];
    // Walk forward; search again only if the input went backwards.
    if (piece > 0 && x < starts[piece - 1]) piece = FindPiece(x);
    while (piece < num_starts && x >= starts[piece]) ++piece;
    global_ns[i] = Evaluate(pieces_[piece], x);
  }
}

absl::StatusOr<std::unique_ptr<PostmortemCorrection>> FitPostmortemCorrection(
    CorrectionKind kind, absl::Span<const SyncSession> sessions,
    const PostmortemOptions& options) {
  if (!IsPostmortem(kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", CorrectionKindName(kind),
                     "' is not a post-mortem correction (expected linear, "
                     "spline or piecewise)"));
  }
  if (!(options.slow_fraction >= 0 && options.slow_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slow_fraction must be in [0, 1), got ", options.slow_fraction));
  }
  CorrectionReport report;
  report.method = kind;
  std::unique_ptr<PostmortemCorrection> correction =
      kind == CorrectionKind::kLinear
          ? MakeLinear(sessions, options, std::move(report))
          : MakeFromKnots(kind, sessions, options, std::move(report));
  if (correction == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        CorrectionKindName(kind), " correction: none of the ", sessions.size(),
        " sync sessions has a usable exchange (r >= s)"));
  }
  return correction;
}

}  // namespace clocksync::hull
