// tools/collector/collector_benchmark.cc: trace collection measured on this
// machine, in two parts, each with its own collector (the real Collection
// and gRPC service, in this program's parent process, tuned as
// clocksync-collector is):
//
//   bazel run -c opt //tools:collector_benchmark [-- --processes=8]
//
// 1. Throughput: --processes (8) traced processes record --events (4 Mi)
//    events each as fast as they can (Enter/Leave pairs) and stream them,
//    over loopback TCP and then over a Unix socket. The figure is events
//    stored per second of wall time from "go" until every rank finished:
//    recording, streaming and storing, all on this machine's cores.
// 2. The cost of an event while streaming, side by side with the clock
//    read it is built on (as //tracer:tracer_benchmark does for local
//    files): one traced process records --rounds rounds; a round is one
//    buffer of events (--buffer_events, the default 65536: one hand-off to
//    the writer thread, which streams it) beside as many bare
//    clock_gettime(CLOCK_MONOTONIC_RAW) reads, in alternating order; the
//    median of the per-round ratios is the figure. Between rounds the
//    process lets the stream catch up (untimed), as a program whose event
//    rate is below the collection's throughput would: the rounds then
//    measure the recording path and the hand-off, not back-pressure.
//    The same rounds back to back (no pause) are reported beside it as
//    "saturated": the recording thread then waits for the stream.
// A daemon stand-in (testing/bench_segment.h) publishes the mapping, and a
// TSC mapping where the TSC is invariant.
//
// Output ends with
//   FIGURE collector_events_per_s <v> 1/s            part 1, loopback TCP
//   FIGURE collector_events_per_s_unix <v> 1/s       part 1, Unix socket
//   FIGURE collector_cpu_ns_per_event <v> ns         part 1 TCP: CPU time
//       of every process (recording, streaming, storing) per event
//   FIGURE tracer_event_ns_streaming <v> ns          part 2
//   FIGURE tracer_event_vs_clock_gettime_ratio_streaming <v> x
//   FIGURE tracer_event_vs_clock_gettime_ratio_streaming_saturated <v> x
//   FIGURE collector_archive_events_per_s <v> 1/s    the end of part 1
//       (TCP): raw archives read, put on the online timescale, one OTF2
//       archive written, the corrections compared (--archive=false skips)

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/clock.h"
#include "collector/collection.h"
#include "collector/collector_service.h"
#include "collector/contact.h"
#include "collector/run_archive.h"
#include "testing/bench_segment.h"
#include "testing/side_by_side.h"
#include "tracer/tracer.h"

ABSL_FLAG(int, processes, 8, "part 1: traced processes streaming at once (1..64)");
ABSL_FLAG(int64_t, events, 2 << 20, "part 1: events each process records");
ABSL_FLAG(int, rounds, 61, "part 2: rounds, one buffer of events each");
ABSL_FLAG(int64_t, buffer_events, 65536, "the tracer's buffer, events");
ABSL_FLAG(bool, archive, true, "also write and time the run's archive");

namespace {

using clocksync::bench::Median;
namespace collector = clocksync::collector;

bool WriteLine(int fd, const std::string& line) {
  const std::string text = line + "\n";
  return write(fd, text.data(), text.size()) ==
         static_cast<ssize_t>(text.size());
}

std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

double NowS() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU time (user + system) of a process, ns; this process with pid 0.
int64_t CpuNs(pid_t pid) {
  if (pid == 0) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (int64_t{usage.ru_utime.tv_sec} + usage.ru_stime.tv_sec) *
               1'000'000'000 +
           (int64_t{usage.ru_utime.tv_usec} + usage.ru_stime.tv_usec) * 1000;
  }
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces): state is 3rd,
  // utime 14th, stime 15th.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  const std::vector<std::string> fields =
      absl::StrSplit(text.substr(close + 2), ' ');
  int64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return 0;
  }
  return (utime + stime) * (1'000'000'000 / sysconf(_SC_CLK_TCK));
}

// Records `n` events as fast as it can.
void RecordFlat(uint32_t region, int64_t n) {
  for (int64_t i = 0; i < n; i += 2) {
    clocksync::Tracer::Enter(region);
    clocksync::Tracer::Leave(region);
  }
}

