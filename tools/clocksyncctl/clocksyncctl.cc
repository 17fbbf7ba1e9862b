// tools/clocksyncctl/clocksyncctl.cc
//
// clocksyncctl — asks a clocksyncd node, over its gRPC service, how well it
// is synchronized: `status` (chronyc-tracking-like), `watch`, `tree` (its
// subtree), `sources` (its ancestors), `wait` (until synchronized within a
// bound). Text by default, --json for scripts; the exit code makes `status`
// and `wait` usable as health checks. Usage: docs/CLOCKSYNCCTL.md.
//
// main() checks the flags (absl's parser would exit 1 on a bad one; usage
// errors are 2 here), makes the channel and runs one command; what is
// printed and the exit codes come from tools/clocksyncctl/ctl_format.h, the
// metrics from metrics/exposition.h (the daemon serves the same).
#include <atomic>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tools/clocksyncctl/ctl_format.h"
#include "metrics/exposition.h"
#include "probe/address.h"
#include "proto/limits.h"
#include "grpcpp/grpcpp.h"
#include "proto/clocksync.grpc.pb.h"

ABSL_FLAG(std::string, target, "127.0.0.1:3191",
          "The node's gRPC address: HOST:PORT or unix:PATH.");
ABSL_FLAG(bool, json, false,
          "Print JSON (proto3 JSON mapping; one object per line) instead of "
          "text.");
ABSL_FLAG(int64_t, max_error_ns, 1'000'000,
          "status, wait: the largest acceptable error bound, in ns.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(2),
          "Deadline of every RPC (tree: of the whole gathering).");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(1),
          "watch: time between updates (50ms..60s); wait: between polls.");
ABSL_FLAG(absl::Duration, wait_timeout, absl::Seconds(60),
          "wait: give up (exit 1) after this long.");
ABSL_FLAG(int, count, 0, "watch: stop after this many updates (0: never).");
ABSL_FLAG(int, max_nodes, 1000,
          "tree, metrics --tree: at most this many nodes (1..100000).");
ABSL_FLAG(int, max_depth, 32,
          "tree, metrics --tree: levels below the target (0..255).");
ABSL_FLAG(bool, tree, false,
          "metrics: every node of the target's subtree, not the target alone.");

namespace clocksync::ctl {
namespace {

constexpr absl::string_view kUsage =
    R"(clocksyncctl: asks a clocksyncd node how well it is synchronized.

usage: clocksyncctl [--target=HOST:PORT|unix:PATH] [flags] COMMAND

commands:
  status   state and error bound first, then offset, drift, parent, depth,
           samples, probes, uptime; exit 1 when not synchronized or the
           bound exceeds --max_error_ns (a health check)
  watch    one status line per update, every --interval, until Ctrl-C (or
           --count updates)
  tree     the subtree below the node, indented; unreachable nodes say why
  sources  the parent and the ancestors up to the master, nearest first
  wait     poll every --interval until synchronized with a bound within
           --max_error_ns (exit 0), or give up after --wait_timeout (exit 1)
  metrics  the node's metrics in the Prometheus text format; with --tree,
           every node of its subtree (unreachable ones: clocksync_up 0)

exit codes: 0 ok; 1 not synchronized or bound too large (status, wait);
            2 usage error; 3 cannot reach the node

flags:
)";

// The flags of --help, in this order.
constexpr absl::string_view kFlagNames[] = {
    "target",       "json",  "max_error_ns", "timeout",   "interval",
    "wait_timeout", "count", "max_nodes",    "max_depth", "tree",
};

std::string UsageText() {
  std::string out(kUsage);
  for (const absl::string_view name : kFlagNames) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    absl::StrAppendFormat(&out, "  --%s (default %s)\n      %s\n", name,
                          flag->DefaultValue(), flag->Help());
  }
  return out;
}

