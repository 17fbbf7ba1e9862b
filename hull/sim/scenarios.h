// hull/sim/scenarios.h
//
// The standard simulation scenarios (numbered as chrony's test/simulation
// ones are): each a modeled clock, a network and a probe schedule with a
// known truth. The scenario tests check the estimator on every one;
// //tools/simulate:simulate writes any of them as a replayable CSV.

#ifndef CLOCKSYNC_HULL_SIM_SCENARIOS_H_
#define CLOCKSYNC_HULL_SIM_SCENARIOS_H_

#include <cstdint>
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
// `count` scenarios drawn at random (from `seed`), for what neither the
// standard scenarios nor their variants cover. Each draws independently:
// frequency uniform in ±100 ppm; random-walk wander 0 (15 %) or
// log-uniform in 0.05–3 ppb/√s; a sine swing (30 %) of 100–1,500 ppb over
// 10–60 minutes (log-uniform); 0.5–20 probes/s; a minimum delay of
// 1–300 µs and a jitter scale of 0.2–1,000 µs each way, exponential or
// (25 %) Pareto with α 1.5, the two directions' scales apart by a factor
// of 0.1–10 (30 %); loss up to 30 % (20 %); 15–60 minutes; congestion
// episodes (25 %, drawn from a stream of their own, so that the rest is
// as without them) of 15–240 s every 3–20 minutes, a standing queue of
// 0.5–30 jitter scales plus an exponential of 1–30, forward (50 %), back
// (20 %) or both ways. Named "rN w=… sine=…/… hz=… jit=…us… [cong=…]"
// after what was drawn.
std::vector<Scenario> RandomScenarios(int count, uint64_t seed);
// The kinds of scenario the targets were first stated on (docs/
// ACCURACY.md), each at other parameters, all with 1 ppb/√s of wander:
// 0.5–2 ms of exponential jitter at 1 probe/s (18), Pareto delays with α
// 1.1–2 and scales of 10–100 µs at 10 probes/s (9), jitter on one way
// only, 20 µs–1 ms against 2 or 10 µs, at 20 probes/s (8), and on both
// ways at 2:1 and 4:1 at 5 and 20 probes/s (12), swings of 200–800 ppb
// over 10–30 minutes at 2 probes/s (18), chrony's default model with
// 50–200 µs of jitter for 30–120 minutes (9), and congestion episodes on
// 113's network: a queue of 1.5, 3 or 15 jitter scales for 60 or 180 s of
// every 5 minutes, one way or both, at 1, 4 and 10 probes/s (36). Named
// "kind/parameters".
std::vector<Scenario> KindScenarios();
// The scenario with this name, or nullptr.
const Scenario* FindScenario(const std::vector<Scenario>& all,
                             const std::string& name);

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_SIM_SCENARIOS_H_
