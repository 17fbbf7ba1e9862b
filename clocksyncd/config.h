// clocksyncd/config.h: clocksyncd's configuration, from the command line to
// the Daemon. The keys, their defaults, ranges and documentation are the
// schema proto/config.proto (one place; clocksyncd/config_schema.h reads
// it). The command line names an optional text-format file (--config=FILE)
// that fills the schema, and flags --<key>=<value> override it; then
// ValidateConfig() checks everything in one place and converts it to the
// Daemon's DaemonConfig (clocksyncd/daemon.h), in the units the code uses.
//
// Every error is an INVALID_ARGUMENT status whose message names where the
// bad value came from, the key, the reason and the value:
//   bad flag --probe_interval: must be between 1ms and 60s, got "0"
//   bad config /etc/clocksync/clocksyncd.conf:12: window: not a duration
//     (e.g. 100ms, 1.5s), got "5 min"
// main() prints it after "clocksyncd: " and exits with status 2.
//
// Example:
//   absl::StatusOr<CommandLine> line = ParseCommandLine({"--master"});
//   absl::StatusOr<DaemonConfig> config =
//       ValidateConfig(line->config, line->origins);
//
// Thread safety: functions only; all are safe from any thread.

#ifndef CLOCKSYNC_CLOCKSYNCD_CONFIG_H_
#define CLOCKSYNC_CLOCKSYNCD_CONFIG_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clocksyncd/daemon.h"
#include "proto/config.pb.h"

namespace clocksync {

// Where the file set a key: key -> "FILE:LINE". Keys set by a flag, or left
// at their default, are absent (their errors name the flag).
using ConfigOrigins = absl::flat_hash_map<std::string, std::string>;

// What the command line asks for.
struct CommandLine {
  enum class Action { kRun, kHelp, kVersion };
  Action action = Action::kRun;
  std::string config_file;       // --config, empty without one.
  config::DaemonConfig config;   // The file, then the flags over it.
  ConfigOrigins origins;         // Keys the file set and no flag overrode.
};

// Reads `args` (argv without the program name): --config=FILE wherever it
// stands, then every other flag in order (a later one wins) over the file.
// Flags: --key=value, --key value, -key=value; booleans also --key and
// --nokey; lists comma-separated (--join=a:1,b:2, which replaces the file's
// list). --help and --version end the reading (no file is read). An
// unknown flag, a value of the wrong type, a stray argument or an
// unreadable file is an error.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

// Parses a configuration file's text (protobuf text format) into `config`
// (cleared first) and records the line of each key in `origins`. Errors
// name the file, line and key: "bad config FILE:LINE: key: reason".
absl::Status ParseConfigText(absl::string_view text, absl::string_view file_name,
                             config::DaemonConfig* config, ConfigOrigins* origins);

// Sets one key from a flag's value text (flag syntax). Errors name the flag.
absl::Status SetFlag(absl::string_view name, absl::string_view value,
                     config::DaemonConfig* config);

// The one validation: every key's syntax (durations) and (range), then the
// rules between keys (one role; test features refused unless enabled;
// specs and the probe key file readable and well formed), and converts.
// A master without node_id is named "master".
absl::StatusOr<DaemonConfig> ValidateConfig(const config::DaemonConfig& config,
                                            const ConfigOrigins& origins = {});

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_CONFIG_H_
