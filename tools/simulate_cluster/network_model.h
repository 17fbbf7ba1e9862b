// tools/simulate_cluster/network_model.h: the cluster simulator's network.
//
// Nodes sit in racks, racks in pods: a top-of-rack switch per rack, a pod
// switch per pod, one core. A packet from a to b crosses the switches on
// the path (1 within a rack, 3 within a pod, 5 across pods). Its one-way
// delay is
//   2 host_ns + hops hop_ns                       (the minimum, by distance)
//   ± the link's asymmetry                        (fixed per node: forward
//                                                  longer, return shorter)
//   + Exp(hops jitter_mean_ns)                    (queueing; or
//                                                  Exp(jitter_mean_ns))
//   + Exp(congestion_mean_ns) per congested switch on the path
//   + Pareto(tail_scale_ns, tail_alpha) with probability tail_probability.
// A switch is congested during a whole epoch (congestion_epoch_ns) with
// probability congestion_probability, decided by a hash of (seed, switch,
// epoch): every link through it sees the same episode. Packets are lost
// with probability `loss`, and every packet between a cut-off pod and the
// rest is lost while the partition lasts.
//
// Random draws come from the caller's generator state (one per node), so
// results do not depend on the order nodes are simulated in. Const and
// thread-safe once configured.

#ifndef CLOCKSYNC_TOOLS_SIMULATE_CLUSTER_NETWORK_MODEL_H_
#define CLOCKSYNC_TOOLS_SIMULATE_CLUSTER_NETWORK_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

namespace clocksync::sim {

struct NetworkParams {
  int64_t host_ns = 8'000;    // One host's stack and NIC, one way.
  int64_t hop_ns = 1'500;     // One switch traversal and its cables.
  int64_t asymmetry_max_ns = 500;  // |forward min − return min| / 2, at most.
  double jitter_mean_ns = 1'000;   // Per hop on the path ...
  bool jitter_per_hop = true;      // ... or, false, per packet.
  double congestion_probability = 0.02;
  int64_t congestion_epoch_ns = 10'000'000'000;
  double congestion_mean_ns = 50'000;
  double tail_probability = 0.005;
  double tail_scale_ns = 20'000;
  double tail_alpha = 1.5;
  double loss = 0.001;
  uint64_t seed = 1;
};

// Returns "" when valid, else "name: reason (value)".
std::string ValidateNetworkParams(const NetworkParams& params);

// A small fast generator (splitmix64): 8 bytes of state per node.
inline uint64_t NextRandom(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
// Uniform in (0, 1].
inline double NextUniform(uint64_t& state) {
  return (static_cast<double>(NextRandom(state) >> 11) + 1.0) * 0x1.0p-53;
}

class NetworkModel {
 public:
  // `pods` × `racks_per_pod` racks; node i is in pod node_pod[i], rack
  // node_rack[i] of that pod.
  NetworkModel(const NetworkParams& params, int pods, int racks_per_pod);

  // Places node `index` (grows the tables as needed).
  void Place(int index, int pod, int rack);
  int pod_of(int index) const { return pod_[index]; }
  int rack_of(int index) const { return pod_[index] * racks_per_pod_ + rack_[index]; }
  int pods() const { return pods_; }

  // Switches a packet between a and b crosses: 1, 3 or 5.
  int Hops(int a, int b) const;
  // The smallest one-way delay a -> b (with the link's asymmetry; the
  // link's asymmetry belongs to the child, `child`, and is + from the
  // child to its parent).
  int64_t MinDelayNs(int from, int to, int child) const;
  // One packet from -> to sent at true time t_ns: its delay, or -1 if lost.
  int64_t DelayNs(int from, int to, int child, int64_t t_ns,
                  uint64_t& rng) const;
  // Whether the switch is congested at t_ns (shared by all its links).
  bool Congested(int switch_id, int64_t t_ns) const;

  // Until `until_ns`, packets between pod `pod` and the other pods are lost.
  void CutPod(int pod, int64_t until_ns);
  bool Reachable(int a, int b, int64_t t_ns) const;

  // The node's fixed asymmetry, ns (from its index and the seed).
  int64_t AsymmetryNs(int node) const;

 private:
  int TorSwitch(int node) const { return rack_of(node); }
  int PodSwitch(int node) const { return pods_ * racks_per_pod_ + pod_[node]; }
  int CoreSwitch() const { return pods_ * racks_per_pod_ + pods_; }

  NetworkParams params_;
  int pods_;
  int racks_per_pod_;
  std::vector<int32_t> pod_;
  std::vector<int32_t> rack_;
  int cut_pod_ = -1;
  int64_t cut_until_ns_ = 0;
};

}  // namespace clocksync::sim

#endif  // CLOCKSYNC_TOOLS_SIMULATE_CLUSTER_NETWORK_MODEL_H_
