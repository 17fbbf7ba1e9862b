// hull/probe_sample.h: one probe exchange (t1, t2, t3, t4), the one type
// for every two-way exchange with a parent or with the master: the daemon's
// probes (hull/estimator.h), the tracer's sync sessions (trace/trace.h) and
// the post-mortem corrections built from them (hull/postmortem.h).
//
// Sign convention (used everywhere in clocksync):
//   t1_ns  local clock when the request left
//   t2_ns  parent's (global) clock when the request arrived
//   t3_ns  parent's (global) clock when the answer left
//   t4_ns  local clock when the answer arrived
// all integer ns. With non-negative delays t1 <= t4 and t2 <= t3; the round
// trip is (t4 − t1) − (t3 − t2), and the offset global − local lies in
// [t3 − t4, t2 − t1].
//
// A parent that is not the master knows global time only within its own
// bound: its t2 and t3 are within ± parent_bound_ns of the true global time
// (0 for the master). The estimator widens the sample by that much (request
// point up, response point down), so that its lines and bound are against
// the true global time however the parent's time wiggles (bounds add up
// down the tree, and a parent's corrections never make the hulls cross).
// The probe transport adds to it the uncertainty of converting the kernel's
// receive stamps of t2 and t4 (probe/udp_socket.h), which it gives at the
// middle of their possible range rather than at its late end: a symmetric
// widening keeps the bound valid without biasing the estimate toward the
// side whose receiver woke up later.
// The post-mortem corrections ignore it: they are against the master.
//
// A plain struct; safe to copy.

#ifndef CLOCKSYNC_HULL_PROBE_SAMPLE_H_
#define CLOCKSYNC_HULL_PROBE_SAMPLE_H_

#include <cstdint>

namespace clocksync::hull {

struct ProbeSample {
  int64_t t1_ns = 0;            // request left (local clock)
  int64_t t2_ns = 0;            // parent received it (global)
  int64_t t3_ns = 0;            // parent answered (global)
  int64_t t4_ns = 0;            // answer arrived (local clock)
  int64_t parent_bound_ns = 0;  // |error| of t2 and t3 against global time
                                // (and of the receive stamps, see above)

  // An exchange whose master gave one stamp m for both t2 and t3 (the
  // post-mortem CSV's "s,m,r" rows).
  static constexpr ProbeSample OneMasterStamp(int64_t local_send_ns,
                                              int64_t master_ns,
                                              int64_t local_receive_ns) {
    return ProbeSample{local_send_ns, master_ns, master_ns, local_receive_ns};
  }

  friend bool operator==(const ProbeSample&, const ProbeSample&) = default;
};

// The master's mean stamp (t2 + t3) / 2, truncated toward zero, without
// overflow: the master time of the exchange in the post-mortem corrections.
inline int64_t MasterMidpointNs(const ProbeSample& s) {
  return static_cast<int64_t>((static_cast<__int128>(s.t2_ns) + s.t3_ns) / 2);
}

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_PROBE_SAMPLE_H_
