// clocksyncd/config_fuzzer.cc: hostile configuration files and flags. The
// input is a config file's text, parsed (ParseConfigText) and validated
// (ValidateConfig) as the daemon does at start-up; its lines are also
// given as flags (ParseCommandLine). Every error must be a clear status,
// never a crash.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "clocksyncd/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  clocksync::config::DaemonConfig config;
  clocksync::ConfigOrigins origins;
  if (clocksync::ParseConfigText(text, "fuzz.conf", &config, &origins).ok()) {
    (void)clocksync::ValidateConfig(config, origins);
  }
  std::vector<std::string> args;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (args.size() >= 64) break;
    args.emplace_back(line);
  }
  const absl::StatusOr<clocksync::CommandLine> line = clocksync::ParseCommandLine(args);
  if (line.ok() && line->action == clocksync::CommandLine::Action::kRun) {
    (void)clocksync::ValidateConfig(line->config, line->origins);
  }
  return 0;
}
