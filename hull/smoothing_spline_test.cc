// hull/smoothing_spline_test.cc: the smoothing spline's limits (lambda 0
// interpolates, a line is kept at any lambda, a huge lambda gives the
// least-squares line), its trace against the influence matrix built column
// by column, and GCV on noisy smooth curves (seeds printed).

#include "hull/smoothing_spline.h"

#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace clocksync::hull {
namespace {

// Unevenly spaced abscissae: spacings between 20 and 120.
std::vector<double> UnevenX(int n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> spacing(20, 120);
  std::vector<double> x = {1000};
  while (static_cast<int>(x.size()) < n) x.push_back(x.back() + spacing(rng));
  return x;
}

TEST(SmoothingSplineTest, ZeroLambdaInterpolates) {
  std::mt19937_64 rng(1);
  const std::vector<double> x = UnevenX(12, rng);
  std::normal_distribution<double> noise(0, 100);
  std::vector<double> y;
  for (size_t i = 0; i < x.size(); ++i) y.push_back(noise(rng));
  const SmoothedValues s = SmoothWithLambda(x, y, 0);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(s.values[i], y[i], 1e-9);
  EXPECT_NEAR(s.degrees_of_freedom, 12, 1e-9);
}

TEST(SmoothingSplineTest, KeepsALineAtAnyLambda) {
  std::mt19937_64 rng(2);
  const std::vector<double> x = UnevenX(30, rng);
  std::vector<double> y;
  for (double xi : x) y.push_back(15'000 * xi - 4e7);  // 15 ppm in ns per s
  for (double lambda : {1e-3, 1.0, 1e6, 1e12}) {
    const SmoothedValues s = SmoothWithLambda(x, y, lambda);
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(s.values[i], y[i], 1e-6 * std::abs(y[i]) + 1e-6)
          << "lambda " << lambda;
    }
  }
  const std::optional<SmoothedValues> gcv = SmoothByGcv(x, y);
  ASSERT_TRUE(gcv.has_value());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(gcv->values[i], y[i], 1e-6 * std::abs(y[i]) + 1e-6);
  }
}

TEST(SmoothingSplineTest, HugeLambdaGivesTheLeastSquaresLine) {
  std::mt19937_64 rng(3);
  const std::vector<double> x = UnevenX(25, rng);
  std::normal_distribution<double> noise(0, 50);
  std::vector<double> y;
  for (double xi : x) y.push_back(2 * xi + noise(rng));
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= static_cast<double>(x.size());
  my /= static_cast<double>(x.size());
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  const double slope = sxy / sxx;
  const SmoothedValues s = SmoothWithLambda(x, y, 1e16);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(s.values[i], my + slope * (x[i] - mx), 1e-3);
  }
  EXPECT_NEAR(s.degrees_of_freedom, 2, 1e-3);
}

// trace(A) from the band of B^-1 equals the trace of A built by smoothing
// each unit vector (A is linear in y).
TEST(SmoothingSplineTest, DegreesOfFreedomAreTheInfluenceMatrixTrace) {
  std::mt19937_64 rng(4);
  const std::vector<double> x = UnevenX(9, rng);
  for (double lambda : {1.0, 1e4, 1e6, 1e8}) {
    double trace = 0;
    std::vector<double> unit(x.size(), 0);
    for (size_t i = 0; i < x.size(); ++i) {
      unit.assign(x.size(), 0);
      unit[i] = 1;
      trace += SmoothWithLambda(x, unit, lambda).values[i];
    }
    const SmoothedValues s = SmoothWithLambda(x, unit, lambda);
    EXPECT_NEAR(s.degrees_of_freedom, trace, 1e-9) << "lambda " << lambda;
    EXPECT_GT(trace, 2 - 1e-9);
    EXPECT_LT(trace, 9 + 1e-9);
  }
}

// A smooth curve (a clock's offset: a drift and a 20-minute cycle) sampled
// every 20-120 s with noise: on every seed, GCV's values are closer to the
// curve than the samples, and within 25% of the best lambda of the grid as
// an oracle knowing the truth would choose it.
TEST(SmoothingSplineTest, GcvRecoversASmoothCurveFromNoise) {
  for (uint64_t seed = 100; seed < 110; ++seed) {
    std::mt19937_64 rng(seed);
    std::cout << "GcvRecoversASmoothCurve: seed=" << seed << "\n";
    const std::vector<double> x = UnevenX(80, rng);
    std::normal_distribution<double> noise(0, 2'000);
    std::vector<double> truth, y;
    for (double xi : x) {
      truth.push_back(15'000 * xi + 150'000 * std::sin(xi * 6.2832 / 1200));
      y.push_back(truth.back() + noise(rng));
    }
    auto rms_error = [&](const std::vector<double>& values) {
      double sum = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        sum += (values[i] - truth[i]) * (values[i] - truth[i]);
      }
      return std::sqrt(sum / static_cast<double>(x.size()));
    };
    const std::optional<SmoothedValues> s = SmoothByGcv(x, y);
    ASSERT_TRUE(s.has_value());
    const double h = (x.back() - x.front()) / static_cast<double>(x.size() - 1);
    double oracle = rms_error(y);
    for (int k = -24; k <= 48; ++k) {
      oracle = std::min(
          oracle,
          rms_error(SmoothWithLambda(x, y, h * h * h * std::pow(10.0, k / 4.0))
                        .values));
    }
    const double gcv = rms_error(s->values);
    std::cout << "  raw " << rms_error(y) << " gcv " << gcv << " oracle "
              << oracle << " (dof " << s->degrees_of_freedom << ")\n";
    EXPECT_LT(gcv, rms_error(y)) << "seed " << seed;
    EXPECT_LE(gcv, 1.25 * oracle) << "seed " << seed;
  }
}

TEST(SmoothingSplineTest, RefusesWhatItCannotSmooth) {
  EXPECT_FALSE(SmoothByGcv({1, 2, 3}, {1, 2, 3}).has_value());
  EXPECT_FALSE(SmoothByGcv({1, 2, 2, 3}, {1, 2, 3, 4}).has_value());
  EXPECT_FALSE(SmoothByGcv({1, 3, 2, 4}, {1, 2, 3, 4}).has_value());
  EXPECT_FALSE(SmoothByGcv({1, 2, 3, 4}, {1, NAN, 3, 4}).has_value());
  EXPECT_FALSE(SmoothByGcv({1, 2, 3, 4}, {1, 2, 3}).has_value());
}

}  // namespace
}  // namespace clocksync::hull