// Part 2's rounds; `paced`: the stream catches up between rounds.
struct Rounds {
  std::vector<double> ratios, event_ns, bare_ns;
};
Rounds RunRounds(uint32_t region, int rounds, int64_t buffer_events,
                 bool paced) {
  Rounds r;
  for (int round = 0; round < rounds; ++round) {
    auto events = [&] {
      const int64_t start = clocksync::Clock::RawNowNs();
      RecordFlat(region, buffer_events);
      return static_cast<double>(clocksync::Clock::RawNowNs() - start) /
             static_cast<double>(buffer_events);
    };
    double bare = 0, event = 0;
    if (round % 2 == 0) {
      bare = clocksync::bench::TimeBareClockReadsNs(buffer_events);
      event = events();
    } else {
      event = events();
      bare = clocksync::bench::TimeBareClockReadsNs(buffer_events);
    }
    r.ratios.push_back(event / bare);
    r.event_ns.push_back(event);
    r.bare_ns.push_back(bare);
    if (paced) {
      // Untimed: every full buffer acknowledged before the next round.
      for (int i = 0; i < 20000; ++i) {
        const clocksync::TracerStats stats = clocksync::Tracer::Stats();
        if (stats.events_streamed + static_cast<uint64_t>(buffer_events) >
            stats.events_recorded) {
          break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    }
  }
  return r;
}

// A traced process: runs the sessions the parent asks for, one per
// command "<throughput|rounds> <rank> <world> <contact>", until "exit".
int Child(int from_parent, int to_parent, const std::string& shm,
          const std::string& dir) {
  const int64_t buffer_events = absl::GetFlag(FLAGS_buffer_events);
  while (true) {
    const std::vector<std::string> command =
        absl::StrSplit(ReadLine(from_parent), ' ');
    if (command.size() != 4) return 0;
    clocksync::TracerOptions options;
    options.trace_dir = dir;
    options.name = "bench";
    if (!absl::SimpleAtoi(command[1], &options.rank) ||
        !absl::SimpleAtoi(command[2], &options.world_size)) {
      return 1;
    }
    options.shm_path = shm;
    options.buffer_events = buffer_events;
    options.collector = command[3];
    options.read_environment = false;
    options.install_signal_handlers = false;
    if (const char* env = std::getenv("CLOCKSYNC_TSC")) options.tsc = env;
    if (absl::Status s = clocksync::Tracer::Init(options); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    const uint32_t region = *clocksync::Tracer::DefineRegion("benchmark");
    WriteLine(to_parent, "ready");
    if (ReadLine(from_parent) != "go") return 1;
    std::string report;
    if (command[0] == "throughput") {
      RecordFlat(region, absl::GetFlag(FLAGS_events));
    } else {
      const int rounds = absl::GetFlag(FLAGS_rounds);
      const Rounds paced = RunRounds(region, rounds, buffer_events, true);
      const Rounds saturated = RunRounds(region, rounds, buffer_events, false);
      report = absl::StrCat(Median(paced.ratios), " ", Median(paced.event_ns),
                            " ", Median(paced.bare_ns), " ",
                            Median(saturated.ratios), " ",
                            Median(saturated.event_ns), " ");
    }
    const clocksync::TracerStats live = clocksync::Tracer::Stats();
    const absl::Status finalized = clocksync::Tracer::Finalize();
    const clocksync::TracerStats stats = clocksync::Tracer::Stats();
    if (!finalized.ok()) {
      std::fprintf(stderr, "%s\n", finalized.ToString().c_str());
    }
    WriteLine(to_parent,
              absl::StrCat(report, stats.events_recorded, " ",
                           stats.events_streamed, " ", live.writer_waits, " ",
                           stats.collector_fallback ? 1 : 0));
  }
}

struct Process {
  pid_t pid;
  int to_child;
  int from_child;
};

struct Collected {
  bool ok = false;
  double seconds = 0;
  uint64_t events = 0;
  double bytes = 0;
  int64_t cpu_ns = 0;
  std::vector<std::string> reports;  // one per process
  std::vector<std::string> raw_dirs;
};

// One collection: a collector on `address` for `processes`, each given
// `mode`; from "go" until every rank finished.
Collected Collect(const std::string& address, const std::string& raw_dir,
                  const std::vector<Process>& processes,
                  const std::string& mode) {
  Collected out;
  mkdir(raw_dir.c_str(), 0755);
  collector::CollectionOptions options;
  options.token = *collector::NewToken();
  options.raw_dir = raw_dir;
  options.world_size = static_cast<int32_t>(processes.size());
  collector::Collection collection(options);
  collector::CollectorService service(&collection, [](const std::string& l) {
    std::fprintf(stderr, "collector: %s\n", l.c_str());
  });
  int port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      collector::BuildCollectorServer(address, &service, nullptr, &port);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return out;
  }
  const std::string contact =
      absl::StrCat(options.token, "@",
                   address.rfind("unix:", 0) == 0
                       ? address
                       : absl::StrCat("127.0.0.1:", port));
  for (size_t i = 0; i < processes.size(); ++i) {
    WriteLine(processes[i].to_child, absl::StrCat(mode, " ", i, " ",
                                                  processes.size(), " ",
                                                  contact));
  }
  for (const Process& p : processes) {
    if (ReadLine(p.from_child) != "ready") return out;
  }
  int64_t cpu_before = CpuNs(0);
  for (const Process& p : processes) cpu_before += CpuNs(p.pid);
  const double start_s = NowS();
  for (const Process& p : processes) WriteLine(p.to_child, "go");
  const bool done = collection.WaitUntilDone(absl::Minutes(10));
  out.seconds = NowS() - start_s;
  int64_t cpu_after = CpuNs(0);
  for (const Process& p : processes) {
    out.reports.push_back(ReadLine(p.from_child));
    cpu_after += CpuNs(p.pid);
  }
  out.cpu_ns = cpu_after - cpu_before;
  const collector::CollectionStats stats = collection.Stats();
  out.events = stats.events;
  out.bytes = static_cast<double>(stats.event_bytes);
  for (const collector::RankStatus& r : collection.Status()) {
    out.raw_dirs.push_back(r.archive_dir);
  }
  (*server)->Shutdown();
  out.ok = done;
  return out;
}

// Field `i` of a report line (0 when missing).
double Field(const std::string& report, size_t i) {
  const std::vector<std::string> fields = absl::StrSplit(report, ' ');
  double value = 0;
  if (i >= fields.size() || !absl::SimpleAtod(fields[i], &value)) return 0;
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int processes = absl::GetFlag(FLAGS_processes);
  if (processes < 1 || processes > 64 || absl::GetFlag(FLAGS_rounds) < 1 ||
      absl::GetFlag(FLAGS_events) < 2) {
    std::fprintf(stderr,
                 "collector_benchmark: bad --processes, --rounds or --events\n");
    return 1;
  }
  std::unique_ptr<clocksync::bench::BenchSegment> segment =
      clocksync::bench::BenchSegment::Create("clocksync_collector_benchmark");
  {
    absl::StatusOr<clocksync::Clock> clock =
        clocksync::Clock::Open(segment->shm_path());
    for (int i = 0; clock.ok() && i < 30 && !clock->UsesTsc(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::printf("event stamps: %s\n",
                clock.ok() && clock->UsesTsc()
                    ? "TSC (rdtsc and the published TSC mapping)"
                    : "clock_gettime(CLOCK_MONOTONIC_RAW)");
  }
  // The processes first: gRPC starts in this process only after the forks.
  std::vector<Process> children;
  for (int rank = 0; rank < processes; ++rank) {
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0) {
      std::perror("pipe");
      return 1;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      close(down[1]);
      close(up[0]);
      std::_Exit(Child(down[0], up[1], segment->shm_path(), segment->dir()));
    }
    close(down[0]);
    close(up[1]);
    children.push_back({pid, down[1], up[0]});
  }
  // The collector's process, tuned as clocksync-collector tunes it.
  collector::TuneMallocForCollector();
  auto finish = [&](int status) {
    for (const Process& p : children) {
      WriteLine(p.to_child, "exit");
      int child_status = 0;
      waitpid(p.pid, &child_status, 0);
    }
    return status;
  };

  // Part 1: throughput, loopback TCP, then a Unix socket.
  const Collected tcp = Collect("127.0.0.1:0", segment->dir() + "/tcp.raw",
                                children, "throughput");
  const Collected unix_socket =
      Collect(absl::StrCat("unix:", segment->dir(), "/collector.sock"),
              segment->dir() + "/unix.raw", children, "throughput");
  uint64_t recorded = 0, fallbacks = 0, waits = 0;
  for (const std::string& r : tcp.reports) {
    recorded += static_cast<uint64_t>(Field(r, 0));
    waits += static_cast<uint64_t>(Field(r, 2));
    fallbacks += static_cast<uint64_t>(Field(r, 3));
  }
  std::printf(
      "part 1: %d processes x %lld events, loopback TCP: %llu recorded, "
      "%llu stored (%.1f MB) in %.3f s, %.1f s of CPU over all processes, "
      "%llu buffer hand-offs waited for the writer, %llu fallbacks\n",
      processes, static_cast<long long>(absl::GetFlag(FLAGS_events)),
      static_cast<unsigned long long>(recorded),
      static_cast<unsigned long long>(tcp.events), tcp.bytes / 1e6,
      tcp.seconds, tcp.cpu_ns / 1e9, static_cast<unsigned long long>(waits),
      static_cast<unsigned long long>(fallbacks));
  std::printf("part 1, Unix socket: %llu stored in %.3f s, %.1f s of CPU\n",
              static_cast<unsigned long long>(unix_socket.events),
              unix_socket.seconds, unix_socket.cpu_ns / 1e9);
  if (!tcp.ok || !unix_socket.ok || tcp.events != recorded || fallbacks > 0) {
    std::fprintf(stderr, "collector_benchmark: a collection is incomplete\n");
    return finish(1);
  }

  // Part 2: one process's rounds.
  const Collected rounds = Collect("127.0.0.1:0", segment->dir() + "/rounds.raw",
                                   {children[0]}, "rounds");
  if (!rounds.ok || rounds.reports.empty()) {
    std::fprintf(stderr, "collector_benchmark: part 2 is incomplete\n");
    return finish(1);
  }
  const std::string& r = rounds.reports[0];
  std::printf(
      "part 2: %d rounds of %lld events paced, then %d back to back, "
      "streamed over loopback TCP: event %.2f ns (paced), %.2f ns "
      "(saturated); clock_gettime %.2f ns\n",
      absl::GetFlag(FLAGS_rounds),
      static_cast<long long>(absl::GetFlag(FLAGS_buffer_events)),
      absl::GetFlag(FLAGS_rounds), Field(r, 1), Field(r, 4), Field(r, 2));
  finish(0);
  segment->Stop();

  double archive_events_per_s = 0;
  if (absl::GetFlag(FLAGS_archive)) {
    const double archive_start_s = NowS();
    absl::StatusOr<collector::RunArchiveResult> result =
        collector::WriteRunArchive(tcp.raw_dirs, segment->dir() + "/run.otf2",
                                   collector::RunArchiveOptions());
    const double archive_s = NowS() - archive_start_s;
    if (!result.ok()) {
      std::fprintf(stderr, "archive: %s\n", result.status().ToString().c_str());
      return 1;
    }
    archive_events_per_s = static_cast<double>(result->events) / archive_s;
    std::printf("archive of part 1 (TCP): %llu events in %.3f s (%s correction)\n",
                static_cast<unsigned long long>(result->events), archive_s,
                std::string(clocksync::hull::CorrectionKindName(
                                result->correction_used))
                    .c_str());
  }
  segment.reset();
  std::printf("targets: >= 10 M events/s collected; ratio <= 2\n");
  std::printf("FIGURE collector_events_per_s %.0f 1/s\n",
              static_cast<double>(tcp.events) / tcp.seconds);
  std::printf("FIGURE collector_events_per_s_unix %.0f 1/s\n",
              static_cast<double>(unix_socket.events) / unix_socket.seconds);
  std::printf("FIGURE collector_cpu_ns_per_event %.1f ns\n",
              static_cast<double>(tcp.cpu_ns) / static_cast<double>(tcp.events));
  std::printf("FIGURE tracer_event_ns_streaming %.2f ns\n", Field(r, 1));
  std::printf("FIGURE tracer_event_vs_clock_gettime_ratio_streaming %.3f x\n",
              Field(r, 0));
  std::printf(
      "FIGURE tracer_event_vs_clock_gettime_ratio_streaming_saturated %.3f x\n",
      Field(r, 3));
  if (absl::GetFlag(FLAGS_archive)) {
    std::printf("FIGURE collector_archive_events_per_s %.0f 1/s\n",
                archive_events_per_s);
  }
  std::fflush(stdout);
  return 0;
}
