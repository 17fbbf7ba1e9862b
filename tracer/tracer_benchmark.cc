// tracer/tracer_benchmark.cc: the cost of recording one trace event beside
// the clock read it is built on, clock_gettime(CLOCK_MONOTONIC_RAW), in the
// same run. Target: an event costs at most 1x the bare clock read where events
// are stamped through the TSC (the daemon publishes a TSC mapping), 2x where
// the tracer calls clock_gettime itself.
//
//   bazel run -c opt //tracer:tracer_benchmark
//
// Set-up as in production, minus the model: a BenchSegment
// (testing/bench_segment.h) plays the daemon and publishes a new mapping
// every 100 ms (so
// the recording threads take the mapping-change slow path and append
// mapping records, as they would), the tracer writes its OTF2 archive into
// the same temporary directory on disk, with the default buffer of 65536
// events per thread. Events are Enter/Leave pairs of one region.
//
// Each round of the interleaved comparison records exactly one buffer's
// worth of events, so every round fills a buffer once and pays for one
// hand-off to the tracer's writer thread (and for waiting, should the
// writer still have the other buffer: TracerStats::writer_waits). Rounds
// alternate their order (bare reads first, then events, or the reverse);
// the median of the per-round ratios is the figure, so load that comes and
// goes on this shared machine drops out. Google Benchmark's interleaved
// repetitions run first, as a cross-check.
//
// The writer thread's work (OTF2 encoding, file writes) runs beside the
// recording thread, on another core when there is one; its CPU time per
// event is reported too (the process's CPU time minus the recording
// thread's, over the interleaved rounds, per event recorded).
//
// Output ends with
//   FIGURE tracer_event_ns <v> ns
//   FIGURE clock_gettime_ns <v> ns
//   FIGURE tracer_writer_cpu_ns_per_event <v> ns
//   FIGURE tracer_event_vs_clock_gettime_ratio <v> x

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "client/clock.h"
#include "testing/bench_segment.h"
#include "testing/side_by_side.h"
#include "tracer/tracer.h"

