// tools/cluster_monitor/cluster_monitor.cc
//
// cluster_monitor — the local cluster demo's live view. Every daemon on this
// host publishes its raw→global mapping in shared memory and all of them read
// the same CLOCK_MONOTONIC_RAW, so a node's true error is its global time
// minus the master's global time at the same raw instant. Once a second the
// monitor reads every segment at one raw instant and prints node, depth,
// true error, bound, drift and samples; at the end (--duration_s or Ctrl-C)
// a summary counted after --warmup_s, as text or --json. Depth and parent
// come from each daemon's status file when it has them (self-arranged trees
// change), and the table lists the nodes in tree order, indented by depth.
// The master given by --master is the truth throughout: after it dies (its
// segment stays behind with its last mapping) a node that took over is
// listed as a root, marked with its term, and still measured against it.

#include <algorithm>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "client/clock.h"

ABSL_FLAG(std::string, master, "", "Shared-memory path of the master.");
ABSL_FLAG(std::vector<std::string>, nodes, {},
          "Comma-separated ID:DEPTH:SHM_PATH[:STATUS_FILE] of every other node.");
ABSL_FLAG(double, interval_s, 1.0, "Seconds between two checks.");
ABSL_FLAG(double, duration_s, 0, "Stop after this long (0: until Ctrl-C).");
ABSL_FLAG(double, warmup_s, 10, "Checks before this are not counted.");
ABSL_FLAG(bool, json, false, "Print the summary as JSON, no live table.");
ABSL_FLAG(bool, quiet, false, "No live table.");

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

struct Node {
  std::string id;
  int depth = 0;
  std::string parent;  // From the status file; empty if unknown.
  std::string role;    // "master" or "node", from the status file.
  std::string term;
  std::string shm_path;
  std::string status_path;
  std::unique_ptr<clocksync::Clock> clock;
  // Summary after the warm-up.
  uint64_t checks = 0;
  double sum_sq = 0;
  int64_t max_abs = 0;
  double sum_bound = 0;  // Of the bound half-widths, for their mean.
  std::vector<int64_t> bounds;  // Every counted half-width, for the median.
  uint64_t violations = 0;
  uint64_t unsynced = 0;
};

// "key=value key=value" from the daemon's status file; "" when absent.
std::string StatusField(const std::string& path, const std::string& key) {
  if (path.empty()) return "";
  std::ifstream in(path);
  std::string token;
  while (in >> token) {
    if (token.rfind(key + "=", 0) == 0) return token.substr(key.size() + 1);
  }
  return "";
}

// Indices of `nodes` in depth-first tree order (by the parents their status
// files name; the master's children first, orphans and unknowns last).
std::vector<size_t> TreeOrder(const std::vector<Node>& nodes) {
  std::vector<size_t> order;
  std::vector<bool> placed(nodes.size(), false);
  std::function<void(const std::string&)> visit = [&](const std::string& parent) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!placed[i] && nodes[i].parent == parent) {
        placed[i] = true;
        order.push_back(i);
        visit(nodes[i].id);
      }
    }
  };
  visit("master");
  // Nodes that took over: roots of their own ("-" is a master's parent).
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!placed[i] && nodes[i].parent == "-") {
      placed[i] = true;
      order.push_back(i);
      visit(nodes[i].id);
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!placed[i]) {
      placed[i] = true;
      order.push_back(i);
      visit(nodes[i].id);
    }
  }
  return order;
}

