// tracer/local_clock.h: the clock the tracer stamps events with: the host's
// CLOCK_MONOTONIC_RAW, or (test feature) the modeled clock of the node's
// clocksyncd, read from its `<shm>.model` file (shm/model_file.h); and the
// ground truth a test run records (the master's raw->global offset).
#ifndef CLOCKSYNC_TRACER_LOCAL_CLOCK_H_
#define CLOCKSYNC_TRACER_LOCAL_CLOCK_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "hull/sim/clock_model.h"
#include "trace/trace.h"
#include "tracer/tracer.h"

namespace clocksync {
namespace tracer {

// A node's modeled local clock, as its clocksyncd describes it.
struct ClockModel {
  int64_t origin_raw_ns = 0;  // raw time of the model's origin
  std::string spec;           // hull clock model spec
  hull::ClockModelParams params;
};

// The model the options ask for: the file clock_model_file names, else
// `<shm_path>.model` if it exists; none for "none" or no file. Errors name
// the file (and the line, or the bad spec).
absl::StatusOr<std::optional<ClockModel>> LoadClockModel(
    const TracerOptions& options);

// The local clock of one user (a thread, the sync runner): raw, or the
// model evaluated on a private ModeledClock (which is not thread-safe).
class LocalClock {
 public:
  LocalClock() = default;
  explicit LocalClock(const std::optional<ClockModel>& model) {
    if (model) {
      origin_raw_ns_ = model->origin_raw_ns;
      model_.emplace(model->params);
    }
  }
  bool has_model() const { return model_.has_value(); }
  // Local ns at raw time raw_ns.
  int64_t At(int64_t raw_ns) {
    if (!model_) return raw_ns;
    // The model is defined for true time >= 0 (raw after the daemon's start).
    const int64_t since_origin_ns =
        std::max<int64_t>(raw_ns - origin_raw_ns_, 0);
    return origin_raw_ns_ + model_->LocalAt(since_origin_ns);
  }

 private:
  int64_t origin_raw_ns_ = 0;
  std::optional<hull::ModeledClock> model_;
};

// The ground truth for options.truth_master_shm (none when empty, or, with
// a warning, when the master's segment cannot be read).
std::optional<trace::GroundTruth> ReadGroundTruth(
    const TracerOptions& options, const std::optional<ClockModel>& model);

}  // namespace tracer
}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_LOCAL_CLOCK_H_
