// hull/linearity_check.cc: LinearityCheck (see linearity_check.h).

#include "hull/linearity_check.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace clocksync::hull {
namespace {

// Fewest complete stretches the verdict weighs all at once (120 s): with
// fewer, the pooled noise rests on few spacings and one stretch's minimum
// far in its exponential tail passes the limit (109, no wander, seed 42:
// e^3.6 at 75 s; from 3 stretches on, 109 on seeds 40–49 1.008 → 1.064 ×
// the best fixed window), so each is left out in turn.
constexpr size_t kMinStretches = 8;
// Rounds of reading the stretches along a slope and fitting a new one.
constexpr int kFitRounds = 3;
// The clock wanders when the best alternative is this much more likely
// (log): e².
constexpr double kLogRatioLimit = 2.0;
// The verdict's alternatives: σ² at these times the allowance's.
constexpr std::array<double, 4> kVerdictFactors = {0.01, 0.1, 1, 10};
// The fast-wander alternatives: σ² at 10^(k/2) times the allowance's,
// k = 0 .. kFastGrid − 1 (1 to 10⁵), weighed from kFastMinStretches (75 s)
// on: a steep swing departs from a line by many times the stretches'
// noise within a few stretches, and is judged against the allowance, not
// against none (a linear clock's stretches hardly look like 30 times the
// allowance's wander, a quiet stretch like no wander at all).
constexpr int kFastGrid = 11;
constexpr size_t kFastMinStretches = 5;
// Beyond this the probability of a linear clock is 0 in doubles anyway
// (keeps exp finite).
constexpr double kMaxLogBayesFactor = 300;
// The least noise variance a side's minimum is taken to have (ns²): the
// stamps' own resolution, and no side weighs all.
constexpr double kMinSideVariance = 1.0;

// A stretch whose width (its lowest request offset less its highest
// response offset: the two directions' least delays, θ cancels) lies this
// many noise standard deviations above the median width rests on delayed
// samples only: a standing queue below the round trips' congestion limit
// (22 µs added one way at 13.5 µs of jitter) shifts its middle by half
// the queue, which reads as a wander and vetoes the linear verdicts for
// the whole first longest window. For exponential minima a clean stretch
// lies that far out once in 300 or more rarely (e^5.7 with jitter one
// way, e^6.5 with the same both ways).
constexpr double kImpureWidthNoises = 5;

// Drops the stretches whose width is impure (above) from the parallel
// vectors: their centres, upper and lower offsets and the two sides'
// squared noise spacings.
void KeepPure(std::vector<double>& centre, std::vector<double>& upper,
              std::vector<double>& lower, std::vector<double>& up2,
              std::vector<double>& down2) {
  const size_t n = centre.size();
  if (n < 3) return;
  std::vector<double> width(n);
  double noise2 = 0;
  for (size_t j = 0; j < n; ++j) {
    width[j] = upper[j] - lower[j];
    noise2 += up2[j] + down2[j];
  }
  noise2 /= static_cast<double>(n);
  std::vector<double> sorted = width;
  std::nth_element(sorted.begin(), sorted.begin() + n / 2, sorted.end());
  const double limit = sorted[n / 2] + kImpureWidthNoises * std::sqrt(noise2);
  size_t kept = 0;
  for (size_t j = 0; j < n; ++j) {
    if (width[j] > limit) continue;
    centre[kept] = centre[j];
    upper[kept] = upper[j];
    lower[kept] = lower[j];
    up2[kept] = up2[j];
    down2[kept] = down2[j];
    ++kept;
  }
  for (std::vector<double>* v : {&centre, &upper, &lower, &up2, &down2}) {
    v->resize(kept);
  }
}

// The restricted (REML) log likelihood of offsets y (ns) at times t (s)
// under an unknown line, white noise of variance `var` (ns²) and a
// random-walk frequency of σ² = q (ppb²/s), whose offsets covary as
// q (s² t / 2 − s³ / 6), s ≤ t. The line's offset and slope are
// integrated out: only the departure from a line counts.
double RestrictedLogLikelihood(const std::vector<double>& t,
                               const std::vector<double>& y, double var,
                               double q) {
  const size_t n = t.size();
  std::vector<double> a(n * n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j <= i; ++j) {
      const double lo = t[j] - t[0];  // t ascending: j ≤ i
      const double hi = t[i] - t[0];
      a[i * n + j] =
          q * (lo * lo * hi / 2 - lo * lo * lo / 6) + (i == j ? var : 0);
    }
  }
  // Cholesky, lower triangle in place.
  double log_det = 0;
  for (size_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0)) return -std::numeric_limits<double>::infinity();
    d = std::sqrt(d);
    a[j * n + j] = d;
    log_det += 2 * std::log(d);
    for (size_t i = j + 1; i < n; ++i) {
      double v = a[i * n + j];
      for (size_t k = 0; k < j; ++k) v -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = v / d;
    }
  }
  // Whitened columns L⁻¹ y, L⁻¹ 1, L⁻¹ t, and the generalized least
  // squares of y on the line through them.
  auto whiten = [&](std::vector<double> v) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < i; ++k) v[i] -= a[i * n + k] * v[k];
      v[i] /= a[i * n + i];
    }
    return v;
  };
  std::vector<double> since(n);
  for (size_t i = 0; i < n; ++i) since[i] = t[i] - t[0];
  const std::vector<double> wy = whiten(y);
  const std::vector<double> w1 = whiten(std::vector<double>(n, 1.0));
  const std::vector<double> wt = whiten(since);
  double m11 = 0, m12 = 0, m22 = 0, v1 = 0, v2 = 0, yy = 0;
  for (size_t i = 0; i < n; ++i) {
    m11 += w1[i] * w1[i];
    m12 += w1[i] * wt[i];
    m22 += wt[i] * wt[i];
    v1 += w1[i] * wy[i];
    v2 += wt[i] * wy[i];
    yy += wy[i] * wy[i];
  }
  const double det = m11 * m22 - m12 * m12;
  if (!(det > 0)) return -std::numeric_limits<double>::infinity();
  const double fitted =
      (m22 * v1 * v1 - 2 * m12 * v1 * v2 + m11 * v2 * v2) / det;
  return -0.5 * (log_det + std::log(det) + yy - fitted);
}

