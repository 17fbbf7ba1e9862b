// RoundTrips: span and spread of the round trips held, congested intervals
// opened by runs above the clean limit (not by shorter ones) and by a
// floor risen below it (not by a shorter rise), the clean stretches
// between them, the spread held while congested round trips are, and a
// longer route learnt afresh.

#include "hull/round_trips.h"

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kLongestNs = 600 * kS;
constexpr int64_t kFloorWindowNs = 18'750'000'000;

// Clean round trips: 100 us plus 0, 10 or 20 us in turn (median excess
// 10 us over the minimum: the limit is 100 + 2 × 10 = 120 us, the floor
// limit 100 + 0.75 × 10 = 107.5 us).
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
  RoundTrips r(kLongestNs, kFloorWindowNs);
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
  RoundTrips r(kLongestNs, kFloorWindowNs);
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
  // The floor rose too, over the same stretch: counted once.
  EXPECT_EQ(r.congested_intervals(RoundTrips::Intervals::kRunsOnly), 1);
  EXPECT_EQ(r.congested_intervals(), 2);
  const int64_t end = x - kS;
  EXPECT_DOUBLE_EQ(r.CongestedNs(0, x), static_cast<double>(end - begin));
  EXPECT_DOUBLE_EQ(r.CongestedNs(begin + 10 * kS, begin + 15 * kS), 5e9);
  EXPECT_DOUBLE_EQ(r.CongestedNs(0, last_clean), 0);
  // The first clean round trip ends it.
  Feed(&r, &x, 1, Clean);
  EXPECT_FALSE(r.congested());
  EXPECT_EQ(r.congested_intervals(), 2);
  // Kept as long as the longest window reaches back to it.
  Feed(&r, &x, 600, Clean);
  EXPECT_EQ(r.congested_intervals(), 0);
}

