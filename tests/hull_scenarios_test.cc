// The two-hull estimator on every standard scenario (hull/scenarios.h),
// against the known truth: RMS and maximum error of the estimate, and
// whether [earliest, latest] contains the truth, at every sample after the
// first minute and, during outages, once a second in holdover. Prints a
// table (see the test log) that docs/ACCURACY.md quotes.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "hull/adaptive_estimator.h"
#include "hull/sim/scenarios.h"
#include "hull/two_hull_estimator.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kS = 1'000'000'000;

struct Result {
  int checks = 0;
  double rms_ns = 0;
  int64_t max_abs_ns = 0;
  double mean_half_width_ns = 0;
  int violations = 0;
  int violations_near_step = 0;  // Within 10 s after a step.
  int holdover_checks = 0;
  int holdover_violations = 0;
  uint64_t inconsistencies = 0;
  double worst_holdover_half_width_ns = 0;
};

template <typename Estimator, typename Config>
Result RunScenario(const Scenario& scenario, const Config& config) {
  Result r;
  Estimator est(config);
  ProbeSimulator sim(scenario.params);
  // A second simulator with the same seed gives local readings between
  // samples without disturbing the first one's random stream.
  ProbeSimulator clock(scenario.params);
  SimulatedSample s;
  double sum_sq = 0, sum_width = 0;
  int64_t last_true = 0;
  auto near_step = [&](int64_t true_ns) {
    for (const ClockStep& step : scenario.params.clock.steps) {
      if (true_ns >= step.at_ns && true_ns < step.at_ns + 10 * kS) return true;
    }
    return false;
  };
  while (sim.Next(&s)) {
    // Holdover: once a second between samples more than 2 s apart.
    for (int64_t t = last_true + 2 * kS; t < s.true_ns - kS && last_true > 60 * kS;
         t += kS) {
      const TimeEstimate e = est.Estimate(clock.LocalAt(t));
      if (e.state == SyncState::kUnsynced) continue;
      const int64_t truth = clock.GlobalAt(t);
      ++r.holdover_checks;
      if (truth < e.earliest_ns || truth > e.latest_ns) ++r.holdover_violations;
      r.worst_holdover_half_width_ns = std::max(
          r.worst_holdover_half_width_ns, (e.latest_ns - e.earliest_ns) / 2.0);
    }
    last_true = s.true_ns;
    est.Add(s.sample);
    if (s.true_ns < 60 * kS) continue;
    const TimeEstimate e = est.Estimate(s.sample.t4_ns);
    if (e.state == SyncState::kUnsynced) continue;
    const int64_t truth = s.true_global_at_t4_ns;
    const int64_t error = e.global_ns - truth;
    const bool inside = truth >= e.earliest_ns && truth <= e.latest_ns;
    if (near_step(s.true_ns)) {
      if (!inside) ++r.violations_near_step;
      continue;
    }
    ++r.checks;
    sum_sq += static_cast<double>(error) * error;
    sum_width += (e.latest_ns - e.earliest_ns) / 2.0;
    r.max_abs_ns = std::max<int64_t>(r.max_abs_ns, std::llabs(error));
    if (!inside) ++r.violations;
  }
  r.inconsistencies = est.stats().inconsistencies;
  if (r.checks > 0) {
    r.rms_ns = std::sqrt(sum_sq / r.checks);
    r.mean_half_width_ns = sum_width / r.checks;
  }
  return r;
}

void Print(const std::string& name, const std::string& variant, const Result& r) {
  std::printf("%-26s %-12s %7d %10.0f %10lld %12.0f %6d %6d %6llu %8d %6d\n",
              name.c_str(), variant.c_str(), r.checks, r.rms_ns,
              static_cast<long long>(r.max_abs_ns), r.mean_half_width_ns,
              r.violations, r.violations_near_step,
              static_cast<unsigned long long>(r.inconsistencies),
              r.holdover_checks, r.holdover_violations);
}

void PrintHeader() {
  std::printf("%-26s %-12s %7s %10s %10s %12s %6s %6s %6s %8s %6s\n",
              "scenario", "window", "checks", "rms_ns", "max_ns",
              "half_bound", "viol", "vstep", "incons", "holdover", "hviol");
}

class ScenarioTest : public testing::TestWithParam<Scenario> {};

