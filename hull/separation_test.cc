// Separate() and FeasibleRangeAt() against the brute-force linear program of
// naive_separation.h, on random windows (seeded), including windows split
// across both chains of a SlidingHull and windows whose hulls cross.

#include "hull/separation.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "hull/sim/naive_separation.h"
#include "hull/sliding_hull.h"

namespace clocksync::hull {
namespace {

struct Window {
  SlidingHull req{HullSide::kLower};
  SlidingHull resp{HullSide::kUpper};
  HullChains Chains() const {
    HullChains c;
    c.lower = {req.front_chain(), req.back_chain()};
    c.upper = {resp.front_chain(), resp.back_chain()};
    return c;
  }
  std::vector<Point> Requests() const {
    std::vector<Point> v;
    for (size_t i = 0; i < req.size(); ++i) v.push_back(req.at(i));
    return v;
  }
  std::vector<Point> Responses() const {
    std::vector<Point> v;
    for (size_t i = 0; i < resp.size(); ++i) v.push_back(resp.at(i));
    return v;
  }
};

// Samples of a linear clock (offset, slope in ppm) with random delays; with
// `noise_ns` > 0 some points break the model so that hulls may cross.
void Fill(Window* w, std::mt19937_64& rng, int n, int pops, double slope,
          int64_t delay_ns, int64_t noise_ns) {
  std::exponential_distribution<double> exp_delay(1.0 / delay_ns);
  int64_t t = w->req.empty() ? 5'000'000 : w->resp.back().x;
  for (int i = 0; i < n; ++i) {
    t += 1'000'000 + static_cast<int64_t>(rng() % 100'000);
    const int64_t d1 = 1000 + static_cast<int64_t>(exp_delay(rng));
    const int64_t d2 = 1000 + static_cast<int64_t>(exp_delay(rng));
    const int64_t t4 = t + d1 + d2 + 500;
    auto theta = [&](int64_t x) {
      return static_cast<int64_t>(std::llround(123456.0 + slope * x));
    };
    int64_t jitter = 0;
    if (noise_ns > 0 && rng() % 10 == 0) {
      jitter = static_cast<int64_t>(rng() % (2 * noise_ns)) - noise_ns;
    }
    w->req.PushBack({t, theta(t) + d1 + jitter});
    w->resp.PushBack({t4, theta(t4) - d2 + jitter});
  }
  for (int i = 0; i < pops; ++i) {
    w->req.PopFront();
    w->resp.PopFront();
  }
}

void Compare(const Window& w, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  const Separation fast = Separate(w.Chains());
  const NaiveSeparation slow = NaiveSeparate(w.Requests(), w.Responses());
  ASSERT_EQ(fast.bounded, slow.bounded);
  if (!fast.bounded) return;
  // Feasibility is exact in the fast version; the naive one uses a small
  // tolerance, so only compare when the margin is clearly away from 0.
  if (std::fabs(static_cast<double>(slow.margin)) > 1e-3) {
    ASSERT_EQ(fast.feasible, slow.feasible);
  }
  if (!fast.feasible || !slow.feasible) return;
  const double tol = 1e-6 * (1 + std::fabs(static_cast<double>(slow.margin)));
  EXPECT_NEAR(fast.margin, static_cast<double>(slow.margin), tol);
  EXPECT_NEAR(fast.max_slope.value(), static_cast<double>(slow.max_slope),
              1e-12);
  EXPECT_NEAR(fast.min_slope.value(), static_cast<double>(slow.min_slope),
              1e-12);
  // The mid line: compare values where a different maximizer could only
  // arise from a flat top (then both lines still have the same margin).
  const int64_t first = w.req.front().x, last = w.resp.back().x;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 20; ++i) {
    // Inside, before and after the data.
    const int64_t span = last - first;
    const int64_t x = first - span / 2 +
                      static_cast<int64_t>(rng() % (2 * span + 1));
    long double low, high;
    NaiveRangeAt(slow, x, &low, &high);
    const OffsetRange r = FeasibleRangeAt(w.Chains(), fast, x);
    const double vtol = 1e-3 + 1e-9 * std::fabs(static_cast<double>(high));
    EXPECT_NEAR(r.low, static_cast<double>(low), vtol) << "x=" << x;
    EXPECT_NEAR(r.high, static_cast<double>(high), vtol) << "x=" << x;
    EXPECT_LE(r.low, fast.mid.At(x) + vtol);
    EXPECT_GE(r.high, fast.mid.At(x) - vtol);
  }
}

TEST(SeparationTest, MatchesLinearProgramOnRandomLinearClocks) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    Window w;
    const int n = 2 + static_cast<int>(rng() % 40);
    const int pops = static_cast<int>(rng() % n) / 2;
    const double slope = (static_cast<double>(rng() % 2001) - 1000) * 1e-7;
    Fill(&w, rng, n, pops, slope, 1 + rng() % 50'000, 0);
    Compare(w, seed);
    // Keep sliding so that both chains of each hull hold points.
    Fill(&w, rng, 10, 5, slope, 20'000, 0);
    Compare(w, seed + 1000);
  }
}

TEST(SeparationTest, MatchesLinearProgramWhenHullsMayCross) {
  int infeasible = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed * 7919);
    Window w;
    Fill(&w, rng, 5 + static_cast<int>(rng() % 30), 3, 2e-5, 5'000, 20'000);
    Compare(w, seed);
    infeasible += Separate(w.Chains()).feasible ? 0 : 1;
  }
  // The noise must actually produce crossings for this test to mean much.
  EXPECT_GT(infeasible, 10);
}