bool OpenClock(Node* node) {
  if (node->clock) return true;
  auto clock = clocksync::Clock::Open(node->shm_path);
  if (!clock.ok()) return false;
  node->clock = std::make_unique<clocksync::Clock>(std::move(*clock));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Live accuracy of a local tree of clocksyncd daemons.\n"
      "  cluster_monitor --master=/run/x/m.shm --nodes=n1:1:/run/x/n1.shm:"
      "/run/x/n1.status,... [--duration_s=60] [--json]");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_master).empty()) {
    std::fprintf(stderr, "cluster_monitor: --master is required\n");
    return 2;
  }
  Node master;
  master.id = "master";
  master.shm_path = absl::GetFlag(FLAGS_master);
  std::vector<Node> nodes;
  for (const std::string& spec : absl::GetFlag(FLAGS_nodes)) {
    std::vector<std::string> parts = absl::StrSplit(spec, ':');
    if (parts.size() < 3 || parts.size() > 4) {
      std::fprintf(stderr, "cluster_monitor: --nodes entry '%s': expected "
                   "ID:DEPTH:SHM_PATH[:STATUS_FILE]\n", spec.c_str());
      return 2;
    }
    Node n;
    n.id = parts[0];
    n.depth = std::atoi(parts[1].c_str());
    n.shm_path = parts[2];
    if (parts.size() == 4) n.status_path = parts[3];
    nodes.push_back(std::move(n));
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  const bool table = !absl::GetFlag(FLAGS_json) && !absl::GetFlag(FLAGS_quiet);
  const auto interval = std::chrono::duration<double>(absl::GetFlag(FLAGS_interval_s));
  const double duration_s = absl::GetFlag(FLAGS_duration_s);
  const double warmup_s = absl::GetFlag(FLAGS_warmup_s);
  const auto start = std::chrono::steady_clock::now();
  for (int tick = 0; !g_stop; ++tick) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (duration_s > 0 && elapsed >= duration_s) break;
    std::this_thread::sleep_for(interval);
    if (!OpenClock(&master)) {
      if (table) std::printf("t=%5.0fs  waiting for the master's segment %s\n",
                             elapsed, master.shm_path.c_str());
      continue;
    }
    const int64_t raw = clocksync::Clock::RawNowNs();
    const clocksync::TimeReading m = master.clock->At(raw);
    if (table) {
      std::printf("\nt=%5.0fs %-16s %6s %5s %12s %12s %12s %9s %s\n", elapsed,
                  "node (tree)", "parent", "depth", "error_ns", "bound_ns",
                  "drift_ppb", "samples", "state");
    }
    for (Node& n : nodes) {
      const std::string depth = StatusField(n.status_path, "depth");
      if (!depth.empty()) n.depth = std::atoi(depth.c_str());
      n.parent = StatusField(n.status_path, "parent");
      n.role = StatusField(n.status_path, "role");
      n.term = StatusField(n.status_path, "term");
    }
    for (size_t index : TreeOrder(nodes)) {
      Node& n = nodes[index];
      const std::string label = std::string(2 * std::max(0, n.depth - 1), ' ') + n.id;
      if (!OpenClock(&n)) {
        if (table) std::printf("         %-16s %6s %5d   (no segment yet)\n", label.c_str(), n.parent.c_str(), n.depth);
        continue;
      }
      const clocksync::TimeReading r = n.clock->At(raw);
      // The node's drift against global time (its modeled clock's rate
      // error, negated), from its status file.
      const std::string drift = StatusField(n.status_path, "drift_ppb");
      const bool synced = r.error == CLOCKSYNC_OK &&
                          r.state() != CLOCKSYNC_STATE_UNSYNCED &&
                          r.state() != CLOCKSYNC_STATE_UNSPECIFIED;
      const int64_t error = r.global_ns - m.global_ns;
      const int64_t bound = (r.latest_ns - r.earliest_ns) / 2;
      const bool inside = m.global_ns >= r.earliest_ns && m.global_ns <= r.latest_ns;
      if (elapsed >= warmup_s) {
        if (!synced) {
          ++n.unsynced;
        } else {
          ++n.checks;
          n.sum_sq += static_cast<double>(error) * error;
          n.max_abs = std::max<int64_t>(n.max_abs, std::llabs(error));
          n.sum_bound += static_cast<double>(bound);
          n.bounds.push_back(bound);
          if (!inside) ++n.violations;
        }
      }
      if (table) {
        const char* state_names[] = {"?", "unsynced", "synced", "recovering", "holdover"};
        const int s = r.state() <= 4 ? r.state() : 0;
        const std::string role =
            n.role == "master" ? "  MASTER, term " + n.term : std::string();
        std::printf("         %-16s %6s %5d %12lld %12lld %12s %9s %s%s%s\n",
                    label.c_str(), n.parent.c_str(), n.depth, synced ? static_cast<long long>(error) : 0LL,
                    synced ? static_cast<long long>(bound) : 0LL, drift.c_str(),
                    StatusField(n.status_path, "samples").c_str(), state_names[s],
                    role.c_str(), synced && !inside ? "  BOUND VIOLATED" : "");
      }
    }
    std::fflush(stdout);
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("{\"nodes\":[");
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      std::vector<int64_t> bounds = n.bounds;
      std::sort(bounds.begin(), bounds.end());
      const int64_t median_bound = bounds.empty() ? 0 : bounds[bounds.size() / 2];
      std::printf("%s{\"id\":\"%s\",\"depth\":%d,\"parent\":\"%s\",\"rms_error_ns\":%.1f,"
                  "\"max_abs_error_ns\":%lld,\"mean_bound_ns\":%.1f,"
                  "\"median_bound_ns\":%lld,\"bound_violations\":%llu,"
                  "\"checks\":%llu,\"unsynced_checks\":%llu}",
                  i ? "," : "", n.id.c_str(), n.depth, n.parent.c_str(),
                  n.checks ? std::sqrt(n.sum_sq / n.checks) : 0.0,
                  static_cast<long long>(n.max_abs),
                  n.checks ? n.sum_bound / n.checks : 0.0,
                  static_cast<long long>(median_bound),
                  static_cast<unsigned long long>(n.violations),
                  static_cast<unsigned long long>(n.checks),
                  static_cast<unsigned long long>(n.unsynced));
    }
    std::printf("]}\n");
  } else {
    std::printf("\nsummary after %.0f s warm-up:\n%-10s %5s %8s %12s %14s %10s\n",
                warmup_s, "node", "depth", "checks", "rms_error_ns",
                "max_abs_err_ns", "violations");
    for (const Node& n : nodes) {
      std::printf("%-10s %5d %8llu %12.1f %14lld %10llu\n", n.id.c_str(), n.depth,
                  static_cast<unsigned long long>(n.checks),
                  n.checks ? std::sqrt(n.sum_sq / n.checks) : 0.0,
                  static_cast<long long>(n.max_abs),
                  static_cast<unsigned long long>(n.violations));
    }
  }
  return 0;
}
