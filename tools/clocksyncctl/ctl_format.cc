// tools/clocksyncctl/ctl_format.cc: clocksyncctl's text and JSON output, its health
// verdict and exit codes.
#include "tools/clocksyncctl/ctl_format.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"

namespace clocksync::ctl {
namespace {

constexpr int64_t kNsPerS = 1'000'000'000;

// Label column of the chronyc-like text ("Error bound     : ").
std::string Line(absl::string_view label, absl::string_view value) {
  return absl::StrFormat("%-16s: %s\n", label, value);
}

// One line of proto3 JSON, field names as in the .proto, zeros included.
std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  // Printing a generated message cannot fail (no Any with unknown types).
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

// A JSON string literal.
std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// Pads each cell but a row's last to the widest such cell of its column (a
// long last cell, like an error, widens nothing); rows end in '\n'.
std::string AlignColumns(const std::vector<std::vector<std::string>>& rows,
                         absl::string_view indent) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i + 1 < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line(indent);
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size())
        line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

// The short state of watch lines and tree rows.
absl::string_view ShortState(SyncState state) {
  switch (state) {
    case SYNC_STATE_SYNCED:
      return "synced";
    case SYNC_STATE_UNSYNCED:
      return "unsynced";
    case SYNC_STATE_RECOVERING:
      return "recovering";
    case SYNC_STATE_HOLDOVER:
      return "holdover";
    default:
      return "unknown";
  }
}

// The bound as shown: "-" without an estimate (its value means nothing).
std::string BoundText(const NodeStatus& status) {
  if (status.state() == SYNC_STATE_UNSYNCED ||
      status.state() == SYNC_STATE_UNSPECIFIED) {
    return "-";
  }
  return FormatDurationNs(status.error_bound_ns());
}

std::string DriftText(double drift_ppb) {
  return absl::StrFormat("%+.3f ppb", drift_ppb);
}

// What the sign of the drift means (README.md, "Sign convention").
absl::string_view DriftMeaning(double drift_ppb) {
  if (drift_ppb > 0) return " (local clock slow)";
  if (drift_ppb < 0) return " (local clock fast)";
  return "";
}

std::string ParentText(const NodeStatus& status) {
  if (status.role() == ROLE_MASTER) return "none (master)";
  if (status.ancestors_size() > 0) {
    const NodeAddress& parent = status.ancestors(status.ancestors_size() - 1);
    return absl::StrCat(parent.node_id(), " at ",
                        parent.probe_address().empty()
                            ? status.parent()
                            : parent.probe_address());
  }
  return status.parent().empty() ? "none yet" : status.parent();
}

absl::string_view RoleText(Role role) {
  switch (role) {
    case ROLE_MASTER:
      return "master";
    case ROLE_NODE:
      return "node";
    default:
      return "unknown role";
  }
}

}  // namespace

bool IsSynchronized(const NodeStatus& status) {
  return status.state() == SYNC_STATE_SYNCED ||
         status.state() == SYNC_STATE_RECOVERING;
}

Health CheckHealth(const NodeStatus& status, int64_t max_error_ns) {
  if (!IsSynchronized(status)) {
    return {kExitUnhealthy,
            absl::StrCat("not synchronized: ", DescribeState(status.state()))};
  }
  if (status.error_bound_ns() > max_error_ns) {
    return {
        kExitUnhealthy,
        absl::StrCat("error bound ", FormatDurationNs(status.error_bound_ns()),
                     " exceeds --max_error_ns=", max_error_ns, " (",
                     FormatDurationNs(max_error_ns), ")")};
  }
  return {kExitOk, absl::StrCat("synchronized, error bound ",
                                FormatDurationNs(status.error_bound_ns()),
                                " <= ", FormatDurationNs(max_error_ns))};
}

RpcFailure DescribeRpcFailure(const grpc::Status& status,
                              absl::string_view target, absl::string_view rpc) {
  const std::string code = absl::StatusCodeToString(
      static_cast<absl::StatusCode>(status.error_code()));
  const std::string detail = absl::StrCat(code, ": ", status.error_message());
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return {kExitUnreachable, absl::StrCat("cannot reach clocksyncd at ",
                                             target, " (", rpc, "): ", detail)};
    case grpc::StatusCode::INVALID_ARGUMENT:
      return {kExitUsage,
              absl::StrCat(target, " refused ", rpc, " as invalid: ", detail)};
    case grpc::StatusCode::UNIMPLEMENTED:
      return {kExitUnreachable,
              absl::StrCat(target, " does not serve ", rpc, " (", detail,
                           "): not a clocksyncd, or an older one")};
    default:
      return {kExitUnreachable,
              absl::StrCat(target, " failed ", rpc, ": ", detail)};
  }
}

