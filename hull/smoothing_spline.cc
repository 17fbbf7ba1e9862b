// hull/smoothing_spline.cc: Reinsch's smoothing spline and GCV (see
// smoothing_spline.h).
//
// Notation of Green & Silverman, "Nonparametric Regression and Generalized
// Linear Models" (1994), ch. 2: with h_i = x_{i+1} - x_i, the n x (n-2)
// matrix Q has in column j (interior point j+1) the entries
//   a_j = 1/h_j, b_j = -1/h_j - 1/h_{j+1}, c_j = 1/h_{j+1}
// in rows j, j+1, j+2; the (n-2) x (n-2) matrix R is tridiagonal with
//   R_jj = (h_j + h_{j+1}) / 3, R_{j,j+1} = h_{j+1} / 6.
// The spline's second derivatives gamma at the interior points solve
//   (R + lambda Q^T Q) gamma = Q^T y,   and   g = y - lambda Q gamma.
// B = R + lambda Q^T Q is symmetric, positive definite and pentadiagonal.
// The influence matrix is A = I - lambda Q B^-1 Q^T, so
//   trace(A) = n - lambda * sum_jk (B^-1)_jk (Q^T Q)_kj,
// which needs only the central band (width 2) of B^-1.

#include "hull/smoothing_spline.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "absl/base/internal/raw_logging.h"

namespace clocksync::hull {
namespace {

// A symmetric pentadiagonal matrix by its three upper diagonals.
struct Penta {
  std::vector<double> d0, d1, d2;  // (j,j), (j,j+1), (j,j+2)
};

// Q's columns and Q^T Q.
struct Design {
  std::vector<double> a, b, c;  // Q's entries, column j rows j, j+1, j+2
  Penta qtq;
  Penta r;
};

Design MakeDesign(absl::Span<const double> x) {
  const size_t n = x.size();
  const size_t m = n - 2;
  Design s;
  s.a.resize(m);
  s.b.resize(m);
  s.c.resize(m);
  s.r.d0.resize(m);
  s.r.d1.assign(m, 0);
  s.r.d2.assign(m, 0);
  for (size_t j = 0; j < m; ++j) {
    const double h0 = x[j + 1] - x[j];
    const double h1 = x[j + 2] - x[j + 1];
    s.a[j] = 1 / h0;
    s.b[j] = -1 / h0 - 1 / h1;
    s.c[j] = 1 / h1;
    s.r.d0[j] = (h0 + h1) / 3;
    if (j + 1 < m) s.r.d1[j] = h1 / 6;
  }
  s.qtq.d0.resize(m);
  s.qtq.d1.assign(m, 0);
  s.qtq.d2.assign(m, 0);
  for (size_t j = 0; j < m; ++j) {
    s.qtq.d0[j] = s.a[j] * s.a[j] + s.b[j] * s.b[j] + s.c[j] * s.c[j];
    if (j + 1 < m) s.qtq.d1[j] = s.b[j] * s.a[j + 1] + s.c[j] * s.b[j + 1];
    if (j + 2 < m) s.qtq.d2[j] = s.c[j] * s.a[j + 2];
  }
  return s;
}

// B = L D L^T with L unit lower triangular of bandwidth 2:
// l1[i] = L_{i+1,i}, l2[i] = L_{i+2,i}.
struct Ldl {
  std::vector<double> d, l1, l2;
};

Ldl Factor(const Penta& bm) {
  const size_t m = bm.d0.size();
  Ldl f{std::vector<double>(m), std::vector<double>(m, 0),
        std::vector<double>(m, 0)};
  for (size_t i = 0; i < m; ++i) {
    double d = bm.d0[i];
    if (i >= 1) d -= f.l1[i - 1] * f.l1[i - 1] * f.d[i - 1];
    if (i >= 2) d -= f.l2[i - 2] * f.l2[i - 2] * f.d[i - 2];
    f.d[i] = d;
    if (i + 1 < m) {
      double b = bm.d1[i];
      if (i >= 1) b -= f.l2[i - 1] * f.l1[i - 1] * f.d[i - 1];
      f.l1[i] = b / d;
    }
    if (i + 2 < m) f.l2[i] = bm.d2[i] / d;
  }
  return f;
}

std::vector<double> Solve(const Ldl& f, std::vector<double> z) {
  const size_t m = z.size();
  for (size_t i = 0; i < m; ++i) {
    if (i >= 1) z[i] -= f.l1[i - 1] * z[i - 1];
    if (i >= 2) z[i] -= f.l2[i - 2] * z[i - 2];
  }
  for (size_t i = 0; i < m; ++i) z[i] /= f.d[i];
  for (size_t k = m; k-- > 0;) {
    if (k + 1 < m) z[k] -= f.l1[k] * z[k + 1];
    if (k + 2 < m) z[k] -= f.l2[k] * z[k + 2];
  }
  return z;
}

// The central band of B^-1 (Hutchinson & de Hoog): from the last row up,
// using B^-1 = D^-1 L^-1 + (I - L^T) B^-1.
Penta InverseBand(const Ldl& f) {
  const size_t m = f.d.size();
  Penta s{std::vector<double>(m, 0), std::vector<double>(m, 0),
          std::vector<double>(m, 0)};
  for (size_t k = m; k-- > 0;) {
    const double l1 = k + 1 < m ? f.l1[k] : 0;
    const double l2 = k + 2 < m ? f.l2[k] : 0;
    const double s11 = k + 1 < m ? s.d0[k + 1] : 0;  // (k+1,k+1)
    const double s12 = k + 2 < m ? s.d1[k + 1] : 0;  // (k+1,k+2)
    const double s22 = k + 2 < m ? s.d0[k + 2] : 0;  // (k+2,k+2)
    s.d2[k] = -l1 * s12 - l2 * s22;
    s.d1[k] = -l1 * s11 - l2 * s12;
    s.d0[k] = 1 / f.d[k] - l1 * s.d1[k] - l2 * s.d2[k];
  }
  return s;
}

struct Fit {
  SmoothedValues smoothed;
  double rss = 0;
};

Fit FitLambda(absl::Span<const double> y, const Design& s, double lambda,
              bool want_trace) {
  const size_t n = y.size();
  const size_t m = n - 2;
  Penta bm = s.r;
  for (size_t j = 0; j < m; ++j) {
    bm.d0[j] += lambda * s.qtq.d0[j];
    bm.d1[j] += lambda * s.qtq.d1[j];
    bm.d2[j] += lambda * s.qtq.d2[j];
  }
  const Ldl f = Factor(bm);
  std::vector<double> qty(m);
  for (size_t j = 0; j < m; ++j) {
    qty[j] = s.a[j] * y[j] + s.b[j] * y[j + 1] + s.c[j] * y[j + 2];
  }
  const std::vector<double> gamma = Solve(f, std::move(qty));
  Fit fit;
  fit.smoothed.lambda = lambda;
  fit.smoothed.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    double q_gamma = 0;
    if (i < m) q_gamma += s.a[i] * gamma[i];
    if (i >= 1 && i - 1 < m) q_gamma += s.b[i - 1] * gamma[i - 1];
    if (i >= 2 && i - 2 < m) q_gamma += s.c[i - 2] * gamma[i - 2];
    fit.smoothed.values[i] = y[i] - lambda * q_gamma;
    const double residual = y[i] - fit.smoothed.values[i];
    fit.rss += residual * residual;
  }
  if (want_trace) {
    const Penta inv = InverseBand(f);
    double sum = 0;
    for (size_t j = 0; j < m; ++j) {
      sum += inv.d0[j] * s.qtq.d0[j] + 2 * inv.d1[j] * s.qtq.d1[j] +
             2 * inv.d2[j] * s.qtq.d2[j];
    }
    fit.smoothed.degrees_of_freedom = static_cast<double>(n) - lambda * sum;
  }
  return fit;
}

}  // namespace

