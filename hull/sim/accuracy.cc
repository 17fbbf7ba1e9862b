// hull/sim/accuracy.cc: the estimator measured against a scenario's truth
// and the accuracy table; see accuracy.h.

#include "hull/sim/accuracy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>

namespace clocksync::hull {
namespace {

constexpr int64_t kS = 1'000'000'000;
// After a clock step, a miss of the bound is allowed this long.
constexpr int64_t kStepGraceNs = 10 * kS;

int64_t Scale(int64_t ns, double scale) {
  return static_cast<int64_t>(std::llround(static_cast<double>(ns) * scale));
}

}  // namespace

double AccuracyResult::rms_ns() const {
  return checks > 0 ? std::sqrt(sum_sq_ns2 / static_cast<double>(checks)) : 0;
}

double AccuracyResult::mean_half_width_ns() const {
  return checks > 0 ? sum_half_width_ns / static_cast<double>(checks) : 0;
}

void AccuracyResult::Pool(const AccuracyResult& o) {
  checks += o.checks;
  sum_sq_ns2 += o.sum_sq_ns2;
  max_abs_ns = std::max(max_abs_ns, o.max_abs_ns);
  sum_half_width_ns += o.sum_half_width_ns;
  violations += o.violations;
  violations_near_step += o.violations_near_step;
  holdover_checks += o.holdover_checks;
  holdover_violations += o.holdover_violations;
  inconsistencies += o.inconsistencies;
  worst_holdover_half_width_ns =
      std::max(worst_holdover_half_width_ns, o.worst_holdover_half_width_ns);
}

Scenario SeededScenario(const Scenario& scenario, int seed_index) {
  Scenario s = scenario;
  if (seed_index == 0) return s;
  // Far apart, so that no two (scenario, seed) pairs share a stream.
  s.params.seed += 1'000'003ULL * static_cast<uint64_t>(seed_index);
  s.params.clock.seed += 7'919ULL * static_cast<uint64_t>(seed_index);
  return s;
}

Scenario ScaledScenario(const Scenario& scenario, double scale) {
  Scenario s = scenario;
  if (scale == 1.0) return s;
  SimulationParams& p = s.params;
  p.duration_ns = Scale(p.duration_ns, scale);
  for (ClockStep& step : p.clock.steps) step.at_ns = Scale(step.at_ns, scale);
  for (auto& [begin, end] : p.outages) {
    begin = Scale(begin, scale);
    end = Scale(end, scale);
  }
  for (CongestionEpisode& e : p.congestion) {
    e.begin_ns = Scale(e.begin_ns, scale);
    e.end_ns = Scale(e.end_ns, scale);
  }
  return s;
}

bool NearClockStep(const Scenario& scenario, int64_t true_ns) {
  for (const ClockStep& step : scenario.params.clock.steps) {
    if (true_ns >= step.at_ns && true_ns < step.at_ns + kStepGraceNs) {
      return true;
    }
  }
  return false;
}

AccuracyResult MeasureAccuracy(const Scenario& scenario, Estimator& est) {
  AccuracyResult r;
  ProbeSimulator sim(scenario.params);
  // A second simulator with the same seed gives local readings between
  // samples without disturbing the first one's random stream.
  ProbeSimulator clock(scenario.params);
  SimulatedSample s;
  int64_t last_true = 0;
  while (sim.Next(&s)) {
    // Holdover: once a second between samples more than 2 s apart.
    for (int64_t t = last_true + 2 * kS;
         t < s.true_ns - kS && last_true > kAccuracyWarmupNs; t += kS) {
      const TimeEstimate e = est.Estimate(clock.LocalAt(t));
      if (e.state == SyncState::kUnsynced) continue;
      const int64_t truth = clock.GlobalAt(t);
      ++r.holdover_checks;
      if (truth < e.earliest_ns || truth > e.latest_ns) ++r.holdover_violations;
      r.worst_holdover_half_width_ns = std::max(
          r.worst_holdover_half_width_ns, (e.latest_ns - e.earliest_ns) / 2.0);
    }
    last_true = s.true_ns;
    est.Add(s.sample);
    if (s.true_ns < kAccuracyWarmupNs) continue;
    const TimeEstimate e = est.Estimate(s.sample.t4_ns);
    if (e.state == SyncState::kUnsynced) continue;
    const int64_t truth = s.true_global_at_t4_ns;
    const int64_t error = e.global_ns - truth;
    const bool inside = truth >= e.earliest_ns && truth <= e.latest_ns;
    if (NearClockStep(scenario, s.true_ns)) {
      if (!inside) ++r.violations_near_step;
      continue;
    }
    ++r.checks;
    r.sum_sq_ns2 += static_cast<double>(error) * static_cast<double>(error);
    r.sum_half_width_ns += (e.latest_ns - e.earliest_ns) / 2.0;
    r.max_abs_ns = std::max<int64_t>(r.max_abs_ns, std::llabs(error));
    if (!inside) ++r.violations;
  }
  r.inconsistencies = est.stats().inconsistencies;
  return r;
}

std::vector<TableColumn> StandardColumns() {
  std::vector<TableColumn> columns;
  for (const int64_t window_ms : {37'500, 75'000, 150'000, 300'000, 600'000}) {
    TableColumn c;
    c.config.base.window_ns = window_ms * 1'000'000;
    c.config.levels = 1;
    char name[32];
    std::snprintf(name, sizeof(name), "%g s", window_ms / 1000.0);
    c.name = name;
    columns.push_back(c);
  }
  columns.push_back({"adaptive", AdaptiveConfig()});
  TableColumn daemon{"daemon", AdaptiveConfig()};
  daemon.config.base.window_ns = 300 * kS;
  daemon.config.levels = 4;
  columns.push_back(daemon);
  return columns;
}

double TableRow::best_fixed_rms_ns() const {
  double best = std::numeric_limits<double>::infinity();
  for (int c = 0; c < kFixedColumns && c < static_cast<int>(results.size());
       ++c) {
    best = std::min(best, results[c].rms_ns());
  }
  return best;
}

double TableRow::ratio_to_best(int column) const {
  return results[column].rms_ns() / best_fixed_rms_ns();
}

double TableRow::ratio_to_300(int column) const {
  return results[column].rms_ns() / results[kFixed300Column].rms_ns();
}

bool TableRow::MeetsTarget(int column, double tolerance) const {
  const AccuracyResult& r = results[column];
  if (r.violations > 0 || r.holdover_violations > 0) return false;
  return ratio_to_best(column) <= tolerance && ratio_to_300(column) <= 1.0;
}

std::vector<TableRow> AccuracyTable(const std::vector<Scenario>& scenarios,
                                    const std::vector<TableColumn>& columns,
                                    int seeds, double scale,
                                    double restart_after) {
  std::vector<TableRow> rows;
  for (const Scenario& base : scenarios) {
    TableRow row;
    row.scenario = base.name;
    row.results.resize(columns.size());
    for (int seed = 0; seed < seeds; ++seed) {
      const Scenario s = SeededScenario(ScaledScenario(base, scale), seed);
      for (size_t c = 0; c < columns.size(); ++c) {
        AdaptiveConfig config = columns[c].config;
        if (restart_after > 0 && config.levels > 1) {
          const Scenario previous =
              SeededScenario(ScaledScenario(base, scale * restart_after),
                             kRestartSeedOffset + seed);
          const std::unique_ptr<Estimator> before = MakeEstimator(config);
          MeasureAccuracy(previous, *before);
          config.wander_prior_ppb_per_sqrt_s = before->LearntWanderPpb();
        }
        const std::unique_ptr<Estimator> est = MakeEstimator(config);
        row.results[c].Pool(MeasureAccuracy(s, *est));
      }
    }
    rows.push_back(row);
  }
  return rows;
}

std::string FormatAccuracyTable(const std::vector<TableColumn>& columns,
                                const std::vector<TableRow>& rows) {
  std::string out = "| scenario |";
  std::string rule = "|---|";
  for (const TableColumn& c : columns) {
    out += " " + c.name + " |";
    rule += "---:|";
  }
  out += " adaptive / best | adaptive / 300 s | daemon / best | daemon / 300 s "
         "| adaptive viol | target |\n";
  rule += "---:|---:|---:|---:|---:|---|\n";
  out += rule;
  char cell[64];
  for (const TableRow& row : rows) {
    out += "| " + row.scenario + " |";
    const double best = row.best_fixed_rms_ns();
    for (size_t c = 0; c < row.results.size(); ++c) {
      const double rms = row.results[c].rms_ns();
      // The best fixed window in bold.
      const bool bold = static_cast<int>(c) < kFixedColumns && rms == best;
      // Sub-10-ns errors (kernel timestamps) with one decimal.
      const int decimals = rms < 10 ? 1 : 0;
      std::snprintf(cell, sizeof(cell), bold ? " **%.*f** |" : " %.*f |",
                    decimals, rms);
      out += cell;
    }
    const int64_t violations =
        row.results[kAdaptiveColumn].violations +
        row.results[kAdaptiveColumn].holdover_violations;
    std::snprintf(cell, sizeof(cell), " %.3f | %.3f | %.3f | %.3f | %lld |",
                  row.ratio_to_best(kAdaptiveColumn),
                  row.ratio_to_300(kAdaptiveColumn),
                  row.ratio_to_best(kDaemonColumn),
                  row.ratio_to_300(kDaemonColumn),
                  static_cast<long long>(violations));
    out += cell;
    out += row.MeetsTarget(kAdaptiveColumn) ? " holds |\n" : " MISSED |\n";
  }
  return out;
}

}  // namespace clocksync::hull