std::string FormatDurationNs(int64_t duration_ns) {
  const char* sign = duration_ns < 0 ? "-" : "";
  // |INT64_MIN| does not fit: take it as a double from there on.
  const double magnitude = std::abs(static_cast<double>(duration_ns));
  if (magnitude < 1e3) return absl::StrCat(sign, magnitude, " ns");
  if (magnitude < 1e6)
    return absl::StrFormat("%s%.3f us", sign, magnitude / 1e3);
  if (magnitude < 1e9)
    return absl::StrFormat("%s%.3f ms", sign, magnitude / 1e6);
  return absl::StrFormat("%s%.3f s", sign, magnitude / 1e9);
}

std::string FormatUptimeNs(int64_t uptime_ns) {
  const int64_t s = std::max<int64_t>(uptime_ns, 0) / kNsPerS;
  const int64_t days = s / 86400, hours = s / 3600 % 24, minutes = s / 60 % 60,
                seconds = s % 60;
  if (days > 0) {
    return absl::StrFormat("%dd %02dh %02dm %02ds", days, hours, minutes,
                           seconds);
  }
  if (hours > 0)
    return absl::StrFormat("%dh %02dm %02ds", hours, minutes, seconds);
  if (minutes > 0) return absl::StrFormat("%dm %02ds", minutes, seconds);
  return absl::StrFormat("%ds", seconds);
}

std::string FormatOffsetNs(int64_t offset_ns) {
  // Integer arithmetic keeps every nanosecond of offsets of years.
  const bool negative = offset_ns < 0;
  const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(offset_ns)
                                      : static_cast<uint64_t>(offset_ns);
  return absl::StrFormat("%c%d.%09d s", negative ? '-' : '+',
                         magnitude / kNsPerS, magnitude % kNsPerS);
}

std::string DescribeState(SyncState state) {
  switch (state) {
    case SYNC_STATE_SYNCED:
      return "synchronized";
    case SYNC_STATE_UNSYNCED:
      return "unsynchronized (no estimate yet)";
    case SYNC_STATE_RECOVERING:
      return "synchronized, recovering (window restarted after an "
             "inconsistency)";
    case SYNC_STATE_HOLDOVER:
      return "holdover (no answers from the parent; the bound grows)";
    default:
      return "unknown state";
  }
}

// "n1 (1), n2 (2)": the candidates with their priorities, best first.
static std::string CandidatesText(const NodeStatus& status) {
  if (status.candidates().empty()) return "none";
  std::vector<std::string> parts;
  for (const MasterCandidate& c : status.candidates()) {
    parts.push_back(absl::StrCat(c.node().node_id(), " (", c.priority(), ")"));
  }
  return absl::StrJoin(parts, ", ");
}

