// trace/synthetic_trace.h: test-only: writes a two-process trace whose
// correct answers are known (compare, export and timeline tests).
//
// Both processes share one host raw clock; the master's global time is
// raw + kMasterOffsetNs.
//   rank 0 ("ping"): local = raw (no clock model); one thread.
//   rank 1 ("pong"): local = raw + 3 ms + 50 ppm * (raw - (start - 1 s)),
//     a clock model in its ground truth; two threads (the second only enters and
//     leaves "work" and runs barriers).
// Every 10 ms for 10 s rank 0 sends to rank 1 (tag 1) and 5 ms later rank 1
// sends to rank 0 (tag 2); each message takes exactly 20 us of raw time.
// Sync sessions (10 exchanges, 10 us each way, no processing time) at
// start, every second and at the end. Online mapping records: rank 0's is
// exactly 100 ns ahead of the truth, rank 1's exactly 200 ns behind.
// Known answers (SyntheticAnswers):
//   none     every rank 1 -> rank 0 message is received before it was sent
//            (rank 1's clock is ~3 ms ahead): `messages / 2` violations;
//   online   no violation; error +100 ns on every rank-0 event, -200 ns on
//            every rank-1 event;
//   linear, spline, piecewise
//            no violation; errors within a few ns (the clocks are linear
//            and the exchanges symmetric).

#ifndef CLOCKSYNC_TRACE_SYNTHETIC_TRACE_H_
#define CLOCKSYNC_TRACE_SYNTHETIC_TRACE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace clocksync::trace {

inline constexpr int64_t kSyntheticMasterOffsetNs = 1'700'000'000'000'000'000;
inline constexpr int64_t kSyntheticOnlineError0Ns = 100;
inline constexpr int64_t kSyntheticOnlineError1Ns = -200;

struct SyntheticAnswers {
  std::string rank0_dir;  // <dir>/rank0
  std::string rank1_dir;  // <dir>/rank1
  int64_t messages = 0;   // sends (all matched)
  int64_t reversed_without_correction = 0;
  int64_t events_rank0 = 0;
  int64_t events_rank1 = 0;
  // RMS of the online errors over all events.
  double online_rms_error_ns = 0;
};

// Writes the two archives under `dir` (which must exist).
absl::StatusOr<SyntheticAnswers> WriteSyntheticTraces(const std::string& dir);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_SYNTHETIC_TRACE_H_
