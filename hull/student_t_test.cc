// StudentQuantile against the exact one-sided quantiles of Student's t
// (by numerical integration of its density), at the two z the adaptive
// estimator uses.

#include "hull/student_t.h"

#include "gtest/gtest.h"

namespace clocksync::hull {
namespace {

TEST(StudentQuantileTest, MatchesTheExactQuantiles) {
  // z = 1.5 (P = 0.9332): exact t quantiles at 3, 4, 6, 10, 20 and 50
  // degrees of freedom.
  const double exact_15[] = {2.0434, 1.8778, 1.7340, 1.6325, 1.5635, 1.5248};
  const double nu[] = {3, 4, 6, 10, 20, 50};
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(StudentQuantile(1.5, nu[i]), exact_15[i],
                0.002 * exact_15[i])
        << nu[i];
  }
  // z = 2.5 (P = 0.99379): 3, 4, 6 and 10 degrees of freedom.
  const double exact_25[] = {5.4045, 4.3229, 3.5266, 3.0420};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(StudentQuantile(2.5, nu[i]), exact_25[i],
                0.03 * exact_25[i])
        << nu[i];
  }
}

TEST(StudentQuantileTest, TendsToTheNormalAndNeverBelowIt) {
  EXPECT_NEAR(StudentQuantile(1.5, 1e6), 1.5, 1e-5);
  double last = StudentQuantile(1.5, 0.5);
  EXPECT_DOUBLE_EQ(last, StudentQuantile(1.5, 1));  // below 1 counts as 1
  for (double nu = 2; nu <= 100; nu += 1) {
    const double t = StudentQuantile(1.5, nu);
    EXPECT_GT(t, 1.5);
    EXPECT_LT(t, last);  // fewer degrees of freedom, wider
    last = t;
  }
}

}  // namespace
}  // namespace clocksync::hull
