// clocksyncd/config_schema.h: clocksyncd's configuration schema
// (proto/config.proto) as read at run time from the field options the
// generated code keeps (keys, defaults, kinds, ranges, documentation), and
// the texts generated from it: --help, docs/CONFIG.md and the example file
// deploy/clocksyncd.conf. Nothing here reads a file or the command line
// (clocksyncd/config.h does).
//
// Thread safety: functions only; all are safe from any thread.

#ifndef CLOCKSYNC_CLOCKSYNCD_CONFIG_SCHEMA_H_
#define CLOCKSYNC_CLOCKSYNCD_CONFIG_SCHEMA_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "proto/config.pb.h"

namespace clocksync {

using ConfigKey = google::protobuf::FieldDescriptor;

// Every key (= flag), in the schema's order.
std::vector<const ConfigKey*> ConfigKeys();
// The key of that name, or nullptr.
const ConfigKey* FindConfigKey(absl::string_view name);

// (kind) = KIND_DURATION: a string in absl::ParseDuration syntax.
bool IsDurationKey(const ConfigKey* key);

// The key's value as a flag spells it: 16, 1.5, true, 100ms, a:1,b:2.
std::string FlagText(const config::DaemonConfig& config, const ConfigKey* key);
// The same for error messages: strings quoted ("100ms"), numbers bare.
std::string QuotedFlagText(const config::DaemonConfig& config,
                           const ConfigKey* key);

// The default for people: the literal in flag syntax, else (default_text),
// else "none" (an empty string or list).
std::string DefaultDescription(const ConfigKey* key);

// A parsed (range) option, in the key's unit (nanoseconds for durations).
struct ValueRange {
  std::optional<double> min;  // Absent: unbounded.
  std::optional<double> max;
  bool min_inclusive = true;
  bool max_inclusive = true;
  std::string min_text;       // As written in the schema ("1ms").
  std::string max_text;
};
// The key's (range), nullopt without one; an error when the option is
// malformed (a schema bug: config_test parses every range).
absl::StatusOr<std::optional<ValueRange>> RangeOf(const ConfigKey* key);
// Whether a value (in the key's unit) lies in the range.
bool InRange(const ValueRange& range, double value);
// "must be between 1ms and 60s", "must be > 0", "must be >= 1", ...
std::string RangeRequirement(const ValueRange& range);

// `clocksyncd --help`: the usage message, then every flag with its value
// syntax, default, range and documentation, by section.
std::string ConfigHelpText(absl::string_view usage);
// docs/CONFIG.md.
std::string ConfigMarkdown();
// deploy/clocksyncd.conf: every key with its documentation, and the key
// with its default, commented out ("#key: value").
std::string ExampleConfigFile();

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_CONFIG_SCHEMA_H_
