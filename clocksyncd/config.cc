// clocksyncd/config.cc: the command line and the configuration file into
// the schema, and the one validation and conversion into DaemonConfig.

#include "clocksyncd/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "clocksyncd/config_schema.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "hull/sim/clock_model.h"
#include "probe/address.h"
#include "probe/auth.h"
#include "probe/delay_injection.h"
#include "proto/limits.h"

namespace clocksync {
namespace {

using google::protobuf::FieldDescriptor;
using ConfigProto = config::DaemonConfig;

absl::Status FlagError(absl::string_view name, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat("bad flag --", name, ": ", reason));
}

std::string Quoted(absl::string_view text) {
  return absl::StrCat("\"", absl::CHexEscape(text), "\"");
}

// Keeps the text-format parser's first error (lines and columns 0-based).
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (seen) return;
    seen = true;
    this->line = line;
    this->message = message;
  }
  bool seen = false;
  int line = -1;
  std::string message;
};

// The key a line of the file sets: its leading identifier, or "".
std::string KeyOnLine(absl::string_view text, int line) {
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (line < 0 || line >= static_cast<int>(lines.size())) return "";
  const absl::string_view rest = absl::StripLeadingAsciiWhitespace(lines[line]);
  size_t n = 0;
  while (n < rest.size() && (absl::ascii_isalnum(rest[n]) || rest[n] == '_')) ++n;
  return std::string(rest.substr(0, n));
}

// "bad config FILE:LINE: key: reason" from the parser's error.
absl::Status FileError(absl::string_view text, absl::string_view file_name,
                       const FirstError& error) {
  std::string key = KeyOnLine(text, error.line);
  std::string reason = error.message;
  // 'Message type "clocksync.config.DaemonConfig" has no field named "x".'
  const std::string unknown = "has no field named \"";
  const size_t at = reason.find(unknown);
  if (at != std::string::npos) {
    const size_t start = at + unknown.size();
    key = reason.substr(start, reason.find('"', start) - start);
    reason = "unknown key (clocksyncd --help lists them)";
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "bad config ", file_name, ":", error.line + 1, ": ",
      key.empty() ? "" : absl::StrCat(key, ": "), reason));
}

