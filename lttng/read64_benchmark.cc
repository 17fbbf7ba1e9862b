// lttng/read64_benchmark.cc: the clock read alone, as LTTng-UST makes it:
// libclocksync-lttng.so's read64 callback beside LTTng's default clock
// read (clock_gettime(CLOCK_MONOTONIC), what lttng-ust's
// trace_clock_read64_monotonic does), in one run.
//
//   bazel run -c opt //lttng:read64_benchmark -- $(bazel info -c opt bazel-bin)/lttng/libclocksync-lttng.so
//
// The plugin is dlopen()ed as LTTng-UST does it, and its
// lttng_ust_clock_plugin_init() registers its callbacks with the
// lttng_ust_trace_clock_set_* functions of this program (exported, in
// place of liblttng-ust-common's), so the callback runs exactly as it does
// in a traced process: through a function pointer, its thread-local state
// in a dlopen()ed library. A BenchSegment (testing/bench_segment.h) plays
// the daemon. kRounds rounds each time kBatch reads of each clock back to
// back (order alternating); the medians of the per-round ns and ratio:
//   FIGURE lttng_read64_default_ns <v> ns
//   FIGURE lttng_read64_plugin_ns <v> ns
//   FIGURE lttng_read64_plugin_vs_default_ratio <v> x

#include <dlfcn.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "client/clock.h"
#include "testing/bench_segment.h"
#include "testing/side_by_side.h"

namespace {

constexpr int kRounds = 2000;
constexpr int kBatch = 10000;

using Read64Function = uint64_t (*)();
Read64Function g_read64 = nullptr;
bool g_enabled = false;

// LTTng's default clock read (lttng-ust: trace_clock_read64_monotonic).
uint64_t DefaultRead64() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 +
         static_cast<uint64_t>(ts.tv_nsec);
}

// ns per read of kBatch reads through `read64`, the values summed so that
// none is optimized away.
double TimeBatchNs(Read64Function read64, uint64_t* sink) {
  const int64_t start_ns = clocksync::Clock::RawNowNs();
  uint64_t sum = 0;
  for (int i = 0; i < kBatch; ++i) sum += read64();
  *sink += sum;
  return static_cast<double>(clocksync::Clock::RawNowNs() - start_ns) / kBatch;
}

}  // namespace

// The plugin's view of LTTng-UST: these take the callbacks it registers.
extern "C" {
__attribute__((visibility("default"))) int lttng_ust_trace_clock_set_read64_cb(
    uint64_t (*read64)()) {
  g_read64 = read64;
  return 0;
}
__attribute__((visibility("default"))) int lttng_ust_trace_clock_set_freq_cb(uint64_t (*)()) {
  return 0;
}
__attribute__((visibility("default"))) int lttng_ust_trace_clock_set_uuid_cb(int (*)(char*)) {
  return 0;
}
__attribute__((visibility("default"))) int lttng_ust_trace_clock_set_name_cb(
    const char* (*)()) {
  return 0;
}
__attribute__((visibility("default"))) int lttng_ust_trace_clock_set_description_cb(
    const char* (*)()) {
  return 0;
}
__attribute__((visibility("default"))) int lttng_ust_enable_trace_clock_override() {
  g_enabled = true;
  return 0;
}
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: read64_benchmark PATH/libclocksync-lttng.so\n");
    return 2;
  }
  std::unique_ptr<clocksync::bench::BenchSegment> segment =
      clocksync::bench::BenchSegment::Create("lttng_read64_benchmark");
  setenv("CLOCKSYNC_SHM", segment->shm_path().c_str(), 1);
  void* plugin = dlopen(argv[1], RTLD_NOW);
  if (plugin == nullptr) {
    std::fprintf(stderr, "read64_benchmark: %s\n", dlerror());
    return 1;
  }
  auto init = reinterpret_cast<void (*)()>(dlsym(plugin, "lttng_ust_clock_plugin_init"));
  if (init == nullptr) {
    std::fprintf(stderr, "read64_benchmark: no lttng_ust_clock_plugin_init in %s\n", argv[1]);
    return 1;
  }
  init();
  if (g_read64 == nullptr || !g_enabled) {
    std::fprintf(stderr, "read64_benchmark: the plugin registered no clock\n");
    return 1;
  }
  absl::StatusOr<clocksync::Clock> clock = clocksync::Clock::Open(segment->shm_path());
  if (!clock.ok()) {
    std::fprintf(stderr, "read64_benchmark: %s\n", clock.status().ToString().c_str());
    return 1;
  }
  // Global time is raw + 1 s in the BenchSegment, less the plugin's 1 ms.
  const int64_t value = static_cast<int64_t>(g_read64());
  const int64_t raw_ns = clocksync::Clock::RawNowNs();
  if (std::llabs(value - (raw_ns + 999'000'000)) > 10'000'000) {
    std::fprintf(stderr, "read64_benchmark: the plugin reads %lld, expected about %lld\n",
                 static_cast<long long>(value), static_cast<long long>(raw_ns + 999'000'000));
    return 1;
  }
  std::vector<double> default_ns, plugin_ns, ratios;
  uint64_t sink = 0;
  for (int r = 0; r < kRounds; ++r) {
    double d, p;
    if (r % 2 == 0) {
      d = TimeBatchNs(DefaultRead64, &sink);
      p = TimeBatchNs(g_read64, &sink);
    } else {
      p = TimeBatchNs(g_read64, &sink);
      d = TimeBatchNs(DefaultRead64, &sink);
    }
    default_ns.push_back(d);
    plugin_ns.push_back(p);
    ratios.push_back(p / d);
  }
  benchmark::DoNotOptimize(sink);
  std::printf("%d rounds of %d reads each, alternating; global time read with %s\n", kRounds,
              kBatch, clock->UsesTsc() ? "rdtsc (the TSC mapping)" : "clock_gettime");
  std::printf("FIGURE lttng_read64_default_ns %.2f ns\n", clocksync::bench::Median(default_ns));
  std::printf("FIGURE lttng_read64_plugin_ns %.2f ns\n", clocksync::bench::Median(plugin_ns));
  std::printf("FIGURE lttng_read64_plugin_vs_default_ratio %.3f x\n",
              clocksync::bench::Median(ratios));
  return 0;
}
