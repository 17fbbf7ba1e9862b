// tools/simulate/selection_timeline_main.cc
//
// //tools/simulate:selection_timeline — what the adaptive estimator chose,
// and what it cost, over one run of one scenario.
//
// Runs the scenario at one seed under the fixed windows of the accuracy
// table and the library's default adaptive estimator, and prints a row
// per interval: each one's RMS error over the interval (ns), the candidate
// answering and the home candidate at the interval's end, the wander W* was
// computed for, and the references' and the samples' view of the wander
// (the last column: "wander seen", or how far the home leans towards the
// longest level by the samples' probability of a linear clock, "lean p").
// The errors count as in the table (MeasureAccuracy): rows begin after the
// first minute, and the seconds after a clock step are left out.
// The accuracy table says how much a scenario loses; this says when, and
// which choice lost it.
//
// Candidates are named by window: "75" a level, "75|150" the mean of two
// neighbours, "37.5>75" the shorter level extrapolated away from the longer
// (hull/adaptive_estimator.h, step 3).

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hull/adaptive_estimator.h"
#include "hull/estimator.h"
#include "hull/sim/accuracy.h"
#include "hull/sim/probe_simulator.h"
#include "hull/sim/scenarios.h"

ABSL_FLAG(std::string, scenario, "102-large-offset-linear",
          "A standard, variant or kind scenario's name, as the accuracy "
          "table prints it.");
ABSL_FLAG(uint64_t, random_seed, 0,
          "With --scenario=rN: the N-th of the 40 random scenarios that "
          "accuracy_table --random=40 --random_seed=S draws (S >= 1).");
ABSL_FLAG(int, seed, 0, "Seed number (0 is the scenario as defined).");
ABSL_FLAG(double, every_s, 30, "Interval of the rows, seconds.");

namespace {

using namespace clocksync::hull;

// A window in seconds as the table writes it: 37.5, 75, 150, ...
std::string WindowName(int64_t window_ns) {
  const double s = static_cast<double>(window_ns) * 1e-9;
  return s == std::floor(s) ? absl::StrCat(static_cast<int64_t>(s))
                            : absl::StrCat(s);
}

std::string CandidateName(const AdaptiveWindowEstimator& e, int candidate,
                          int64_t longest_ns) {
  const int levels = e.levels();
  auto window = [&](int level) { return WindowName(longest_ns >> level); };
  if (candidate < 2 * levels - 1) {
    const int level = candidate / 2;
    return candidate % 2 == 0
               ? window(level)
               : absl::StrCat(window(level + 1), "|", window(level));
  }
  const int level = candidate - (2 * levels - 1);
  return absl::StrCat(window(level + 1), ">", window(level));
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "What the adaptive estimator chose over one run, and what it cost.\n"
      "  selection_timeline [--scenario=NAME | --scenario=rN --random_seed=S] "
      "[--seed=0] [--every_s=30]");
  absl::ParseCommandLine(argc, argv);
  const int seed = absl::GetFlag(FLAGS_seed);
  const double every_s = absl::GetFlag(FLAGS_every_s);
  if (seed < 0) {
    std::cerr << "selection_timeline: --seed must be >= 0 (got " << seed
              << ")\n";
    return 2;
  }
  if (!(every_s >= 1)) {
    std::cerr << "selection_timeline: --every_s must be >= 1 (got "
              << every_s << ")\n";
    return 2;
  }
  const std::string name = absl::GetFlag(FLAGS_scenario);
  const uint64_t random_seed = absl::GetFlag(FLAGS_random_seed);
  std::vector<Scenario> all;
  const Scenario* base = nullptr;
  if (random_seed > 0) {
    // As accuracy_table --random=40 draws them; named "rN w=... ...".
    all = RandomScenarios(40, random_seed);
    for (const Scenario& s : all) {
      if (s.name.rfind(name + " ", 0) == 0) base = &s;
    }
  } else {
    all = StandardScenarios();
    for (Scenario& s : VariantScenarios()) all.push_back(std::move(s));
    for (Scenario& s : KindScenarios()) all.push_back(std::move(s));
    base = FindScenario(all, name);
  }
  if (base == nullptr) {
    std::cerr << "selection_timeline: no scenario named '" << name
              << (random_seed > 0
                      ? "' among the random ones (r0 to r39)\n"
                      : "' (see accuracy_table's tables for the names)\n");
    return 2;
  }
  const Scenario scenario = SeededScenario(*base, seed);
  const std::vector<TableColumn> columns = StandardColumns();
  std::vector<std::unique_ptr<Estimator>> fixed;
  for (int c = 0; c < kFixedColumns; ++c) {
    fixed.push_back(MakeEstimator(columns[c].config));
  }
  const AdaptiveConfig config = columns[kAdaptiveColumn].config;
  AdaptiveWindowEstimator adaptive(config);
  const int64_t longest_ns = config.base.window_ns;

