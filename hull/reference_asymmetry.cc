// hull/reference_asymmetry.cc: see reference_asymmetry.h.
#include "hull/reference_asymmetry.h"

#include <algorithm>
#include <cmath>

namespace clocksync::hull {

ReferenceAsymmetry::ReferenceAsymmetry(int64_t memory_ns)
    : memory_ns_(memory_ns) {}

double ReferenceAsymmetry::Reference(int kind, int64_t x_ns, double upper_ns,
                                     double lower_ns, double slope,
                                     bool learn) {
  const double middle = (upper_ns + lower_ns) / 2;
  const double width = upper_ns - lower_ns;
  if (learn) AddWidth(kind, width);
  if (count_ < kMinDifferences) {
    early_widths_[static_cast<size_t>(kind)].Add(width);
    noise_valid_ = {};
  }
  const double reference = middle - Miss(kind, width);
  if (learn && kind == 0) AddShort(x_ns, middle, width, slope);
  return reference;
}

void ReferenceAsymmetry::AddWidth(int kind, double width_ns) {
  widths_[static_cast<size_t>(kind)].Add(width_ns);
  noise_valid_ = {};
}

void ReferenceAsymmetry::AddShort(int64_t x_ns, double middle_ns,
                                  double width_ns, double slope) {
  if (have_last_) {
    const double dm = (middle_ns - last_middle_) -
                      slope * static_cast<double>(x_ns - last_x_);
    const double dw = width_ns - last_width_;
    const double decay =
        std::exp(-static_cast<double>(std::max<int64_t>(0, x_ns - last_x_)) /
                 static_cast<double>(memory_ns_));
    const double ww = dw * dw;
    sum_mw_ = sum_mw_ * decay + dm * dw;
    sum_ww_ = sum_ww_ * decay + ww;
    sum_wwmm_ = sum_wwmm_ * decay + ww * dm * dm;
    sum_wwwm_ = sum_wwwm_ * decay + ww * dw * dm;
    sum_wwww_ = sum_wwww_ * decay + ww * ww;
    ++count_;
    noise_valid_ = {};  // k moved
  }
  have_last_ = true;
  last_x_ = x_ns;
  last_middle_ = middle_ns;
  last_width_ = width_ns;
}

void ReferenceAsymmetry::AddSample(int64_t request_x, double request_offset,
                                   int64_t response_x, double response_offset,
                                   double slope, bool skip) {
  if (count_ >= kMinDifferences) return;  // k is measured now.
  if (skip) {  // Nor is the next one differenced against it.
    have_sample_ = false;
    return;
  }
  if (have_sample_) {
    // Successive offsets after the slope: θ's own change cancels, and
    // each direction's delay differences remain.
    const double df = (request_offset - last_request_) -
                      slope * static_cast<double>(request_x - last_request_x_);
    const double db = (response_offset - last_response_) -
                      slope * static_cast<double>(response_x - last_response_x_);
    forward_.Add(std::abs(df));
    backward_.Add(std::abs(db));
    noise_valid_ = {};  // the prior k moved
  }
  have_sample_ = true;
  last_request_x_ = request_x;
  last_response_x_ = response_x;
  last_request_ = request_offset;
  last_response_ = response_offset;
}

double ReferenceAsymmetry::prior_slope() const {
  if (forward_.count() < kSpreadSamples) return 0;
  const double forward = forward_.median();
  const double backward = backward_.median();
  if (!(forward > 0) || !(backward > 0)) return 0;
  // ½ tanh(ln r) = (r² − 1) / (2 (r² + 1)): k for exponential excess
  // minima, whose variances go as their spreads squared.
  const double r = std::log(forward / backward);
  const double beyond = std::max(0.0, std::abs(r) - kPriorDeadZone);
  return std::copysign(std::tanh(beyond) / 2, r);
}

double ReferenceAsymmetry::slope() const {
  return sum_ww_ > 0 ? sum_mw_ / sum_ww_ : 0.0;
}

double ReferenceAsymmetry::slope_error() const {
  if (sum_ww_ <= 0) return 0;
  const double k = slope();
  // The sandwich standard error (see the header), widened by
  // kOverlapVariance.
  const double residual =
      sum_wwmm_ - 2 * k * sum_wwwm_ + k * k * sum_wwww_;
  return std::sqrt(kOverlapVariance * std::max(0.0, residual)) / sum_ww_;
}

double ReferenceAsymmetry::AppliedSlope() const {
  if (count_ < kMinDifferences) return prior_slope();
  // k shrunk towards 0 by how well it stands out from its noise: all of
  // it far beyond kSignificance standard errors, none within them.
  const double k_raw = slope();
  const double noise = kSignificance * slope_error();
  if (!(std::abs(k_raw) > noise)) return 0;
  const double shrink = 1 - (noise / k_raw) * (noise / k_raw);
  return std::clamp(k_raw * shrink, -0.5, 0.5);
}

const RecentValues<ReferenceAsymmetry::kWidths>& ReferenceAsymmetry::Widths(
    int kind) const {
  return count_ < kMinDifferences ? early_widths_[static_cast<size_t>(kind)]
                                  : widths_[static_cast<size_t>(kind)];
}

double ReferenceAsymmetry::Miss(int kind, double width_ns) const {
  const RecentValues<kWidths>& widths = Widths(kind);
  if (widths.count() == 0) return 0;
  return AppliedSlope() * (width_ns - widths.min());
}

double ReferenceAsymmetry::NoiseNs2(int kind) const {
  const size_t i = static_cast<size_t>(kind);
  if (!noise_valid_[i]) {  // the paired tests ask for it per pair
    const RecentValues<kWidths>& widths = Widths(kind);
    const double k = AppliedSlope();
    noise_ns2_[i] = widths.count() < kMinNoiseWidths
                        ? 0
                        : widths.variance() * (0.25 - k * k);
    noise_valid_[i] = true;
  }
  return noise_ns2_[i];
}

}  // namespace clocksync::hull
