// shm/model_file.h: the `<shm_path>.model` side file, the contract between a
// clocksyncd that runs a modeled local clock (test feature --clock_model)
// and the tracers on its node, which stamp their events on the same model.
//
// The file is one line of text:
//   origin_raw_ns=<int64> spec=<clock model spec>\n
// origin_raw_ns is the host CLOCK_MONOTONIC_RAW reading (ns) at which the
// model's true time is 0 (the daemon's start); spec is a hull clock model
// spec (hull/sim/clock_model.h: ParseClockModel), which holds no
// whitespace. Both fields are required, each once, in any order; nothing
// else may appear. The daemon writes it (atomically: a temporary file
// renamed into place) after creating its segment and removes it when it
// stops; readers parse it with ReadModelFile. This file checks the syntax
// only: the reader parses the spec itself.
//
// Example:
//   shm::ModelFile model{start_raw_ns, "offset=1ms,frequency_ppm=20"};
//   RETURN_IF_ERROR(shm::WriteModelFile(shm::ModelFilePath(shm_path), model));
//   absl::StatusOr<shm::ModelFile> read = shm::ReadModelFile(path);
#ifndef CLOCKSYNC_SHM_MODEL_FILE_H_
#define CLOCKSYNC_SHM_MODEL_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace clocksync {
namespace shm {

// The content of a model file.
struct ModelFile {
  // Host CLOCK_MONOTONIC_RAW at the model's origin (true time 0), ns.
  int64_t origin_raw_ns = 0;
  // The clock model spec (no whitespace).
  std::string spec;
};

// Where the daemon publishing at `shm_path` leaves its model file.
std::string ModelFilePath(const std::string& shm_path);

// The file's text for `model` (one line with its newline).
std::string FormatModelFile(const ModelFile& model);

// Parses a model file's text. `path` only names the file in errors, which
// are InvalidArgument as "<path>:<line>: <what>, got '<text>'".
absl::StatusOr<ModelFile> ParseModelFile(absl::string_view text,
                                         const std::string& path);

// Reads and parses the file at `path`: NotFound when it cannot be read,
// else as ParseModelFile.
absl::StatusOr<ModelFile> ReadModelFile(const std::string& path);

// Writes `model` to `path` atomically (a temporary file in the same
// directory, renamed over `path`). InvalidArgument when the spec is empty
// or holds whitespace (it could not be read back); Internal naming the
// path when the file cannot be written.
absl::Status WriteModelFile(const std::string& path, const ModelFile& model);

}  // namespace shm
}  // namespace clocksync

#endif  // CLOCKSYNC_SHM_MODEL_FILE_H_
