// RoundTrips: span and spread of the round trips held, congested intervals
// opened by runs above the clean limit (not by shorter ones), the spread
// held while congested round trips are, and a longer route learnt afresh.

#include "hull/round_trips.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kLongestNs = 600 * kS;

// Clean round trips: 100 us plus 0, 10 or 20 us in turn (median excess
// 10 us over the minimum: the limit is 100 + 2 × 10 = 120 us).
double Clean(int i) { return 100'000 + 10'000 * (i % 3); }

// Feeds `n` round trips one second apart from *x on, with a checkpoint
// (SpreadFloor) every 10; returns the last floor.
template <typename F>
double Feed(RoundTrips* r, int64_t* x, int n, F round_trip) {
  double floor = 0;
  for (int i = 0; i < n; ++i) {
    r->Add(round_trip(i), *x);
    if (i % 10 == 9) floor = r->SpreadFloor(*x);
    *x += kS;
  }
  return floor;
}

TEST(RoundTripsTest, SpanCountAndSpread) {
  RoundTrips r(kLongestNs);
  int64_t x = 5 * kS;
  EXPECT_EQ(r.count(), 0);
  EXPECT_EQ(r.SpanNs(), 0);
  EXPECT_DOUBLE_EQ(Feed(&r, &x, 200, Clean), 10'000);
  EXPECT_EQ(r.count(), RoundTrips::kSize);
  EXPECT_EQ(r.SpanNs(), (RoundTrips::kSize - 1) * kS);
  EXPECT_DOUBLE_EQ(r.clean_limit_ns(), 120'000);
  EXPECT_EQ(r.congested_intervals(), 0);
}

TEST(RoundTripsTest, RunAboveTheLimitOpensAnInterval) {
  RoundTrips r(kLongestNs);
  int64_t x = 0;
  Feed(&r, &x, 200, Clean);
  const int64_t last_clean = x - kS;
  // 7 high round trips in a row: chance, not congestion.
  Feed(&r, &x, 7, [](int) { return 500'000.0; });
  EXPECT_FALSE(r.congested());
  EXPECT_EQ(r.congested_intervals(), 0);
  Feed(&r, &x, 1, Clean);
  // 30 in a row: an interval from the last clean round trip on.
  const int64_t begin = x - kS;
  Feed(&r, &x, 30, [](int) { return 500'000.0; });
  EXPECT_TRUE(r.congested());
  EXPECT_EQ(r.congested_intervals(), 1);
  const int64_t end = x - kS;
  EXPECT_DOUBLE_EQ(r.CongestedNs(0, x), static_cast<double>(end - begin));
  EXPECT_DOUBLE_EQ(r.CongestedNs(begin + 10 * kS, begin + 15 * kS), 5e9);
  EXPECT_DOUBLE_EQ(r.CongestedNs(0, last_clean), 0);
  // The first clean round trip ends it.
  Feed(&r, &x, 1, Clean);
  EXPECT_FALSE(r.congested());
  EXPECT_EQ(r.congested_intervals(), 1);
  // Kept as long as the longest window reaches back to it.
  Feed(&r, &x, 600, Clean);
  EXPECT_EQ(r.congested_intervals(), 0);
}

TEST(RoundTripsTest, SpreadHeldWhileCongestedRoundTripsAreHeld) {
  RoundTrips r(kLongestNs);
  int64_t x = 0;
  EXPECT_DOUBLE_EQ(Feed(&r, &x, 200, Clean), 10'000);
  // A 60 s episode with a wide spread of its own: the floor and the limit
  // stay those of the clean round trips while the ring holds the episode.
  EXPECT_DOUBLE_EQ(
      Feed(&r, &x, 60, [](int i) { return 400'000.0 + 50'000 * (i % 5); }),
      10'000);
  EXPECT_DOUBLE_EQ(r.clean_limit_ns(), 120'000);
  EXPECT_DOUBLE_EQ(Feed(&r, &x, 100, Clean), 10'000);
  EXPECT_DOUBLE_EQ(r.clean_limit_ns(), 120'000);
}

TEST(RoundTripsTest, LongerRouteIsLearntAfresh) {
  RoundTrips r(kLongestNs);
  int64_t x = 0;
  Feed(&r, &x, 200, Clean);
  // 200 us more for good: congested until half the longest window has
  // passed, then the new normal.
  auto longer = [](int i) { return 300'000 + Clean(i); };
  Feed(&r, &x, 299, longer);
  EXPECT_TRUE(r.congested());
  Feed(&r, &x, 10, longer);
  EXPECT_FALSE(r.congested());
  EXPECT_EQ(r.congested_intervals(), 0);
  // The next checkpoints learn the limit from the new round trips.
  Feed(&r, &x, 200, longer);
  EXPECT_DOUBLE_EQ(r.clean_limit_ns(), 420'000);
  EXPECT_FALSE(r.congested());
  EXPECT_EQ(r.congested_intervals(), 0);
}

}  // namespace
}  // namespace clocksync::hull
