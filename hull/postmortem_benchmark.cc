// hull/postmortem_benchmark.cc: converting 10 million sorted local
// timestamps (one hour of a trace) to global time with each post-mortem
// correction. Target: <= 10 ns per timestamp.
//
// Two paths per method:
//   sorted/<method>   Correction::ToGlobalSorted on the whole array (walks
//                     the pieces; what trace conversion uses). The FIGURE
//                     lines report this path.
//   per_call/<method> ToGlobalNs once per timestamp through the Correction
//                     interface (a virtual call and a binary search each).
// The corrections come from a simulated hour: sessions every minute, 20
// exchanges each, against a master whose frequency wanders.
//
// Ends with one line per method:
//   FIGURE postmortem_ns_per_timestamp_<method> <value> ns
// (CPU time of the sorted path, best of three repetitions).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "hull/postmortem.h"

namespace clocksync::hull {
namespace {

// An exchange whose master gave one stamp m (t2 = t3 = m): local send s,
// local receive r.
constexpr ProbeSample Exchange(int64_t s, int64_t m, int64_t r) {
  return ProbeSample::OneMasterStamp(s, m, r);
}

constexpr int64_t kEpochNs = 1'700'000'000'000'000'000;
constexpr int64_t kHourNs = 3'600'000'000'000;
constexpr size_t kTimestamps = 10'000'000;

// Global time of a local reading: 1 ms ahead, 20 ppm fast, plus a 2 ppm
// frequency swing over 20 minutes.
int64_t TrueGlobalNs(int64_t local_ns) {
  const double t_ns = static_cast<double>(local_ns - kEpochNs);
  const double period_ns = 1200e9;
  const double swing_ns = 2e-6 * period_ns / (2 * M_PI) *
                          (1 - std::cos(2 * M_PI * t_ns / period_ns));
  return local_ns + 1'000'000 +
         static_cast<int64_t>(std::llround(20e-6 * t_ns + swing_ns));
}

std::vector<SyncSession> SimulatedSessions() {
  std::mt19937_64 rng(1);
  std::exponential_distribution<double> extra_ns(1.0 / 5'000);
  std::vector<SyncSession> sessions;
  for (int64_t minute = 0; minute <= 60; ++minute) {
    SyncSession session{minute, {}};
    for (int j = 0; j < 20; ++j) {
      const int64_t s = kEpochNs + minute * 60'000'000'000 + j * 1'000'000;
      const auto forward = 20'000 + static_cast<int64_t>(extra_ns(rng));
      const auto back = 20'000 + static_cast<int64_t>(extra_ns(rng));
      session.exchanges.push_back(
          Exchange(s, TrueGlobalNs(s + forward), s + forward + back));
    }
    sessions.push_back(session);
  }
  return sessions;
}

// 10 million sorted local times spread over the hour.
const std::vector<int64_t>& SortedLocalTimes() {
  static const std::vector<int64_t>* times = [] {
    auto* v = new std::vector<int64_t>(kTimestamps);
    std::mt19937_64 rng(2);
    std::uniform_int_distribution<int64_t> any(kEpochNs, kEpochNs + kHourNs);
    for (int64_t& t : *v) t = any(rng);
    std::sort(v->begin(), v->end());
    return v;
  }();
  return *times;
}

void BM_Sorted(benchmark::State& state, const Correction* correction) {
  const std::vector<int64_t>& local = SortedLocalTimes();
  std::vector<int64_t> global(local.size());
  for (auto _ : state) {
    correction->ToGlobalSorted(local, absl::MakeSpan(global));
    benchmark::DoNotOptimize(global.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() *
                          static_cast<int64_t>(local.size()));
}

void BM_PerCall(benchmark::State& state, const Correction* correction) {
  const std::vector<int64_t>& local = SortedLocalTimes();
  std::vector<int64_t> global(local.size());
  for (auto _ : state) {
    for (size_t i = 0; i < local.size(); ++i) {
      global[i] = correction->ToGlobalNs(local[i]);
    }
    benchmark::DoNotOptimize(global.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() *
                          static_cast<int64_t>(local.size()));
}

// The console output, plus the lowest CPU ns per timestamp of each
// benchmark over its repetitions. CPU time rather than wall time, and the
// minimum of several repetitions, so that other work on a shared machine
// disturbs the figure as little as possible.
class FigureReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred) continue;
      const double ns = run.GetAdjustedCPUTime() /
                        benchmark::GetTimeUnitMultiplier(run.time_unit) * 1e9 /
                        static_cast<double>(kTimestamps);
      const std::string& name = run.run_name.function_name;  // no "/repeats:3"
      auto it = ns_per_timestamp_.find(name);
      if (it == ns_per_timestamp_.end() || ns < it->second) {
        ns_per_timestamp_[name] = ns;
      }
    }
  }
  // ns per timestamp of benchmark `name`, or a negative value if not run.
  double Get(const std::string& name) const {
    auto it = ns_per_timestamp_.find(name);
    return it == ns_per_timestamp_.end() ? -1 : it->second;
  }

 private:
  std::map<std::string, double> ns_per_timestamp_;
};

}  // namespace
}  // namespace clocksync::hull

int main(int argc, char** argv) {
  using namespace clocksync::hull;
  const std::vector<SyncSession> sessions = SimulatedSessions();
  const CorrectionKind methods[] = {CorrectionKind::kLinear,
                                    CorrectionKind::kSpline,
                                    CorrectionKind::kPiecewise};
  std::vector<std::unique_ptr<PostmortemCorrection>> corrections;
  for (CorrectionKind method : methods) {
    absl::StatusOr<std::unique_ptr<PostmortemCorrection>> c =
        FitPostmortemCorrection(method, sessions);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", std::string(c.status().message()).c_str());
      return 1;
    }
    const std::string name(CorrectionKindName(method));
    benchmark::RegisterBenchmark(("sorted/" + name).c_str(), BM_Sorted,
                                 c->get())
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(3);
    benchmark::RegisterBenchmark(("per_call/" + name).c_str(), BM_PerCall,
                                 c->get())
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(3);
    corrections.push_back(std::move(*c));
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  FigureReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  std::printf(
      "\nCPU ns per timestamp (best of 3), %zu sorted timestamps over one "
      "hour, 61 sessions:\n",
      kTimestamps);
  for (CorrectionKind method : methods) {
    const std::string name(CorrectionKindName(method));
    std::printf("  %-9s sorted path %.2f ns, per-call ToGlobalNs %.2f ns\n",
                name.c_str(), reporter.Get("sorted/" + name),
                reporter.Get("per_call/" + name));
  }
  // The figures: the sorted path (ToGlobalSorted).
  for (CorrectionKind method : methods) {
    const std::string name(CorrectionKindName(method));
    const double ns = reporter.Get("sorted/" + name);
    if (ns >= 0) {
      std::printf("FIGURE postmortem_ns_per_timestamp_%s %.2f ns\n",
                  name.c_str(), ns);
    }
  }
  return 0;
}