namespace {

using ::clocksync::bench::BM_ClockGettimeRaw;
using ::clocksync::bench::Median;

constexpr int kRepetitions = 9;
constexpr int kRounds = 101;
constexpr int64_t kBufferEvents = 65536;  // TracerOptions' default

uint32_t g_region = 0;

BENCHMARK(BM_ClockGettimeRaw)->Repetitions(kRepetitions);

// One event per iteration (Enter and Leave alternate).
void BM_TracerEvent(benchmark::State& state) {
  bool ok = true;
  for (auto _ : state) {
    ok &= clocksync::Tracer::Enter(g_region);
    ok &= clocksync::Tracer::Leave(g_region);
  }
  state.SetItemsProcessed(2 * state.iterations());
  if (!ok) state.SkipWithError("recording failed");
}
BENCHMARK(BM_TracerEvent)->Repetitions(kRepetitions);


int64_t CpuNs(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// ns per event of kBufferEvents events: exactly one buffer, one flush.
double TimeEventBatchNs() {
  const int64_t start_ns = clocksync::Clock::RawNowNs();
  for (int64_t i = 0; i < kBufferEvents; i += 2) {
    clocksync::Tracer::Enter(g_region);
    clocksync::Tracer::Leave(g_region);
  }
  return static_cast<double>(clocksync::Clock::RawNowNs() - start_ns) /
         kBufferEvents;
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<clocksync::bench::BenchSegment> segment =
      clocksync::bench::BenchSegment::Create("clocksync_tracer_benchmark");
  // Where the TSC is invariant the segment gets a TSC mapping after its
  // first calibration (0.2 s here): events are stamped through it. Wait for
  // it, up to 3 s, and say which read path events take. A Clock on the same
  // segment tells (it honors CLOCKSYNC_TSC as the tracer below does).
  absl::StatusOr<clocksync::Clock> clock =
      clocksync::Clock::Open(segment->shm_path());
  if (!clock.ok()) {
    std::cerr << clock.status() << "\n";
    return 1;
  }
  for (int i = 0; i < 30 && !clock->UsesTsc(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const bool tsc = clock->UsesTsc();
  std::printf("event stamps: %s\n",
              tsc ? "TSC (rdtsc and the published TSC mapping)"
                  : "clock_gettime(CLOCK_MONOTONIC_RAW) (no TSC mapping: "
                    "TSC not invariant, or CLOCKSYNC_TSC=off)");

  clocksync::TracerOptions options;
  options.trace_dir = segment->dir();
  options.name = "bench";
  options.shm_path = segment->shm_path();
  options.buffer_events = kBufferEvents;
  options.read_environment = false;
  if (const char* env = std::getenv("CLOCKSYNC_TSC")) options.tsc = env;
  if (const absl::Status status = clocksync::Tracer::Init(options);
      !status.ok()) {
    std::cerr << status << "\n";
    return 1;
  }
  g_region = *clocksync::Tracer::DefineRegion("benchmark");

  clocksync::bench::InitializeInterleaved(argc, argv);
  clocksync::bench::MedianReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  // The interleaved comparison, one buffer (one flush) per round.
  std::vector<double> bare_ns, event_ns, ratios;
  const uint64_t recorded_before = clocksync::Tracer::Stats().events_recorded;
  const int64_t process_cpu_before_ns = CpuNs(CLOCK_PROCESS_CPUTIME_ID);
  const int64_t thread_cpu_before_ns = CpuNs(CLOCK_THREAD_CPUTIME_ID);
  for (int round = 0; round < kRounds; ++round) {
    double bare = 0, event = 0;
    if (round % 2 == 0) {
      bare = clocksync::bench::TimeBareClockReadsNs(kBufferEvents);
      event = TimeEventBatchNs();
    } else {
      event = TimeEventBatchNs();
      bare = clocksync::bench::TimeBareClockReadsNs(kBufferEvents);
    }
    bare_ns.push_back(bare);
    event_ns.push_back(event);
    ratios.push_back(event / bare);
  }

  const clocksync::TracerStats live = clocksync::Tracer::Stats();
  const bool tsc_at_end = clock->UsesTsc();
  // The writer's backlog at the end of the rounds is at most one buffer:
  // small beside the 101 buffers written, and counted in Finalize's time,
  // not here.
  const int64_t background_cpu_ns =
      (CpuNs(CLOCK_PROCESS_CPUTIME_ID) - process_cpu_before_ns) -
      (CpuNs(CLOCK_THREAD_CPUTIME_ID) - thread_cpu_before_ns);
  const double writer_cpu_ns_per_event =
      static_cast<double>(background_cpu_ns) /
      static_cast<double>(live.events_recorded - recorded_before);
  const absl::Status finalized = clocksync::Tracer::Finalize();
  segment.reset();  // Stops the "daemon", removes the directory.
  const clocksync::TracerStats stats = clocksync::Tracer::Stats();
  if (!finalized.ok()) {
    std::cerr << "Finalize: " << finalized << "\n";
    return 1;
  }

  const double raw_cpu_ns = reporter.MedianCpuNs("BM_ClockGettimeRaw");
  // BM_TracerEvent's iteration is two events.
  const double event_cpu_ns = reporter.MedianCpuNs("BM_TracerEvent") / 2;
  std::printf(
      "tracer: %llu events written in %llu buffer flushes before Finalize "
      "(%llu of them waited for the writer thread), %llu dropped, %llu "
      "mapping records (a new mapping every 100 ms)\n",
      static_cast<unsigned long long>(stats.events_written),
      static_cast<unsigned long long>(live.flushes),
      static_cast<unsigned long long>(live.writer_waits),
      static_cast<unsigned long long>(stats.events_dropped),
      static_cast<unsigned long long>(stats.mapping_records));
  if (raw_cpu_ns > 0 && event_cpu_ns > 0) {
    std::printf(
        "Google Benchmark medians (CPU time): clock_gettime %.2f ns, event "
        "%.2f ns, ratio %.3f\n",
        raw_cpu_ns, event_cpu_ns, event_cpu_ns / raw_cpu_ns);
  }
  std::printf(
      "interleaved, %d rounds of %lld calls each (one buffer hand-off per "
      "round, included): clock_gettime median %.2f ns, event median %.2f "
      "ns\n",
      kRounds, static_cast<long long>(kBufferEvents), Median(bare_ns),
      Median(event_ns));
  if (tsc && !tsc_at_end) {
    std::printf("the TSC mapping was withdrawn during the run: the figure "
                "mixes both read paths\n");
  }
  std::printf("target: ratio <= 1.0 with TSC stamps, <= 2 without\n");
  std::printf("FIGURE tracer_event_ns %.2f ns\n", Median(event_ns));
  std::printf("FIGURE clock_gettime_ns %.2f ns\n", Median(bare_ns));
  std::printf("FIGURE tracer_writer_cpu_ns_per_event %.2f ns\n",
              writer_cpu_ns_per_event);
  std::printf("FIGURE tracer_event_vs_clock_gettime_ratio %.3f x\n",
              Median(ratios));
  std::fflush(stdout);
  return 0;
}