TEST(RoundTripsTest, FloorRiseBelowTheLimitOpensAnInterval) {
  RoundTrips r(kLongestNs, kFloorWindowNs);
  int64_t x = 0;
  Feed(&r, &x, 199, Clean);  // The last one 100 us: at the clean floor.
  EXPECT_DOUBLE_EQ(r.floor_limit_ns(), 107'500);
  const int64_t last_low = x - kS;
  // A standing queue of 10 us: every round trip below the 120 us limit,
  // the floor above 107.5 us. Shorter than the floor window (19 round
  // trips at 1 per second): not yet.
  auto queued = [](int i) { return 110'000.0 + 5'000 * (i % 2); };
  Feed(&r, &x, 18, queued);
  EXPECT_FALSE(r.congested());
  EXPECT_EQ(r.congested_intervals(), 0);
  // Once the window holds only queued round trips: an interval from the
  // last round trip at the floor on, and no run.
  EXPECT_DOUBLE_EQ(r.FloorRiseNs(), 0);
  Feed(&r, &x, 42, queued);
  EXPECT_TRUE(r.congested());
  // The queue's depth: the floor 110 us against the clean floor's 100.
  EXPECT_DOUBLE_EQ(r.FloorRiseNs(), 10'000);
  EXPECT_EQ(r.congested_intervals(), 1);
  EXPECT_EQ(r.congested_intervals(RoundTrips::Intervals::kRunsOnly), 0);
  const int64_t end = x - kS;
  EXPECT_DOUBLE_EQ(r.CongestedNs(0, x), static_cast<double>(end - last_low));
  EXPECT_DOUBLE_EQ(r.CongestedNs(0, x, RoundTrips::Intervals::kRunsOnly), 0);
  EXPECT_TRUE(r.CongestionHeld(x));
  // The first round trip at the floor again ends it.
  Feed(&r, &x, 1, Clean);
  EXPECT_FALSE(r.congested());
  EXPECT_DOUBLE_EQ(r.FloorRiseNs(), 0);
  EXPECT_DOUBLE_EQ(r.CongestedNs(0, x), static_cast<double>(end - last_low));
}

// The clean stretches, newest first: what lies between the congested
// intervals (runs and floor rises, overlapping, counted once), the oldest
// open towards the past; the callback stops the walk.
TEST(RoundTripsTest, CleanStretchesLieBetweenTheIntervals) {
  RoundTrips r(kLongestNs, kFloorWindowNs);
  int64_t x = 0;
  auto high = [](int) { return 500'000.0; };
  Feed(&r, &x, 200, Clean);
  const int64_t a_begin = x - kS;  // The last clean round trip before A.
  Feed(&r, &x, 30, high);
  const int64_t a_end = x - kS;
  Feed(&r, &x, 50, Clean);
  const int64_t b_begin = x - kS;
  Feed(&r, &x, 20, high);
  ASSERT_TRUE(r.congested());
  using Stretches = std::vector<std::pair<int64_t, int64_t>>;
  auto stretches = [&](int64_t end_x, RoundTrips::Intervals which,
                       size_t most) {
    Stretches out;
    r.ForEachCleanStretch(end_x, which, [&](int64_t begin, int64_t end) {
      out.emplace_back(begin, end);
      return out.size() < most;
    });
    return out;
  };
  // Runs only: the newest round trip lies in B; A and B part the rest.
  const int64_t newest = x - kS;
  const Stretches runs =
      stretches(newest, RoundTrips::Intervals::kRunsOnly, 9);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0], std::make_pair(a_end, b_begin));
  EXPECT_EQ(runs[1].first, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(runs[1].second, a_begin);
  // Both kinds: the floor rose over each episode too, so the stretches
  // are no longer, and what they leave out of [0, newest] is what
  // CongestedNs counts.
  const Stretches all = stretches(newest, RoundTrips::Intervals::kAll, 9);
  double clean_ns = 0;
  int64_t newer_begin = x;
  ASSERT_EQ(all.size(), 2u);
  for (const auto& [begin, end] : all) {
    EXPECT_LT(begin, end);
    EXPECT_LE(end, newer_begin);  // Newest first, disjoint.
    newer_begin = begin;
    clean_ns += static_cast<double>(end - std::max<int64_t>(begin, 0));
  }
  EXPECT_DOUBLE_EQ(clean_ns + r.CongestedNs(0, newest),
                   static_cast<double>(newest));
  EXPECT_LE(all[0].second - all[0].first, b_begin - a_end);
  // Walked back from inside A's clean stretch before it; stopped early.
  const Stretches first = stretches(a_begin - 10 * kS,
                                    RoundTrips::Intervals::kRunsOnly, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].second, a_begin - 10 * kS);
}

// At 20 round trips per second the floor window (375 of them) is the
// ring's 127: the floor follows the ring as it turns, also where its
// smallest round trip leaves it, and a clean path's floor never rises; a
// standing queue's does.
TEST(RoundTripsTest, FloorFollowsTheRingAtHighRates) {
  RoundTrips r(kLongestNs, kFloorWindowNs);
  int64_t x = 0;
  int congested = 0;
  // 104, 112 or 120 us, and 100 us once every 200 (not in the ring at the
  // checkpoints): the clean floor is 104 us, the spread 8, the floor limit
  // 104 + 0.75 × 8 = 110 us, the limit 104 + 2 × 8 = 120 us; the ring's
  // smallest is 100 us for 127 round trips after each 100, else 104.
  auto rare_low = [](int i) {
    return i % 200 == 0 ? 100'000.0 : 104'000.0 + 8'000 * (i % 3);
  };
  for (int i = 0; i < 4000; ++i) {
    r.Add(rare_low(i), x);
    if (i % 200 == 199) r.SpreadFloor(x);
    congested += r.congested();
    x += kS / 20;
  }
  EXPECT_EQ(congested, 0);
  EXPECT_DOUBLE_EQ(r.floor_limit_ns(), 110'000);
  EXPECT_DOUBLE_EQ(r.clean_limit_ns(), 120'000);
  for (int i = 0; i < 400; ++i) {
    r.Add(112'000.0 + 6'000 * (i % 2), x);
    congested += r.congested();
    x += kS / 20;
  }
  // Risen once the ring holds only queued round trips.
  EXPECT_EQ(congested, 400 - RoundTrips::kSize + 1);
  EXPECT_EQ(r.congested_intervals(RoundTrips::Intervals::kRunsOnly), 0);
}

// A floor risen for good below the limit (10 us more): a floor-rise
// interval for a whole longest window, then the new normal.
TEST(RoundTripsTest, FloorRisenForAWholeWindowIsANewRoute) {
  RoundTrips r(kLongestNs, kFloorWindowNs);
  int64_t x = 0;
  Feed(&r, &x, 199, Clean);
  auto longer = [](int i) { return 110'000.0 + 5'000 * (i % 2); };
  Feed(&r, &x, 590, longer);
  EXPECT_TRUE(r.congested());
  EXPECT_EQ(r.congested_intervals(RoundTrips::Intervals::kRunsOnly), 0);
  Feed(&r, &x, 20, longer);
  EXPECT_FALSE(r.congested());
  EXPECT_EQ(r.congested_intervals(), 0);
  // The next checkpoints learn the floor from the new round trips.
  Feed(&r, &x, 200, longer);
  EXPECT_GE(r.floor_limit_ns(), 110'000);
  EXPECT_FALSE(r.congested());
  EXPECT_EQ(r.congested_intervals(), 0);
}

TEST(RoundTripsTest, SpreadHeldWhileCongestedRoundTripsAreHeld) {
  RoundTrips r(kLongestNs, kFloorWindowNs);
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
  RoundTrips r(kLongestNs, kFloorWindowNs);
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

// Not while its owner holds the new normal back (the adaptive estimator,
// while its shorter levels disagree with the longest): the run stays an
// episode until allowed.
TEST(RoundTripsTest, NewNormalWaitsUntilAllowed) {
  RoundTrips r(kLongestNs, kFloorWindowNs);
  int64_t x = 0;
  Feed(&r, &x, 200, Clean);
  auto longer = [](int i) { return 300'000 + Clean(i); };
  r.set_new_normal_allowed(false);
  Feed(&r, &x, 400, longer);
  EXPECT_TRUE(r.congested());
  EXPECT_GT(r.congested_intervals(), 0);
  r.set_new_normal_allowed(true);
  Feed(&r, &x, 1, longer);
  EXPECT_FALSE(r.congested());
  EXPECT_EQ(r.congested_intervals(), 0);
}

}  // namespace
}  // namespace clocksync::hull