absl::Status ReadConfigFile(const std::string& path, ConfigProto* config,
                            ConfigOrigins* origins) {
  std::ifstream in(path);
  if (!in) {
    return FlagError("config", absl::StrCat("cannot read ", path, ": ",
                                            std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return FlagError("config", absl::StrCat("cannot read ", path));
  }
  return ParseConfigText(text.str(), path, config, origins);
}

}  // namespace

absl::Status ParseConfigText(absl::string_view text, absl::string_view file_name,
                             ConfigProto* config, ConfigOrigins* origins) {
  google::protobuf::TextFormat::Parser parser;
  FirstError error;
  parser.RecordErrorsTo(&error);
  google::protobuf::TextFormat::ParseInfoTree locations;
  parser.WriteLocationsTo(&locations);
  if (!parser.ParseFromString(std::string(text), config)) {
    return FileError(text, file_name, error);
  }
  const google::protobuf::Reflection* r = config->GetReflection();
  for (const ConfigKey* key : ConfigKeys()) {
    const bool set = key->is_repeated() ? r->FieldSize(*config, key) > 0
                                        : r->HasField(*config, key);
    if (!set) continue;
    const int line = locations.GetLocation(key, key->is_repeated() ? 0 : -1).line;
    (*origins)[key->name()] = absl::StrCat(file_name, ":", line + 1);
  }
  return absl::OkStatus();
}

absl::Status SetFlag(absl::string_view name, absl::string_view value,
                     ConfigProto* config) {
  const ConfigKey* key = FindConfigKey(name);
  if (key == nullptr) {
    return FlagError(name, "unknown flag (clocksyncd --help lists them)");
  }
  const google::protobuf::Reflection* r = config->GetReflection();
  if (key->is_repeated()) {
    r->ClearField(config, key);
    if (value.empty()) return absl::OkStatus();
    for (absl::string_view item : absl::StrSplit(value, ',')) {
      r->AddString(config, key, std::string(item));
    }
    return absl::OkStatus();
  }
  switch (key->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool b = false;
      if (!absl::SimpleAtob(value, &b)) {
        return FlagError(name, absl::StrCat("not a boolean (true or false), got ",
                                            Quoted(value)));
      }
      r->SetBool(config, key, b);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t i = 0;
      if (!absl::SimpleAtoi(value, &i)) {
        return FlagError(name, absl::StrCat("not an integer, got ", Quoted(value)));
      }
      r->SetInt32(config, key, i);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double d = 0;
      if (!absl::SimpleAtod(value, &d)) {
        return FlagError(name, absl::StrCat("not a number, got ", Quoted(value)));
      }
      r->SetDouble(config, key, d);
      return absl::OkStatus();
    }
    default:
      r->SetString(config, key, std::string(value));
      return absl::OkStatus();
  }
}

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine line;
  std::vector<std::pair<std::string, std::string>> flags;  // Name, value.
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-' || arg == "--") {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad argument ", Quoted(arg),
          ": clocksyncd takes flags only (clocksyncd --help lists them)"));
    }
    absl::string_view body(arg);
    body.remove_prefix(absl::StartsWith(body, "--") ? 2 : 1);
    const size_t equals = body.find('=');
    const bool has_value = equals != absl::string_view::npos;
    const std::string name(body.substr(0, equals));
    std::string value = has_value ? std::string(body.substr(equals + 1)) : "";
    if (name == "help" || name == "helpfull") {
      line.action = CommandLine::Action::kHelp;
      return line;
    }
    if (name == "version") {
      line.action = CommandLine::Action::kVersion;
      return line;
    }
    const ConfigKey* key = FindConfigKey(name);
    const bool takes_value =
        name == "config" ||
        (key != nullptr && key->cpp_type() != FieldDescriptor::CPPTYPE_BOOL);
    if (key == nullptr && name != "config") {
      // --nomaster: a boolean set to false.
      const ConfigKey* negated =
          absl::StartsWith(name, "no") ? FindConfigKey(name.substr(2)) : nullptr;
      if (negated != nullptr && !has_value &&
          negated->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) {
        flags.emplace_back(negated->name(), "false");
        continue;
      }
      return FlagError(name, "unknown flag (clocksyncd --help lists them)");
    }
    if (!has_value) {
      if (!takes_value) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return FlagError(name, "missing value");
      }
    }
    if (name == "config") {
      if (!line.config_file.empty()) return FlagError(name, "given twice");
      if (value.empty()) return FlagError(name, "missing value");
      line.config_file = value;
      continue;
    }
    flags.emplace_back(name, std::move(value));
  }
  if (!line.config_file.empty()) {
    const absl::Status read =
        ReadConfigFile(line.config_file, &line.config, &line.origins);
    if (!read.ok()) return read;
  }
  for (const auto& [name, value] : flags) {
    const absl::Status set = SetFlag(name, value, &line.config);
    if (!set.ok()) return set;
    line.origins.erase(name);
  }
  return line;
}