// absl's parser exits with status 1 on an unknown or malformed flag, but
// usage errors exit 2 here: every flag is checked first. Returns the error,
// empty when the command line is fine.
std::string CheckFlags(int argc, char** argv) {
  // Flags absl's parser handles itself.
  static const auto* const kBuiltins = new absl::flat_hash_set<std::string>{
      "helpfull",  "helpshort",  "helppackage",     "helpon",
      "helpmatch", "version",    "only_check_args", "flagfile",
      "fromenv",   "tryfromenv", "undefok"};
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t equals = arg.find('=');
    const std::string name(arg.substr(0, equals));
    if (kBuiltins->contains(name)) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    bool negated = false;
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      flag = absl::FindCommandLineFlag(absl::string_view(name).substr(2));
      negated = flag != nullptr && flag->IsOfType<bool>();
      if (!negated) flag = nullptr;
    }
    if (flag == nullptr) return absl::StrCat("unknown flag --", name);
    std::string value;
    if (flag->IsOfType<bool>()) {
      if (equals == absl::string_view::npos) continue;
      if (negated) return absl::StrCat("flag --", name, " takes no value");
      value = std::string(arg.substr(equals + 1));
    } else if (equals == absl::string_view::npos) {
      if (i + 1 >= argc) return absl::StrCat("flag --", name, " needs a value");
      value = argv[++i];
    } else {
      value = std::string(arg.substr(equals + 1));
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::StrCat("bad flag --", name, ": ", error);
    }
  }
  return "";
}

struct Options {
  std::string target;
  bool json = false;
  int64_t max_error_ns = 0;
  absl::Duration timeout;
  absl::Duration interval;
  absl::Duration wait_timeout;
  int count = 0;
  int max_nodes = 0;
  int max_depth = 0;
  bool tree = false;
};

// Empty when the values are usable by `command`, else "--flag: reason".
std::string ValidateOptions(const Options& o, absl::string_view command) {
  const absl::Status target = probe::ValidateGrpcAddress("--target", o.target);
  if (!target.ok()) return std::string(target.message());
  if (o.max_error_ns < 0) return "--max_error_ns: must be >= 0";
  if (o.timeout <= absl::ZeroDuration()) return "--timeout: must be > 0";
  if (command == "watch" &&
      (o.interval < absl::Milliseconds(kMinWatchIntervalMs) ||
       o.interval > absl::Milliseconds(kMaxWatchIntervalMs))) {
    return absl::StrCat("--interval: must be 50ms..60s for watch, got ",
                        absl::FormatDuration(o.interval));
  }
  if (command == "wait" && o.interval < absl::Milliseconds(10)) {
    return "--interval: must be >= 10ms for wait";
  }
  if (o.wait_timeout < absl::ZeroDuration())
    return "--wait_timeout: must be >= 0";
  if (o.count < 0) return "--count: must be >= 0";
  if (o.max_nodes < 1 || o.max_nodes > static_cast<int>(kMaxTopologyMaxNodes)) {
    return absl::StrCat("--max_nodes: must be 1..", kMaxTopologyMaxNodes);
  }
  if (o.max_depth < 0 || o.max_depth > static_cast<int>(kMaxTopologyMaxDepth)) {
    return absl::StrCat("--max_depth: must be 0..", kMaxTopologyMaxDepth);
  }
  return "";
}

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// Prints the failure on stderr and returns its exit code.
int Fail(const RpcFailure& failure) {
  std::cerr << "clocksyncctl: " << failure.message << "\n";
  return failure.exit_code;
}

// GetStatus with a deadline; false (and *failure) when it failed.
bool FetchStatus(Clocksync::Stub& stub, const Options& o,
                 absl::Duration timeout, NodeStatus* status,
                 RpcFailure* failure) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  const grpc::Status rpc = stub.GetStatus(&context, GetStatusRequest(), status);
  if (rpc.ok()) return true;
  *failure = DescribeRpcFailure(rpc, o.target, "GetStatus");
  return false;
}

int RunStatus(Clocksync::Stub& stub, const Options& o) {
  NodeStatus status;
  RpcFailure failure;
  if (!FetchStatus(stub, o, o.timeout, &status, &failure)) return Fail(failure);
  std::cout << (o.json ? FormatStatusJson(status, o.max_error_ns) + "\n"
                       : FormatStatusText(status, o.max_error_ns));
  return CheckHealth(status, o.max_error_ns).exit_code;
}