std::string FormatStatusText(const NodeStatus& status, int64_t max_error_ns) {
  const bool master = status.role() == ROLE_MASTER;
  const bool estimated = status.state() != SYNC_STATE_UNSYNCED &&
                         status.state() != SYNC_STATE_UNSPECIFIED;
  std::string bound = "- (no estimate)";
  std::string offset = "-";
  std::string drift = "-";
  if (estimated) {
    const bool within = status.error_bound_ns() <= max_error_ns;
    bound = absl::StrCat(BoundText(status), " (limit ",
                         FormatDurationNs(max_error_ns), ": ",
                         within ? "ok" : "EXCEEDED", ")");
    offset = absl::StrCat(FormatOffsetNs(status.offset_to_parent_ns()),
                          " (global - local)");
    drift = absl::StrCat(DriftText(status.drift_ppb()),
                         DriftMeaning(status.drift_ppb()));
  }
  std::string out = Line("State", DescribeState(status.state()));
  out += Line("Error bound", bound);
  if (master && status.takeovers() > 0) {
    out += Line("Offset", "- (master by takeover: it continues global time "
                          "from its synchronized mapping)");
  } else if (master) {
    out += Line("Offset", "- (master: its clock defines global time)");
  } else {
    out += Line("Offset", offset);
    out += Line("Drift", drift);
  }
  out += Line("Parent", ParentText(status));
  out +=
      Line("Node", absl::StrCat(status.node_id(), ", ", RoleText(status.role()),
                                ", depth ", status.depth()));
  if (status.term() > 0) {
    // Standby masters (docs/MEMBERSHIP.md): whose time, under which term.
    out += Line("Master",
                absl::StrCat(status.master_id().empty() ? "?" : status.master_id(),
                             ", term ", status.term(),
                             status.has_master() ? "" : " (none now: holding over)"));
    out += Line("Candidates", CandidatesText(status));
  }
  if (status.master_priority() > 0 || status.takeovers() > 0 ||
      status.masterless_ns() > 0) {
    out += Line("Standby",
                absl::StrCat(status.master_priority() > 0
                                 ? absl::StrCat("priority ", status.master_priority())
                                 : std::string("not a candidate"),
                             ", ", status.takeovers(),
                             status.takeovers() == 1 ? " takeover" : " takeovers",
                             ", ", FormatDurationNs(status.masterless_ns()),
                             " without a master"));
  }
  if (!master) {
    out += Line("Samples",
                absl::StrCat(status.samples_in_window(),
                             " in window (hulls: ", status.lower_hull_size(),
                             " lower, ", status.upper_hull_size(), " upper)"));
    if (!status.timestamping().empty()) {
      out += Line("Timestamps", status.timestamping());
    }
    out += Line("Min round trip",
                status.samples_in_window() > 0
                    ? FormatDurationNs(status.min_round_trip_ns())
                    : "-");
    out += Line("Probes", absl::StrCat(status.probes_sent(), " sent, ",
                                       status.probes_answered(), " answered, ",
                                       status.probes_lost(), " lost, ",
                                       status.probes_rejected(), " rejected"));
    out += Line("Last answer",
                status.has_last_answer_age_ns()
                    ? absl::StrCat(
                          FormatDurationNs(status.last_answer_age_ns()), " ago")
                    : "never");
    std::string inconsistencies = absl::StrCat(status.inconsistencies());
    if (status.has_last_inconsistency_age_ns()) {
      absl::StrAppend(&inconsistencies, ", last ",
                      FormatDurationNs(status.last_inconsistency_age_ns()),
                      " ago");
      if (!status.last_inconsistency().empty()) {
        absl::StrAppend(&inconsistencies, " (", status.last_inconsistency(),
                        ")");
      }
    }
    out += Line("Inconsistencies", inconsistencies);
    out += Line("Holdover", status.holdover() ? "YES" : "no");
  }
  out += Line("Children", absl::StrCat(status.children_count()));
  out += Line("Uptime", FormatUptimeNs(status.uptime_ns()));
  out += Line("Version", status.version().empty() ? "-" : status.version());
  return out;
}

std::string FormatStatusJson(const NodeStatus& status, int64_t max_error_ns) {
  const Health health = CheckHealth(status, max_error_ns);
  return absl::StrCat(
      "{\"synchronized\":", IsSynchronized(status) ? "true" : "false",
      ",\"healthy\":", health.exit_code == kExitOk ? "true" : "false",
      ",\"reason\":", JsonQuote(health.reason), ",\"max_error_ns\":\"",
      max_error_ns, "\",\"status\":", ToJson(status), "}");
}

std::string FormatWatchLine(const NodeStatus& status, absl::Time received,
                            absl::TimeZone zone) {
  std::string line = absl::StrFormat(
      "%s  %s  %-10s  bound %10s",
      absl::FormatTime("%H:%M:%E3S", received, zone), status.node_id(),
      ShortState(status.state()), BoundText(status));
  if (status.role() != ROLE_MASTER) {
    // Offset and drift mean nothing without an estimate.
    const bool estimated = BoundText(status) != "-";
    absl::StrAppendFormat(
        &line, "  offset %s  drift %s  samples %d  probes %d/%d/%d/%d",
        estimated ? FormatOffsetNs(status.offset_to_parent_ns()) : "-",
        estimated ? DriftText(status.drift_ppb()) : "-",
        status.samples_in_window(), status.probes_sent(),
        status.probes_answered(), status.probes_lost(),
        status.probes_rejected());
  }
  return line;
}

std::string FormatWatchJson(const NodeStatus& status) { return ToJson(status); }