absl::StatusOr<DaemonConfig> ValidateConfig(const ConfigProto& c,
                                            const ConfigOrigins& origins) {
  // "bad flag --key: reason" or "bad config FILE:LINE: key: reason".
  const auto bad = [&origins](absl::string_view key, absl::string_view reason) {
    const auto it = origins.find(key);
    if (it == origins.end()) return FlagError(key, reason);
    return absl::InvalidArgumentError(
        absl::StrCat("bad config ", it->second, ": ", key, ": ", reason));
  };
  const auto got = [&c](absl::string_view key) {
    return absl::StrCat(", got ", QuotedFlagText(c, FindConfigKey(key)));
  };

  // Each key alone: syntax, then (required) and (range).
  absl::flat_hash_map<std::string, int64_t> ns;  // Durations by key.
  for (const ConfigKey* key : ConfigKeys()) {
    const std::string& name = key->name();
    std::optional<double> value;
    if (IsDurationKey(key)) {
      absl::Duration d;
      if (!absl::ParseDuration(FlagText(c, key), &d)) {
        return bad(name, absl::StrCat("not a duration (e.g. 100ms, 1.5s)", got(name)));
      }
      ns[name] = absl::ToInt64Nanoseconds(d);
      value = absl::ToDoubleNanoseconds(d);
    } else if (key->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
      value = c.GetReflection()->GetDouble(c, key);
      if (!std::isfinite(*value)) {
        return bad(name, absl::StrCat("must be a finite number", got(name)));
      }
    } else if (key->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
      value = c.GetReflection()->GetInt32(c, key);
    }
    if (key->options().GetExtension(config::required) && FlagText(c, key).empty()) {
      return bad(name, "must not be empty");
    }
    const absl::StatusOr<std::optional<ValueRange>> range = RangeOf(key);
    if (!range.ok()) return range.status();
    if (*range && value && !InRange(**range, *value)) {
      return bad(name, absl::StrCat(RangeRequirement(**range), got(name)));
    }
  }

  DaemonConfig d;
  d.master = c.master();
  d.node_id = c.node_id().empty() && d.master ? "master" : c.node_id();
  d.join.assign(c.join().begin(), c.join().end());
  d.parent = c.parent();
  d.parent_grpc = c.parent_grpc();
  d.max_children = c.max_children();
  d.advertise_host = c.advertise_host();
  d.heartbeat_interval_ns = ns["heartbeat_interval"];
  d.lease_ns = ns["lease"];
  d.missed_probes_for_loss = c.missed_probes_for_loss();
  d.leave_grace_ns = ns["leave_grace"];
  d.master_priority = c.master_priority();
  d.takeover_after_ns = ns["takeover_after"];
  d.listen = c.listen();
  d.grpc_listen = c.grpc_listen();
  d.admin_socket = c.admin_socket();
  d.metrics_listen = c.metrics_listen();
  d.shm_path = c.shm_path();
  d.status_file = c.status_file();
  d.wander_state_file = c.wander_state_file();
  d.probe_interval_ns = ns["probe_interval"];
  d.estimator.base.window_ns = ns["window"];
  d.estimator.levels = c.window_levels();
  d.estimator.base.wander_ppb_per_sqrt_s = c.wander_ppb_per_sqrt_s();
  d.estimator.base.max_drift_ppm = c.max_drift_ppm();
  d.estimator.base.max_round_trip_ns = ns["max_round_trip"];
  d.slew.max_slew_ppm = c.max_slew_ppm();
  d.slew.slew_time_ns = ns["slew_time"];
  d.slew.step_threshold_ns = ns["step_threshold"];
  d.holdover_after_ns = ns["holdover_after"];
  d.log_interval_ns = ns["log_interval"];
  d.enable_test_features = c.enable_test_features();
  d.clock_model = c.clock_model();
  d.inject_delay = c.inject_delay();
  d.probe_key_file = c.probe_key_file();
  d.sample_log = c.sample_log();
  if (c.tsc() != "auto" && c.tsc() != "off") {
    return bad("tsc", absl::StrCat("must be auto or off", got("tsc")));
  }
  d.tsc = c.tsc() == "auto";
  d.truth_shm = c.truth_shm();
  if (c.timestamping() == "kernel") {
    d.timestamping = Timestamping::kKernel;
  } else if (c.timestamping() == "hardware") {
    d.timestamping = Timestamping::kHardware;
  } else if (c.timestamping() == "user") {
    d.timestamping = Timestamping::kUser;
  } else {
    return bad("timestamping",
               absl::StrCat("must be kernel, hardware or user",
                            got("timestamping")));
  }

  // The rules between keys.
  if (d.node_id.empty()) return bad("node_id", "must not be empty");
  {
    // Peers refuse ids outside [A-Za-z0-9._-]{1,64}: refuse them here.
    const absl::Status id = ValidateNodeId("node_id", d.node_id);
    if (!id.ok()) return bad("node_id", absl::StripPrefix(id.message(), "node_id: "));
  }
  if (d.master && !d.parent.empty()) {
    return bad("parent", absl::StrCat("a master has no parent", got("parent")));
  }
  if (!d.master && d.parent.empty() == d.join.empty()) {
    return d.parent.empty()
               ? bad("join", "required unless --master or --parent (a static tree)")
               : bad("join", "give --join or --parent, not both");
  }
  if (d.master_priority > 0 && !d.master && d.join.empty()) {
    return bad("master_priority",
               absl::StrCat("a candidate needs join (a pinned node cannot "
                            "move to take over)",
                            got("master_priority")));
  }
  if (!d.parent_grpc.empty() && d.parent.empty()) {
    return bad("parent_grpc",
               "needs --parent (the pinned parent's probe address)");
  }
  // ValidateHostPort says "<field>: <reason>, got "<address>"".
  {
    absl::Status valid = probe::ValidateHostPort("listen", d.listen, /*allow_port_zero=*/true);
    if (!valid.ok()) return bad("listen", absl::StripPrefix(valid.message(), "listen: "));
    if (!d.parent.empty()) {
      valid = probe::ValidateHostPort("parent", d.parent);
      if (!valid.ok()) return bad("parent", absl::StripPrefix(valid.message(), "parent: "));
    }
    if (!d.grpc_listen.empty()) {
      valid = probe::ValidateHostPort("grpc_listen", d.grpc_listen, /*allow_port_zero=*/true);
      if (!valid.ok()) {
        return bad("grpc_listen", absl::StripPrefix(valid.message(), "grpc_listen: "));
      }
    }
    if (!d.metrics_listen.empty()) {
      valid = probe::ValidateHostPort("metrics_listen", d.metrics_listen,
                                      /*allow_port_zero=*/true);
      if (!valid.ok()) {
        return bad("metrics_listen",
                   absl::StripPrefix(valid.message(), "metrics_listen: "));
      }
      // The gRPC port is the one a mistake takes (and its error would
      // then blame grpc_listen): say so here.
      const absl::StatusOr<probe::HostPort> metrics =
          probe::ParseHostPort("", d.metrics_listen, {.allow_port_zero = true});
      const absl::StatusOr<probe::HostPort> grpc =
          probe::ParseHostPort("", d.grpc_listen, {.allow_port_zero = true});
      const auto wildcard = [](const std::string& host) {
        return host == "0.0.0.0" || host == "::";
      };
      if (grpc.ok() && metrics->port != 0 && metrics->port == grpc->port &&
          (metrics->host == grpc->host || wildcard(metrics->host) ||
           wildcard(grpc->host))) {
        return bad("metrics_listen",
                   absl::StrCat("must not share grpc_listen's port (",
                                d.grpc_listen, ")", got("metrics_listen")));
      }
    }
  }
  for (const std::string& seed : d.join) {
    const absl::Status valid = probe::ValidateHostPort("join", seed);
    if (!valid.ok()) return bad("join", absl::StripPrefix(valid.message(), "join: "));
  }
  if (!d.parent_grpc.empty()) {
    const absl::Status valid = probe::ValidateHostPort("parent_grpc", d.parent_grpc);
    if (!valid.ok()) {
      return bad("parent_grpc", absl::StripPrefix(valid.message(), "parent_grpc: "));
    }
  }
  const bool membership = d.master || !d.join.empty() || !d.parent_grpc.empty();
  if (membership && d.grpc_listen.empty()) {
    return bad("grpc_listen",
               "required for tree membership (--join, --parent_grpc, or a "
               "master): other nodes join over gRPC");
  }
  if ((d.estimator.base.window_ns >> (d.estimator.levels - 1)) < 1'000'000'000) {
    return bad("window_levels",
               absl::StrCat("the shortest window (window / 2^(window_levels-1)) "
                            "must be at least 1s, got window ",
                            QuotedFlagText(c, FindConfigKey("window")),
                            " and window_levels ", d.estimator.levels));
  }
  if (membership && d.lease_ns < 4 * d.heartbeat_interval_ns) {
    return bad("lease",
               absl::StrCat("must be at least 4 heartbeat intervals (the lease "
                            "is renewed by heartbeats, one interval later at "
                            "each level), heartbeat_interval is ",
                            FlagText(c, FindConfigKey("heartbeat_interval")),
                            got("lease")));
  }
  if (d.holdover_after_ns < d.probe_interval_ns) {
    return bad("holdover_after",
               absl::StrCat("must be at least probe_interval (",
                            FlagText(c, FindConfigKey("probe_interval")), ")",
                            got("holdover_after")));
  }
  if (!d.enable_test_features) {
    if (!d.clock_model.empty()) {
      return bad("clock_model",
                 "a test feature; refused without --enable_test_features");
    }
    if (!d.inject_delay.empty()) {
      return bad("inject_delay",
                 "a test feature; refused without --enable_test_features");
    }
    if (!d.truth_shm.empty()) {
      return bad("truth_shm",
                 "a test feature; refused without --enable_test_features");
    }
  }
  if (!d.truth_shm.empty() && d.sample_log.empty()) {
    return bad("truth_shm", "only meaningful with sample_log");
  }
  if (!d.truth_shm.empty() && !d.clock_model.empty()) {
    return bad("truth_shm",
               "needs the host's clock: refused with clock_model");
  }
  if (!d.clock_model.empty()) {
    hull::ClockModelParams params;
    const std::string error = hull::ParseClockModel(d.clock_model, &params);
    if (!error.empty()) return bad("clock_model", absl::StrCat(error, got("clock_model")));
  }
  if (!d.probe_key_file.empty()) {
    const absl::StatusOr<probe::ProbeKeys> key = probe::ReadProbeKeyFile(d.probe_key_file);
    if (!key.ok()) return bad("probe_key_file", key.status().message());
  }
  if (!d.inject_delay.empty()) {
    probe::DelayInjection delay;
    std::string error;
    if (!probe::ParseDelayInjection(d.inject_delay, &delay, &error)) {
      return bad("inject_delay", absl::StrCat(error, got("inject_delay")));
    }
  }

  // What the components check themselves ("key: reason"), with their keys
  // named as ours; the checks above should leave nothing for them.
  const auto component = [&bad](absl::string_view invalid) {
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(invalid, absl::MaxSplits(": ", 1));
    absl::string_view key = kv.first;
    if (key == "window_ns") key = "window";
    if (key == "levels") key = "window_levels";
    if (key == "max_round_trip_ns") key = "max_round_trip";
    if (key == "lease_ns") key = "lease";
    return bad(key, kv.second);
  };
  const std::string estimator = hull::ValidateAdaptiveConfig(d.estimator);
  if (!estimator.empty()) return component(estimator);
  const std::string slew = ValidateSlewConfig(d.slew);
  if (!slew.empty()) return component(slew);
  if (membership) {
    MembershipConfig m;
    m.self = {d.node_id, "x:1", "x:1"};
    m.master = d.master;
    m.max_children = d.max_children;
    m.lease_ns = d.lease_ns;
    m.master_priority = d.master_priority;
    m.takeover_after_ns = d.takeover_after_ns;
    for (const std::string& seed : d.join) m.seeds.push_back({"", "", seed});
    if (!d.parent_grpc.empty()) m.pinned_parent = NodeRef{"", d.parent, d.parent_grpc};
    MembershipAgentOptions o;
    o.heartbeat_interval_ns = d.heartbeat_interval_ns;
    o.child_timeout_ns = std::max<int64_t>(3'000'000'000, 10 * d.heartbeat_interval_ns);
    const std::string invalid = ValidateMembershipAgentOptions(o, m);
    if (!invalid.empty()) return component(invalid);
  }
  return d;
}

}  // namespace clocksync