// The lower end of σ²'s likelihood interval over the fast-wander grid
// (the smallest alternative within e² of the best; as σ, ppb/√s) where
// the allowance's σ² (the grid's first) lies outside it, else 0.
double FastWanderLowerEnd(const std::vector<double>& t,
                          const std::vector<double>& y, double var,
                          double wander_ppb) {
  std::array<double, kFastGrid> fast{};
  double top = -std::numeric_limits<double>::infinity();
  for (int k = 0; k < kFastGrid; ++k) {
    const double factor = std::pow(10.0, k / 2.0);
    fast[k] =
        RestrictedLogLikelihood(t, y, var, factor * wander_ppb * wander_ppb);
    top = std::max(top, fast[k]);
  }
  for (int k = 1; k < kFastGrid && top - fast[0] > kLogRatioLimit; ++k) {
    if (fast[k] >= top - kLogRatioLimit) {
      return std::pow(10.0, k / 4.0) * wander_ppb;
    }
  }
  return 0;
}

// `v` without its element `out` (a stretch left out).
std::vector<double> Without(const std::vector<double>& v, size_t out) {
  std::vector<double> rest;
  rest.reserve(v.size() - 1);
  for (size_t j = 0; j < v.size(); ++j) {
    if (j != out) rest.push_back(v[j]);
  }
  return rest;
}

// The log likelihood ratios of the verdict's alternatives (σ² at 0.01,
// 0.1, 1 and 10 times the allowance's) over no wander.
std::array<double, kVerdictFactors.size()> VerdictLogRatios(
    const std::vector<double>& t, const std::vector<double>& y, double var,
    double wander_ppb) {
  const double none = RestrictedLogLikelihood(t, y, var, 0);
  std::array<double, kVerdictFactors.size()> ratios{};
  for (size_t k = 0; k < kVerdictFactors.size(); ++k) {
    ratios[k] = RestrictedLogLikelihood(
                    t, y, var, kVerdictFactors[k] * wander_ppb * wander_ppb) -
                none;
  }
  return ratios;
}

// The verdict's log likelihood ratio: the best alternative's.
double VerdictLogRatio(const std::vector<double>& t,
                       const std::vector<double>& y, double var,
                       double wander_ppb) {
  const auto ratios = VerdictLogRatios(t, y, var, wander_ppb);
  return *std::max_element(ratios.begin(), ratios.end());
}

}  // namespace

