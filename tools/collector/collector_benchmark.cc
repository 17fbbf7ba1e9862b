// tools/collector/collector_benchmark.cc: trace collection measured on this
// machine: --processes (8) traced processes record as fast as they can and
// stream to one collector (the real Collection and gRPC service, in this
// program's parent process, on loopback TCP), then the run's archive is
// written as clocksync-collector writes it.
//
//   bazel run -c opt //tools:collector_benchmark [-- --processes=8 --rounds=61]
//
// Each process records --rounds rounds; a round is one buffer's worth of
// events (--buffer_events, the tracer's default 65536: one hand-off to the
// writer thread, which streams it) beside the same number of bare
// clock_gettime(CLOCK_MONOTONIC_RAW) reads, in alternating order. The
// median of the per-round ratios, over all processes, is the streaming
// tracer's cost against the clock read, side by side in one run (the load
// of the other processes and of the collector hits both halves alike). A
// daemon stand-in (testing/bench_segment.h) publishes the mapping, and a
// TSC mapping where the TSC is invariant, as for //tracer:tracer_benchmark.
//
// Output ends with
//   FIGURE collector_events_per_s <v> 1/s        events recorded by all
//       processes and stored by the collector, per second of wall time from
//       "go" until every rank finished (recording, streaming, storing)
//   FIGURE tracer_event_ns_streaming <v> ns
//   FIGURE tracer_event_vs_clock_gettime_ratio_streaming <v> x
//   FIGURE collector_archive_events_per_s <v> 1/s   the end of the run:
//       raw archives read, put on the online timescale, one OTF2 archive
//       written, the corrections compared (--archive=false skips it)

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
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

ABSL_FLAG(int, processes, 8, "traced processes streaming at once (1..64)");
ABSL_FLAG(int, rounds, 61, "rounds per process, one buffer of events each");
ABSL_FLAG(int64_t, buffer_events, 65536, "the tracer's buffer, events");
ABSL_FLAG(bool, archive, true, "also write and time the run's archive");