std::string FormatTreeText(const Topology& topology) {
  // Children of each node, in the order the list gives them (depth-first,
  // siblings as their parent lists them).
  absl::flat_hash_map<std::string, std::vector<int>> children_of;
  absl::flat_hash_set<std::string> listed;
  for (const TopologyNode& node : topology.nodes())
    listed.insert(node.status().node_id());
  std::vector<int> roots;
  for (int i = 0; i < topology.nodes_size(); ++i) {
    const TopologyNode& node = topology.nodes(i);
    if (node.parent_id().empty() || !listed.contains(node.parent_id()) ||
        node.parent_id() == node.status().node_id()) {
      roots.push_back(i);
    } else {
      children_of[node.parent_id()].push_back(i);
    }
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> shown(topology.nodes_size(), false);
  // Depth-first, with "|-- " / "`-- " prefixes; each index once even if
  // the list is malformed (a cycle of parent ids).
  auto add = [&](auto&& self, int index, const std::string& prefix,
                 const std::string& branch) -> void {
    if (shown[index]) return;
    shown[index] = true;
    const TopologyNode& node = topology.nodes(index);
    const NodeStatus& status = node.status();
    std::vector<std::string> row = {prefix + branch + status.node_id()};
    const std::string& address = node.ref().grpc_address().empty()
                                     ? status.grpc_address()
                                     : node.ref().grpc_address();
    if (node.unreachable()) {
      row.insert(row.end(), {"UNREACHABLE", node.error()});
    } else {
      row.push_back(std::string(ShortState(status.state())));
      row.push_back(absl::StrCat("bound ", BoundText(status)));
      row.push_back(
          status.role() == ROLE_MASTER
              ? (status.term() > 0 ? absl::StrCat("master, term ", status.term())
                                   : std::string("master"))
              : absl::StrCat("drift ", DriftText(status.drift_ppb())));
      row.push_back(address.empty() ? "-" : address);
      if (node.children_omitted()) row.push_back("(children not shown)");
    }
    rows.push_back(std::move(row));
    const std::string child_prefix = prefix + (branch.empty()     ? ""
                                               : branch == "`-- " ? "    "
                                                                  : "|   ");
    const auto it = children_of.find(status.node_id());
    if (it == children_of.end()) return;
    const std::vector<int>& children = it->second;
    for (size_t k = 0; k < children.size(); ++k) {
      self(self, children[k], child_prefix,
           k + 1 == children.size() ? "`-- " : "|-- ");
    }
  };
  for (const int root : roots) add(add, root, "", "");
  // Nodes whose parent ids form a loop hang below no root: draw them too.
  for (int i = 0; i < topology.nodes_size(); ++i) add(add, i, "", "");
  std::string out = AlignColumns(rows, "");
  if (!topology.nodes().empty() &&
      !topology.nodes(0).status().candidates().empty()) {
    out += absl::StrCat("candidates: ", CandidatesText(topology.nodes(0).status()),
                        "\n");
  }
  if (topology.truncated()) {
    out += "(truncated: --max_nodes or --max_depth reached)\n";
  }
  return out;
}

std::string FormatTreeJson(const Topology& topology) {
  return ToJson(topology);
}

std::string FormatSourcesText(const NodeStatus& status) {
  std::string out =
      absl::StrCat("Node ", status.node_id(), ", ", RoleText(status.role()),
                   ", depth ", status.depth(), ", ", status.children_count(),
                   status.children_count() == 1 ? " child\n" : " children\n");
  if (status.role() == ROLE_MASTER) {
    return out + "No sources: its clock defines global time.\n";
  }
  std::vector<std::vector<std::string>> rows = {
      {"Depth", "Node", "Probe address", "gRPC address"},
      {"=====", "====", "=============", "============"}};
  // Nearest first: the chain is stored master first, so ancestor k sits
  // at depth k.
  for (int k = status.ancestors_size() - 1; k >= 0; --k) {
    const NodeAddress& ancestor = status.ancestors(k);
    rows.push_back(
        {absl::StrCat(k), ancestor.node_id(),
         ancestor.probe_address().empty() ? "-" : ancestor.probe_address(),
         ancestor.grpc_address().empty() ? "-" : ancestor.grpc_address()});
  }
  if (status.ancestors_size() == 0) {
    // A node that knows only its parent's probe address.
    rows.push_back({status.depth() > 0 ? absl::StrCat(status.depth() - 1) : "?",
                    "?", status.parent().empty() ? "-" : status.parent(), "-"});
  }
  return out + AlignColumns(rows, "  ");
}

std::string FormatSourcesJson(const NodeStatus& status) {
  std::vector<std::string> ancestors;
  for (const NodeAddress& ancestor : status.ancestors()) {
    ancestors.push_back(ToJson(ancestor));
  }
  return absl::StrCat("{\"node_id\":", JsonQuote(status.node_id()),
                      ",\"depth\":", status.depth(),
                      ",\"parent\":", JsonQuote(status.parent()),
                      ",\"ancestors\":[", absl::StrJoin(ancestors, ","),
                      "],\"children_count\":", status.children_count(), "}");
}

}  // namespace clocksync::ctl
