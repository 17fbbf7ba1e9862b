// clocksyncd/config_reload.cc: the reload's diff, merge and plan (see
// config_reload.h).

#include "clocksyncd/config_reload.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "clocksyncd/config.h"
#include "clocksyncd/config_schema.h"

namespace clocksync {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Reflection;

// The value in one spelling per meaning: durations normalized, doubles
// exact; lists and the rest as flags spell them.
std::string CanonicalValue(const config::DaemonConfig& c, const ConfigKey* key) {
  const std::string text = FlagText(c, key);
  if (IsDurationKey(key)) {
    absl::Duration d;
    if (absl::ParseDuration(text, &d)) return absl::FormatDuration(d);
    return text;
  }
  if (!key->is_repeated() && key->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
    return absl::StrFormat("%.17g", c.GetReflection()->GetDouble(c, key));
  }
  return text;
}

// Sets `key` of `to` as it is in `from` (set or left at its default).
void CopyKey(const config::DaemonConfig& from, const ConfigKey* key,
             config::DaemonConfig* to) {
  const Reflection* r = to->GetReflection();
  r->ClearField(to, key);
  if (key->is_repeated()) {
    for (int i = 0; i < r->FieldSize(from, key); ++i) {
      r->AddString(to, key, r->GetRepeatedString(from, key, i));
    }
    return;
  }
  if (!r->HasField(from, key)) return;
  switch (key->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
      r->SetBool(to, key, r->GetBool(from, key));
      break;
    case FieldDescriptor::CPPTYPE_INT32:
      r->SetInt32(to, key, r->GetInt32(from, key));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      r->SetDouble(to, key, r->GetDouble(from, key));
      break;
    default:
      r->SetString(to, key, r->GetString(from, key));
      break;
  }
}

}  // namespace

bool IsLiveKey(absl::string_view key) {
  for (const char* live : kLiveKeys) {
    if (key == live) return true;
  }
  return false;
}

std::vector<ConfigChange> DiffConfig(const config::DaemonConfig& before,
                                     const config::DaemonConfig& after) {
  std::vector<ConfigChange> changes;
  for (const ConfigKey* key : ConfigKeys()) {
    if (CanonicalValue(before, key) == CanonicalValue(after, key)) continue;
    changes.push_back({key->name(), QuotedFlagText(before, key),
                       QuotedFlagText(after, key), IsLiveKey(key->name())});
  }
  return changes;
}

config::DaemonConfig MergeLiveKeys(const config::DaemonConfig& running,
                                   const config::DaemonConfig& next) {
  config::DaemonConfig merged = running;
  for (const char* name : kLiveKeys) {
    const ConfigKey* key = FindConfigKey(name);
    if (key != nullptr) CopyKey(next, key, &merged);
  }
  return merged;
}

absl::StatusOr<ReloadPlan> PlanReload(const std::vector<std::string>& args,
                                      const config::DaemonConfig& running) {
  absl::StatusOr<CommandLine> line = ParseCommandLine(args);
  if (!line.ok()) return line.status();
  if (line->action != CommandLine::Action::kRun) {
    return absl::InvalidArgumentError("the command line asks for no daemon");
  }
  // The new configuration must be valid as a whole, even where it is not
  // applied: it is what the next start will run.
  const absl::StatusOr<DaemonConfig> valid = ValidateConfig(line->config, line->origins);
  if (!valid.ok()) return valid.status();
  ReloadPlan plan;
  plan.changes = DiffConfig(running, line->config);
  plan.config = MergeLiveKeys(running, line->config);
  absl::StatusOr<DaemonConfig> merged = ValidateConfig(plan.config, line->origins);
  if (!merged.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the new values of the keys applied live do not fit the running "
        "values of the others (a restart applies them all): ",
        merged.status().message()));
  }
  plan.daemon_config = *std::move(merged);
  if (!plan.daemon_config.probe_key_file.empty()) {
    absl::StatusOr<probe::ProbeKeys> keys =
        probe::ReadProbeKeyFile(plan.daemon_config.probe_key_file);
    if (!keys.ok()) {
      return absl::Status(keys.status().code(),
                          absl::StrCat("--probe_key_file=",
                                       plan.daemon_config.probe_key_file, ": ",
                                       keys.status().message()));
    }
    plan.probe_keys = *keys;
  }
  return plan;
}

std::vector<std::string> DescribeChanges(const std::vector<ConfigChange>& changes) {
  std::vector<std::string> lines;
  for (const ConfigChange& c : changes) {
    const std::string head = absl::StrCat(c.key, " changed (", c.before, " -> ", c.after, "): ");
    lines.push_back(c.live ? absl::StrCat(head, "applied")
                           : absl::StrCat(head, "needs a restart, keeping ", c.before));
  }
  return lines;
}

}  // namespace clocksync
