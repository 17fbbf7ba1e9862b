// hull/recent_values_test.cc: RecentValues against sorting the last N
// values afresh.

#include "hull/recent_values.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace clocksync::hull {
namespace {

TEST(RecentValuesTest, MinAndMedianOfTheLastValues) {
  RecentValues<7> recent;
  std::vector<double> all;
  std::mt19937_64 rng(3);
  // Repeats too: the values leaving must be found among equal ones.
  std::uniform_int_distribution<int> value(0, 20);
  for (int i = 0; i < 500; ++i) {
    const double v = value(rng);
    recent.Add(v);
    all.push_back(v);
    std::vector<double> last(all.end() - std::min<size_t>(all.size(), 7),
                             all.end());
    std::sort(last.begin(), last.end());
    ASSERT_EQ(recent.count(), static_cast<int>(last.size())) << i;
    ASSERT_EQ(recent.min(), last.front()) << i;
    ASSERT_EQ(recent.median(), last[last.size() / 2]) << i;
    if (last.size() >= 2) {
      double mean = 0, sum2 = 0;
      for (const double x : last) mean += x / last.size();
      for (const double x : last) sum2 += (x - mean) * (x - mean);
      ASSERT_NEAR(recent.variance(), sum2 / (last.size() - 1), 1e-9) << i;
    } else {
      ASSERT_EQ(recent.variance(), 0) << i;
    }
  }
}

TEST(RecentValuesTest, ClearForgetsEverything) {
  RecentValues<4> recent;
  for (const double v : {9.0, 8.0, 7.0, 6.0, 5.0}) recent.Add(v);
  EXPECT_EQ(recent.count(), 4);
  EXPECT_EQ(recent.min(), 5.0);
  recent.Clear();
  EXPECT_EQ(recent.count(), 0);
  recent.Add(30.0);
  recent.Add(10.0);
  EXPECT_EQ(recent.count(), 2);
  EXPECT_EQ(recent.min(), 10.0);
  EXPECT_EQ(recent.median(), 30.0);  // The upper one of an even count.
}

}  // namespace
}  // namespace clocksync::hull
