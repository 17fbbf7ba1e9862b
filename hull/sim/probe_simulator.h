// hull/sim/probe_simulator.h
//
// ProbeSimulator: probe samples between a parent whose clock is true global
// time and a child on a ModeledClock, with modeled network delays, loss and
// outages, each sample with its truth. Pure math, seeded, reproducible.
// Used by the scenario tests, the estimator benchmark and //tools/simulate:simulate.

#ifndef CLOCKSYNC_HULL_SIM_PROBE_SIMULATOR_H_
#define CLOCKSYNC_HULL_SIM_PROBE_SIMULATOR_H_

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "hull/sim/clock_model.h"
#include "hull/estimator.h"

namespace clocksync::hull {

// One-way delay: min_ns plus exponential jitter of mean exp_mean_ns, or,
// when pareto_alpha > 0, Pareto jitter (scale pareto_scale_ns, shape alpha:
// heavy-tailed, as queues under load give).
struct DelayParams {
  int64_t min_ns = 100'000;
  double exp_mean_ns = 100'000;
  double pareto_alpha = 0;
  double pareto_scale_ns = 0;
};

// A congestion episode: during [begin_ns, end_ns) (true ns since the
// origin, by the probe's send time) each direction's delay gets an extra
// delay drawn from `forward_extra` / `backward_extra` on top of the usual
// one (a standing queue as extra min_ns, bursts as extra jitter).
struct CongestionEpisode {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  DelayParams forward_extra{0, 0};
  DelayParams backward_extra{0, 0};
};

struct SimulationParams {
  ClockModelParams clock;
  // Global time at the origin (Unix epoch ns), and the child's local clock
  // reading at the origin before the model's offset (a boot-relative raw
  // clock): offsets between the two are those of CLOCK_MONOTONIC_RAW vs
  // CLOCK_REALTIME.
  int64_t global_origin_ns = 1'800'000'000'000'000'000;
  int64_t local_origin_ns = 7'200'000'000'000;
  int64_t interval_ns = 1'000'000'000;
  double interval_jitter = 0.1;  // Uniform ± fraction of the interval.
  DelayParams forward;
  DelayParams backward;
  int64_t turnaround_ns = 10'000;  // Parent's t3 − t2.
  double loss = 0;                 // Probability a probe or reply is lost.
  // [begin, end) in true ns since the origin: no probes get through.
  std::vector<std::pair<int64_t, int64_t>> outages;
  // Congestion episodes (extra queueing delay), in time order.
  std::vector<CongestionEpisode> congestion;
  int64_t duration_ns = 3'600'000'000'000;
  uint64_t seed = 1;
};

struct SimulatedSample {
  ProbeSample sample;
  int64_t true_ns;                // True time of t4, since the origin.
  int64_t true_global_at_t4_ns;   // The global time at local instant t4.
};

class ProbeSimulator {
 public:
  explicit ProbeSimulator(const SimulationParams& params);

  // The next delivered sample; false at the end of the duration.
  bool Next(SimulatedSample* out);
  // The child's local reading at a true time (for queries between samples).
  int64_t LocalAt(int64_t true_ns) {
    return params_.local_origin_ns + clock_.LocalAt(true_ns);
  }
  int64_t GlobalAt(int64_t true_ns) const {
    return params_.global_origin_ns + true_ns;
  }

 private:
  int64_t Delay(const DelayParams& d);

  SimulationParams params_;
  ModeledClock clock_;
  std::mt19937_64 rng_;
  int64_t next_send_ns_ = 0;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_SIM_PROBE_SIMULATOR_H_