SmoothedValues SmoothWithLambda(absl::Span<const double> x,
                                absl::Span<const double> y, double lambda) {
  ABSL_RAW_CHECK(x.size() == y.size() && x.size() >= 3,
                 "SmoothWithLambda: need as many x as y, at least 3");
  return FitLambda(y, MakeDesign(x), lambda, /*want_trace=*/true).smoothed;
}

std::optional<SmoothedValues> SmoothByGcv(absl::Span<const double> x,
                                          absl::Span<const double> y) {
  const size_t n = x.size();
  if (n < 4 || y.size() != n) return std::nullopt;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) return std::nullopt;
    if (i > 0 && !(x[i] > x[i - 1])) return std::nullopt;
  }
  const Design design = MakeDesign(x);
  // lambda balances R (~h) against Q^T Q (~1/h^2): the grid is around the
  // mean spacing cubed, from near interpolation to near a straight line,
  // in steps of 10^(1/4).
  const double h = (x[n - 1] - x[0]) / static_cast<double>(n - 1);
  const double scale = h * h * h;
  std::optional<Fit> best;
  double best_gcv = std::numeric_limits<double>::infinity();
  for (int k = -24; k <= 48; ++k) {
    const double lambda = scale * std::pow(10.0, k / 4.0);
    Fit fit = FitLambda(y, design, lambda, /*want_trace=*/true);
    const double free = static_cast<double>(n) -
                        fit.smoothed.degrees_of_freedom;
    if (!(free > 1e-6)) continue;
    const double gcv = static_cast<double>(n) * fit.rss / (free * free);
    if (std::isfinite(gcv) && gcv < best_gcv) {
      best_gcv = gcv;
      best = std::move(fit);
    }
  }
  if (!best.has_value()) return std::nullopt;
  return std::move(best->smoothed);
}

}  // namespace clocksync::hull
