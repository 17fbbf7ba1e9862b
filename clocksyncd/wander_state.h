// clocksyncd/wander_state.h: what a node's clock has shown of its
// frequency wander, kept across restarts (the `wander_state_file` key), as
// chrony keeps its frequency in a drift file.
//
// The adaptive estimator starts its home window from the configured
// wander allowance (1 ppb/√s) until its drifts and checkpoint references
// bound the wander tighter, which takes minutes; a clock that wanders far
// less answers meanwhile from windows shorter than it needs
// (docs/ACCURACY.md). The wander is the oscillator's, so what one run
// learnt (hull::Estimator::LearntWanderPpb, an upper bound) is a prior for
// the next: the home window starts from it (AdaptiveConfig::
// wander_prior_ppb_per_sqrt_s), the references overrule it once they
// count, and the error bound keeps the allowance.
//
// The file is two lines of text, `key value`, '#' comments allowed:
//   wander_ppb_per_sqrt_s 0.0843
//   saved_unix_s 1764650000
// written aside and renamed, so that a crash never leaves half of one.

#ifndef CLOCKSYNC_CLOCKSYNCD_WANDER_STATE_H_
#define CLOCKSYNC_CLOCKSYNCD_WANDER_STATE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace clocksync {

struct WanderState {
  double wander_ppb_per_sqrt_s = 0;  // > 0 and finite.
  int64_t saved_unix_s = 0;          // When it was written (CLOCK_REALTIME).
};

// The file's text.
std::string FormatWanderState(const WanderState& state);

// Parses FormatWanderState's text; InvalidArgument naming the line and
// what is wrong with it ("line 2: saved_unix_s: 'x' is not an integer").
absl::StatusOr<WanderState> ParseWanderState(absl::string_view text);

// Reads `path`: NotFound when there is no such file, InvalidArgument (with
// the path) when it cannot be parsed, the errno's status when unreadable.
absl::StatusOr<WanderState> ReadWanderState(const std::string& path);

// Writes `path` through path + ".tmp" and a rename.
absl::Status WriteWanderState(const std::string& path,
                              const WanderState& state);

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_WANDER_STATE_H_
