// tools/simulate/simulate_main.cc
//
// //tools/simulate:simulate — writes a standard scenario's probe samples, with their
// truth, as a CSV that //tools/replay:replay reads.

#include <fstream>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "hull/sim/scenarios.h"

ABSL_FLAG(std::string, scenario, "101-chrony-default",
          "Scenario name (--list shows them).");
ABSL_FLAG(std::string, output, "", "CSV path (default: standard output).");
ABSL_FLAG(bool, list, false, "List the scenarios and exit.");
ABSL_FLAG(double, duration_s, 0, "Override the scenario's duration.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Writes a simulated probe scenario as CSV (t1,t2,t3,t4,truth_ns).\n"
      "  simulate --scenario=101-chrony-default --output=samples.csv");
  absl::ParseCommandLine(argc, argv);
  const auto all = clocksync::hull::StandardScenarios();
  if (absl::GetFlag(FLAGS_list)) {
    for (const auto& s : all) std::cout << s.name << "  " << s.description << "\n";
    return 0;
  }
  const auto* scenario =
      clocksync::hull::FindScenario(all, absl::GetFlag(FLAGS_scenario));
  if (scenario == nullptr) {
    std::cerr << "simulate: unknown --scenario '" << absl::GetFlag(FLAGS_scenario)
              << "' (--list shows the names)\n";
    return 2;
  }
  clocksync::hull::SimulationParams params = scenario->params;
  if (absl::GetFlag(FLAGS_duration_s) > 0) {
    params.duration_ns = static_cast<int64_t>(absl::GetFlag(FLAGS_duration_s) * 1e9);
  }
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (!absl::GetFlag(FLAGS_output).empty()) {
    file.open(absl::GetFlag(FLAGS_output));
    if (!file) {
      std::cerr << "simulate: cannot write " << absl::GetFlag(FLAGS_output) << "\n";
      return 1;
    }
    out = &file;
  }
  *out << "# " << scenario->name << ": " << scenario->description << "\n";
  *out << "t1,t2,t3,t4,truth_ns\n";
  clocksync::hull::ProbeSimulator sim(params);
  clocksync::hull::SimulatedSample s;
  while (sim.Next(&s)) {
    *out << s.sample.t1_ns << ',' << s.sample.t2_ns << ',' << s.sample.t3_ns
         << ',' << s.sample.t4_ns << ',' << s.true_global_at_t4_ns << '\n';
  }
  out->flush();
  return *out ? 0 : 1;
}
