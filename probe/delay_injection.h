// probe/delay_injection.h: user-space delays (a minimum plus an
// exponential variable) on outgoing probes and replies, to emulate a
// network on one host. Used by tests, local clusters and clocksyncd's
// --inject_delay test feature; never in production.
//
//   DelayInjection          the parameters (Options of the responder and the
//                           requester; off by default).
//   ParseDelayInjection     "min=50us,mean=20us,seed=3" (--inject_delay).
//   ValidateDelayInjection  range checks, done by the responder's and the
//                           requester's Create().
//   DelaySampler            the seeded delays, one stream per side.
//   DelayQueue              the packets waiting for their due time.
//
// The delays are added after the send stamp (t1 at the child, t3 at the
// parent), so they are network delay to the estimator, outside the parent's
// turnaround.
//
// Thread safety: none; a sampler and a queue belong to the thread that owns
// the socket. Allocation: DelayQueue allocates in its constructor only.
#ifndef CLOCKSYNC_PROBE_DELAY_INJECTION_H_
#define CLOCKSYNC_PROBE_DELAY_INJECTION_H_

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "probe/packet.h"

namespace clocksync::probe {

// User-space delay added to outgoing packets: min_ns plus an exponential
// variable of mean exp_mean_ns, drawn from a generator seeded with `seed`.
struct DelayInjection {
  bool enabled = false;
  int64_t min_ns = 0;
  double exp_mean_ns = 0;
  uint64_t seed = 1;
};

// Parses "min=50us,mean=20us,seed=3" (keys in any order; min and mean are
// durations with a unit as absl::ParseDuration reads them: ns, us, ms, s;
// seed a decimal integer; at least one of min and mean). On success sets
// *out (enabled = true) and returns true; otherwise sets *error to a message
// naming the bad key or value and returns false.
bool ParseDelayInjection(const std::string& spec, DelayInjection* out,
                         std::string* error);

// OK when `delay` is off, or its min and mean are in [0, 10 s] and
// `queue_capacity` in [1, 2^24]; InvalidArgument otherwise.
absl::Status ValidateDelayInjection(const DelayInjection& delay,
                                    size_t queue_capacity);

// Draws the delays of a DelayInjection: deterministic for a seed and
// stream (the responder and the requester use different streams).
// Allocation-free; not thread-safe.
class DelaySampler {
 public:
  DelaySampler(const DelayInjection& delay, uint64_t stream);
  // min_ns + Exp(exp_mean_ns), rounded to ns.
  int64_t NextNs();

 private:
  uint64_t NextBits();
  int64_t min_ns_;
  double exp_mean_ns_;
  uint64_t state_;
};

// Encoded packets waiting for their due time (raw clock, ns), each with its
// destination (the responder's; the requester's socket is connected): a
// binary min-heap of (due, sequence) over fixed slots, so ties leave in
// arrival order. All memory is allocated in the constructor.
class DelayQueue {
 public:
  explicit DelayQueue(size_t capacity);

  bool empty() const { return heap_.empty(); }
  // Requires !empty().
  int64_t next_due_ns() const { return heap_.front().due_ns; }

  // Copies kProbePacketSize bytes of `packet` and, unless `to` is null,
  // `to_len` bytes of `to`. False when full.
  bool Push(int64_t due_ns, const uint8_t* packet, const sockaddr_storage* to,
            socklen_t to_len);

  // Moves the earliest packet out (and its destination, unless `to` is
  // null). Requires !empty().
  void Pop(uint8_t* packet, sockaddr_storage* to, socklen_t* to_len);

 private:
  struct Slot {
    uint8_t packet[kProbePacketSize];
    sockaddr_storage to;
    socklen_t to_len;
  };
  struct Due {
    int64_t due_ns;
    uint64_t sequence;  // Ties leave in arrival order.
    uint32_t slot;
  };
  static bool Later(const Due& a, const Due& b) {
    return a.due_ns != b.due_ns ? a.due_ns > b.due_ns
                                : a.sequence > b.sequence;
  }

  std::vector<Slot> slots_;
  std::vector<Due> heap_;
  std::vector<uint32_t> free_;
  uint64_t sequence_ = 0;
};

}  // namespace clocksync::probe

#endif  // CLOCKSYNC_PROBE_DELAY_INJECTION_H_