double LinearityCheck::LinearProbability(double wander_odds) const {
  if (std::isnan(log_bayes_factor_)) return log_bayes_factor_;
  return 1 / (1 + wander_odds * std::exp(std::min(log_bayes_factor_,
                                                  kMaxLogBayesFactor)));
}

void LinearityCheck::Side::Add(double dx, double v, double slope_ppb) {
  if (!have_base) {
    have_base = true;
    base = v;
  }
  const float rel = static_cast<float>(v - base);
  const float k = static_cast<float>(v - base - slope_ppb * dx);
  if (n == kKept && k >= key[kKept - 1]) return;
  int i = n < kKept ? n++ : kKept - 1;
  for (; i > 0 && key[i - 1] > k; --i) {
    key[i] = key[i - 1];
    value[i] = value[i - 1];
    dx_s[i] = dx_s[i - 1];
  }
  key[i] = k;
  value[i] = rel;
  dx_s[i] = static_cast<float>(dx);
}

double LinearityCheck::Side::Lowest(double slope_ppb, double* spacing) const {
  std::array<double, kKept> along{};
  for (int i = 0; i < n; ++i) along[i] = value[i] - slope_ppb * dx_s[i];
  std::partial_sort(along.begin(), along.begin() + kLowest,
                    along.begin() + n);
  *spacing = (along[kLowest - 1] - along[0]) / (kLowest - 1);
  return base + along[0];
}

LinearityCheck::LinearityCheck(int64_t horizon_ns,
                               double wander_ppb_per_sqrt_s,
                               int64_t stretch_ns)
    : stretch_ns_(stretch_ns),
      horizon_ns_(horizon_ns),
      wander_ppb_(wander_ppb_per_sqrt_s),
      running_(stretch_ns > 0 && wander_ppb_per_sqrt_s > 0) {}

void LinearityCheck::Stop() {
  running_ = false;
  stretches_.clear();
  stretches_.shrink_to_fit();
  filling_.clear();
  filling_.shrink_to_fit();
}

void LinearityCheck::Add(int64_t request_x, double request_offset,
                         int64_t response_x, double response_offset,
                         double slope_ppb) {
  if (!running_) return;
  if (!have_first_) {
    have_first_ = true;
    first_x_ = response_x;
  }
  if (response_x < first_x_) return;  // the estimator's own checks keep
                                      // time forward; never index back
  if (response_x - first_x_ >= horizon_ns_) {
    Stop();
    return;
  }
  const size_t index =
      static_cast<size_t>((response_x - first_x_) / stretch_ns_);
  if (index != filling_index_) {
    // The filling stretch is complete: keep its lowest points along the
    // best slope known now (over all the samples so far, this one's too).
    Close(std::isnan(slope_ppb) ? slope_ppb_ : slope_ppb);
    filling_index_ = index;
    if (stretches_.size() >= kFastMinStretches) Test();
  }
  const double centre_x = static_cast<double>(first_x_) +
                          (static_cast<double>(index) + 0.5) *
                              static_cast<double>(stretch_ns_);
  filling_.push_back({(static_cast<double>(request_x) - centre_x) * 1e-9,
                      request_offset,
                      (static_cast<double>(response_x) - centre_x) * 1e-9,
                      -response_offset});
}

void LinearityCheck::Close(double slope_ppb) {
  if (filling_.empty()) return;
  stretches_.resize(filling_index_ + 1);
  Stretch& s = stretches_[filling_index_];
  for (const Point& p : filling_) {
    s.up.Add(p.request_dx_s, p.request, slope_ppb);
    s.down.Add(p.response_dx_s, p.negated_response, -slope_ppb);
  }
  filling_.clear();
}

