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
  const double reference = middle - Miss(kind, width);
  if (learn && kind == 0) AddShort(x_ns, middle, width, slope);
  return reference;
}

void ReferenceAsymmetry::AddWidth(int kind, double width_ns) {
  widths_[static_cast<size_t>(kind)].Add(width_ns);
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
  }
  have_last_ = true;
  last_x_ = x_ns;
  last_middle_ = middle_ns;
  last_width_ = width_ns;
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

double ReferenceAsymmetry::Miss(int kind, double width_ns) const {
  const RecentValues<kWidths>& widths = widths_[static_cast<size_t>(kind)];
  if (count_ < kMinDifferences || widths.count() == 0) return 0;
  // k shrunk towards 0 by how well it stands out from its noise: all of
  // it far beyond kSignificance standard errors, none within them.
  const double k_raw = slope();
  const double noise = kSignificance * slope_error();
  if (!(std::abs(k_raw) > noise)) return 0;
  const double shrink = 1 - (noise / k_raw) * (noise / k_raw);
  const double k = std::clamp(k_raw * shrink, -0.5, 0.5);
  return k * (width_ns - widths.min());
}

}  // namespace clocksync::hull
