// hull/clock_condition.h: the clock condition (Lamport): a message is
// received after it was sent, and no sooner than the minimum latency.
//
// Given matched messages (send event on one process, receive event on
// another), on the global timescale, this counts the violations and finds
// the worst one. It is the measure the trace tools print for each
// correction: a correction that leaves receives before their sends has put
// events in the wrong order. Pure math.
//
// Example:
//   ClockConditionReport r = CheckClockCondition(messages, 1000);
//   std::cout << r.ToString() << "\n";
//   // "clock condition: 3 of 1000 messages received before sent, 12 within
//   //  the 1000 ns minimum latency; worst: message 17 (2 -> 5), latency
//   //  -5400 ns, short by 6400 ns"

#ifndef CLOCKSYNC_HULL_CLOCK_CONDITION_H_
#define CLOCKSYNC_HULL_CLOCK_CONDITION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hull/postmortem.h"

namespace clocksync::hull {

// One message, both ends on the global timescale.
struct MatchedMessage {
  int32_t send_process = 0;
  int32_t receive_process = 0;
  int64_t send_global_ns = 0;
  int64_t receive_global_ns = 0;
};

// The same, both ends on their own process's local clock.
struct LocalMessage {
  int32_t send_process = 0;
  int32_t receive_process = 0;
  int64_t send_local_ns = 0;
  int64_t receive_local_ns = 0;
};

struct ClockConditionReport {
  int64_t min_latency_ns = 0;  // the minimum latency checked against
  int64_t messages = 0;        // messages checked
  // receive < send: received before it was sent.
  int64_t reversed = 0;
  // receive < send + min_latency_ns: faster than any message can travel
  // (includes the reversed ones when min_latency_ns >= 0).
  int64_t below_min_latency = 0;
  // The message with the largest shortfall send + min_latency - receive,
  // if any message falls short (below_min_latency > 0).
  bool has_worst = false;
  int64_t worst_index = 0;  // into the messages given
  MatchedMessage worst;
  int64_t worst_latency_ns = 0;    // receive - send of the worst message
  int64_t worst_shortfall_ns = 0;  // send + min_latency - receive (> 0)

  bool ok() const { return below_min_latency == 0; }
  // One line for people (see the example above).
  std::string ToString() const;
};

// Checks every message against the clock condition. Differences are taken
// exactly (saturated to the int64_t range).
ClockConditionReport CheckClockCondition(
    absl::Span<const MatchedMessage> messages, int64_t min_latency_ns);

// Converts each end with its process's correction
// (corrections[process]) and checks. Fails when a message names a process
// without a correction (negative, out of range or null).
absl::StatusOr<ClockConditionReport> CheckClockCondition(
    absl::Span<const LocalMessage> messages,
    absl::Span<const Correction* const> corrections, int64_t min_latency_ns);

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_CLOCK_CONDITION_H_