void LinearityCheck::Test() {
  const size_t complete = stretches_.size();
  const double stretch_s = static_cast<double>(stretch_ns_) * 1e-9;
  double slope = slope_ppb_;
  std::vector<double> centre, middle;
  std::vector<double> upper, lower;
  double var = 0;  // the stretches' noise, pooled (their sample counts
                   // are alike), from about 3 kLowest − 3 spacings each
  for (int round = 0; round < kFitRounds; ++round) {
    centre.clear();
    upper.clear();
    lower.clear();
    double upper_var = 0, lower_var = 0;
    std::vector<double> up2, down2;
    for (size_t j = 0; j < complete; ++j) {
      const Stretch& s = stretches_[j];
      if (s.up.n < kLowest || s.down.n < kLowest) continue;
      double up_spacing = 0, down_spacing = 0;
      centre.push_back((static_cast<double>(j) + 0.5) * stretch_s);
      upper.push_back(s.up.Lowest(slope, &up_spacing));
      lower.push_back(-s.down.Lowest(-slope, &down_spacing));
      up2.push_back(up_spacing * up_spacing);
      down2.push_back(down_spacing * down_spacing);
    }
    KeepPure(centre, upper, lower, up2, down2);
    for (size_t j = 0; j < centre.size(); ++j) {
      upper_var += up2[j];
      lower_var += down2[j];
    }
    const size_t n = centre.size();
    if (n < kFastMinStretches) return;
    upper_var /= static_cast<double>(n);
    lower_var /= static_cast<double>(n);
    // Each side weighed by the other's noise, pooled over the stretches
    // (the same weights for all, so that the floors' constant stays one).
    const double weigh_upper = std::max(upper_var, kMinSideVariance);
    const double weigh_lower = std::max(lower_var, kMinSideVariance);
    const double w_upper = weigh_lower / (weigh_upper + weigh_lower);
    const double w_lower = 1 - w_upper;
    var = w_upper * w_upper * upper_var + w_lower * w_lower * lower_var;
    middle.clear();
    for (size_t j = 0; j < n; ++j) {
      middle.push_back(w_upper * upper[j] + w_lower * lower[j]);
    }
    double mx = 0, my = 0;
    for (size_t j = 0; j < centre.size(); ++j) {
      mx += centre[j];
      my += middle[j];
    }
    mx /= static_cast<double>(centre.size());
    my /= static_cast<double>(centre.size());
    double sxx = 0, sxy = 0;
    for (size_t j = 0; j < centre.size(); ++j) {
      sxx += (centre[j] - mx) * (centre[j] - mx);
      sxy += (centre[j] - mx) * (middle[j] - my);
    }
    slope = sxy / sxx;
    // The likelihoods integrate any line out: they are read on the
    // residuals from this one, which keeps them exact in doubles (the
    // offsets themselves run to 10⁸ ns and more against a noise of 1 ns).
    for (size_t j = 0; j < centre.size(); ++j) {
      middle[j] -= my + slope * (centre[j] - mx);
    }
  }
  slope_ppb_ = slope;
  if (!(var > 0)) return;
  fast_wander_ppb_ = FastWanderLowerEnd(centre, middle, var, wander_ppb_);
  // It must hold with the first or the last stretch left out: a random
  // walk explains a lone minimum far in its exponential tail as a bend
  // where it can bend once, at either end (inside, it would take two).
  if (fast_wander_ppb_ > 0) {
    for (const size_t out : {size_t{0}, centre.size() - 1}) {
      fast_wander_ppb_ = std::min(
          fast_wander_ppb_, FastWanderLowerEnd(Without(centre, out),
                                               Without(middle, out), var,
                                               wander_ppb_));
    }
  }
  // The Bayes factor of a wander against none: the alternatives' mean
  // likelihood ratio, from all the stretches (a stretch far in its tail
  // lowers the probability of a linear clock: the cautious side).
  const auto ratios = VerdictLogRatios(centre, middle, var, wander_ppb_);
  const double top = *std::max_element(ratios.begin(), ratios.end());
  double mean = 0;
  for (const double r : ratios) mean += std::exp(r - top);
  log_bayes_factor_ = top + std::log(mean / static_cast<double>(ratios.size()));
  double log_ratio = std::numeric_limits<double>::infinity();
  if (centre.size() >= kMinStretches) {
    log_ratio = top;
  } else {
    // Fewer: the ratio with each stretch left out in turn, the least of
    // them (one stretch's minimum far in its tail does not pass it).
    for (size_t out = 0; out < centre.size(); ++out) {
      log_ratio = std::min(
          log_ratio, VerdictLogRatio(Without(centre, out),
                                     Without(middle, out), var, wander_ppb_));
    }
  }
  wander_seen_ = log_ratio > kLogRatioLimit;
}

}  // namespace clocksync::hull
