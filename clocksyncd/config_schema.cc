// clocksyncd/config_schema.cc: the configuration schema read from
// proto/config.proto's field options, and the texts generated from it.

#include "clocksyncd/config_schema.h"

#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"

namespace clocksync {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Reflection;

const google::protobuf::Descriptor* Schema() {
  return config::DaemonConfig::descriptor();
}

// Words of `text` in lines of at most `width` characters (unless a word is
// longer), each line starting with `prefix`.
std::string Wrap(absl::string_view text, size_t width, absl::string_view prefix) {
  std::string out;
  std::string line(prefix);
  bool line_empty = true;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line_empty && line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, line, "\n");
      line = std::string(prefix);
      line_empty = true;
    }
    if (!line_empty) line += ' ';
    absl::StrAppend(&line, word);
    line_empty = false;
  }
  if (!line_empty) absl::StrAppend(&out, line, "\n");
  return out;
}

// The placeholder in --help: --probe_interval=DURATION.
std::string Placeholder(const ConfigKey* key) {
  const std::string& name = key->options().GetExtension(config::value_name);
  if (!name.empty()) return name;
  if (IsDurationKey(key)) return "DURATION";
  switch (key->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return "INT";
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return "NUMBER";
    default:
      return "STRING";
  }
}

// The (range) for people: "1ms to 60s", ">= 10ms", "> 0 and <= 10000";
// empty without one.
std::string RangeText(const ConfigKey* key) {
  const absl::StatusOr<std::optional<ValueRange>> range = RangeOf(key);
  if (!range.ok()) return key->options().GetExtension(config::range);
  if (!*range) return "";
  return std::string(absl::StripPrefix(RangeRequirement(**range), "must be "));
}

// The kind of value in docs/CONFIG.md: "duration", "integer", ...
std::string ValueDescription(const ConfigKey* key) {
  std::string kind;
  if (key->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) {
    kind = "boolean";
  } else if (IsDurationKey(key)) {
    kind = "duration";
  } else if (key->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
    kind = "integer";
  } else if (key->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
    kind = "number";
  } else if (key->is_repeated()) {
    kind = "list of HOST:PORT";
  } else {
    kind = Placeholder(key) == "STRING" ? "string" : Placeholder(key);
  }
  const std::string range = RangeText(key);
  if (!range.empty()) absl::StrAppend(&kind, ", ", range);
  if (key->options().GetExtension(config::required)) {
    absl::StrAppend(&kind, ", not empty");
  }
  return kind;
}

// The default in text-format syntax, for the example file.
std::string TextFormatDefault(const ConfigKey* key) {
  if (key->is_repeated()) return "[]";
  switch (key->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
      return key->default_value_bool() ? "true" : "false";
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(key->default_value_int32());
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return absl::StrCat(key->default_value_double());
    default:
      return absl::StrCat("\"", absl::CEscape(key->default_value_string()), "\"");
  }
}

bool IsLiteralDefault(const ConfigKey* key) {
  return key->options().GetExtension(config::default_text).empty() &&
         DefaultDescription(key) != "none";
}

absl::StatusOr<std::optional<double>> ParseBound(const ConfigKey* key,
                                                 absl::string_view text) {
  if (text.empty()) return std::optional<double>();
  if (IsDurationKey(key)) {
    absl::Duration d;
    if (!absl::ParseDuration(text, &d)) {
      return absl::InternalError(absl::StrCat(key->name(), ": bad bound ", text));
    }
    return std::optional<double>(absl::ToDoubleNanoseconds(d));
  }
  double value = 0;
  if (!absl::SimpleAtod(text, &value)) {
    return absl::InternalError(absl::StrCat(key->name(), ": bad bound ", text));
  }
  return std::optional<double>(value);
}

constexpr char kGenerated[] =
    "Generated from proto/config.proto by "
    "`bazel run //clocksyncd:config_docs -- %s > %s`; edit the schema, not "
    "this file (//clocksyncd:config_docs_test checks that they agree).";

std::string GeneratedNote(absl::string_view mode, absl::string_view path) {
  return absl::StrReplaceAll(kGenerated, {{"%s > %s", absl::StrCat(mode, " > ", path)}});
}

}  // namespace

std::vector<const ConfigKey*> ConfigKeys() {
  std::vector<const ConfigKey*> keys;
  for (int i = 0; i < Schema()->field_count(); ++i) keys.push_back(Schema()->field(i));
  return keys;
}

const ConfigKey* FindConfigKey(absl::string_view name) {
  return Schema()->FindFieldByName(std::string(name));
}

bool IsDurationKey(const ConfigKey* key) {
  return key->options().GetExtension(config::kind) == config::KIND_DURATION;
}

