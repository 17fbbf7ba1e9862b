// hull/estimator_benchmark.cc
//
// Cost per sample of TwoHullEstimator::Add + Estimate in steady state (the
// window full and sliding), at windows of 300 to 300,000 samples (1 kHz
// probes, window 0.3 s to 300 s), beside a naive estimator that rebuilds
// both hulls from every sample of the window and solves them afresh.
//
// Ends with:
//   FIGURE estimator_ns_per_sample_300k <ns> ns
//   FIGURE estimator_speedup_vs_naive_300k <ratio> x
//   FIGURE estimator_bytes_per_sample <bytes> B
//   FIGURE adaptive_ns_per_sample_300k <ns> ns         (library default:
//                                                       5 windows)
//   FIGURE adaptive_daemon_ns_per_sample_300k <ns> ns  (4 windows)
//   FIGURE adaptive_daemon_ns_per_sample_300s <ns> ns  (4 windows, 1 probe/s,
//                                                       300 s: 300 samples)
//
// Figures are CPU time per iteration (the machine is shared; wall time
// moves with its load; both are in the table above the figures).
//
// Run: bazel run -c opt //hull:estimator_benchmark

#include <benchmark/benchmark.h>

#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hull/adaptive_estimator.h"
#include "hull/estimator.h"
#include "hull/separation.h"
#include "hull/sliding_hull.h"
#include "hull/two_hull_estimator.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kPeriodNs = 1'000'000;  // 1 kHz probes.

