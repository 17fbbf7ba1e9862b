// tools/simulate_cluster/network_model.cc: NetworkModel: see
// network_model.h.

#include "tools/simulate_cluster/network_model.h"

#include <cmath>

namespace clocksync::sim {
namespace {

uint64_t Mix(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t s = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL) * 0xbf58476d1ce4e5b9ULL ^
               (c + 0x85157af5ULL) * 0x94d049bb133111ebULL;
  return NextRandom(s);
}

std::string Bad(const char* name, const char* why, double value) {
  return std::string(name) + ": " + why + " (" + std::to_string(value) + ")";
}

}  // namespace

std::string ValidateNetworkParams(const NetworkParams& p) {
  if (p.host_ns < 0) return Bad("host_ns", "must be >= 0", p.host_ns);
  if (p.hop_ns < 0) return Bad("hop_ns", "must be >= 0", p.hop_ns);
  if (p.asymmetry_max_ns < 0 || p.asymmetry_max_ns > p.host_ns) {
    return Bad("asymmetry_max_ns", "must be in [0, host_ns]", p.asymmetry_max_ns);
  }
  if (!(p.jitter_mean_ns >= 0)) return Bad("jitter_mean_ns", "must be >= 0", p.jitter_mean_ns);
  if (!(p.congestion_probability >= 0 && p.congestion_probability <= 1)) {
    return Bad("congestion_probability", "must be in [0, 1]", p.congestion_probability);
  }
  if (p.congestion_epoch_ns <= 0) {
    return Bad("congestion_epoch_ns", "must be > 0", p.congestion_epoch_ns);
  }
  if (!(p.congestion_mean_ns >= 0)) {
    return Bad("congestion_mean_ns", "must be >= 0", p.congestion_mean_ns);
  }
  if (!(p.tail_probability >= 0 && p.tail_probability <= 1)) {
    return Bad("tail_probability", "must be in [0, 1]", p.tail_probability);
  }
  if (!(p.tail_scale_ns >= 0)) return Bad("tail_scale_ns", "must be >= 0", p.tail_scale_ns);
  if (!(p.tail_alpha > 1)) return Bad("tail_alpha", "must be > 1", p.tail_alpha);
  if (!(p.loss >= 0 && p.loss < 1)) return Bad("loss", "must be in [0, 1)", p.loss);
  return "";
}

NetworkModel::NetworkModel(const NetworkParams& params, int pods,
                           int racks_per_pod)
    : params_(params), pods_(pods), racks_per_pod_(racks_per_pod) {}

void NetworkModel::Place(int index, int pod, int rack) {
  if (static_cast<int>(pod_.size()) <= index) {
    pod_.resize(index + 1, 0);
    rack_.resize(index + 1, 0);
  }
  pod_[index] = pod;
  rack_[index] = rack;
}

int NetworkModel::Hops(int a, int b) const {
  if (pod_[a] != pod_[b]) return 5;
  if (rack_[a] != rack_[b]) return 3;
  return 1;
}

int64_t NetworkModel::AsymmetryNs(int node) const {
  if (params_.asymmetry_max_ns == 0) return 0;
  const uint64_t h = Mix(params_.seed, 0xa5a5, static_cast<uint64_t>(node));
  return static_cast<int64_t>(h % (2 * params_.asymmetry_max_ns + 1)) -
         params_.asymmetry_max_ns;
}

int64_t NetworkModel::MinDelayNs(int from, int to, int child) const {
  const int64_t base = 2 * params_.host_ns + Hops(from, to) * params_.hop_ns;
  const int64_t asym = AsymmetryNs(child);
  return from == child ? base + asym : base - asym;
}

bool NetworkModel::Congested(int switch_id, int64_t t_ns) const {
  if (params_.congestion_probability <= 0) return false;
  const uint64_t epoch = static_cast<uint64_t>(t_ns / params_.congestion_epoch_ns);
  const uint64_t h = Mix(params_.seed, static_cast<uint64_t>(switch_id) + 1, epoch);
  return static_cast<double>(h >> 11) * 0x1.0p-53 < params_.congestion_probability;
}

void NetworkModel::CutPod(int pod, int64_t until_ns) {
  cut_pod_ = pod;
  cut_until_ns_ = until_ns;
}

bool NetworkModel::Reachable(int a, int b, int64_t t_ns) const {
  if (cut_pod_ < 0 || t_ns >= cut_until_ns_) return true;
  return (pod_[a] == cut_pod_) == (pod_[b] == cut_pod_);
}

int64_t NetworkModel::DelayNs(int from, int to, int child, int64_t t_ns,
                              uint64_t& rng) const {
  if (!Reachable(from, to, t_ns)) return -1;
  if (params_.loss > 0 && NextUniform(rng) < params_.loss) return -1;
  const int hops = Hops(from, to);
  double delay = static_cast<double>(MinDelayNs(from, to, child));
  if (params_.jitter_mean_ns > 0) {
    delay += -std::log(NextUniform(rng)) * params_.jitter_mean_ns *
             (params_.jitter_per_hop ? hops : 1);
  }
  if (params_.congestion_probability > 0) {
    int switches[5];
    int n = 0;
    switches[n++] = TorSwitch(from);
    if (hops >= 3) {
      switches[n++] = PodSwitch(from);
      switches[n++] = PodSwitch(to);
    }
    if (hops == 5) switches[n++] = CoreSwitch();
    if (hops > 1) switches[n++] = TorSwitch(to);
    for (int i = 0; i < n; ++i) {
      if (i > 0 && switches[i] == switches[i - 1]) continue;
      if (Congested(switches[i], t_ns)) {
        delay += -std::log(NextUniform(rng)) * params_.congestion_mean_ns;
      }
    }
  }
  if (params_.tail_probability > 0 && NextUniform(rng) < params_.tail_probability) {
    delay += params_.tail_scale_ns *
             (std::pow(NextUniform(rng), -1.0 / params_.tail_alpha) - 1.0);
  }
  return static_cast<int64_t>(delay);
}

}  // namespace clocksync::sim