std::string FlagText(const config::DaemonConfig& config, const ConfigKey* key) {
  const Reflection* r = config.GetReflection();
  if (key->is_repeated()) {
    std::vector<std::string> values;
    for (int i = 0; i < r->FieldSize(config, key); ++i) {
      values.push_back(r->GetRepeatedString(config, key, i));
    }
    return absl::StrJoin(values, ",");
  }
  switch (key->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
      return r->GetBool(config, key) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(r->GetInt32(config, key));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return absl::StrCat(r->GetDouble(config, key));
    default:
      return r->GetString(config, key);
  }
}

std::string QuotedFlagText(const config::DaemonConfig& config,
                           const ConfigKey* key) {
  const std::string text = FlagText(config, key);
  if (key->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    return absl::StrCat("\"", absl::CHexEscape(text), "\"");
  }
  return text;
}

std::string DefaultDescription(const ConfigKey* key) {
  const std::string& text = key->options().GetExtension(config::default_text);
  if (!text.empty()) return text;
  if (key->is_repeated()) return "none";
  switch (key->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
      return key->default_value_bool() ? "true" : "false";
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(key->default_value_int32());
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return absl::StrCat(key->default_value_double());
    default:
      return key->default_value_string().empty() ? "none"
                                                 : key->default_value_string();
  }
}

absl::StatusOr<std::optional<ValueRange>> RangeOf(const ConfigKey* key) {
  const absl::string_view text =
      absl::StripAsciiWhitespace(key->options().GetExtension(config::range));
  if (text.empty()) return std::optional<ValueRange>();
  const bool brackets = text.size() >= 3 &&
                        (text.front() == '[' || text.front() == '(') &&
                        (text.back() == ']' || text.back() == ')');
  const std::vector<absl::string_view> bounds =
      brackets ? absl::StrSplit(text.substr(1, text.size() - 2), ',')
               : std::vector<absl::string_view>();
  if (bounds.size() != 2) {
    return absl::InternalError(absl::StrCat(key->name(), ": bad range ", text));
  }
  ValueRange range;
  range.min_inclusive = text.front() == '[';
  range.max_inclusive = text.back() == ']';
  range.min_text = std::string(absl::StripAsciiWhitespace(bounds[0]));
  range.max_text = std::string(absl::StripAsciiWhitespace(bounds[1]));
  absl::StatusOr<std::optional<double>> min = ParseBound(key, range.min_text);
  if (!min.ok()) return min.status();
  absl::StatusOr<std::optional<double>> max = ParseBound(key, range.max_text);
  if (!max.ok()) return max.status();
  range.min = *min;
  range.max = *max;
  return std::optional<ValueRange>(std::move(range));
}

bool InRange(const ValueRange& range, double value) {
  if (std::isnan(value)) return false;
  if (range.min && (range.min_inclusive ? value < *range.min : value <= *range.min)) {
    return false;
  }
  if (range.max && (range.max_inclusive ? value > *range.max : value >= *range.max)) {
    return false;
  }
  return true;
}

std::string RangeRequirement(const ValueRange& range) {
  if (range.min && range.max && range.min_inclusive && range.max_inclusive) {
    return absl::StrCat("must be between ", range.min_text, " and ", range.max_text);
  }
  std::vector<std::string> parts;
  if (range.min) {
    parts.push_back(absl::StrCat(range.min_inclusive ? ">= " : "> ", range.min_text));
  }
  if (range.max) {
    parts.push_back(absl::StrCat(range.max_inclusive ? "<= " : "< ", range.max_text));
  }
  return absl::StrCat("must be ", absl::StrJoin(parts, " and "));
}

std::string ConfigHelpText(absl::string_view usage) {
  std::string out(usage);
  absl::StrAppend(
      &out, "\nFlags (each also a key of the --config file, which they override):\n",
      "  --config=FILE\n",
      Wrap("A configuration file in protobuf text format (key: value, # "
           "comments; deploy/clocksyncd.conf lists every key), read before "
           "the other flags.", 78, "      "),
      "  --help\n      This text (docs/CONFIG.md says the same).\n",
      "  --version\n      The program's name and version.\n");
  for (const ConfigKey* key : ConfigKeys()) {
    const std::string& section = key->options().GetExtension(config::section);
    if (!section.empty()) absl::StrAppend(&out, "\n", section, ":\n");
    std::string line = absl::StrCat("  --", key->name());
    if (key->cpp_type() != FieldDescriptor::CPPTYPE_BOOL) {
      absl::StrAppend(&line, "=", Placeholder(key));
    }
    std::string details = absl::StrCat("(default: ", DefaultDescription(key));
    const std::string range = RangeText(key);
    if (!range.empty()) absl::StrAppend(&details, "; ", range);
    if (key->options().GetExtension(config::required)) {
      absl::StrAppend(&details, "; not empty");
    }
    details += ")";
    if (line.size() + 2 + details.size() <= 78) {
      absl::StrAppend(&out, line, "  ", details, "\n");
    } else {
      absl::StrAppend(&out, line, "\n", Wrap(details, 78, "      "));
    }
    absl::StrAppend(&out, Wrap(key->options().GetExtension(config::doc), 78, "      "));
  }
  return out;
}

