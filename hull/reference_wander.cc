// hull/reference_wander.cc: ReferenceWander (see reference_wander.h).

#include "hull/reference_wander.h"

#include <algorithm>
#include <cmath>

namespace clocksync::hull {

ReferenceWander::ReferenceWander(int64_t memory_ns,
                                 double prior_ppb_per_sqrt_s)
    : memory_ns_(std::max<int64_t>(1, memory_ns)),
      prior2_(prior_ppb_per_sqrt_s * prior_ppb_per_sqrt_s) {
  Reset();
}

void ReferenceWander::Reset() {
  count_ = 0;
  next_ = 0;
  have_origin_ = false;
  sum_y_.fill(0);
  sum_s_.fill(0);
  sum_n_.fill(0);
  triples_.fill(0);
  effective_ = 0;
  wander2_ = prior2_;
  wander2_error_ = 0;
  noise_ns2_ = -1;  // Unknown until the first triple.
}

void ReferenceWander::Add(int64_t x_ns, double theta_ns) {
  if (!have_origin_) {
    have_origin_ = true;
    origin_x_ = x_ns;
    last_x_s_ = 0;
  }
  const double x_s = static_cast<double>(x_ns - origin_x_) * 1e-9;
  const double decay = std::exp(-std::max(0.0, x_s - last_x_s_) /
                                (static_cast<double>(memory_ns_) * 1e-9));
  last_x_s_ = x_s;
  for (int l = 0; l < kLags; ++l) {
    sum_y_[l] *= decay;
    sum_s_[l] *= decay;
    sum_n_[l] *= decay;
    triples_[l] *= decay;
  }
  constexpr int kRing = 2 * kMaxLag + 1;
  x_s_[next_] = x_s;
  theta_[next_] = theta_ns;
  const int newest = next_;
  next_ = (next_ + 1) % kRing;
  count_ = std::min(count_ + 1, kRing);
  for (int l = 0, lag = 2; l < kLags && 2 * lag < count_; ++l, lag *= 2) {
    const int mid = (newest - lag + kRing) % kRing;
    const int old = (newest - 2 * lag + kRing) % kRing;
    const double a = x_s_[mid] - x_s_[old];
    const double b = x_s_[newest] - x_s_[mid];
    if (a <= 0 || b <= 0) continue;
    const double chord = (theta_[old] * b + theta_[newest] * a) / (a + b);
    const double delta = theta_[mid] - chord;
    sum_y_[l] += delta * delta;
    sum_s_[l] += a * a * b * b / (3 * (a + b));
    sum_n_[l] += 1 + (a * a + b * b) / ((a + b) * (a + b));
    triples_[l] += 1;
  }
  Solve();
}

void ReferenceWander::Solve() {
  // Each lag's mean: y = σ² S + r N, with variance 2 E² lag / count.
  std::array<double, kLags> y{}, s{}, n{}, c{};
  int lags = 0;
  effective_ = 0;
  for (int l = 0, lag = 2; l < kLags; ++l, lag *= 2) {
    if (triples_[l] < 1) continue;
    c[l] = triples_[l] / lag;
    y[l] = sum_y_[l] / triples_[l];
    s[l] = sum_s_[l] / triples_[l];
    n[l] = sum_n_[l] / triples_[l];
    effective_ += c[l];
    ++lags;
  }
  if (lags < 2) return;
  // The fit, committed only when every iteration determined it.
  double fitted = wander2_;
  double wander2 = std::max(wander2_, 0.0);
  double noise = noise_ns2_ >= 0 ? noise_ns2_ : y[0] / std::max(n[0], 1.0);
  double error2 = 0;
  // Reweighted least squares: the weights need the estimates.
  for (int iteration = 0; iteration < 3; ++iteration) {
    double ss = 0, sn = 0, nn = 0, sy = 0, ny = 0;
    for (int l = 0; l < kLags; ++l) {
      if (c[l] <= 0) continue;
      const double expected =
          std::max(wander2 * s[l] + noise * n[l], 1e-6);
      const double w = c[l] / (2 * expected * expected);
      ss += w * s[l] * s[l];
      sn += w * s[l] * n[l];
      nn += w * n[l] * n[l];
      sy += w * s[l] * y[l];
      ny += w * n[l] * y[l];
    }
    const double det = ss * nn - sn * sn;
    if (!(det > 1e-9 * ss * nn)) return;
    fitted = (sy * nn - ny * sn) / det;
    noise = (ss * ny - sn * sy) / det;
    error2 = nn / det;
    if (noise < 0) {
      noise = 0;
      fitted = sy / ss;
      error2 = 1 / ss;
    }
    // A negative σ² is noise: the next weights assume none.
    wander2 = std::max(fitted, 0.0);
  }
  wander2_ = fitted;
  wander2_error_ = std::sqrt(std::max(0.0, error2));
  noise_ns2_ = noise;
}

}  // namespace clocksync::hull
