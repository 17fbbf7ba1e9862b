// hull/reference_wander.h: ReferenceWander, the clock's wander measured
// from the adaptive estimator's checkpoint references.
//
// The references (adaptive_estimator.h, step 1) are independent,
// low-noise readings θ_i of the offset at local times x_i. Under a
// random-walk frequency of σ ppb/√s, the middle of three of them misses the
// chord through the outer two (spacings a and b) by δ with
//   E[δ²] = σ² a² b² / (3 (a + b)) + r (1 + (a² + b²) / (a + b)²),
// r the references' own noise variance (ns²): the first term grows as the
// cube of the spacing, the second does not. Triples at spacings of 2, 4,
// ..., 32 checkpoints give σ² and r by weighted least squares over the
// lags' mean δ² (each weighted by its count / E[δ²]², the variance of a
// squared normal, reweighted with the estimates; a lag's triples count as
// one independent reading per `lag`, over which they overlap). This is
// the Allan-variance idea applied to offsets: the noise is measured, not
// assumed, so σ comes out close to the truth (within 20 %, on the low
// side, in reference_wander_test.cc), and far sooner than from the
// levels' drifts, whose own noise only adds to what they show.
//
// Thread safety: none; one owner.

#ifndef CLOCKSYNC_HULL_REFERENCE_WANDER_H_
#define CLOCKSYNC_HULL_REFERENCE_WANDER_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace clocksync::hull {

class ReferenceWander {
 public:
  // `memory_ns`: older triples weigh e^(−age / memory_ns).
  // `prior_ppb_per_sqrt_s`: the wander the first weights assume.
  ReferenceWander(int64_t memory_ns, double prior_ppb_per_sqrt_s);

  // A reference θ (ns, any fixed origin) for local time x (ns), in
  // increasing x.
  void Add(int64_t x_ns, double theta_ns);
  // Forgets everything (a step: references across it do not compare).
  void Reset();

  // Readings taken (triples, counted as independent).
  double effective_count() const { return effective_; }
  // σ² (ppb²/s) and its standard error; r (ns²). Meaningful once
  // effective_count() >= a few.
  double wander2() const { return wander2_; }
  double wander2_error() const { return wander2_error_; }
  double noise_ns2() const { return noise_ns2_; }
  // Whether σ²'s standard error exceeds resolvable² (too noisy to tell a
  // wander of `resolvable_ppb` from the references' own noise).
  bool TooNoisy(double resolvable_ppb) const {
    return wander2_error_ > resolvable_ppb * resolvable_ppb;
  }
  // σ from σ² less z standard errors (ppb/√s, at least 0).
  double Lower(double z) const {
    return std::sqrt(std::max(0.0, wander2_ - z * wander2_error_));
  }

  static constexpr int kMaxLag = 32;  // Checkpoints.

 private:
  void Solve();

  int64_t memory_ns_;
  double prior2_;
  // The last 2 kMaxLag + 1 references (ring).
  std::array<double, 2 * kMaxLag + 1> x_s_{};
  std::array<double, 2 * kMaxLag + 1> theta_{};
  int count_ = 0;
  int next_ = 0;
  bool have_origin_ = false;
  int64_t origin_x_ = 0;
  double last_x_s_ = 0;
  // By lag (2, 4, ..., kMaxLag checkpoints): Σ y (δ²), Σ S, Σ N over its
  // triples, and their count, all decayed with age.
  static constexpr int kLags = 5;
  std::array<double, kLags> sum_y_{};
  std::array<double, kLags> sum_s_{};
  std::array<double, kLags> sum_n_{};
  std::array<double, kLags> triples_{};
  double effective_ = 0;
  double wander2_ = 0;
  double wander2_error_ = 0;
  double noise_ns2_ = 0;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_REFERENCE_WANDER_H_