std::string ConfigMarkdown() {
  std::string out = absl::StrCat(
      "# clocksyncd configuration\n\n<!-- ",
      GeneratedNote("markdown", "docs/CONFIG.md"), " -->\n\n");
  absl::StrAppend(
      &out,
      Wrap("clocksyncd reads its configuration from the file given by "
           "`--config=FILE`, if any (protobuf text format: `key: value` per "
           "line, `#` comments; `deploy/clocksyncd.conf` lists every key "
           "with its default), then from its command-line flags: every key "
           "is also a flag of the same name, `--key=value`, which overrides "
           "the file. Without either, a key has its default.", 76, ""),
      "\n",
      Wrap("Values: durations in absl::ParseDuration syntax (`100ms`, `1.5s`, "
           "`1h30m`; in the file as strings, `probe_interval: \"100ms\"`); "
           "booleans as `--master`, `--nomaster` or `--master=false` (in the "
           "file `master: true`); lists as `--join=a:1,b:2` (in the file "
           "`join: \"a:1\"` repeated, or `join: [\"a:1\", \"b:2\"]`).", 76, ""),
      "\n",
      Wrap("Everything is validated at start-up, before anything is opened. "
           "An unknown key or flag, a value of the wrong type or out of its "
           "range, or contradicting keys stop clocksyncd with exit status 2 "
           "and a message naming the flag, or the file, line and key: "
           "`clocksyncd: bad flag --probe_interval: must be between 1ms and "
           "60s, got \"0\"`, `clocksyncd: bad config "
           "/etc/clocksync/clocksyncd.conf:12: probe_intervall: unknown "
           "key`. `clocksyncd --help` prints this reference.", 76, ""));
  bool in_table = false;
  for (const ConfigKey* key : ConfigKeys()) {
    const std::string& section = key->options().GetExtension(config::section);
    if (!section.empty() || !in_table) {
      absl::StrAppend(&out, "\n## ", section.empty() ? "Keys" : section, "\n\n",
                      "| key (flag) | value | default | meaning |\n",
                      "|---|---|---|---|\n");
      in_table = true;
    }
    const std::string default_cell =
        IsLiteralDefault(key) ? absl::StrCat("`", DefaultDescription(key), "`")
                              : DefaultDescription(key);
    absl::StrAppend(
        &out, "| `", key->name(), "` | ",
        absl::StrReplaceAll(ValueDescription(key), {{"|", "\\|"}}), " | ",
        default_cell, " | ",
        absl::StrReplaceAll(key->options().GetExtension(config::doc), {{"|", "\\|"}}),
        " |\n");
  }
  return out;
}

std::string ExampleConfigFile() {
  std::string out = absl::StrCat(
      "# deploy/clocksyncd.conf: an example configuration of clocksyncd\n",
      "# (clocksyncd --config=/etc/clocksync/clocksyncd.conf), in protobuf text\n",
      "# format. Every key is listed with its default, commented out (#key:):\n",
      "# uncomment and edit. Flags on the command line (--key=value) override\n",
      "# this file. docs/CONFIG.md describes the keys and the rules.\n",
      Wrap(GeneratedNote("example", "deploy/clocksyncd.conf"), 76, "# "));
  for (const ConfigKey* key : ConfigKeys()) {
    const std::string& section = key->options().GetExtension(config::section);
    if (!section.empty()) absl::StrAppend(&out, "\n# ---- ", section, " ----\n");
    absl::StrAppend(&out, "\n", Wrap(key->options().GetExtension(config::doc), 76, "# "));
    std::vector<std::string> notes;
    if (!key->options().GetExtension(config::default_text).empty()) {
      notes.push_back(absl::StrCat(
          "Default: ", key->options().GetExtension(config::default_text), "."));
    }
    if (IsDurationKey(key)) notes.push_back("A duration (\"100ms\", \"1.5s\").");
    const std::string range = RangeText(key);
    if (!range.empty()) notes.push_back(absl::StrCat("Range: ", range, "."));
    if (!notes.empty()) absl::StrAppend(&out, Wrap(absl::StrJoin(notes, " "), 76, "# "));
    absl::StrAppend(&out, "#", key->name(), ": ", TextFormatDefault(key), "\n");
  }
  return out;
}

}  // namespace clocksync
