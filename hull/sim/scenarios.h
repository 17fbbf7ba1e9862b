// hull/sim/scenarios.h
//
// The standard simulation scenarios (numbered as chrony's test/simulation
// ones are): each a modeled clock, a network and a probe schedule with a
// known truth. The scenario tests check the estimator on every one;
// //tools/simulate:simulate writes any of them as a replayable CSV.

#ifndef CLOCKSYNC_HULL_SIM_SCENARIOS_H_
#define CLOCKSYNC_HULL_SIM_SCENARIOS_H_

#include <string>
#include <vector>

#include "hull/sim/probe_simulator.h"

namespace clocksync::hull {

struct Scenario {
  std::string name;         // e.g. "101-chrony-default"
  std::string description;  // One line.
  SimulationParams params;
};

std::vector<Scenario> StandardScenarios();
// Standard scenarios with one parameter changed (probe rate, jitter, the
// swing's amplitude or period, wander), named "base/what": checks that the
// adaptive estimator was not fitted to the standard parameters.
std::vector<Scenario> VariantScenarios();
// The scenario with this name, or nullptr.
const Scenario* FindScenario(const std::vector<Scenario>& all,
                             const std::string& name);

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_SIM_SCENARIOS_H_