TEST_P(ScenarioTest, BoundContainsTruthAndErrorIsSmall) {
  const Scenario& scenario = GetParam();
  const Result fixed =
      RunScenario<TwoHullEstimator>(scenario, EstimatorConfig());
  const Result r =
      RunScenario<AdaptiveWindowEstimator>(scenario, AdaptiveConfig());
  PrintHeader();
  Print(scenario.name, "300s", fixed);
  Print(scenario.name, "adaptive", r);
  for (const Result* result : {&fixed, &r}) {
    EXPECT_GT(result->checks, 100);
    EXPECT_EQ(result->violations, 0) << scenario.name;
    EXPECT_EQ(result->holdover_violations, 0) << scenario.name;
  }
  if (scenario.name == "108-asymmetric") {
    // No two-way method can see a constant asymmetry: the estimate is off
    // by half of it (30 us here), and the bound still holds.
    EXPECT_NEAR(r.rms_ns, 30'000, 2'000);
  } else {
    // Errors well inside the bound.
    EXPECT_LT(r.rms_ns, r.mean_half_width_ns / 4) << scenario.name;
  }
  if (scenario.name == "101-chrony-default") {
    EXPECT_LE(fixed.rms_ns, 2'000);  // The foundation issue's target.
    EXPECT_LE(r.rms_ns, 2'000);
  }
  if (scenario.name == "102-large-offset-linear") {
    EXPECT_EQ(r.inconsistencies, 0u);
  }
  if (scenario.name == "104-sine-temperature") {
    // The bend is what the adaptive window is for.
    EXPECT_LT(r.rms_ns, fixed.rms_ns / 3);
  }
  if (scenario.name == "105-step") {
    EXPECT_GE(r.inconsistencies, 1u);
  }
  if (scenario.name == "107-outage") {
    EXPECT_GT(r.holdover_checks, 100);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Standard, ScenarioTest, testing::ValuesIn(StandardScenarios()),
    [](const testing::TestParamInfo<Scenario>& info) {
      std::string name = info.param.name;
      for (char& c : name) {
        if (c == '-') c = '_';
      }
      return name;
    });

// On a stable clock (constant frequency, no wander) with kernel-stamp
// delays the error of the answering estimate must not ramp: no drift
// estimate held wrong for tens of seconds. Measured as the largest change
// of the error over any 20 s, after the first minute, in ns per s (ppb).
TEST(DriftStabilityTest, ErrorDoesNotRampOnAStableClock) {
  const std::vector<Scenario> scenarios = StandardScenarios();
  const Scenario* scenario = FindScenario(scenarios, "109-kernel-stamps-16hz");
  ASSERT_NE(scenario, nullptr);
  AdaptiveWindowEstimator est{AdaptiveConfig()};
  ProbeSimulator sim(scenario->params);
  SimulatedSample s;
  std::vector<std::pair<int64_t, int64_t>> errors;  // (true ns, error ns)
  while (sim.Next(&s)) {
    est.Add(s.sample);
    if (s.true_ns < 60 * kS) continue;
    const TimeEstimate e = est.Estimate(s.sample.t4_ns);
    ASSERT_NE(e.state, SyncState::kUnsynced);
    errors.emplace_back(s.true_ns, e.global_ns - s.true_global_at_t4_ns);
  }
  ASSERT_GT(errors.size(), 5000u);
  double worst_ramp_ppb = 0;
  double sum_sq = 0;
  size_t j = 0;
  for (size_t i = 0; i < errors.size(); ++i) {
    sum_sq += static_cast<double>(errors[i].second) * errors[i].second;
    while (j < errors.size() && errors[j].first < errors[i].first + 20 * kS) ++j;
    if (j == errors.size()) break;
    const double ramp = std::abs(static_cast<double>(errors[j].second -
                                                     errors[i].second)) /
                        (static_cast<double>(errors[j].first - errors[i].first) /
                         1e9);
    worst_ramp_ppb = std::max(worst_ramp_ppb, ramp);
  }
  const double rms_ns = std::sqrt(sum_sq / errors.size());
  std::printf("109: rms %.1f ns, worst ramp over 20 s %.2f ns/s (ppb)\n",
              rms_ns, worst_ramp_ppb);
  // The complaint: 10-110 ppb held for tens of seconds. Here the
  // error may move by the delay noise over 20 s, not ramp.
  EXPECT_LT(worst_ramp_ppb, 5.0);
  EXPECT_LT(rms_ns, 50.0);
}

// Window length against a clock whose frequency bends (temperature) and one
// that only wanders: shorter windows follow the bend, longer ones average
// more delay noise. The table shows the trade-off the default sits on.
TEST(WindowLengthTest, TradeOffOnBendingAndWanderingClocks) {
  const std::vector<Scenario> all = StandardScenarios();
  PrintHeader();
  for (const char* name : {"101-chrony-default", "104-sine-temperature",
                           "103-loopback-10hz"}) {
    const Scenario* s = FindScenario(all, name);
    ASSERT_NE(s, nullptr);
    for (const int window_s : {30, 60, 120, 300}) {
      EstimatorConfig c;
      c.window_ns = window_s * kS;
      const Result r = RunScenario<TwoHullEstimator>(*s, c);
      Print(name, std::to_string(window_s) + "s", r);
      EXPECT_EQ(r.violations, 0) << name << " window " << window_s;
    }
    const Result adaptive = RunScenario<AdaptiveWindowEstimator>(*s, AdaptiveConfig());
    Print(name, "adaptive", adaptive);
  }
}

}  // namespace
}  // namespace clocksync::hull
