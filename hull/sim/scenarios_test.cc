// hull/sim/scenarios_test.cc: the scenario sets are well formed, and the
// random ones are reproducible and drawn from the documented ranges.

#include "hull/sim/scenarios.h"

#include <cmath>
#include <set>

#include "gtest/gtest.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kUs = 1'000;
constexpr int64_t kS = 1'000'000'000;

TEST(ScenariosTest, NamesAreUniqueAndFindable) {
  for (const auto& all : {StandardScenarios(), VariantScenarios(),
                          KindScenarios(), RandomScenarios(50, 1)}) {
    std::set<std::string> names;
    for (const Scenario& s : all) {
      EXPECT_TRUE(names.insert(s.name).second) << s.name;
      EXPECT_EQ(FindScenario(all, s.name), &all[&s - all.data()]);
      EXPECT_GT(s.params.duration_ns, 0) << s.name;
      EXPECT_GT(s.params.interval_ns, 0) << s.name;
    }
  }
  EXPECT_EQ(FindScenario(StandardScenarios(), "no-such-scenario"), nullptr);
  EXPECT_EQ(KindScenarios().size(), 18u + 9 + 8 + 12 + 18 + 9 + 36);
}

TEST(ScenariosTest, RandomScenariosAreReproducible) {
  const std::vector<Scenario> a = RandomScenarios(20, 7);
  const std::vector<Scenario> b = RandomScenarios(20, 7);
  const std::vector<Scenario> c = RandomScenarios(20, 8);
  ASSERT_EQ(a.size(), 20u);
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].params.seed, b[i].params.seed);
    EXPECT_EQ(a[i].params.forward.exp_mean_ns, b[i].params.forward.exp_mean_ns);
    differ += a[i].name != c[i].name;
    EXPECT_NE(a[i].params.seed, c[i].params.seed);
  }
  EXPECT_GT(differ, 15);
}

TEST(ScenariosTest, RandomScenariosStayInTheirRanges) {
  int linear = 0, swinging = 0, pareto = 0, lossy = 0;
  const std::vector<Scenario> all = RandomScenarios(400, 3);
  for (const Scenario& s : all) {
    const SimulationParams& p = s.params;
    EXPECT_LE(std::abs(p.clock.frequency_ppm), 100) << s.name;
    const double w = p.clock.wander_ppb_per_sqrt_s;
    EXPECT_TRUE(w == 0 || (w >= 0.05 && w <= 3)) << s.name;
    linear += w == 0;
    if (p.clock.sine_amplitude_ppb > 0) {
      ++swinging;
      EXPECT_GE(p.clock.sine_amplitude_ppb, 100) << s.name;
      EXPECT_LE(p.clock.sine_amplitude_ppb, 1500) << s.name;
      EXPECT_GE(p.clock.sine_period_s, 600) << s.name;
      EXPECT_LE(p.clock.sine_period_s, 3600) << s.name;
    }
    const double hz = 1e9 / static_cast<double>(p.interval_ns);
    EXPECT_GE(hz, 0.5 - 1e-6) << s.name;
    EXPECT_LE(hz, 20 + 1e-6) << s.name;
    EXPECT_EQ(p.forward.min_ns, p.backward.min_ns) << s.name;
    EXPECT_GE(p.forward.min_ns, 1 * kUs) << s.name;
    EXPECT_LE(p.forward.min_ns, 300 * kUs) << s.name;
    const bool is_pareto = p.forward.pareto_alpha > 0;
    pareto += is_pareto;
    for (const DelayParams* d : {&p.forward, &p.backward}) {
      const double scale = is_pareto ? d->pareto_scale_ns : d->exp_mean_ns;
      // The jitter scale times at most √10 for the asymmetry.
      EXPECT_GE(scale, 0.2 * kUs / std::sqrt(10.0) - 1) << s.name;
      EXPECT_LE(scale, 1000 * kUs * std::sqrt(10.0) + 1) << s.name;
    }
    EXPECT_GE(p.loss, 0) << s.name;
    EXPECT_LE(p.loss, 0.3) << s.name;
    lossy += p.loss > 0;
    EXPECT_GE(p.duration_ns, 900 * kS) << s.name;
    EXPECT_LE(p.duration_ns, 3600 * kS) << s.name;
  }
  // The documented shares (15 %, 30 %, 25 %, 20 %), loosely.
  EXPECT_GT(linear, 30);
  EXPECT_LT(linear, 90);
  EXPECT_GT(swinging, 80);
  EXPECT_LT(swinging, 160);
  EXPECT_GT(pareto, 60);
  EXPECT_LT(pareto, 140);
  EXPECT_GT(lossy, 45);
  EXPECT_LT(lossy, 125);
}

}  // namespace
}  // namespace clocksync::hull