namespace {

using clocksync::bench::Median;

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

// One traced process: connects, waits for "go", records, reports
// "<median ratio> <median event ns> <median bare ns> <events> <streamed>
// <writer waits> <fallback>".
int Child(int rank, int from_parent, int to_parent, const std::string& shm,
          const std::string& dir) {
  const std::string contact = ReadLine(from_parent);
  const int64_t buffer_events = absl::GetFlag(FLAGS_buffer_events);
  clocksync::TracerOptions options;
  options.trace_dir = dir;
  options.name = "bench";
  options.rank = rank;
  options.world_size = absl::GetFlag(FLAGS_processes);
  options.shm_path = shm;
  options.buffer_events = buffer_events;
  options.collector = contact;
  options.read_environment = false;
  options.install_signal_handlers = false;
  if (const char* env = std::getenv("CLOCKSYNC_TSC")) options.tsc = env;
  if (absl::Status s = clocksync::Tracer::Init(options); !s.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
    return 1;
  }
  const uint32_t region = *clocksync::Tracer::DefineRegion("benchmark");
  WriteLine(to_parent, "ready");
  if (ReadLine(from_parent) != "go") return 1;
  std::vector<double> ratios, event_ns, bare_ns;
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    auto events = [&] {
      const int64_t start = clocksync::Clock::RawNowNs();
      for (int64_t i = 0; i < buffer_events; i += 2) {
        clocksync::Tracer::Enter(region);
        clocksync::Tracer::Leave(region);
      }
      return static_cast<double>(clocksync::Clock::RawNowNs() - start) /
             static_cast<double>(buffer_events);
    };
    double bare = 0, event = 0;
    if ((round + rank) % 2 == 0) {
      bare = clocksync::bench::TimeBareClockReadsNs(buffer_events);
      event = events();
    } else {
      event = events();
      bare = clocksync::bench::TimeBareClockReadsNs(buffer_events);
    }
    ratios.push_back(event / bare);
    event_ns.push_back(event);
    bare_ns.push_back(bare);
  }
  const clocksync::TracerStats live = clocksync::Tracer::Stats();
  const absl::Status finalized = clocksync::Tracer::Finalize();
  const clocksync::TracerStats stats = clocksync::Tracer::Stats();
  if (!finalized.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, finalized.ToString().c_str());
  }
  WriteLine(to_parent,
            absl::StrCat(Median(ratios), " ", Median(event_ns), " ",
                         Median(bare_ns), " ", stats.events_recorded, " ",
                         stats.events_streamed, " ", live.writer_waits, " ",
                         stats.collector_fallback ? 1 : 0));
  return finalized.ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int processes = absl::GetFlag(FLAGS_processes);
  if (processes < 1 || processes > 64 || absl::GetFlag(FLAGS_rounds) < 1) {
    std::fprintf(stderr, "collector_benchmark: bad --processes or --rounds\n");
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
  struct Process {
    pid_t pid;
    int to_child;
    int from_child;
  };
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
      std::_Exit(Child(rank, down[0], up[1], segment->shm_path(),
                       segment->dir()));
    }
    close(down[0]);
    close(up[1]);
    children.push_back({pid, down[1], up[0]});
  }

  // The collector's process, tuned as clocksync-collector tunes it.
  clocksync::collector::TuneMallocForCollector();
  const std::string raw_dir = segment->dir() + "/run.otf2.raw";
  mkdir(raw_dir.c_str(), 0755);
  clocksync::collector::CollectionOptions options;
  options.token = *clocksync::collector::NewToken();
  options.raw_dir = raw_dir;
  options.world_size = processes;
  clocksync::collector::Collection collection(options);
  clocksync::collector::CollectorService service(&collection, [](const std::string& l) {
    std::fprintf(stderr, "collector: %s\n", l.c_str());
  });
  int port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      clocksync::collector::BuildCollectorServer("127.0.0.1:0", &service,
                                                 nullptr, &port);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    for (const Process& p : children) kill(p.pid, SIGKILL);
    return 1;
  }
  const std::string contact = absl::StrCat(options.token, "@127.0.0.1:", port);
  for (const Process& p : children) WriteLine(p.to_child, contact);
  for (const Process& p : children) {
    if (ReadLine(p.from_child) != "ready") {
      std::fprintf(stderr, "a process did not start\n");
      for (const Process& q : children) kill(q.pid, SIGKILL);
      return 1;
    }
  }
  const double start_s = NowS();
  for (const Process& p : children) WriteLine(p.to_child, "go");
  const bool done = collection.WaitUntilDone(absl::Minutes(10));
  const double collect_s = NowS() - start_s;
  std::vector<double> ratios, event_ns, bare_ns;
  uint64_t recorded = 0, streamed = 0, waits = 0, fallbacks = 0;
  for (const Process& p : children) {
    const std::vector<std::string> fields =
        absl::StrSplit(ReadLine(p.from_child), ' ');
    int status = 0;
    waitpid(p.pid, &status, 0);
    if (fields.size() != 7) continue;
    double r = 0, e = 0, b = 0;
    uint64_t n = 0, s = 0, w = 0, f = 0;
    if (absl::SimpleAtod(fields[0], &r) && absl::SimpleAtod(fields[1], &e) &&
        absl::SimpleAtod(fields[2], &b) && absl::SimpleAtoi(fields[3], &n) &&
        absl::SimpleAtoi(fields[4], &s) && absl::SimpleAtoi(fields[5], &w) &&
        absl::SimpleAtoi(fields[6], &f)) {
      ratios.push_back(r);
      event_ns.push_back(e);
      bare_ns.push_back(b);
      recorded += n;
      streamed += s;
      waits += w;
      fallbacks += f;
    }
  }
  const clocksync::collector::CollectionStats stats = collection.Stats();
  (*server)->Shutdown();
  segment->Stop();
  std::printf(
      "%d processes x %d rounds x %lld events: %llu recorded, %llu "
      "acknowledged, %llu stored by the collector (%.1f MB) in %.3f s; %llu "
      "buffer hand-offs waited for the writer; %llu fallbacks; every rank "
      "finished: %s\n",
      processes, absl::GetFlag(FLAGS_rounds),
      static_cast<long long>(absl::GetFlag(FLAGS_buffer_events)),
      static_cast<unsigned long long>(recorded),
      static_cast<unsigned long long>(streamed),
      static_cast<unsigned long long>(stats.events),
      stats.event_bytes / 1e6, collect_s,
      static_cast<unsigned long long>(waits),
      static_cast<unsigned long long>(fallbacks), done ? "yes" : "NO");
  std::printf(
      "per process (medians over its rounds): ratio event/clock_gettime "
      "%s\n",
      absl::StrJoin(ratios, " ",
                    [](std::string* out, double r) {
                      absl::StrAppend(out, absl::StrFormat("%.3f", r));
                    })
          .c_str());
  if (!done || stats.events != recorded || fallbacks > 0) {
    std::fprintf(stderr, "collector_benchmark: the collection is incomplete\n");
    return 1;
  }
  double archive_events_per_s = 0;
  if (absl::GetFlag(FLAGS_archive)) {
    std::vector<std::string> dirs;
    for (const clocksync::collector::RankStatus& r : collection.Status()) {
      dirs.push_back(r.archive_dir);
    }
    const double archive_start_s = NowS();
    absl::StatusOr<clocksync::collector::RunArchiveResult> result =
        clocksync::collector::WriteRunArchive(
            dirs, segment->dir() + "/run.otf2",
            clocksync::collector::RunArchiveOptions());
    const double archive_s = NowS() - archive_start_s;
    if (!result.ok()) {
      std::fprintf(stderr, "archive: %s\n", result.status().ToString().c_str());
      return 1;
    }
    archive_events_per_s = static_cast<double>(result->events) / archive_s;
    std::printf("archive: %llu events in %.3f s (%s correction)\n",
                static_cast<unsigned long long>(result->events), archive_s,
                std::string(clocksync::hull::CorrectionKindName(result->correction_used))
                    .c_str());
  }
  segment.reset();
  std::printf("targets: >= 10 M events/s collected; ratio <= 2\n");
  std::printf("FIGURE collector_events_per_s %.0f 1/s\n",
              static_cast<double>(stats.events) / collect_s);
  std::printf("FIGURE tracer_event_ns_streaming %.2f ns\n", Median(event_ns));
  std::printf("FIGURE clock_gettime_ns_streaming %.2f ns\n", Median(bare_ns));
  std::printf("FIGURE tracer_event_vs_clock_gettime_ratio_streaming %.3f x\n",
              Median(ratios));
  if (absl::GetFlag(FLAGS_archive)) {
    std::printf("FIGURE collector_archive_events_per_s %.0f 1/s\n",
                archive_events_per_s);
  }
  std::fflush(stdout);
  return 0;
}
