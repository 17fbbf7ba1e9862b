// hull/sim/probe_simulator.cc: ProbeSimulator: see probe_simulator.h.

#include "hull/sim/probe_simulator.h"

#include <cmath>

namespace clocksync::hull {

ProbeSimulator::ProbeSimulator(const SimulationParams& params)
    : params_(params), clock_(params.clock), rng_(params.seed) {}

int64_t ProbeSimulator::Delay(const DelayParams& d) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double jitter = 0;
  if (d.pareto_alpha > 0) {
    // Pareto with minimum scale: scale / U^(1/alpha), shifted to start at 0.
    const double u = 1.0 - unit(rng_);
    jitter = d.pareto_scale_ns * (std::pow(u, -1.0 / d.pareto_alpha) - 1.0);
  } else if (d.exp_mean_ns > 0) {
    jitter = std::exponential_distribution<double>(1.0 / d.exp_mean_ns)(rng_);
  }
  return d.min_ns + static_cast<int64_t>(std::llround(std::min(jitter, 1e15)));
}

bool ProbeSimulator::Next(SimulatedSample* out) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (;;) {
    const int64_t send = next_send_ns_;
    if (send >= params_.duration_ns) return false;
    const double jitter =
        (2 * unit(rng_) - 1) * params_.interval_jitter * params_.interval_ns;
    next_send_ns_ =
        send + params_.interval_ns + static_cast<int64_t>(std::llround(jitter));
    int64_t forward = Delay(params_.forward);
    int64_t backward = Delay(params_.backward);
    // Extra draws only inside an episode, so scenarios without congestion
    // keep their random streams.
    for (const CongestionEpisode& episode : params_.congestion) {
      if (send >= episode.begin_ns && send < episode.end_ns) {
        forward += Delay(episode.forward_extra);
        backward += Delay(episode.backward_extra);
      }
    }
    const int64_t arrive = send + forward;
    const int64_t reply = arrive + params_.turnaround_ns;
    const int64_t back = reply + backward;
    const bool lost = unit(rng_) < params_.loss;
    bool in_outage = false;
    for (const auto& [begin, end] : params_.outages) {
      if (back >= begin && send < end) in_outage = true;
    }
    if (lost || in_outage) continue;
    out->sample.t1_ns = LocalAt(send);
    out->sample.t2_ns = GlobalAt(arrive);
    out->sample.t3_ns = GlobalAt(reply);
    out->sample.t4_ns = LocalAt(back);
    out->true_ns = back;
    out->true_global_at_t4_ns = GlobalAt(back);
    return true;
  }
}

}  // namespace clocksync::hull