int RunSources(Clocksync::Stub& stub, const Options& o) {
  NodeStatus status;
  RpcFailure failure;
  if (!FetchStatus(stub, o, o.timeout, &status, &failure)) return Fail(failure);
  std::cout << (o.json ? FormatSourcesJson(status) + "\n"
                       : FormatSourcesText(status));
  return kExitOk;
}

int RunTree(Clocksync::Stub& stub, const Options& o) {
  GetTopologyRequest request;
  request.set_max_nodes(o.max_nodes);
  request.set_max_depth(o.max_depth);
  grpc::ClientContext context;
  SetDeadline(&context, o.timeout);
  Topology topology;
  const grpc::Status rpc = stub.GetTopology(&context, request, &topology);
  if (!rpc.ok()) return Fail(DescribeRpcFailure(rpc, o.target, "GetTopology"));
  std::cout << (o.json ? FormatTreeJson(topology) + "\n"
                       : FormatTreeText(topology));
  return kExitOk;
}

// The node's metrics (GetStatus), or its subtree's (GetTopology, --tree).
int RunMetrics(Clocksync::Stub& stub, const Options& o) {
  Topology topology;
  if (o.tree) {
    GetTopologyRequest request;
    request.set_max_nodes(o.max_nodes);
    request.set_max_depth(o.max_depth);
    grpc::ClientContext context;
    SetDeadline(&context, o.timeout);
    const grpc::Status rpc = stub.GetTopology(&context, request, &topology);
    if (!rpc.ok()) {
      return Fail(DescribeRpcFailure(rpc, o.target, "GetTopology"));
    }
  } else {
    RpcFailure failure;
    if (!FetchStatus(stub, o, o.timeout,
                     topology.add_nodes()->mutable_status(), &failure)) {
      return Fail(failure);
    }
  }
  std::cout << metrics::FormatMetrics(topology);
  return kExitOk;
}

// Streams until --count updates, Ctrl-C, the server ending the stream, or
// silence longer than an interval plus --timeout (the node hung: exit 3).
int RunWatch(Clocksync::Stub& stub, const Options& o) {
  grpc::ClientContext context;
  WatchStatusRequest request;
  request.set_interval_ms(
      static_cast<uint32_t>(absl::ToInt64Milliseconds(o.interval)));
  std::atomic<int64_t> last_update_ns{absl::GetCurrentTimeNanos()};
  std::atomic<bool> got_first{false};
  std::atomic<bool> stalled{false};
  absl::Notification done;
  std::thread watchdog([&] {
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
      // The first update comes at once; later ones every interval.
      const absl::Duration allowed =
          got_first.load() ? o.interval + o.timeout : o.timeout;
      if (absl::Now() - absl::FromUnixNanos(last_update_ns.load()) > allowed) {
        stalled.store(true);
        context.TryCancel();
        return;
      }
    }
  });
  std::unique_ptr<grpc::ClientReader<NodeStatus>> reader =
      stub.WatchStatus(&context, request);
  NodeStatus status;
  int updates = 0;
  bool counted_out = false;
  while (reader->Read(&status)) {
    last_update_ns.store(absl::GetCurrentTimeNanos());
    got_first.store(true);
    std::cout << (o.json ? FormatWatchJson(status)
                         : FormatWatchLine(status, absl::Now(),
                                           absl::LocalTimeZone()))
              << std::endl;
    if (o.count > 0 && ++updates >= o.count) {
      counted_out = true;
      context.TryCancel();
      break;
    }
  }
  const grpc::Status end = reader->Finish();
  done.Notify();
  watchdog.join();
  if (counted_out) return kExitOk;
  if (stalled.load()) {
    return Fail(
        {kExitUnreachable,
         absl::StrCat("no update from clocksyncd at ", o.target, " for ",
                      absl::FormatDuration(o.interval + o.timeout))});
  }
  return Fail(DescribeRpcFailure(end, o.target, "WatchStatus"));
}

