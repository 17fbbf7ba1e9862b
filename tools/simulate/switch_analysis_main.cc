// tools/simulate/switch_analysis_main.cc
//
// //tools/simulate:switch_analysis — how soon an estimator would have to
// tell a linear clock from one that wanders as the allowance says, to hold
// the targets of docs/ACCURACY.md on both.
//
// Two scenarios that differ only in the clock's wander (by default
// 102-large-offset-linear, no wander, and its variant with the allowance's
// 1 ppb/√s) are run over the seeds under the fixed windows and the
// library's default adaptive estimator, and every sample's error after the
// first minute is kept. Then, for a switch time T and a detection time D:
//   - on the linear clock, a rule that answers as the adaptive estimator
//     before T and from the longest window after T;
//   - on the wandering clock, the same rule until D (its samples could not
//     tell it from the linear one before), and as the adaptive estimator
//     from D on (it has seen the wander);
// each as its RMS over the best fixed window's (pooled over seeds). A
// causal estimator that holds the linear clock (≤ 1.05 ×) must answer
// from the long window by the T where the first column still holds, and
// then see the wander on the other clock by the D where its row holds.
// This bounds what is possible; it is not an estimator.

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "hull/estimator.h"
#include "hull/sim/accuracy.h"
#include "hull/sim/probe_simulator.h"
#include "hull/sim/scenarios.h"

ABSL_FLAG(std::string, linear, "102-large-offset-linear",
          "The scenario whose clock does not wander.");
ABSL_FLAG(std::string, wandering, "102-large-offset-linear/wander=1",
          "The same network on a clock that wanders (a variant's name).");
ABSL_FLAG(int, seeds, 10, "Seeds per scenario (0 is the scenario as defined).");
ABSL_FLAG(std::string, switch_s, "60,70,80,90,100,120,150",
          "Switch times T (s, comma-separated).");
ABSL_FLAG(std::string, detect_s, "100,125,150,200,300,400",
          "Detection times D (s, comma-separated).");

namespace {

using namespace clocksync::hull;

// One sample's errors (ns) under the longest fixed window and the
// adaptive estimator, at true time t_s.
struct Errors {
  double t_s;
  double longest_ns;
  double adaptive_ns;
};

struct Run {
  std::vector<Errors> errors;        // Every seed's samples.
  std::vector<double> fixed_sum_sq;  // Per fixed window.
  double best_fixed_rms_ns() const {
    double best = INFINITY;
    for (const double s : fixed_sum_sq) {
      best = std::min(best, std::sqrt(s / static_cast<double>(errors.size())));
    }
    return best;
  }
};

Run Record(const Scenario& base, int seeds) {
  const std::vector<TableColumn> columns = StandardColumns();
  Run run;
  run.fixed_sum_sq.assign(kFixedColumns, 0.0);
  for (int seed = 0; seed < seeds; ++seed) {
    const Scenario scenario = SeededScenario(base, seed);
    std::vector<std::unique_ptr<Estimator>> estimators;
    for (int c = 0; c <= kAdaptiveColumn; ++c) {
      estimators.push_back(MakeEstimator(columns[c].config));
    }
    ProbeSimulator sim(scenario.params);
    SimulatedSample s;
    std::vector<double> error(estimators.size());
    while (sim.Next(&s)) {
      for (auto& e : estimators) e->Add(s.sample);
      if (s.true_ns < kAccuracyWarmupNs) continue;
      bool synced = true;
      for (size_t c = 0; c < estimators.size(); ++c) {
        const TimeEstimate e = estimators[c]->Estimate(s.sample.t4_ns);
        synced = synced && e.state != SyncState::kUnsynced;
        error[c] = static_cast<double>(e.global_ns - s.true_global_at_t4_ns);
      }
      if (!synced) continue;
      for (int c = 0; c < kFixedColumns; ++c) {
        run.fixed_sum_sq[c] += error[c] * error[c];
      }
      run.errors.push_back({static_cast<double>(s.true_ns) * 1e-9,
                            error[kFixedColumns - 1], error[kAdaptiveColumn]});
    }
  }
  return run;
}

// RMS of the rule: adaptive before T, longest window in [T, D), adaptive
// from D on; over the best fixed window.
double RuleRatio(const Run& run, double switch_s, double detect_s) {
  double sum_sq = 0;
  for (const Errors& e : run.errors) {
    const double error = e.t_s >= switch_s && e.t_s < detect_s
                             ? e.longest_ns
                             : e.adaptive_ns;
    sum_sq += error * error;
  }
  return std::sqrt(sum_sq / static_cast<double>(run.errors.size())) /
         run.best_fixed_rms_ns();
}

bool ParseTimes(const std::string& flag, const std::string& text,
                std::vector<double>* out) {
  for (const absl::string_view part : absl::StrSplit(text, ',')) {
    double v = 0;
    if (!absl::SimpleAtod(part, &v) || !(v >= 0)) {
      std::cerr << "switch_analysis: --" << flag << ": '" << part
                << "' is not a time in seconds\n";
      return false;
    }
    out->push_back(v);
  }
  return !out->empty();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "How soon a linear clock must be told from a wandering one.\n"
      "  switch_analysis [--linear=NAME] [--wandering=NAME] [--seeds=10] "
      "[--switch_s=T,...] [--detect_s=D,...]");
  absl::ParseCommandLine(argc, argv);
  const int seeds = absl::GetFlag(FLAGS_seeds);
  if (seeds < 1) {
    std::cerr << "switch_analysis: --seeds must be >= 1 (got " << seeds
              << ")\n";
    return 2;
  }
  std::vector<double> switch_s, detect_s;
  if (!ParseTimes("switch_s", absl::GetFlag(FLAGS_switch_s), &switch_s) ||
      !ParseTimes("detect_s", absl::GetFlag(FLAGS_detect_s), &detect_s)) {
    return 2;
  }
  std::vector<Scenario> all = StandardScenarios();
  for (Scenario& s : VariantScenarios()) all.push_back(std::move(s));
  const Scenario* linear = FindScenario(all, absl::GetFlag(FLAGS_linear));
  const Scenario* wandering =
      FindScenario(all, absl::GetFlag(FLAGS_wandering));
  if (linear == nullptr || wandering == nullptr) {
    std::cerr << "switch_analysis: no scenario named '"
              << (linear == nullptr ? absl::GetFlag(FLAGS_linear)
                                    : absl::GetFlag(FLAGS_wandering))
              << "' (see accuracy_table's tables for the names)\n";
    return 2;
  }
  const Run lin = Record(*linear, seeds);
  const Run wan = Record(*wandering, seeds);
  std::printf("%s: best fixed window %.1f ns, adaptive %.3f x\n",
              linear->name.c_str(), lin.best_fixed_rms_ns(),
              RuleRatio(lin, INFINITY, INFINITY));
  std::printf("%s: best fixed window %.1f ns, adaptive %.3f x\n\n",
              wandering->name.c_str(), wan.best_fixed_rms_ns(),
              RuleRatio(wan, INFINITY, INFINITY));
  std::printf("| switch T s | linear: long from T |");
  for (const double d : detect_s) std::printf(" wandering, seen at %.0f s |", d);
  std::printf("\n|---:|---:|");
  for (size_t i = 0; i < detect_s.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (const double t : switch_s) {
    std::printf("| %.0f | %.3f |", t, RuleRatio(lin, t, INFINITY));
    for (const double d : detect_s) {
      if (d < t) {
        std::printf(" - |");
      } else {
        std::printf(" %.3f |", RuleRatio(wan, t, d));
      }
    }
    std::printf("\n");
  }
  return 0;
}