// An endless stream of samples of a clock 50 ppm slow with exponential
// delays (mean 20 us over a 10 us minimum each way), Unix-epoch timestamps.
class SampleStream {
 public:
  explicit SampleStream(int64_t period_ns = kPeriodNs) : period_ns_(period_ns) {
    std::mt19937_64 rng(1);
    std::exponential_distribution<double> jitter(1.0 / 20'000);
    delays_.resize(1 << 16);
    for (int64_t& d : delays_) d = 10'000 + static_cast<int64_t>(jitter(rng));
  }
  ProbeSample Next() {
    const int64_t t1 = 3'600'000'000'000 + n_ * period_ns_;
    const int64_t theta =
        1'800'000'000'000'000'000 + (n_ * period_ns_) / 20'000;
    const int64_t d1 = delays_[(2 * n_) & (delays_.size() - 1)];
    const int64_t d2 = delays_[(2 * n_ + 1) & (delays_.size() - 1)];
    ++n_;
    const int64_t t2 = t1 + theta + d1;
    const int64_t t3 = t2 + 2'000;
    return {t1, t2, t3, t1 + d1 + 2'000 + d2};
  }

 private:
  int64_t period_ns_;
  std::vector<int64_t> delays_;
  int64_t n_ = 0;
};

EstimatorConfig ConfigFor(int64_t window_samples) {
  EstimatorConfig c;
  c.window_ns = window_samples * kPeriodNs;
  return c;
}

void BM_TwoHull(benchmark::State& state) {
  const int64_t window = state.range(0);
  TwoHullEstimator est(ConfigFor(window));
  SampleStream stream;
  // Fill twice over so that the window slides and the front part is used.
  for (int64_t i = 0; i < 2 * window; ++i) est.Add(stream.Next());
  const uint64_t recomputes_before = est.stats().line_recomputations;
  for (auto _ : state) {
    const ProbeSample s = stream.Next();
    est.Add(s);
    benchmark::DoNotOptimize(est.Estimate(s.t4_ns));
  }
  state.counters["window_samples"] = static_cast<double>(est.window_samples());
  state.counters["bytes_per_sample"] =
      static_cast<double>(est.memory_bytes()) / est.window_samples();
  state.counters["recompute_fraction"] =
      static_cast<double>(est.stats().line_recomputations - recomputes_before) /
      state.iterations();
  state.counters["hull_vertices"] = static_cast<double>(
      est.lower_hull_vertices() + est.upper_hull_vertices());
}
BENCHMARK(BM_TwoHull)->Arg(300)->Arg(3'000)->Arg(30'000)->Arg(300'000);

// The adaptive window on the same stream, through the Estimator interface
// as the daemon holds it: the library's default levels (5: W down to W/16)
// for range(1) = 0, the daemon's (4) for range(1) = 1. W is the window of
// range(0) samples.
void BM_Adaptive(benchmark::State& state) {
  AdaptiveConfig config;
  config.levels = state.range(1) == 0 ? AdaptiveConfig().levels : 4;
  config.base = ConfigFor(state.range(0));
  const std::unique_ptr<Estimator> est = MakeEstimator(config);
  SampleStream stream;
  for (int64_t i = 0; i < 2 * state.range(0); ++i) est->Add(stream.Next());
  for (auto _ : state) {
    const ProbeSample s = stream.Next();
    est->Add(s);
    benchmark::DoNotOptimize(est->Estimate(s.t4_ns));
  }
}
BENCHMARK(BM_Adaptive)->Args({300'000, 0})->Args({300'000, 1});

// The daemon's and the cluster simulator's case: 1 probe/s, 4 windows of
// 300 s down to 37.5 s (300 samples in the longest), score memory one
// window, as tools/simulate_cluster configures it.
void BM_AdaptiveDaemon1Hz(benchmark::State& state) {
  constexpr int64_t kOneSecondNs = 1'000'000'000;
  AdaptiveConfig config;
  config.levels = 4;
  config.base.window_ns = state.range(0) * kOneSecondNs;
  config.score_time_constant_ns = config.base.window_ns;
  const std::unique_ptr<Estimator> est = MakeEstimator(config);
  SampleStream stream(kOneSecondNs);
  for (int64_t i = 0; i < 2 * state.range(0); ++i) est->Add(stream.Next());
  for (auto _ : state) {
    const ProbeSample s = stream.Next();
    est->Add(s);
    benchmark::DoNotOptimize(est->Estimate(s.t4_ns));
  }
}
BENCHMARK(BM_AdaptiveDaemon1Hz)->Arg(300);

// The baseline: keep the window's samples; per sample, rebuild both hulls
// with a monotone chain over the whole window and solve.
void BM_NaiveRebuild(benchmark::State& state) {
  const int64_t window = state.range(0);
  SampleStream stream;
  std::deque<ProbeSample> kept;
  std::vector<Point> req, resp;
  const int64_t anchor_x = 3'600'000'000'000;
  const int64_t anchor_y = 1'800'000'000'000'000'000 - anchor_x;
  auto add = [&](const ProbeSample& s) {
    kept.push_back(s);
    while (s.t4_ns - kept.front().t4_ns > window * kPeriodNs) kept.pop_front();
  };
  for (int64_t i = 0; i < window; ++i) add(stream.Next());
  for (auto _ : state) {
    const ProbeSample s = stream.Next();
    add(s);
    req.clear();
    resp.clear();
    for (const ProbeSample& k : kept) {
      req.push_back({k.t1_ns - anchor_x, k.t2_ns - k.t1_ns - anchor_y});
      resp.push_back({k.t4_ns - anchor_x, k.t3_ns - k.t4_ns - anchor_y});
    }
    const std::vector<Point> lower = BuildChainPoints(req, HullSide::kLower);
    const std::vector<Point> upper = BuildChainPoints(resp, HullSide::kUpper);
    HullChains chains;
    chains.lower[0] =
        ChainView(lower.data(), static_cast<int>(lower.size()), false);
    chains.upper[0] =
        ChainView(upper.data(), static_cast<int>(upper.size()), false);
    const Separation sep = Separate(chains);
    benchmark::DoNotOptimize(sep.mid.At(s.t4_ns - anchor_x));
  }
}
BENCHMARK(BM_NaiveRebuild)->Arg(300)->Arg(3'000)->Arg(30'000)->Arg(300'000);

// Keeps each run's time per iteration and counters for the FIGURE lines.
class FigureReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      // CPU time of the benchmark thread, ns: these machines are shared,
      // and wall time moves with whatever else runs.
      ns_per_iteration_[run.benchmark_name()] = run.GetAdjustedCPUTime();
      for (const auto& [name, counter] : run.counters) {
        counters_[run.benchmark_name() + "/" + name] = counter.value;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> ns_per_iteration_;
  std::map<std::string, double> counters_;
};

}  // namespace
}  // namespace clocksync::hull

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  clocksync::hull::FigureReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  const auto& t = reporter.ns_per_iteration_;
  const auto ours = t.find("BM_TwoHull/300000");
  const auto naive = t.find("BM_NaiveRebuild/300000");
  if (ours != t.end()) {
    std::printf("FIGURE estimator_ns_per_sample_300k %.1f ns\n", ours->second);
    if (naive != t.end()) {
      std::printf("FIGURE estimator_speedup_vs_naive_300k %.0f x\n",
                  naive->second / ours->second);
    }
    std::printf("FIGURE estimator_bytes_per_sample %.1f B\n",
                reporter.counters_["BM_TwoHull/300000/bytes_per_sample"]);
    const auto adaptive = t.find("BM_Adaptive/300000/0");
    if (adaptive != t.end()) {
      std::printf("FIGURE adaptive_ns_per_sample_300k %.1f ns\n",
                  adaptive->second);
    }
    const auto daemon = t.find("BM_Adaptive/300000/1");
    if (daemon != t.end()) {
      std::printf("FIGURE adaptive_daemon_ns_per_sample_300k %.1f ns\n",
                  daemon->second);
    }
  }
  const auto daemon_300s = t.find("BM_AdaptiveDaemon1Hz/300");
  if (daemon_300s != t.end()) {
    std::printf("FIGURE adaptive_daemon_ns_per_sample_300s %.1f ns\n",
                daemon_300s->second);
  }
  return 0;
}
