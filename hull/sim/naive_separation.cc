// hull/sim/naive_separation.cc
//
// The obvious O(n^3) reference; see naive_separation.h.

#include "hull/sim/naive_separation.h"

#include <algorithm>
#include <limits>

namespace clocksync::hull {
namespace {

long double L(const std::vector<Point>& req, long double b) {
  long double m = std::numeric_limits<long double>::infinity();
  for (const Point& p : req) m = std::min(m, p.y - b * p.x);
  return m;
}
long double U(const std::vector<Point>& resp, long double b) {
  long double m = -std::numeric_limits<long double>::infinity();
  for (const Point& p : resp) m = std::max(m, p.y - b * p.x);
  return m;
}

std::vector<long double> CandidateSlopes(const std::vector<Point>& req,
                                         const std::vector<Point>& resp) {
  std::vector<Point> all = req;
  all.insert(all.end(), resp.begin(), resp.end());
  std::vector<long double> slopes;
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = i + 1; j < all.size(); ++j) {
      if (all[i].x == all[j].x) continue;
      slopes.push_back(static_cast<long double>(all[j].y - all[i].y) /
                       (all[j].x - all[i].x));
    }
  }
  return slopes;
}

}  // namespace

NaiveSeparation NaiveSeparate(const std::vector<Point>& req,
                              const std::vector<Point>& resp) {
  NaiveSeparation s;
  s.requests = req;
  s.responses = resp;
  if (req.empty() || resp.empty()) return s;
  int64_t req_min = req[0].x, req_max = req[0].x;
  int64_t resp_min = resp[0].x, resp_max = resp[0].x;
  for (const Point& p : req) {
    req_min = std::min(req_min, p.x);
    req_max = std::max(req_max, p.x);
  }
  for (const Point& p : resp) {
    resp_min = std::min(resp_min, p.x);
    resp_max = std::max(resp_max, p.x);
  }
  s.bounded = resp_min < req_max && resp_max > req_min;
  if (!s.bounded) return s;
  const std::vector<long double> slopes = CandidateSlopes(req, resp);
  long double best_g = -std::numeric_limits<long double>::infinity();
  for (long double b : slopes) {
    const long double g = L(req, b) - U(resp, b);
    if (g > best_g) {
      best_g = g;
      s.mid_slope = b;
    }
  }
  s.margin = best_g / 2;
  s.mid_a = (L(req, s.mid_slope) + U(resp, s.mid_slope)) / 2;
  s.feasible = best_g >= -1e-6L;
  if (!s.feasible) return s;
  // Extreme slopes: g is zero there; the roots are slopes through one
  // request and one response point, which are among the candidates.
  s.max_slope = s.min_slope = s.mid_slope;
  for (long double b : slopes) {
    if (L(req, b) - U(resp, b) >= -1e-6L) {
      s.max_slope = std::max(s.max_slope, b);
      s.min_slope = std::min(s.min_slope, b);
    }
  }
  return s;
}

void NaiveRangeAt(const NaiveSeparation& s, long double x, long double* low,
                  long double* high) {
  // The feasible lines form a convex polygon in (a, b); the extremes of
  // a + b*x are at its vertices: for a vertex slope b, a is L(b) or U(b).
  const std::vector<long double> slopes =
      CandidateSlopes(s.requests, s.responses);
  *low = std::numeric_limits<long double>::infinity();
  *high = -std::numeric_limits<long double>::infinity();
  for (long double b : slopes) {
    if (b < s.min_slope - 1e-15L || b > s.max_slope + 1e-15L) continue;
    const long double l = L(s.requests, b), u = U(s.responses, b);
    if (l - u < -1e-6L) continue;
    *high = std::max(*high, l + b * x);
    *low = std::min(*low, u + b * x);
  }
}

}  // namespace clocksync::hull
