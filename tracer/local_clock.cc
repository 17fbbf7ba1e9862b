// tracer/local_clock.cc: loading the node's clock model and reading the
// ground truth (local_clock.h).

#include "tracer/local_clock.h"

#include <unistd.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/clock.h"
#include "shm/model_file.h"
#include "tracer/warn.h"

namespace clocksync {
namespace tracer {
namespace {

// The master's raw->global offset from its segment (global = raw + offset
// on the master, which runs on the raw clock).
absl::StatusOr<int64_t> ReadMasterOffset(const std::string& path) {
  absl::StatusOr<Clock> master = Clock::Open(path);
  if (!master.ok()) return master.status();
  const int64_t raw_ns = Clock::RawNowNs();
  const TimeReading reading = master->At(raw_ns);
  if (reading.error != CLOCKSYNC_OK && reading.error != CLOCKSYNC_ESTALE) {
    return absl::UnavailableError(absl::StrCat(
        "master segment ", path, ": ", clocksync_strerror(reading.error)));
  }
  return reading.global_ns - raw_ns;
}

}  // namespace

absl::StatusOr<std::optional<ClockModel>> LoadClockModel(
    const TracerOptions& options) {
  std::string path = options.clock_model_file;
  if (path == "none") return std::nullopt;
  if (path.empty()) {
    path = shm::ModelFilePath(options.shm_path);
    if (access(path.c_str(), F_OK) != 0) return std::nullopt;
  }
  absl::StatusOr<shm::ModelFile> file = shm::ReadModelFile(path);
  if (!file.ok()) return file.status();
  ClockModel model;
  model.origin_raw_ns = file->origin_raw_ns;
  model.spec = std::move(file->spec);
  const std::string error = hull::ParseClockModel(model.spec, &model.params);
  if (!error.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": spec: ", error));
  }
  return model;
}

std::optional<trace::GroundTruth> ReadGroundTruth(
    const TracerOptions& options, const std::optional<ClockModel>& model) {
  if (options.truth_master_shm.empty()) return std::nullopt;
  absl::StatusOr<int64_t> offset = ReadMasterOffset(options.truth_master_shm);
  if (!offset.ok()) {
    Warn(absl::StrCat("no ground truth: ", offset.status().ToString()));
    return std::nullopt;
  }
  trace::GroundTruth truth;
  truth.master_offset_ns = *offset;
  if (model) {
    truth.clock_model_spec = model->spec;
    truth.model_origin_raw_ns = model->origin_raw_ns;
  }
  return truth;
}

}  // namespace tracer
}  // namespace clocksync
