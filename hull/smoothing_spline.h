// hull/smoothing_spline.h: the cubic smoothing spline (Reinsch 1967) with
// its smoothing chosen by generalized cross-validation (Craven & Wahba
// 1979), for the post-mortem spline's knots (hull/postmortem.h).
//
// Given points (x_i, y_i) with x strictly increasing, the smoothing spline
// g minimizes
//   sum_i (y_i - g(x_i))^2 + lambda * integral g''(x)^2 dx,
// from interpolation (lambda -> 0) to the least-squares line (lambda -> inf).
// Noisy knots of a smooth curve (a clock's offset between sync sessions)
// come out closer to the curve than they went in; a penalty on curvature
// leaves lines (a constant drift) untouched at any lambda. lambda is the
// minimizer of GCV(lambda) = n * RSS / (n - trace(A))^2 over a log grid,
// A being the matrix that maps y to g(x). Everything is O(n) per lambda:
// the system is pentadiagonal (banded LDL^T), and the trace comes from the
// central band of its inverse (Hutchinson & de Hoog 1985).
//
// Example:
//   std::optional<SmoothedValues> s = SmoothByGcv(x_s, offsets_ns);
//   if (s.has_value()) use(s->values);  // g(x_i), one per point

#ifndef CLOCKSYNC_HULL_SMOOTHING_SPLINE_H_
#define CLOCKSYNC_HULL_SMOOTHING_SPLINE_H_

#include <optional>
#include <vector>

#include "absl/types/span.h"

namespace clocksync::hull {

struct SmoothedValues {
  std::vector<double> values;  // g(x_i)
  double lambda = 0;           // the smoothing chosen
  double degrees_of_freedom = 0;  // trace(A): n = interpolation, 2 = a line
};

// The values at x of the smoothing spline of `lambda` through (x, y).
// Requires x.size() == y.size() >= 3, x strictly increasing, lambda >= 0.
SmoothedValues SmoothWithLambda(absl::Span<const double> x,
                                absl::Span<const double> y, double lambda);

// The same with lambda chosen by GCV. nullopt when there are fewer than 4
// points, x is not strictly increasing, or a value is not finite: the
// caller then keeps its points as they are.
std::optional<SmoothedValues> SmoothByGcv(absl::Span<const double> x,
                                          absl::Span<const double> y);

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_SMOOTHING_SPLINE_H_
