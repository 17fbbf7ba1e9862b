// ConvexChain: its extreme of y − slope t equals the brute-force one over
// every point added, for any slope, while it keeps only the hull; its
// value at t lies on the hull's edges.

#include "hull/convex_chain.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace clocksync::hull {
namespace {

TEST(ConvexChainTest, EmptyIsInfinite) {
  EXPECT_TRUE(std::isinf(ConvexChain(true).Extreme(1)));
  EXPECT_LT(ConvexChain(false).Extreme(1), 0);
}

TEST(ConvexChainTest, ExtremeMatchesBruteForce) {
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> delay(1.0 / 20'000);
  for (const bool lower : {true, false}) {
    ConvexChain chain(lower);
    std::vector<std::pair<double, double>> all;
    double t = 0;
    for (int i = 0; i < 2'000; ++i) {
      t += 50e6;  // 20 samples/s
      // A line, a bend and one-sided delay noise (up for requests).
      const double y = 3e-6 * t + 1e-18 * t * t +
                       (lower ? delay(rng) : -delay(rng));
      chain.Add(t, y);
      all.emplace_back(t, y);
    }
    for (const double slope : {-1e-4, -3e-6, 0.0, 2.9e-6, 3e-6, 1e-3}) {
      double expected = lower ? INFINITY : -INFINITY;
      for (const auto& [pt, py] : all) {
        const double v = py - slope * pt;
        expected = lower ? std::min(expected, v) : std::max(expected, v);
      }
      EXPECT_DOUBLE_EQ(chain.Extreme(slope), expected)
          << (lower ? "lower" : "upper") << " slope " << slope;
    }
  }
}

TEST(ConvexChainTest, AtInterpolatesBetweenVertices) {
  ConvexChain chain(true);
  EXPECT_TRUE(std::isnan(chain.At(0)));
  for (const auto& [t, y] : std::vector<std::pair<double, double>>{
           {0, 4}, {1, 1}, {2, 3}, {3, 0}, {4, 6}}) {
    chain.Add(t, y);
  }
  // Lower hull: (0, 4), (1, 1), (3, 0), (4, 6); (2, 3) lies above it.
  EXPECT_DOUBLE_EQ(chain.At(0), 4);
  EXPECT_DOUBLE_EQ(chain.At(1), 1);
  EXPECT_DOUBLE_EQ(chain.At(2), 0.5);
  EXPECT_DOUBLE_EQ(chain.At(3.5), 3);
  EXPECT_DOUBLE_EQ(chain.At(-1), 4);
  EXPECT_DOUBLE_EQ(chain.At(9), 6);
}

TEST(ConvexChainTest, ClearForgets) {
  ConvexChain chain(true);
  chain.Add(0, 5);
  chain.Add(1, 3);
  EXPECT_FALSE(chain.empty());
  chain.Clear();
  EXPECT_TRUE(chain.empty());
  chain.Add(2, 10);
  EXPECT_DOUBLE_EQ(chain.Extreme(0), 10);
}

}  // namespace
}  // namespace clocksync::hull
