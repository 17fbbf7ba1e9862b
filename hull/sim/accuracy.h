// hull/sim/accuracy.h: an estimator measured against a scenario's known
// truth, and the accuracy table (scenario × fixed windows × adaptive, over
// several seeds) that docs/ACCURACY.md quotes. Used by the scenario test
// (its short form) and //tools/simulate:accuracy_table (the long form).
//
// What is measured, at every sample's t4 after the first minute: the
// estimate's error against the true global time (RMS and maximum), the
// bound's half-width, and whether [earliest, latest] contains the truth
// (`violations`; within 10 s after a clock step they count apart, as
// `violations_near_step`, and the error is not counted). Between samples
// more than 2 s apart (outages, losses) the bound is checked once a second
// (`holdover_checks`, `holdover_violations`).
//
// Over seeds, results are pooled: the RMS is over every check of every
// seed, not a mean of per-seed RMS values.

#ifndef CLOCKSYNC_HULL_SIM_ACCURACY_H_
#define CLOCKSYNC_HULL_SIM_ACCURACY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hull/estimator.h"
#include "hull/sim/scenarios.h"

namespace clocksync::hull {

// Errors count from this long after the start (the first window fills).
inline constexpr int64_t kAccuracyWarmupNs = 60'000'000'000;

struct AccuracyResult {
  int64_t checks = 0;
  double sum_sq_ns2 = 0;  // Sum of squared errors, ns².
  int64_t max_abs_ns = 0;
  double sum_half_width_ns = 0;
  int64_t violations = 0;
  int64_t violations_near_step = 0;
  int64_t holdover_checks = 0;
  int64_t holdover_violations = 0;
  uint64_t inconsistencies = 0;
  double worst_holdover_half_width_ns = 0;

  double rms_ns() const;
  double mean_half_width_ns() const;
  // Pools another run (another seed) into this one.
  void Pool(const AccuracyResult& other);
};

// The scenario with its random streams (network and clock wander) drawn
// from seed number `seed_index`; 0 is the scenario as defined.
Scenario SeededScenario(const Scenario& scenario, int seed_index);

// The scenario `scale` times as long, its events (steps, outages,
// congestion episodes) at the same fraction of its duration; a sine keeps
// its period. For the short form in tests.
Scenario ScaledScenario(const Scenario& scenario, double scale);

// Whether true time `true_ns` lies within 10 s after one of the
// scenario's clock steps: there the error is not counted, and a miss of
// the bound counts apart (`violations_near_step`).
bool NearClockStep(const Scenario& scenario, int64_t true_ns);

// Feeds the scenario's samples to `estimator` (fresh) and measures it.
AccuracyResult MeasureAccuracy(const Scenario& scenario, Estimator& estimator);

// One column of the table: a name and the estimator configuration (levels
// 1 = a fixed window).
struct TableColumn {
  std::string name;
  AdaptiveConfig config;
};

// The table's columns: fixed windows of 37.5, 75, 150, 300 and 600 s, the
// library's default adaptive estimator (AdaptiveConfig{}, "adaptive") and
// the daemon's default (300 s × 4 levels, "daemon").
std::vector<TableColumn> StandardColumns();
// Index of the fixed 300 s column and the range of fixed columns in
// StandardColumns().
inline constexpr int kFixedColumns = 5;
inline constexpr int kFixed300Column = 3;
inline constexpr int kAdaptiveColumn = 5;
inline constexpr int kDaemonColumn = 6;

struct TableRow {
  std::string scenario;
  std::vector<AccuracyResult> results;  // One per column, pooled over seeds.

  // The best fixed column's RMS, and adaptive / best, adaptive / 300 s.
  double best_fixed_rms_ns() const;
  double ratio_to_best(int column) const;
  double ratio_to_300(int column) const;
  // The targets (docs/ACCURACY.md): column `column` ≤ 1.05 × the best fixed
  // window and ≤ the 300 s window, and no bound violation in any column.
  bool MeetsTarget(int column, double tolerance = 1.05) const;
};

// Runs every column on every scenario over seeds 0 .. seeds-1, each
// scenario scaled by `scale`. With restart_after > 0, each adaptive column
// (levels > 1) is a restart: it first runs the same scenario, scaled by
// scale × restart_after, on seed kRestartSeedOffset + seed (the same
// clock's kind, another realization: a previous run), and starts the
// measured run with the wander that run learnt as its prior
// (Estimator::LearntWanderPpb, AdaptiveConfig::wander_prior_ppb_per_sqrt_s).
inline constexpr int kRestartSeedOffset = 100'000;
std::vector<TableRow> AccuracyTable(const std::vector<Scenario>& scenarios,
                                    const std::vector<TableColumn>& columns,
                                    int seeds, double scale,
                                    double restart_after = 0);

// The table as Markdown (RMS ns per column, the ratios, violations).
std::string FormatAccuracyTable(const std::vector<TableColumn>& columns,
                                const std::vector<TableRow>& rows);

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_SIM_ACCURACY_H_
