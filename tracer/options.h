// tracer/options.h: the tracer's settings: the bounds of TracerOptions
// (tracer.h), their validation, and the one table of the CLOCKSYNC_*
// environment variables that override them (name, default, meaning),
// parsed in one place (ApplyTracerEnvironment) and documented from the
// same table (docs/TRACER.md; //docs:tracer_env_table_test checks the copy
// there).
#ifndef CLOCKSYNC_TRACER_OPTIONS_H_
#define CLOCKSYNC_TRACER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "tracer/tracer.h"

namespace clocksync {
namespace tracer {

inline constexpr int64_t kNsPerMs = 1'000'000;
// Bounds of the numeric options.
inline constexpr int64_t kMinBufferEvents = 16;
inline constexpr int64_t kMaxBufferEvents = int64_t{1} << 26;
inline constexpr int32_t kMaxSyncMessages = 1'000'000;
inline constexpr int64_t kMaxSyncDurationMs = 3'600'000;     // 1 h
inline constexpr int64_t kMaxSyncPeriodMs = 24 * 3'600'000;  // 1 day
inline constexpr int64_t kMaxCollectorTimeoutMs = 3'600'000;  // 1 h

// One CLOCKSYNC_* variable. String variables set their field to the value;
// integer ones accept min..max and set their field from the value.
struct EnvVariable {
  const char* name;
  // The default as the docs show it: a value of the variable that leaves
  // TracerOptions' default unchanged ("" for strings whose default is
  // empty).
  const char* default_value;
  // One line for the docs.
  const char* meaning;
  // Exactly one of the two setters is set.
  void (*set_string)(TracerOptions* options, const char* value);
  void (*set_integer)(TracerOptions* options, int64_t value);
  int64_t min = 0;
  int64_t max = 0;
};

// Every variable the tracer reads, in the order of the docs.
absl::Span<const EnvVariable> EnvVariables();

// The docs' table of EnvVariables() (Markdown, one row per variable, with
// its header), as docs/TRACER.md holds it.
std::string EnvVariablesMarkdownTable();

// Checks options after the environment was applied; InvalidArgument names
// the field ("tracer options: buffer_events 3 outside 16..67108864").
absl::Status ValidateOptions(const TracerOptions& options);

}  // namespace tracer
}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_OPTIONS_H_
