// testing/side_by_side.h: what the benchmarks that compare two
// things in one run (ours beside a baseline) share: Google Benchmark set up
// to interleave the repetitions of every benchmark (so load that comes and
// goes on a shared machine hits both sides alike), and a console reporter
// that keeps each repetition's time so the program can print medians and
// their ratio as FIGURE lines. Also the baseline of the clock benchmarks:
// bare clock_gettime(CLOCK_MONOTONIC_RAW) reads.
//
// Example:
//   clocksync::bench::InitializeInterleaved(argc, argv);
//   clocksync::bench::MedianReporter reporter;
//   benchmark::RunSpecifiedBenchmarks(&reporter);
//   benchmark::Shutdown();
//   double ratio = reporter.MedianCpuNs("BM_Ours") /
//                  reporter.MedianCpuNs("BM_Baseline");

#ifndef CLOCKSYNC_TESTING_SIDE_BY_SIDE_H_
#define CLOCKSYNC_TESTING_SIDE_BY_SIDE_H_

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"

namespace clocksync::bench {

// The median of `values` (the mean of the middle two for an even count);
// -1 when empty.
inline double Median(std::vector<double> values) {
  if (values.empty()) return -1.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// benchmark::Initialize with --benchmark_enable_random_interleaving=true
// added, unless the command line sets it.
inline void InitializeInterleaved(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  static char interleave[] = "--benchmark_enable_random_interleaving=true";
  bool given = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strstr(argv[i], "benchmark_enable_random_interleaving")) given = true;
  }
  if (!given) args.push_back(interleave);
  int new_argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&new_argc, args.data());
}

// CLOCK_MONOTONIC_RAW now, ns (what the interleaved rounds are timed with).
inline int64_t RawNowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// The baseline benchmark: one bare clock_gettime(CLOCK_MONOTONIC_RAW) per
// iteration, its timespec left on the stack unread (the cheapest possible
// use). A benchmark registers it under this name:
//   using ::clocksync::bench::BM_ClockGettimeRaw;
//   BENCHMARK(BM_ClockGettimeRaw)->Repetitions(kRepetitions);
inline void BM_ClockGettimeRaw(benchmark::State& state) {
  for (auto _ : state) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    benchmark::DoNotOptimize(ts);
  }
}

// ns per call of `calls` bare clock reads in a row: the baseline half of a
// round of an interleaved comparison.
inline double TimeBareClockReadsNs(int64_t calls) {
  const int64_t start_ns = RawNowNs();
  for (int64_t i = 0; i < calls; ++i) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    benchmark::DoNotOptimize(ts);
  }
  return static_cast<double>(RawNowNs() - start_ns) /
         static_cast<double>(calls);
}

// Prints like the console reporter (without colour codes) and keeps every
// repetition's real and CPU time per iteration (ns), by benchmark name.
class MedianReporter : public benchmark::ConsoleReporter {
 public:
  MedianReporter() : ConsoleReporter(OO_None) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && !run.error_occurred) {
        real_ns_[run.run_name.function_name].push_back(run.GetAdjustedRealTime());
        cpu_ns_[run.run_name.function_name].push_back(run.GetAdjustedCPUTime());
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

  // Median real / CPU time per iteration of `name` in ns, or -1 if it did
  // not run.
  double MedianRealNs(const std::string& name) const {
    return Median(real_ns_, name);
  }
  double MedianCpuNs(const std::string& name) const {
    return Median(cpu_ns_, name);
  }

 private:
  using TimesByName = std::map<std::string, std::vector<double>>;

  static double Median(const TimesByName& times_by_name,
                       const std::string& name) {
    const auto it = times_by_name.find(name);
    return it == times_by_name.end() ? -1.0 : bench::Median(it->second);
  }

  TimesByName real_ns_;
  TimesByName cpu_ns_;
};

}  // namespace clocksync::bench

#endif  // CLOCKSYNC_TESTING_SIDE_BY_SIDE_H_