  std::printf("%s, seed %d: RMS error (ns) per %.0f s\n\n",
              scenario.name.c_str(), seed, every_s);
  std::printf("| until s |");
  for (int c = 0; c < kFixedColumns; ++c) {
    std::printf(" %s |", columns[c].name.c_str());
  }
  std::printf(
      " adaptive | / best | answers | home | W* wander ppb/√s | "
      "references' σ² ppb²/s (readings) | linear check |\n|---:|");
  for (int c = 0; c <= kFixedColumns; ++c) std::printf("---:|");
  std::printf("---:|---|---|---:|---:|---|\n");

  ProbeSimulator sim(scenario.params);
  SimulatedSample s;
  // Per column: squared errors and checks in the row, and in the run.
  std::vector<double> sum_sq(kFixedColumns + 1, 0.0);
  std::vector<int64_t> checks(kFixedColumns + 1, 0);
  std::vector<double> total_sq(kFixedColumns + 1, 0.0);
  std::vector<int64_t> total_checks(kFixedColumns + 1, 0);
  auto rms = [](double sum, int64_t n) {
    return n > 0 ? std::sqrt(sum / static_cast<double>(n)) : NAN;
  };
  auto print_row = [&](double until_s) {
    if (checks[kFixedColumns] == 0) return;
    std::printf("| %.0f |", until_s);
    double best = INFINITY;
    for (int c = 0; c <= kFixedColumns; ++c) {
      const double r = rms(sum_sq[c], checks[c]);
      if (c < kFixedColumns && r < best) best = r;
      std::printf(" %.1f |", r);
    }
    const double adaptive_rms =
        rms(sum_sq[kFixedColumns], checks[kFixedColumns]);
    const ReferenceWander& rw = adaptive.reference_wander();
    std::printf(" %.2f | %s | %s | %.3g | %.3g ± %.2g (%.1f) | %s |\n",
                best > 0 ? adaptive_rms / best : 1.0,
                CandidateName(adaptive, adaptive.selected_candidate(),
                              longest_ns)
                    .c_str(),
                CandidateName(adaptive, adaptive.home_candidate(), longest_ns)
                    .c_str(),
                adaptive.home_wander_ppb(), rw.wander2(), rw.wander2_error(),
                rw.effective_count(),
                adaptive.linearity().wander_seen()
                    ? "wander seen"
                    : adaptive.linear_weight() > 0
                          ? absl::StrFormat("lean %.2f",
                                            adaptive.linear_weight())
                                .c_str()
                          : "-");
    std::fill(sum_sq.begin(), sum_sq.end(), 0.0);
    std::fill(checks.begin(), checks.end(), 0);
  };
  // As MeasureAccuracy (hull/sim/accuracy.h) counts: after the first
  // minute, not just after a clock step, each column where it is synced.
  double row_end_s = every_s;
  double last_s = 0;
  while (sim.Next(&s)) {
    for (auto& e : fixed) e->Add(s.sample);
    adaptive.Add(s.sample);
    last_s = static_cast<double>(s.true_ns) * 1e-9;
    while (last_s >= row_end_s) {
      print_row(row_end_s);
      row_end_s += every_s;
    }
    if (s.true_ns < kAccuracyWarmupNs || NearClockStep(scenario, s.true_ns)) {
      continue;
    }
    for (int c = 0; c <= kFixedColumns; ++c) {
      const TimeEstimate e = c < kFixedColumns
                                 ? fixed[c]->Estimate(s.sample.t4_ns)
                                 : adaptive.Estimate(s.sample.t4_ns);
      if (e.state == SyncState::kUnsynced) continue;
      const double error =
          static_cast<double>(e.global_ns - s.true_global_at_t4_ns);
      sum_sq[c] += error * error;
      total_sq[c] += error * error;
      ++checks[c];
      ++total_checks[c];
    }
  }
  print_row(std::min(row_end_s, std::ceil(last_s)));
  if (total_checks[kFixedColumns] == 0) return 0;
  std::printf("\nafter the first minute:");
  for (int c = 0; c <= kFixedColumns; ++c) {
    std::printf(" %s %.1f",
                c < kFixedColumns ? columns[c].name.c_str() : "adaptive",
                rms(total_sq[c], total_checks[c]));
  }
  std::printf(" ns\n");
  return 0;
}