// chronyc waitsync: polls until synchronized within the bound, printing a
// line per try.
int RunWait(Clocksync::Stub& stub, const Options& o) {
  const absl::Time give_up = absl::Now() + o.wait_timeout;
  NodeStatus status;
  bool answered = false;
  RpcFailure failure{kExitUnreachable, "no answer"};
  bool failed = false;
  Health health{kExitUnhealthy, "no answer yet"};
  for (int attempt = 1;; ++attempt) {
    const absl::Duration left =
        std::max(give_up - absl::Now(), absl::Milliseconds(1));
    failed =
        !FetchStatus(stub, o, std::min(o.timeout, left), &status, &failure);
    if (!failed) {
      answered = true;
      health = CheckHealth(status, o.max_error_ns);
      if (!o.json) {
        std::cout << "try " << attempt << ": "
                  << FormatWatchLine(status, absl::Now(), absl::LocalTimeZone())
                  << std::endl;
      }
      if (health.exit_code == kExitOk) break;
    } else if (!o.json) {
      std::cout << "try " << attempt << ": " << failure.message << std::endl;
    }
    if (absl::Now() + o.interval > give_up) break;
    absl::SleepFor(o.interval);
  }
  if (o.json && answered) {
    std::cout << FormatStatusJson(status, o.max_error_ns) << "\n";
  }
  if (failed) {
    return Fail(
        {failure.exit_code, absl::StrCat("gave up after --wait_timeout=",
                                         absl::FormatDuration(o.wait_timeout),
                                         ": ", failure.message)});
  }
  if (health.exit_code == kExitOk) {
    if (!o.json) std::cout << health.reason << "\n";
    return kExitOk;
  }
  std::cerr << "clocksyncctl: gave up after --wait_timeout="
            << absl::FormatDuration(o.wait_timeout) << ": " << health.reason
            << "\n";
  return kExitUnhealthy;
}

int Usage(absl::string_view error) {
  std::cerr << "clocksyncctl: " << error << "\n"
            << "usage: clocksyncctl [--target=HOST:PORT|unix:PATH] [flags] "
               "status|watch|tree|sources|wait|metrics (--help for more)\n";
  return kExitUsage;
}

int Main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help" || arg == "-h" || arg == "help") {
      std::cout << UsageText();
      return kExitOk;
    }
  }
  const std::string flag_error = CheckFlags(argc, argv);
  if (!flag_error.empty()) return Usage(flag_error);
  absl::SetProgramUsageMessage(std::string(kUsage));
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    return Usage(args.size() < 2 ? "no command"
                                 : absl::StrCat("one command only, got ",
                                                args.size() - 1, " words"));
  }
  const std::string command = args[1];
  Options o;
  o.target = absl::GetFlag(FLAGS_target);
  o.json = absl::GetFlag(FLAGS_json);
  o.max_error_ns = absl::GetFlag(FLAGS_max_error_ns);
  o.timeout = absl::GetFlag(FLAGS_timeout);
  o.interval = absl::GetFlag(FLAGS_interval);
  o.wait_timeout = absl::GetFlag(FLAGS_wait_timeout);
  o.count = absl::GetFlag(FLAGS_count);
  o.max_nodes = absl::GetFlag(FLAGS_max_nodes);
  o.max_depth = absl::GetFlag(FLAGS_max_depth);
  o.tree = absl::GetFlag(FLAGS_tree);
  int (*run)(Clocksync::Stub&, const Options&) = nullptr;
  if (command == "status") run = RunStatus;
  if (command == "watch") run = RunWatch;
  if (command == "tree") run = RunTree;
  if (command == "sources") run = RunSources;
  if (command == "wait") run = RunWait;
  if (command == "metrics") run = RunMetrics;
  if (run == nullptr)
    return Usage(absl::StrCat("unknown command \"", command, "\""));
  const std::string invalid = ValidateOptions(o, command);
  if (!invalid.empty()) return Usage(absl::StrCat("bad flag ", invalid));
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(kMaxTopologyMessageBytes);
  const std::unique_ptr<Clocksync::Stub> stub =
      Clocksync::NewStub(grpc::CreateCustomChannel(
          o.target, grpc::InsecureChannelCredentials(), channel_args));
  return run(*stub, o);
}

}  // namespace
}  // namespace clocksync::ctl

int main(int argc, char** argv) { return clocksync::ctl::Main(argc, argv); }
