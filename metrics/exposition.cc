// metrics/exposition.cc: NodeStatus into the Prometheus text format: one
// family at a time, HELP and TYPE first, a sample per node.
#include "metrics/exposition.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace clocksync::metrics {
namespace {

// State SYNCED or RECOVERING: a valid estimate fed by recent samples (the
// same test as clocksyncctl's IsSynchronized; ctl_format_test holds them
// equal).
bool Synchronized(const NodeStatus& status) {
  return status.state() == SYNC_STATE_SYNCED ||
         status.state() == SYNC_STATE_RECOVERING;
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

// A label value as the exposition format wants it: \\, \" and \n escaped.
std::string LabelValue(absl::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

// The parent's node id when the node knows its ancestors, else its probe
// address ("" for the master).
std::string ParentName(const NodeStatus& node) {
  if (node.ancestors_size() > 0) {
    return node.ancestors(node.ancestors_size() - 1).node_id();
  }
  return node.parent();
}

absl::string_view StateLabel(SyncState state) {
  switch (state) {
    case SYNC_STATE_UNSYNCED: return "unsynced";
    case SYNC_STATE_SYNCED: return "synced";
    case SYNC_STATE_RECOVERING: return "recovering";
    case SYNC_STATE_HOLDOVER: return "holdover";
    default: return "unspecified";
  }
}

// One metric family: HELP and TYPE once, then a sample per node (and per
// extra label value).
class Family {
 public:
  Family(std::string* out, absl::string_view name, absl::string_view type,
         absl::string_view help)
      : out_(out), name_(name) {
    absl::StrAppend(out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ",
                    type, "\n");
  }
  // `labels`: further labels after node="...", already formatted
  // (`key="value",...`), or empty.
  void Sample(const NodeStatus& node, double value,
              absl::string_view labels = "") {
    SampleText(node, absl::StrFormat("%.17g", value), labels);
  }
  // A duration or offset kept in integer ns, in seconds (Prometheus' base
  // unit), written exactly: 12.3456789 rather than 12.345678900000001.
  void SampleNsAsSeconds(const NodeStatus& node, int64_t ns,
                         absl::string_view labels = "") {
    SampleText(node, NsAsSeconds(ns), labels);
  }

  static std::string NsAsSeconds(int64_t ns) {
    const bool negative = ns < 0;
    // Magnitude without overflow at INT64_MIN.
    const uint64_t magnitude =
        negative ? uint64_t{0} - static_cast<uint64_t>(ns)
                 : static_cast<uint64_t>(ns);
    std::string text = absl::StrFormat("%s%d.%09d", negative ? "-" : "",
                                       magnitude / 1'000'000'000,
                                       magnitude % 1'000'000'000);
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
    return text;
  }

 private:
  void SampleText(const NodeStatus& node, absl::string_view value,
                  absl::string_view labels) {
    absl::StrAppend(out_, name_, "{node=\"", LabelValue(node.node_id()), "\"",
                    labels.empty() ? "" : ",", labels, "} ", value, "\n");
  }

  std::string* out_;
  std::string name_;
};

}  // namespace

std::string FormatMetrics(const Topology& topology) {
  // Each node once (a series may appear only once), the first answer kept.
  std::vector<const TopologyNode*> nodes;
  std::vector<const NodeStatus*> up;
  absl::flat_hash_set<std::string> seen;
  for (const TopologyNode& node : topology.nodes()) {
    if (!seen.insert(node.status().node_id()).second) continue;
    nodes.push_back(&node);
    if (!node.unreachable()) up.push_back(&node.status());
  }
  std::string out;
  auto each = [&](absl::string_view name, absl::string_view type,
                  absl::string_view help, auto value) {
    Family family(&out, name, type, help);
    for (const NodeStatus* node : up) family.Sample(*node, value(*node));
  };
  // A quantity the status carries in ns, published in seconds.
  auto each_seconds = [&](absl::string_view name, absl::string_view help,
                          auto ns) {
    Family family(&out, name, "gauge", help);
    for (const NodeStatus* node : up) {
      family.SampleNsAsSeconds(*node, ns(*node));
    }
  };
  {
    Family family(&out, "clocksync_up", "gauge",
                  "1 if the node answered, 0 if its parent could not reach it.");
    for (const TopologyNode* node : nodes) {
      family.Sample(node->status(), node->unreachable() ? 0 : 1);
    }
  }
  each("clocksync_synchronized", "gauge",
       "1 while the node has a valid estimate fed by recent samples.",
       [](const NodeStatus& n) { return Synchronized(n) ? 1.0 : 0.0; });
  each("clocksync_holdover", "gauge",
       "1 while the node holds over (no answers from its parent).",
       [](const NodeStatus& n) { return n.holdover() ? 1.0 : 0.0; });
  {
    Family family(&out, "clocksync_state", "gauge",
                  "1 for the node's synchronization state, 0 for the others.");
    for (const NodeStatus* node : up) {
      for (SyncState state : {SYNC_STATE_UNSYNCED, SYNC_STATE_SYNCED,
                              SYNC_STATE_RECOVERING, SYNC_STATE_HOLDOVER}) {
        family.Sample(*node, node->state() == state ? 1 : 0,
                      absl::StrCat("state=\"", StateLabel(state), "\""));
      }
    }
  }
  each("clocksync_depth", "gauge", "Levels below the master (master: 0).",
       [](const NodeStatus& n) { return static_cast<double>(n.depth()); });
  each_seconds(
      "clocksync_error_bound_seconds",
      "Half-width of [earliest, latest] of global time, parent's included.",
      [](const NodeStatus& n) { return n.error_bound_ns(); });
  each_seconds("clocksync_offset_to_parent_seconds",
               "Global minus local time at the last estimate.",
               [](const NodeStatus& n) { return n.offset_to_parent_ns(); });
  each("clocksync_drift_ratio", "gauge",
       "Rate of the local clock against global time (1e-9 is 1 ppb), "
       "positive when slow.",
       [](const NodeStatus& n) { return n.drift_ppb() * 1e-9; });
  each_seconds("clocksync_min_round_trip_seconds",
               "Shortest probe round trip in the window (0: no samples).",
               [](const NodeStatus& n) { return n.min_round_trip_ns(); });
  each("clocksync_samples_in_window", "gauge",
       "Samples in the estimator's window.", [](const NodeStatus& n) {
         return static_cast<double>(n.samples_in_window());
       });
  {
    Family family(&out, "clocksync_hull_vertices", "gauge",
                  "Vertices of the request (lower) and response (upper) hull.");
    for (const NodeStatus* node : up) {
      family.Sample(*node, static_cast<double>(node->lower_hull_size()),
                    "hull=\"lower\"");
      family.Sample(*node, static_cast<double>(node->upper_hull_size()),
                    "hull=\"upper\"");
    }
  }
  {
    Family family(&out, "clocksync_probes_total", "counter",
                  "Probes to the parent since start, by result.");
    for (const NodeStatus* node : up) {
      family.Sample(*node, static_cast<double>(node->probes_sent()),
                    "result=\"sent\"");
      family.Sample(*node, static_cast<double>(node->probes_answered()),
                    "result=\"answered\"");
      family.Sample(*node, static_cast<double>(node->probes_lost()),
                    "result=\"lost\"");
      family.Sample(*node, static_cast<double>(node->probes_rejected()),
                    "result=\"rejected\"");
    }
  }
  each("clocksync_inconsistencies_total", "counter",
       "Samples that contradicted every line (a clock step or acceleration).",
       [](const NodeStatus& n) {
         return static_cast<double>(n.inconsistencies());
       });
  each("clocksync_children", "gauge", "Nodes synchronizing to this one.",
       [](const NodeStatus& n) {
         return static_cast<double>(n.children_count());
       });
  each("clocksync_joins_total", "counter",
       "Attachments to a parent since start, the first included.",
       [](const NodeStatus& n) { return static_cast<double>(n.joins()); });
  each("clocksync_parent_losses_total", "counter",
       "Parents lost since start (silence, failed heartbeats, disowned).",
       [](const NodeStatus& n) { return static_cast<double>(n.parent_losses()); });
  // Standby masters (docs/MEMBERSHIP.md, "Terms, takeover and handover").
  each("clocksync_term", "gauge",
       "Term of the node's master (its own when master); 0 before any.",
       [](const NodeStatus& n) { return static_cast<double>(n.term()); });
  each("clocksync_has_master", "gauge",
       "1 while the node is master or holds a lease from one.",
       [](const NodeStatus& n) { return n.has_master() ? 1.0 : 0.0; });
  each("clocksync_takeovers_total", "counter",
       "Times this node became master (takeover or handover) since start.",
       [](const NodeStatus& n) { return static_cast<double>(n.takeovers()); });
  {
    Family family(&out, "clocksync_masterless_seconds_total", "counter",
                  "Time this node has spent without a master since start.");
    for (const NodeStatus* node : up) {
      family.SampleNsAsSeconds(*node, node->masterless_ns());
    }
  }
  each("clocksync_mapping_steps_total", "counter",
       "Steps of the published mapping since start (the first "
       "synchronization included); global time is slewed otherwise.",
       [](const NodeStatus& n) { return static_cast<double>(n.mapping_steps()); });
  {
    Family family(&out, "clocksync_probe_drops_total", "counter",
                  "Probe datagrams dropped since start, by socket (the "
                  "node's probe port, or its socket to the parent) and "
                  "reason.");
    for (const NodeStatus* node : up) {
      for (const auto* drops : {&node->dropped_on_probe_port(), &node->dropped_from_parent()}) {
        const bool port = drops == &node->dropped_on_probe_port();
        // Sorted: the map's order is unspecified, the output's is not.
        std::vector<std::pair<std::string, uint64_t>> sorted(drops->begin(), drops->end());
        std::sort(sorted.begin(), sorted.end());
        for (const auto& [reason, count] : sorted) {
          family.Sample(*node, static_cast<double>(count),
                        absl::StrCat("socket=\"", port ? "probe_port" : "to_parent",
                                     "\",reason=\"", LabelValue(reason), "\""));
        }
      }
    }
  }
  {
    Family family(&out, "clocksync_last_answer_age_seconds", "gauge",
                  "Time since the parent last answered a probe.");
    for (const NodeStatus* node : up) {
      if (node->has_last_answer_age_ns()) {
        family.SampleNsAsSeconds(*node, node->last_answer_age_ns());
      }
    }
  }
  each_seconds("clocksync_uptime_seconds", "Time since the daemon started.",
               [](const NodeStatus& n) { return n.uptime_ns(); });
  {
    Family family(&out, "clocksync_info", "gauge",
                  "Always 1; the node's role, parent and version as labels.");
    for (const NodeStatus* node : up) {
      family.Sample(*node, 1,
                    absl::StrCat("role=\"", RoleText(node->role()),
                                 "\",parent=\"", LabelValue(ParentName(*node)),
                                 "\",version=\"", LabelValue(node->version()),
                                 "\""));
    }
  }
  return out;
}

std::string FormatNodeMetrics(const NodeStatus& status) {
  Topology topology;
  *topology.add_nodes()->mutable_status() = status;
  return FormatMetrics(topology);
}

}  // namespace clocksync::metrics
