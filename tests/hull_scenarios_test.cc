// The two-hull estimator on every standard scenario (hull/sim/scenarios.h),
// against the known truth (hull/sim/accuracy.h): RMS and maximum error of
// the estimate, and whether [earliest, latest] contains the truth, at every
// sample after the first minute and, during outages, once a second in
// holdover; and the accuracy table's short form (scenario × fixed windows ×
// adaptive), printed in the log, whose long form docs/ACCURACY.md quotes.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "hull/adaptive_estimator.h"
#include "hull/sim/accuracy.h"
#include "hull/sim/probe_simulator.h"
#include "hull/sim/scenarios.h"
#include "hull/two_hull_estimator.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kS = 1'000'000'000;

using Result = AccuracyResult;

template <typename Estimator, typename Config>
Result RunScenario(const Scenario& scenario, const Config& config) {
  Estimator est(config);
  return MeasureAccuracy(scenario, est);
}

void Print(const std::string& name, const std::string& variant, const Result& r) {
  std::printf("%-26s %-12s %7lld %10.0f %10lld %12.0f %6lld %6lld %6llu %8lld %6lld\n",
              name.c_str(), variant.c_str(), static_cast<long long>(r.checks),
              r.rms_ns(), static_cast<long long>(r.max_abs_ns),
              r.mean_half_width_ns(), static_cast<long long>(r.violations),
              static_cast<long long>(r.violations_near_step),
              static_cast<unsigned long long>(r.inconsistencies),
              static_cast<long long>(r.holdover_checks),
              static_cast<long long>(r.holdover_violations));
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
    // A fixed 300 s window cannot follow 114's swing (400 ppb in 7.5 min,
    // far beyond the 1 ppb/sqrt(s) wander its bound allows for): its bound
    // misses there, the adaptive one's holds (docs/ACCURACY.md).
    if (result == &fixed && scenario.name == "114-thermal-swing") continue;
    EXPECT_EQ(result->violations, 0) << scenario.name;
    EXPECT_EQ(result->holdover_violations, 0) << scenario.name;
  }
  if (scenario.name == "108-asymmetric") {
    // No two-way method can see a constant asymmetry: the estimate is off
    // by half of it (30 us here), and the bound still holds.
    EXPECT_NEAR(r.rms_ns(), 30'000, 2'000);
  } else {
    // Errors well inside the bound.
    EXPECT_LT(r.rms_ns(), r.mean_half_width_ns() / 4) << scenario.name;
  }
  if (scenario.name == "101-chrony-default") {
    EXPECT_LE(fixed.rms_ns(), 2'000);  // The foundation issue's target.
    EXPECT_LE(r.rms_ns(), 2'000);
  }
  if (scenario.name == "102-large-offset-linear") {
    EXPECT_EQ(r.inconsistencies, 0u);
  }
  if (scenario.name == "104-sine-temperature") {
    // The bend is what the adaptive window is for.
    EXPECT_LT(r.rms_ns(), fixed.rms_ns() / 3);
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

// The accuracy table of docs/ACCURACY.md in its short form (2 seeds, each
// scenario half as long; //tools/simulate:accuracy_table prints the long
// one, 10 seeds, and checks the targets there). Here: no bound of the
// adaptive estimators misses the truth on any scenario, and the adaptive
// choice stays within 1.25 times the best fixed window and within the
// 300 s window (+2 %), tolerances wide enough for 2 short seeds (the
// worst is 1.12 times, on 114) and narrow enough that a selector chasing
// delay noise fails (the one before the checkpoint references was 5 to
// 117 times the best window on 103, 112 and 113; the one before the home
// candidate 1.37 times on 103 and 1.34 times on 113 over 10 seeds).
TEST(AccuracyTableTest, ShortForm) {
  const std::vector<TableColumn> columns = StandardColumns();
  const std::vector<TableRow> rows =
      AccuracyTable(StandardScenarios(), columns, /*seeds=*/2, /*scale=*/0.5);
  std::printf("%s", FormatAccuracyTable(columns, rows).c_str());
  // Sub-ns differences (109) are rounding, not choice.
  constexpr double kSlackNs = 2;
  for (const TableRow& row : rows) {
    for (const int c : {kAdaptiveColumn, kDaemonColumn}) {
      const AccuracyResult& r = row.results[c];
      EXPECT_GT(r.checks, 100) << row.scenario;
      EXPECT_EQ(r.violations, 0) << row.scenario << " " << columns[c].name;
      EXPECT_EQ(r.holdover_violations, 0)
          << row.scenario << " " << columns[c].name;
    }
    const double adaptive = row.results[kAdaptiveColumn].rms_ns();
    if (row.scenario == "102-large-offset-linear") {
      // A linear clock whose delay noise hides for 375 s that it does not
      // wander (the drifts show it then; docs/ACCURACY.md): over the short
      // form's 300 s it answers from where the allowance's wander puts W*,
      // between the 37.5 and 75 s windows, not from the best, the longest.
      constexpr int kFixed75Column = 1;  // 37.5, 75, 150, 300, 600 s.
      EXPECT_LE(adaptive,
                1.5 * row.results[kFixed75Column].rms_ns() + kSlackNs)
          << row.scenario;
      continue;
    }
    EXPECT_LE(adaptive, 1.25 * row.best_fixed_rms_ns() + kSlackNs)
        << row.scenario;
    EXPECT_LE(adaptive,
              1.02 * row.results[kFixed300Column].rms_ns() + kSlackNs)
        << row.scenario;
  }
}

// 102's network on a clock that wanders as the allowance says: what 102's
// miss buys (docs/ACCURACY.md). In its first minutes it looks like 102,
// which needs the longest window; here the allowance's home is right and
// the longest window is several times worse (10 seeds: adaptive 90 ns,
// 75 s 99 ns, 600 s 615 ns). A selector that jumped to the longest window
// early to hold 102 fails this.
TEST(AccuracyTableTest, AllowancesHomeHoldsOn102sWanderingTwin) {
  const std::vector<TableColumn> columns = StandardColumns();
  const std::vector<Scenario> variants = VariantScenarios();
  const Scenario* twin =
      FindScenario(variants, "102-large-offset-linear/wander=1");
  ASSERT_NE(twin, nullptr);
  const std::vector<TableRow> rows =
      AccuracyTable({*twin}, columns, /*seeds=*/2, /*scale=*/1.0);
  std::printf("%s", FormatAccuracyTable(columns, rows).c_str());
  const TableRow& row = rows[0];
  const AccuracyResult& longest = row.results[kFixedColumns - 1];  // 600 s
  for (const int c : {kAdaptiveColumn, kDaemonColumn}) {
    const AccuracyResult& r = row.results[c];
    EXPECT_EQ(r.violations, 0) << columns[c].name;
    EXPECT_LE(r.rms_ns(), 1.1 * row.best_fixed_rms_ns()) << columns[c].name;
    EXPECT_LE(r.rms_ns(), 0.4 * longest.rms_ns()) << columns[c].name;
  }
}

// Random scenarios (hull/sim/scenarios.h), short: the adaptive estimators'
// bounds contain the truth wherever the fixed windows' do (a swing faster
// than the wander allowance makes the longer windows' bounds miss; that is
// the allowance's limit, not the selector's), and the adaptive choice is never
// far from the best fixed window (the long form and its figures:
// //tools/simulate:accuracy_table --random=40, docs/ACCURACY.md).
TEST(AccuracyTableTest, RandomScenariosShortForm) {
  const std::vector<TableColumn> columns = StandardColumns();
  const std::vector<TableRow> rows = AccuracyTable(
      RandomScenarios(12, 1), columns, /*seeds=*/1, /*scale=*/0.5);
  std::printf("%s", FormatAccuracyTable(columns, rows).c_str());
  int in_model = 0;
  for (const TableRow& row : rows) {
    bool fixed_hold = true;
    for (int c = 0; c < kFixedColumns; ++c) {
      fixed_hold = fixed_hold && row.results[c].violations == 0 &&
                   row.results[c].holdover_violations == 0;
    }
    if (!fixed_hold) continue;
    ++in_model;
    for (const int c : {kAdaptiveColumn, kDaemonColumn}) {
      EXPECT_EQ(row.results[c].violations, 0)
          << row.scenario << " " << columns[c].name;
      EXPECT_EQ(row.results[c].holdover_violations, 0)
          << row.scenario << " " << columns[c].name;
    }
    EXPECT_LE(row.results[kAdaptiveColumn].rms_ns(),
              4 * row.best_fixed_rms_ns() + 2)
        << row.scenario;
  }
  EXPECT_GE(in_model, 8);
}

// Congestion on a steep swing (adaptive_estimator.h, step 4): random
// scenario r20 of seed 3, a 325 ppb swing over 47 minutes at 1.2 probes/s
// with 120 s episodes one way, 0.6 µs + exp(1.9 µs) on 0.2 µs of jitter.
// The 37.5 s window is the best by far (the long ones lag on the swing);
// an episode makes its level ineligible, and the nearest eligible
// candidate, longer, lags by microseconds where the episode moves the home
// by a fraction of one. The home answers through it: within 1.2 times the
// 37.5 s window over seeds 0-4 (1.80 when the stand-in answered; 1.02
// before the home weighed the holes congestion leaves, 1.18 since: in the
// first episode, 200-270 s into seed 3, it takes the 150 s level).
TEST(AccuracyTableTest, TheHomeOutlastsAnEpisodeOnASteepSwing) {
  const std::vector<Scenario> random = RandomScenarios(40, 3);
  const Scenario& r20 = random[20];
  ASSERT_EQ(r20.name.rfind("r20 w=0 sine=325/2830 ", 0), 0u) << r20.name;
  ASSERT_NE(r20.name.find("cong="), std::string::npos) << r20.name;
  const std::vector<TableColumn> columns = StandardColumns();
  const std::vector<TableRow> rows =
      AccuracyTable({r20}, columns, /*seeds=*/5, /*scale=*/1.0);
  std::printf("%s", FormatAccuracyTable(columns, rows).c_str());
  const TableRow& row = rows[0];
  const double shortest = row.results[0].rms_ns();  // 37.5 s
  EXPECT_EQ(row.best_fixed_rms_ns(), shortest);
  EXPECT_LE(row.results[kAdaptiveColumn].rms_ns(), 1.2 * shortest);
  EXPECT_EQ(row.results[kAdaptiveColumn].violations, 0);
}

// One-way congestion where the minimum delays are far above the jitter:
// random scenario r11 of seed 12 (17 probes/s, 37 µs of jitter, two 44 s
// episodes of 20 µs + exp(276 µs) back). The hull ranges, mostly the two
// minimum delays (about 520 µs), hardly grow, and the round trips' runs
// break on the queue's short draws, so no level is more than three
// quarters congested; the 37.5|75 s blend, answering on its scores from
// before the episode, followed the 37.5 s level 10-40 µs off (seed 1:
// 870 ns over the run against 216 for the 75 s window). A candidate
// shorter than the home, more than half congested, no longer answers:
// within 2 times the best fixed window over seeds 0-4 (1.74; 2.51 before).
// Nor does the home lean towards the 37.5 s level: the clean stretches the
// queue's short draws leave between its runs count as congested (1.09;
// 2.43 counted clean).
TEST(AccuracyTableTest, AShortCandidateDoesNotAnswerThroughAnEpisode) {
  const std::vector<Scenario> random = RandomScenarios(40, 12);
  const Scenario& r11 = random[11];
  ASSERT_EQ(r11.name.rfind("r11 w=2.79 sine=0/0 hz=17.3 ", 0), 0u) << r11.name;
  ASSERT_NE(r11.name.find("cong="), std::string::npos) << r11.name;
  const std::vector<TableColumn> columns = StandardColumns();
  const std::vector<TableRow> rows =
      AccuracyTable({r11}, columns, /*seeds=*/5, /*scale=*/1.0);
  std::printf("%s", FormatAccuracyTable(columns, rows).c_str());
  const TableRow& row = rows[0];
  EXPECT_LE(row.results[kAdaptiveColumn].rms_ns(),
            2.0 * row.best_fixed_rms_ns());
  EXPECT_EQ(row.results[kAdaptiveColumn].violations, 0);
}

// Jitter nearly all one way at 20 probes/s (1 ms forward, 10 µs back): the
// references miss as the short windows do until their asymmetry is
// measured (about 300 s), and scored against them the 37.5 s level looked
// best (seed 16: 1,037 against 98 ns for the 150 s window at 300-360 s).
// The samples give a prior for it from the start (reference_asymmetry.h):
// over seeds 10-19 within 1.05 times the best fixed window (1.037; 1.160
// without the prior).
TEST(AccuracyTableTest, JitterOneWayIsKnownFromTheSamples) {
  const std::vector<Scenario> kinds = KindScenarios();
  const Scenario* base =
      FindScenario(kinds, "asym-20hz/fwd=exp(1000us)/back=exp(10us)");
  ASSERT_NE(base, nullptr);
  const std::vector<TableColumn> columns = StandardColumns();
  const std::vector<TableRow> rows = AccuracyTable(
      {SeededScenario(*base, 10)}, columns, /*seeds=*/10, /*scale=*/1.0);
  std::printf("%s", FormatAccuracyTable(columns, rows).c_str());
  const TableRow& row = rows[0];
  EXPECT_LE(row.results[kAdaptiveColumn].rms_ns(),
            1.05 * row.best_fixed_rms_ns());
  EXPECT_EQ(row.results[kAdaptiveColumn].violations, 0);
}

// The references count from 2 readings where they show the clock plainly
// wandering faster than the allowance (adaptive_estimator.h, step 5): on
// 114's swing the home's wander rises above the allowance by 115 s on 9 of
// its 10 seeds (with 4 readings required: none). A fit of so few readings
// on 110's 1 ms of jitter at 1 probe/s can read hundreds of ppb/√s from the
// references' noise: that does not count (checked until 150 s, when most
// seeds have 4 readings; without the limit 2 of 110's 10 seeds count it).
TEST(ScenarioWanderTest, ReferencesShowASwingFromTwoReadings) {
  const std::vector<Scenario> all = StandardScenarios();
  const std::pair<const char*, int64_t> cases[] = {
      {"114-thermal-swing", 115 * kS}, {"110-chrony-1ms-jitter", 150 * kS}};
  constexpr int kSeeds = 10;
  int raised[2] = {};
  for (int i = 0; i < 2; ++i) {
    const Scenario* base = FindScenario(all, cases[i].first);
    ASSERT_NE(base, nullptr) << cases[i].first;
    for (int seed = 0; seed < kSeeds; ++seed) {
      Scenario scenario = SeededScenario(*base, seed);
      scenario.params.duration_ns = cases[i].second;
      AdaptiveWindowEstimator est{AdaptiveConfig()};
      ProbeSimulator sim(scenario.params);
      SimulatedSample s;
      bool above = false;
      while (sim.Next(&s)) {
        est.Add(s.sample);
        above = above || est.home_wander_ppb() > 1.0;
      }
      raised[i] += above;
    }
  }
  std::printf("home wander above the allowance: 114 by 115 s on %d of %d "
              "seeds, 110 by 150 s on %d of %d\n",
              raised[0], kSeeds, raised[1], kSeeds);
  EXPECT_GE(raised[0], kSeeds * 7 / 10);
  EXPECT_LE(raised[1], 1);
}

// The linear verdict (home = the longest window) needs the references to
// agree once they count (adaptive_estimator.h, step 5). 111's network at
// 5 probes/s on a clock wandering as the allowance says: on seed 15 one
// level's drifts stayed nearly unchanged for a few hundred seconds and
// called the clock linear from 540 to 690 s (387 ns RMS against 77 for the
// 75 s window), while the references read 0.2 ± 0.2 ppb²/s.
TEST(ScenarioWanderTest, ReferencesVetoALinearVerdictOnAWanderingClock) {
  const std::vector<Scenario> variants = VariantScenarios();
  const Scenario* base = FindScenario(variants, "111-pareto-10hz/rate=5Hz");
  ASSERT_NE(base, nullptr);
  int64_t longest_home_samples = 0;
  for (int seed = 10; seed < 20; ++seed) {
    const Scenario scenario = SeededScenario(*base, seed);
    AdaptiveWindowEstimator est{AdaptiveConfig()};
    ProbeSimulator sim(scenario.params);
    SimulatedSample s;
    while (sim.Next(&s)) {
      est.Add(s.sample);
      if (s.true_ns >= kAccuracyWarmupNs && est.home_candidate() == 0) {
        ++longest_home_samples;
      }
    }
  }
  std::printf("111/rate=5Hz, seeds 10-19: %lld samples with the longest "
              "window as home\n",
              static_cast<long long>(longest_home_samples));
  EXPECT_EQ(longest_home_samples, 0);
}

// The linear verdict from the references alone, once their interval
// (σ² up to 0.75 standard errors above) lies wholly below a tenth of the
// allowance's (adaptive_estimator.h, step 5): random scenario r9 of seed
// 3, a linear clock at 1.9 probes/s with 30 % loss and 2.9 times the
// jitter one way.
// The drifts' verdict needs a level's drift at 3 spacings of its window;
// the references bound the wander sooner: the longest window is home
// before 450 s on 8 of seeds 0-9 (by the drifts alone, 6: seed 0 at 759 s,
// 5 at 538 s).
TEST(ScenarioWanderTest, ReferencesAloneCallALinearClockLinear) {
  const std::vector<Scenario> random = RandomScenarios(40, 3);
  const Scenario& r9 = random[9];
  ASSERT_EQ(r9.name.rfind("r9 w=0 sine=0/0 ", 0), 0u) << r9.name;
  constexpr int kSeeds = 10;
  int early = 0;
  for (int seed = 0; seed < kSeeds; ++seed) {
    const Scenario scenario = SeededScenario(r9, seed);
    AdaptiveWindowEstimator est{AdaptiveConfig()};
    ProbeSimulator sim(scenario.params);
    SimulatedSample s;
    int64_t longest_home_ns = -1;
    while (sim.Next(&s) && longest_home_ns < 0) {
      est.Add(s.sample);
      if (est.home_candidate() == 0 && s.true_ns >= kAccuracyWarmupNs) {
        longest_home_ns = s.true_ns;
      }
    }
    std::printf("r9 of random seed 3, seed %d: the longest window home from "
                "%.0f s\n", seed, longest_home_ns * 1e-9);
    early += longest_home_ns >= 0 && longest_home_ns < 450 * kS;
  }
  EXPECT_GE(early, 8);
}

// The longest level's early fit (before the drifts can tell, 131 s) calls
// a kernel-stamped linear clock linear by 60-90 s (9 of seeds 0-9), and
// one wandering at 0.3 of the allowance, where the 37.5 s window is the
// best, seldom (3; 7 when the fit's limit was a fifth of the allowance
// instead of a tenth).
TEST(ScenarioWanderTest, EarlyFitTellsALinearClockFromAQuietWander) {
  const std::vector<Scenario> variants = VariantScenarios();
  const std::vector<Scenario> standard = StandardScenarios();
  const Scenario* wandering =
      FindScenario(variants, "109-kernel-stamps-16hz/wander=0.3");
  const Scenario* linear = FindScenario(standard, "109-kernel-stamps-16hz");
  ASSERT_NE(wandering, nullptr);
  ASSERT_NE(linear, nullptr);
  int linear_early = 0, wandering_early = 0;
  for (int seed = 0; seed < 10; ++seed) {
    for (const Scenario* base : {wandering, linear}) {
      const Scenario scenario = SeededScenario(*base, seed);
      AdaptiveWindowEstimator est{AdaptiveConfig()};
      ProbeSimulator sim(scenario.params);
      SimulatedSample s;
      int64_t longest_home_ns = -1;
      while (sim.Next(&s) && s.true_ns < 90 * kS) {
        est.Add(s.sample);
        if (s.true_ns >= kAccuracyWarmupNs && est.home_candidate() == 0 &&
            longest_home_ns < 0) {
          longest_home_ns = s.true_ns;
        }
      }
      std::printf("%s, seed %d: the longest window home from %.0f s\n",
                  base->name.c_str(), seed, longest_home_ns * 1e-9);
      (base == linear ? linear_early : wandering_early) +=
          longest_home_ns >= 0;
    }
  }
  EXPECT_GE(linear_early, 8);
  EXPECT_LE(wandering_early, 3);
}

// With kernel timestamps a tenth of the allowance makes the 37.5 s window
// the best by far, and the drifts call the clock linear half the time;
// the samples show the wander (LinearityCheck), and then neither verdict
// may put the home in the longest window. On the same network without
// wander, the check stays quiet on (nearly) every seed.
TEST(ScenarioWanderTest, SamplesVetoALinearVerdictOnAQuietlyWanderingClock) {
  const std::vector<Scenario> variants = VariantScenarios();
  const std::vector<Scenario> standard = StandardScenarios();
  const Scenario* wandering =
      FindScenario(variants, "109-kernel-stamps-16hz/wander=0.1");
  const Scenario* linear = FindScenario(standard, "109-kernel-stamps-16hz");
  ASSERT_NE(wandering, nullptr);
  ASSERT_NE(linear, nullptr);
  int seen_wandering = 0, seen_linear = 0;
  int64_t vetoed_longest_home = 0, longest_home_after_check = 0;
  for (int seed = 0; seed < 10; ++seed) {
    for (const Scenario* base : {wandering, linear}) {
      const Scenario scenario = SeededScenario(*base, seed);
      AdaptiveWindowEstimator est{AdaptiveConfig()};
      ProbeSimulator sim(scenario.params);
      SimulatedSample s;
      bool seen = false;
      int64_t seen_since_ns = -1;  // the home follows at a checkpoint
      while (sim.Next(&s)) {
        est.Add(s.sample);
        if (!est.linearity().wander_seen()) {
          seen_since_ns = -1;
        } else if (seen_since_ns < 0) {
          seen_since_ns = s.true_ns;
        }
        seen = seen || est.linearity().wander_seen();
        if (base != wandering || s.true_ns < 120 * kS) continue;
        if (est.home_candidate() == 0) {
          ++longest_home_after_check;
          if (seen_since_ns >= 0 && s.true_ns - seen_since_ns > 10 * kS) {
            ++vetoed_longest_home;
          }
        }
      }
      (base == wandering ? seen_wandering : seen_linear) += seen;
    }
  }
  std::printf("109 with 0.1 ppb/sqrt(s), seeds 0-9: wander seen on %d, "
              "%lld samples after 120 s with the longest window as home; "
              "without wander: seen on %d\n",
              seen_wandering, static_cast<long long>(longest_home_after_check),
              seen_linear);
  EXPECT_GE(seen_wandering, 9);
  EXPECT_LE(seen_linear, 1);
  EXPECT_EQ(vetoed_longest_home, 0);
}

}  // namespace
}  // namespace clocksync::hull
