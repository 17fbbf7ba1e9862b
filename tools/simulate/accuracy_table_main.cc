// tools/simulate/accuracy_table_main.cc
//
// //tools/simulate:accuracy_table — the accuracy table of docs/ACCURACY.md:
// every standard scenario (or those named) under fixed windows of 37.5 to
// 600 s, the library's default adaptive estimator and the daemon's
// default, RMS error against the truth pooled over seeds, the ratios the
// targets are stated in, and whether they hold. Exits 1 when a target is
// missed. The scenario test runs its short form.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "hull/sim/accuracy.h"
#include "hull/sim/scenarios.h"

ABSL_FLAG(int, seeds, 10, "Seeds per scenario (0 is the scenario as defined).");
ABSL_FLAG(int, first_seed, 0,
          "The first seed: seeds first_seed .. first_seed + seeds - 1 (a "
          "fresh set, e.g. 10, checks that nothing was tuned to 0..9).");
ABSL_FLAG(double, scale, 1.0,
          "Scenario durations (and their events) times this; <1 is quicker.");
ABSL_FLAG(std::string, scenarios, "",
          "Comma-separated scenario names (default: all).");
ABSL_FLAG(bool, variants, false,
          "The variant scenarios (a standard one with one parameter changed: "
          "rate, jitter, swing, wander) instead of the standard ones.");
ABSL_FLAG(bool, kinds, false,
          "The kinds of scenario the targets were first stated on, at other "
          "parameters (hull/sim/scenarios.h: KindScenarios), instead of the "
          "standard ones.");
ABSL_FLAG(int, random, 0,
          "This many random scenarios (hull/sim/scenarios.h: RandomScenarios) "
          "instead of the standard ones.");
ABSL_FLAG(uint64_t, random_seed, 1, "The random scenarios' seed.");
ABSL_FLAG(double, restart_after, 0,
          "0: every run starts afresh. X > 0: the adaptive columns restart: "
          "each first runs the same scenario for X times its duration on "
          "another seed (a previous run of the same kind of clock) and "
          "starts from the wander it learnt (the daemon's wander_state_file).");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Prints the scenario x window x adaptive accuracy table.\n"
      "  accuracy_table [--seeds=10] [--first_seed=0] [--scale=1] "
      "[--variants | --kinds | --random=N [--random_seed=S]] "
      "[--scenarios=NAME,...] [--restart_after=X]");
  absl::ParseCommandLine(argc, argv);
  using namespace clocksync::hull;
  const int random = absl::GetFlag(FLAGS_random);
  if (random < 0) {
    std::cerr << "accuracy_table: --random must be >= 0 (got " << random
              << ")\n";
    return 2;
  }
  const bool variants = absl::GetFlag(FLAGS_variants);
  const bool kinds = absl::GetFlag(FLAGS_kinds);
  if ((random > 0) + variants + kinds > 1) {
    std::cerr << "accuracy_table: --random, --variants and --kinds choose "
                 "different scenario sets; give one\n";
    return 2;
  }
  const std::vector<Scenario> all =
      random > 0 ? RandomScenarios(random, absl::GetFlag(FLAGS_random_seed))
      : variants ? VariantScenarios()
      : kinds    ? KindScenarios()
                 : StandardScenarios();
  std::vector<Scenario> chosen;
  const std::string names = absl::GetFlag(FLAGS_scenarios);
  if (names.empty()) {
    chosen = all;
  } else {
    for (const std::string& name :
         std::vector<std::string>(absl::StrSplit(names, ','))) {
      const Scenario* s = FindScenario(all, name);
      if (s == nullptr) {
        std::cerr << "accuracy_table: unknown scenario '" << name << "'\n";
        return 2;
      }
      chosen.push_back(*s);
    }
  }
  const int seeds = absl::GetFlag(FLAGS_seeds);
  const int first_seed = absl::GetFlag(FLAGS_first_seed);
  const double scale = absl::GetFlag(FLAGS_scale);
  if (seeds < 1 || first_seed < 0 || !(scale > 0)) {
    std::cerr << "accuracy_table: --seeds must be >= 1, --first_seed >= 0 "
                 "and --scale > 0 (got "
              << seeds << ", " << first_seed << ", " << scale << ")\n";
    return 2;
  }
  const double restart_after = absl::GetFlag(FLAGS_restart_after);
  if (!(restart_after >= 0) || !std::isfinite(restart_after)) {
    std::cerr << "accuracy_table: --restart_after must be >= 0 (got "
              << restart_after << ")\n";
    return 2;
  }
  // Seed i of a scenario drawn from seed first_seed is seed first_seed + i.
  for (Scenario& s : chosen) s = SeededScenario(s, first_seed);
  const std::vector<TableColumn> columns = StandardColumns();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<TableRow> rows =
      AccuracyTable(chosen, columns, seeds, scale, restart_after);
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  const std::string restarted =
      restart_after > 0
          ? absl::StrFormat(", adaptive columns restarted after a run of x %g",
                            restart_after)
          : "";
  std::printf("RMS error ns after the first minute, pooled over %d seed(s) "
              "from %d, durations x %g%s (%.1f s)\n\n%s",
              seeds, first_seed, scale, restarted.c_str(), seconds,
              FormatAccuracyTable(columns, rows).c_str());
  // Bound misses of every column (the fixed windows' too).
  std::printf("\nbound misses (samples + holdover checks) by column:\n");
  for (const TableRow& row : rows) {
    std::printf("  %-28s", row.scenario.c_str());
    for (size_t c = 0; c < columns.size(); ++c) {
      std::printf(" %s=%lld", columns[c].name.c_str(),
                  static_cast<long long>(row.results[c].violations +
                                         row.results[c].holdover_violations));
    }
    std::printf("\n");
  }
  int missed = 0;
  for (const TableRow& row : rows) missed += !row.MeetsTarget(kAdaptiveColumn);
  std::printf("\ntargets (adaptive <= 1.05 x best fixed, <= 300 s, no bound "
              "violation): %d of %zu scenarios hold\n",
              static_cast<int>(rows.size()) - missed, rows.size());
  return missed == 0 ? 0 : 1;
}
