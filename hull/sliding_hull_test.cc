// SlidingHull against a from-scratch monotone chain over the window, under
// random pushes and pops (seeded; the seed is printed on failure).

#include "hull/sliding_hull.h"

#include <deque>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace clocksync::hull {
namespace {

std::vector<Point> MonotoneChain(const std::vector<Point>& pts, HullSide side) {
  std::vector<Point> chain;
  for (const Point& p : pts) {
    while (chain.size() >= 2) {
      const __int128 turn = Cross(chain[chain.size() - 2], chain.back(), p);
      if (side == HullSide::kLower ? turn > 0 : turn < 0) break;
      chain.pop_back();
    }
    chain.push_back(p);
  }
  return chain;
}

// The hull of the window as the hull of both chains' vertices.
std::vector<Point> MergedHull(const SlidingHull& h, HullSide side) {
  std::vector<Point> pts;
  for (const ChainView& c : {h.front_chain(), h.back_chain()}) {
    for (int k = 0; k < c.size(); ++k) pts.push_back(c.vertex(k));
  }
  return MonotoneChain(pts, side);
}

void ExpectSameChain(const std::vector<Point>& a, const std::vector<Point>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].x, b[i].x) << i;
    EXPECT_EQ(a[i].y, b[i].y) << i;
  }
}

void RunRandom(HullSide side, uint32_t seed, int steps, int max_window,
               bool curved) {
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  SlidingHull hull(side);
  std::deque<Point> window;
  int64_t x = 1'000'000;
  for (int step = 0; step < steps; ++step) {
    const bool push = window.empty() ||
                      (static_cast<int>(window.size()) < max_window &&
                       rng() % 3 != 0);
    if (push) {
      x += 1 + static_cast<int64_t>(rng() % 1000);
      int64_t y = static_cast<int64_t>(rng() % 2000) - 1000;
      if (curved) y += (x / 1000) * (x / 1000) / 50;  // Many hull vertices.
      hull.PushBack({x, y});
      window.push_back({x, y});
    } else {
      hull.PopFront();
      window.pop_front();
    }
    ASSERT_EQ(hull.size(), window.size());
    if (step % 7 == 0 || window.size() < 4) {
      const std::vector<Point> pts(window.begin(), window.end());
      ExpectSameChain(MergedHull(hull, side), MonotoneChain(pts, side));
      // Every chain's vertices are convex and ordered by x on their own.
      for (const ChainView& c : {hull.front_chain(), hull.back_chain()}) {
        for (int k = 0; k + 1 < c.size(); ++k) {
          ASSERT_LT(c.vertex(k).x, c.vertex(k + 1).x);
        }
      }
      if (!window.empty()) {
        EXPECT_EQ(hull.front().x, window.front().x);
        EXPECT_EQ(hull.back().x, window.back().x);
      }
    }
  }
}

TEST(SlidingHullTest, LowerMatchesRebuildUnderRandomPushPop) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    RunRandom(HullSide::kLower, seed, 3000, 1 + seed * 7, false);
  }
}

TEST(SlidingHullTest, UpperMatchesRebuildUnderRandomPushPop) {
  for (uint32_t seed = 101; seed <= 120; ++seed) {
    RunRandom(HullSide::kUpper, seed, 3000, 1 + (seed % 20) * 11, false);
  }
}

TEST(SlidingHullTest, CurvedDataWithLongHulls) {
  RunRandom(HullSide::kLower, 7, 5000, 400, true);
  RunRandom(HullSide::kUpper, 8, 5000, 400, true);
}

TEST(SlidingHullTest, CollinearPointsKeepOnlyEnds) {
  SlidingHull hull(HullSide::kLower);
  for (int64_t i = 0; i < 10; ++i) hull.PushBack({i, 3 * i});
  ExpectSameChain(MergedHull(hull, HullSide::kLower),
                  {{0, 0}, {9, 27}});
  hull.PopFront();
  ExpectSameChain(MergedHull(hull, HullSide::kLower), {{1, 3}, {9, 27}});
}

TEST(SlidingHullTest, ClearEmptiesAndReusesRing) {
  SlidingHull hull(HullSide::kUpper);
  for (int64_t i = 0; i < 1000; ++i) hull.PushBack({i, i % 7});
  const size_t bytes = hull.memory_bytes();
  hull.Clear();
  EXPECT_TRUE(hull.empty());
  EXPECT_EQ(hull.chain_vertices(), 0u);
  for (int64_t i = 0; i < 1000; ++i) hull.PushBack({i, -(i % 5)});
  EXPECT_EQ(hull.size(), 1000u);
  EXPECT_EQ(hull.memory_bytes(), bytes);
}

TEST(SlidingHullTest, ExtremeCoordinatesAreExact) {
  // Coordinates far beyond 2^53 and products beyond 2^63: (1, -big/2 + 1)
  // is exactly on the segment from (0, -big/2) to (big, big/2) and goes;
  // one ns lower it stays. Doubles could not tell the two apart.
  const int64_t big = int64_t{1} << 61;
  for (const int64_t dip : {0, 1}) {
    SlidingHull hull(HullSide::kLower);
    hull.PushBack({-big, big / 2});
    hull.PushBack({0, -big / 2});
    hull.PushBack({1, -big / 2 + 1 - dip});
    hull.PushBack({big, big / 2});
    if (dip == 0) {
      ExpectSameChain(MergedHull(hull, HullSide::kLower),
                      {{-big, big / 2}, {0, -big / 2}, {big, big / 2}});
    } else {
      ExpectSameChain(MergedHull(hull, HullSide::kLower),
                      {{-big, big / 2}, {0, -big / 2}, {1, -big / 2}, {big, big / 2}});
    }
  }
}

}  // namespace
}  // namespace clocksync::hull