TEST(SeparationTest, GoldenSymmetricSamples) {
  // θ(x) = 1000 exactly, delays 100 each way, samples at x = 0 and 1000.
  Window w;
  w.req.PushBack({0, 1100});
  w.resp.PushBack({200, 900});
  w.req.PushBack({1000, 1100});
  w.resp.PushBack({1200, 900});
  const Separation s = Separate(w.Chains());
  ASSERT_TRUE(s.bounded);
  ASSERT_TRUE(s.feasible);
  EXPECT_DOUBLE_EQ(s.mid_slope.value(), 0.0);
  EXPECT_DOUBLE_EQ(s.margin, 100.0);
  EXPECT_DOUBLE_EQ(s.mid.At(600), 1000.0);
  // Steepest line: through (200, 900) and (1000, 1100): slope 1/4.
  EXPECT_DOUBLE_EQ(s.max_slope.value(), 0.25);
  // Shallowest: through (0, 1100) and (1200, 900): slope -1/6.
  EXPECT_DOUBLE_EQ(s.min_slope.value(), -1.0 / 6);
  const OffsetRange at_end = FeasibleRangeAt(w.Chains(), s, 2200);
  EXPECT_DOUBLE_EQ(at_end.high, 1100 + 0.25 * 1200);
  EXPECT_DOUBLE_EQ(at_end.low, 900 - 1000.0 / 6);
}

TEST(SeparationTest, CrossingHullsAreInfeasible) {
  Window w;
  w.req.PushBack({0, 100});
  w.resp.PushBack({10, 50});
  w.req.PushBack({1000, 100});
  w.resp.PushBack({1010, 50});
  w.req.PushBack({2000, 100});
  w.resp.PushBack({2010, 150});  // Above a request point on both sides.
  const Separation s = Separate(w.Chains());
  EXPECT_TRUE(s.bounded);
  EXPECT_FALSE(s.feasible);
}

TEST(SeparationTest, SingleSampleIsUnbounded) {
  Window w;
  w.req.PushBack({0, 100});
  w.resp.PushBack({10, 50});
  EXPECT_FALSE(Separate(w.Chains()).bounded);
}

}  // namespace
}  // namespace clocksync::hull
