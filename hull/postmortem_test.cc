// hull/postmortem_test.cc: tests of the post-mortem corrections: exact
// recovery of a linear clock, the spline's knots and joints, monotonicity on
// random inputs (seeds printed), a wandering clock (spline vs linear error),
// and every degenerate case.

#include "hull/postmortem.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hull/sim/clock_model.h"

namespace clocksync::hull {
namespace {

// An exchange whose master gave one stamp m (t2 = t3 = m): local send s,
// local receive r.
constexpr ProbeSample Exchange(int64_t s, int64_t m, int64_t r) {
  return ProbeSample::OneMasterStamp(s, m, r);
}

using int128 = __int128;

constexpr int64_t kLocalEpochNs = 1'700'000'000'000'000'000;  // ~2023 in ns
constexpr int64_t kSecondNs = 1'000'000'000;
constexpr CorrectionKind kAllMethods[] = {CorrectionKind::kLinear,
                                          CorrectionKind::kSpline,
                                          CorrectionKind::kPiecewise};

std::unique_ptr<PostmortemCorrection> Make(CorrectionKind method,
                                           const std::vector<SyncSession>& s) {
  absl::StatusOr<std::unique_ptr<PostmortemCorrection>> c =
      FitPostmortemCorrection(method, s);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

// A perfectly linear master clock: global = g0 + d + d·ppb/1e9, d = x - l0.
struct LinearClock {
  int64_t l0_ns = kLocalEpochNs;
  int64_t g0_ns = kLocalEpochNs + 987'654'321;
  int64_t ppb = 37'000;

  // 1e9 · global(x), exact.
  int128 GlobalTimes1e9(int64_t x) const {
    const int128 d = static_cast<int128>(x) - l0_ns;
    return static_cast<int128>(g0_ns) * kSecondNs + d * kSecondNs + d * ppb;
  }
  // global(x) rounded to the nearest ns.
  int64_t GlobalNs(int64_t x) const {
    const int128 t = GlobalTimes1e9(x);
    const int128 half = kSecondNs / 2;
    return static_cast<int64_t>((t >= 0 ? t + half : t - half) / kSecondNs);
  }
};

// Sessions against a linear clock with symmetric delays, so that the
// midpoint (s + r) / 2 is exactly when the master stamped. Midpoints fall on
// whole ms and ppb is a multiple of 1000, so the master stamps are exact
// integers: no rounding noise, the fit must be exact. Plus 10% slow
// exchanges with very asymmetric delays, which both drops must remove.
std::vector<SyncSession> LinearClockSessions(const LinearClock& clock,
                                             int num_sessions,
                                             int64_t spacing_ns,
                                             std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> delay_ns(5'000, 40'000);
  std::vector<SyncSession> sessions;
  for (int i = 0; i < num_sessions; ++i) {
    SyncSession session;
    session.id = i;
    for (int j = 0; j < 20; ++j) {
      const int64_t mid = clock.l0_ns + i * spacing_ns + j * 1'000'000;
      const int64_t delay = delay_ns(rng);
      const int64_t s = mid - delay;
      // Slow and asymmetric: 5 ms more on the way there, so that the
      // midpoint is about 2.5 ms before the master's stamp, and 40 µs more
      // on the way back, so that the fastest trip each way is still one
      // exchange's (as the spline's interval middles need to be exact).
      const int64_t late = j % 10 == 3 ? 5'000'000 : 0;
      const int64_t back_extra = late > 0 ? 40'000 : 0;
      session.exchanges.push_back(Exchange(s, clock.GlobalNs(mid + late),
                                           mid + late + delay + back_extra));
    }
    sessions.push_back(session);
  }
  return sessions;
}

TEST(PostmortemTest, RecoversLinearClockExactlyWithEveryMethod) {
  uint64_t seed = 1000;
  for (int64_t ppb : {37'000, -12'000, 0, 250'000}) {
    ++seed;
    std::cout << "RecoversLinearClockExactly: ppb=" << ppb << " seed=" << seed
              << "\n";
    SCOPED_TRACE(testing::Message() << "ppb=" << ppb << " seed=" << seed);
    std::mt19937_64 rng(seed);
    LinearClock clock;
    clock.ppb = ppb;
    const std::vector<SyncSession> sessions =
        LinearClockSessions(clock, 7, 600 * kSecondNs, rng);
    for (CorrectionKind method : kAllMethods) {
      SCOPED_TRACE(CorrectionKindName(method));
      const auto c = Make(method, sessions);
      ASSERT_NE(c, nullptr);
      EXPECT_TRUE(c->report().clean()) << c->report().ToString();
      EXPECT_EQ(c->report().slow_exchanges_dropped, 14);
      // Inside the sessions' hour and an hour beyond either end.
      std::uniform_int_distribution<int64_t> local(
          clock.l0_ns - 3600 * kSecondNs, clock.l0_ns + 7200 * kSecondNs);
      // |ToGlobalNs - true global| <= 1 ns, compared exactly (times 1e9).
      for (int i = 0; i < 20000; ++i) {
        const int64_t x = local(rng);
        int128 error_1e9 = static_cast<int128>(c->ToGlobalNs(x)) * kSecondNs -
                           clock.GlobalTimes1e9(x);
        if (error_1e9 < 0) error_1e9 = -error_1e9;
        ASSERT_LE(error_1e9, kSecondNs) << "local " << x;
      }
    }
  }
}

// A local clock whose frequency wanders against the master (the project's
// ModeledClock: 15 ppm fast, a random walk of 5 ppb/sqrt(s) and a 20-minute
// 800 ppb temperature cycle). Global time is true time + kLocalEpochNs.
ClockModelParams WanderingParams(uint64_t seed) {
  ClockModelParams params;
  params.offset_ns = 4'567'890'123;
  params.frequency_ppm = 15;
  params.wander_ppb_per_sqrt_s = 5;
  params.sine_amplitude_ppb = 800;
  params.sine_period_s = 1200;
  params.seed = seed;
  return params;
}

int64_t LocalAt(ModeledClock& clock, int64_t true_ns) {
  return kLocalEpochNs + clock.LocalAt(true_ns);
}

// Sessions every `spacing_s` over `span_s` of true time, 20 exchanges 1 ms
// apart, each way 20 µs plus an exponential delay (mean 5 µs),
// independently: the asymmetry leaves a few µs of noise per exchange.
std::vector<SyncSession> WanderingSessions(ModeledClock& clock, int64_t span_s,
                                           int64_t spacing_s,
                                           std::mt19937_64& rng) {
  std::exponential_distribution<double> extra(1.0 / 5'000);
  std::vector<SyncSession> sessions;
  for (int64_t t = 0; t <= span_s; t += spacing_s) {
    SyncSession session;
    session.id = t / spacing_s;
    for (int j = 0; j < 20; ++j) {
      const int64_t send = t * kSecondNs + j * 1'000'000;
      const auto forward = 20'000 + static_cast<int64_t>(extra(rng));
      const auto back = 20'000 + static_cast<int64_t>(extra(rng));
      session.exchanges.push_back(
          Exchange(LocalAt(clock, send), kLocalEpochNs + send + forward,
                   LocalAt(clock, send + forward + back)));
    }
    sessions.push_back(session);
  }
  return sessions;
}

TEST(PostmortemTest, SplineFollowsWanderingClockFarBetterThanLinear) {
  constexpr uint64_t kSeed = 20240601;
  constexpr int64_t kSpanS = 3600;
  std::cout << "Wander: seed=" << kSeed << "\n";
  ModeledClock clock(WanderingParams(kSeed));
  std::mt19937_64 rng(kSeed);
  const std::vector<SyncSession> sessions =
      WanderingSessions(clock, kSpanS, 60, rng);
  ASSERT_EQ(sessions.size(), 61u);

  double worst_ns[3] = {0, 0, 0};
  for (int m = 0; m < 3; ++m) {
    const auto c = Make(kAllMethods[m], sessions);
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(c->report().clean()) << c->report().ToString();
    // Every 100 ms over the hour.
    for (int64_t t = 0; t <= kSpanS * kSecondNs; t += kSecondNs / 10) {
      const int64_t error_ns =
          c->ToGlobalNs(LocalAt(clock, t)) - (kLocalEpochNs + t);
      worst_ns[m] =
          std::max(worst_ns[m], std::abs(static_cast<double>(error_ns)));
    }
  }
  std::cout << "Wander over 1 h, sessions every 60 s: max |error| linear "
            << worst_ns[0] << " ns, spline " << worst_ns[1] << " ns, piecewise "
            << worst_ns[2] << " ns\n";
  RecordProperty("linear_max_error_ns", std::to_string(worst_ns[0]));
  RecordProperty("spline_max_error_ns", std::to_string(worst_ns[1]));
  RecordProperty("piecewise_max_error_ns", std::to_string(worst_ns[2]));
  // The linear fit misses the wander by hundreds of µs; the spline stays
  // within the few µs of delay noise that condensing leaves. Measured with
  // this seed: linear 311938 ns, spline 1453 ns, piecewise 2751 ns.
  EXPECT_GT(worst_ns[0], 100'000);
  EXPECT_LT(worst_ns[1], 10'000);
  EXPECT_LT(worst_ns[1] * 20, worst_ns[0]);
  EXPECT_LE(worst_ns[1], worst_ns[2] * 1.5);
}

// Delays of the sessions in SplineBeatsPiecewise: each way a fixed part
// plus a random one.
enum class DelayModel { kExponential, kPareto, kWideExponential };

const char* DelayModelName(DelayModel model) {
  switch (model) {
    case DelayModel::kExponential:
      return "20us+exp(5us)";
    case DelayModel::kPareto:
      return "20us+pareto(2us,a=1.5)";
    case DelayModel::kWideExponential:
      return "50us+exp(50us)";
  }
  return "?";
}

// Sessions every `spacing_s` over `span_s`, `per_session` exchanges 1 ms
// apart, delays drawn independently each way from `model`.
std::vector<SyncSession> NoisySessions(ModeledClock& clock, DelayModel model,
                                       int64_t span_s, int64_t spacing_s,
                                       int per_session, std::mt19937_64& rng) {
  std::exponential_distribution<double> exp5(1.0 / 5'000);
  std::exponential_distribution<double> exp50(1.0 / 50'000);
  std::uniform_real_distribution<double> uniform(0, 1);
  auto delay = [&]() -> int64_t {
    switch (model) {
      case DelayModel::kExponential:
        return 20'000 + static_cast<int64_t>(exp5(rng));
      case DelayModel::kPareto:  // scale 2 µs, shape 1.5, capped at 10 ms
        return 20'000 + static_cast<int64_t>(std::min(
                            2'000 / std::pow(1 - uniform(rng), 1 / 1.5) -
                                2'000,
                            1e7));
      case DelayModel::kWideExponential:
        return 50'000 + static_cast<int64_t>(exp50(rng));
    }
    return 0;
  };
  std::vector<SyncSession> sessions;
  for (int64_t t = 0; t <= span_s; t += spacing_s) {
    SyncSession session;
    session.id = t / spacing_s;
    for (int j = 0; j < per_session; ++j) {
      const int64_t send = t * kSecondNs + j * 1'000'000;
      const int64_t forward = delay();
      const int64_t back = delay();
      session.exchanges.push_back(
          Exchange(LocalAt(clock, send), kLocalEpochNs + send + forward,
                   LocalAt(clock, send + forward + back)));
    }
    sessions.push_back(session);
  }
  return sessions;
}

// RMS of ToGlobalNs against the truth every 100 ms from the first session
// to the last.
double RmsErrorNs(const PostmortemCorrection& c, ModeledClock& clock,
                  int64_t span_s) {
  double sum_sq = 0;
  int64_t n = 0;
  for (int64_t t = 0; t <= span_s * kSecondNs; t += kSecondNs / 10) {
    const double e = static_cast<double>(c.ToGlobalNs(LocalAt(clock, t)) -
                                         (kLocalEpochNs + t));
    sum_sq += e * e;
    ++n;
  }
  return std::sqrt(sum_sq / static_cast<double>(n));
}

// The spline through the sessions' interval middles against the classic
// piecewise line through their means, on wandering clocks with sessions
// every 30-120 s, over 10 seeds per case: never worse on any seed, at most
// half on average. Prints the table docs/POSTMORTEM.md quotes.
TEST(PostmortemTest, SplineBeatsPiecewiseOnWanderingClocks) {
  constexpr int64_t kSpanS = 3600;
  constexpr int kSeeds = 10;
  std::cout << "delays | spacing s | exchanges | piecewise RMS ns | spline "
               "RMS ns | mean ratio | worst ratio\n";
  for (DelayModel model : {DelayModel::kExponential, DelayModel::kPareto,
                           DelayModel::kWideExponential}) {
    for (int64_t spacing_s : {30, 60, 120}) {
      for (int per_session : {5, 20}) {
        double sum_ratio = 0;
        double worst_ratio = 0;
        double sum_spline = 0;
        double sum_piecewise = 0;
        for (int k = 0; k < kSeeds; ++k) {
          const uint64_t seed = 9000 + 100 * spacing_s + 10 * per_session + k +
                                1'000'000 * static_cast<uint64_t>(model);
          SCOPED_TRACE(testing::Message()
                       << DelayModelName(model) << " spacing " << spacing_s
                       << " exchanges " << per_session << " seed " << seed);
          ModeledClock clock(WanderingParams(seed));
          std::mt19937_64 rng(seed);
          const std::vector<SyncSession> sessions = NoisySessions(
              clock, model, kSpanS, spacing_s, per_session, rng);
          const auto spline = Make(CorrectionKind::kSpline, sessions);
          const auto piecewise = Make(CorrectionKind::kPiecewise, sessions);
          ASSERT_NE(spline, nullptr);
          ASSERT_NE(piecewise, nullptr);
          EXPECT_TRUE(spline->report().clean()) << spline->report().ToString();
          const double s = RmsErrorNs(*spline, clock, kSpanS);
          const double p = RmsErrorNs(*piecewise, clock, kSpanS);
          EXPECT_LE(s, p);
          sum_spline += s;
          sum_piecewise += p;
          sum_ratio += s / p;
          worst_ratio = std::max(worst_ratio, s / p);
        }
        const double mean_ratio = sum_ratio / kSeeds;
        std::cout << DelayModelName(model) << " | " << spacing_s << " | "
                  << per_session << " | " << sum_piecewise / kSeeds << " | "
                  << sum_spline / kSeeds << " | " << mean_ratio << " | "
                  << worst_ratio << "\n";
        EXPECT_LE(mean_ratio, 0.5)
            << DelayModelName(model) << " spacing " << spacing_s;
      }
    }
  }
}

TEST(PostmortemTest, SplinePassesThroughKnotsWithContinuousSlope) {
  constexpr uint64_t kSeed = 77;
  std::cout << "Knots: seed=" << kSeed << "\n";
  ModeledClock clock(WanderingParams(kSeed));
  std::mt19937_64 rng(kSeed);
  const std::vector<SyncSession> sessions =
      WanderingSessions(clock, 3600, 60, rng);
  const auto spline = Make(CorrectionKind::kSpline, sessions);
  ASSERT_NE(spline, nullptr);

  // The knots are the condensed sessions.
  CorrectionReport report;
  const std::vector<CondensedPoint> condensed =
      CondenseSessions(sessions, PostmortemOptions{}, &report);
  const std::vector<CondensedPoint>& knots = spline->knots();
  ASSERT_EQ(knots.size(), condensed.size());
  const auto& pieces = spline->pieces();
  ASSERT_EQ(pieces.size(), knots.size() + 1);
  // At the sessions' mean local times, and inside each session's feasible
  // interval of master time (the rate between the neighbouring means
  // carries each exchange's bounds to the mean local time).
  for (size_t k = 0; k < knots.size(); ++k) {
    SCOPED_TRACE(testing::Message() << "knot " << k);
    EXPECT_EQ(knots[k].local.whole_ns, condensed[k].local.whole_ns);
    EXPECT_EQ(knots[k].local.frac_ns, condensed[k].local.frac_ns);
    const CondensedPoint& a = condensed[k == 0 ? 0 : k - 1];
    const CondensedPoint& b = condensed[k + 1 == knots.size() ? k : k + 1];
    const double rate = DifferenceNs(b.global, a.global) /
                        DifferenceNs(b.local, a.local);
    double lo = -1e300;
    double hi = 1e300;
    for (const ProbeSample& e : sessions[k].exchanges) {
      hi = std::min(hi, DifferenceNs(SplitNs{e.t2_ns, 0}, condensed[k].global) +
                            rate * DifferenceNs(condensed[k].local,
                                                SplitNs{e.t1_ns, 0}));
      lo = std::max(lo, DifferenceNs(SplitNs{e.t3_ns, 0}, condensed[k].global) +
                            rate * DifferenceNs(condensed[k].local,
                                                SplitNs{e.t4_ns, 0}));
    }
    ASSERT_LT(lo, hi);
    const double knot = DifferenceNs(knots[k].global, condensed[k].global);
    EXPECT_GE(knot, lo - 1e-3);
    EXPECT_LE(knot, hi + 1e-3);
  }
  for (size_t k = 0; k + 1 < knots.size(); ++k) {
    SCOPED_TRACE(testing::Message() << "segment " << k);
    const auto& piece = pieces[k + 1];
    const double h = DifferenceNs(knots[k + 1].local, knots[k].local);
    // Value at the segment's end: the next knot, within 1e-3 ns.
    const double end_value =
        piece.ValueAt(h) + static_cast<double>(piece.y_anchor.whole_ns -
                                               knots[k + 1].global.whole_ns);
    EXPECT_NEAR(end_value, knots[k + 1].global.frac_ns, 1e-3);
    EXPECT_NEAR(piece.ValueAt(0), knots[k].global.frac_ns, 1e-12);
    // Slope at the joint, from the left and from the right.
    const auto& next = pieces[k + 2];
    EXPECT_NEAR(piece.SlopeAt(h), next.SlopeAt(0), 1e-12);
    // No overshoot: between the two knots' values.
    for (int i = 1; i < 100; ++i) {
      const double v = piece.ValueAt(h * i / 100) +
                       static_cast<double>(piece.y_anchor.whole_ns -
                                           knots[k].global.whole_ns);
      EXPECT_GE(v, knots[k].global.frac_ns - 1e-3);
      EXPECT_LE(v, DifferenceNs(knots[k + 1].global, knots[k].global) +
                       knots[k].global.frac_ns + 1e-3);
    }
  }
  // Linear beyond the ends, with the end slopes (C1 there too).
  EXPECT_EQ(pieces.front().c2, 0.0);
  EXPECT_EQ(pieces.front().c3, 0.0);
  EXPECT_EQ(pieces.back().c2, 0.0);
  EXPECT_EQ(pieces.back().c3, 0.0);
  EXPECT_NEAR(pieces.front().c1, pieces[1].SlopeAt(0), 1e-12);
  const double last_h =
      DifferenceNs(knots.back().local, knots[knots.size() - 2].local);
  EXPECT_NEAR(pieces.back().c1, pieces[pieces.size() - 2].SlopeAt(last_h),
              1e-12);
  // ToGlobalNs agrees at the knots (rounded local times).
  for (const CondensedPoint& knot : knots) {
    const int64_t x = knot.local.whole_ns;
    const double expected = static_cast<double>(knot.global.whole_ns) +
                            knot.global.frac_ns - knot.local.frac_ns;
    EXPECT_NEAR(static_cast<double>(spline->ToGlobalNs(x)), expected, 1.0);
  }
}

// Random increasing points as one-exchange sessions (s = r = local,
// m = global), so the condensed points are exactly these.
std::vector<SyncSession> RandomIncreasingSessions(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> count(2, 40);
  std::uniform_int_distribution<int64_t> gap_ns(1, 600 * kSecondNs);
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_real_distribution<double> rate(0.6, 1.8);
  std::uniform_real_distribution<double> wild(0.51, 40.0);
  std::vector<SyncSession> sessions;
  int64_t x = kLocalEpochNs + gap_ns(rng);
  int64_t y = x + 3'000'000'000;
  const int n = count(rng);
  for (int i = 0; i < n; ++i) {
    sessions.push_back(SyncSession{i, {Exchange(x, y, x)}});
    // Short and long gaps, near-1 and wild rates, to stress the tangents.
    const int64_t gap = kind(rng) < 3 ? gap_ns(rng) % 1000 + 1 : gap_ns(rng);
    const double r = kind(rng) < 2 ? wild(rng) : rate(rng);
    x += gap;
    y += static_cast<int64_t>(std::ceil(static_cast<double>(gap) * r)) + 1;
  }
  return sessions;
}

TEST(PostmortemTest, MonotonicOnRandomIncreasingInputs) {
  constexpr uint64_t kBaseSeed = 5150;
  constexpr int kCases = 200;
  std::cout << "Monotonic: seeds " << kBaseSeed << ".."
            << kBaseSeed + kCases - 1 << "\n";
  for (uint64_t seed = kBaseSeed; seed < kBaseSeed + kCases; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed=" << seed);
    std::mt19937_64 rng(seed);
    const std::vector<SyncSession> sessions = RandomIncreasingSessions(rng);
    for (CorrectionKind method : kAllMethods) {
      SCOPED_TRACE(CorrectionKindName(method));
      const auto c = Make(method, sessions);
      ASSERT_NE(c, nullptr);
      if (method != CorrectionKind::kLinear) {
        EXPECT_TRUE(c->report().inconsistent_sessions.empty())
            << c->report().ToString();
      }
      EXPECT_GE(c->MinRate(), kMinRate / 8);
      // Sorted queries: every integer around each joint, and random ones.
      std::vector<int64_t> xs;
      for (int64_t start : c->starts_ns()) {
        for (int64_t d = -300; d <= 300; ++d) xs.push_back(start + d);
      }
      const int64_t lo = sessions.front().exchanges[0].t1_ns;
      const int64_t hi = sessions.back().exchanges[0].t1_ns;
      std::uniform_int_distribution<int64_t> any(lo - (hi - lo) - 1000,
                                                 hi + (hi - lo) + 1000);
      for (int i = 0; i < 5000; ++i) xs.push_back(any(rng));
      std::sort(xs.begin(), xs.end());
      std::vector<int64_t> sorted_out(xs.size());
      c->ToGlobalSorted(xs, absl::MakeSpan(sorted_out));
      for (size_t i = 0; i < xs.size(); ++i) {
        ASSERT_EQ(sorted_out[i], c->ToGlobalNs(xs[i])) << "local " << xs[i];
        if (i > 0) {
          ASSERT_LE(sorted_out[i - 1], sorted_out[i])
              << "locals " << xs[i - 1] << " < " << xs[i];
        }
      }
    }
  }
}

TEST(PostmortemTest, SortedConversionAcceptsAnyOrder) {
  std::mt19937_64 rng(99);
  std::cout << "AnyOrder: seed=99\n";
  const std::vector<SyncSession> sessions = RandomIncreasingSessions(rng);
  const auto c = Make(CorrectionKind::kSpline, sessions);
  ASSERT_NE(c, nullptr);
  const int64_t lo = sessions.front().exchanges[0].t1_ns;
  std::uniform_int_distribution<int64_t> any(lo - 1000 * kSecondNs,
                                             lo + 30'000 * kSecondNs);
  std::vector<int64_t> xs(10000);
  for (int64_t& x : xs) x = any(rng);
  std::vector<int64_t> out(xs.size());
  c->ToGlobalSorted(xs, absl::MakeSpan(out));
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_EQ(out[i], c->ToGlobalNs(xs[i]));
}

TEST(PostmortemTest, ExtremeInputsSaturateAndStayOrdered) {
  std::mt19937_64 rng(7);
  const LinearClock clock;
  const std::vector<SyncSession> sessions =
      LinearClockSessions(clock, 3, 60 * kSecondNs, rng);
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> xs = {kMin,     kMin + 1,      -kLocalEpochNs,
                                   0,        kLocalEpochNs, kMax / 2,
                                   kMax - 1, kMax};
  for (CorrectionKind method : kAllMethods) {
    const auto c = Make(method, sessions);
    ASSERT_NE(c, nullptr);
    for (size_t i = 1; i < xs.size(); ++i) {
      EXPECT_LE(c->ToGlobalNs(xs[i - 1]), c->ToGlobalNs(xs[i]));
    }
    EXPECT_EQ(c->ToGlobalNs(kMax), kMax);  // saturated
  }
}

TEST(PostmortemTest, CondensesSessionToExactMeans) {
  // Midpoints 1.5, 10.5, 20 and a slow one (dropped: 10% of 10 is 1).
  SyncSession session{
      4, {Exchange(0, 5, 3), Exchange(10, 6, 11), Exchange(19, 7, 21)}};
  for (int i = 0; i < 6; ++i)
    session.exchanges.push_back(Exchange(100, 8, 101));
  session.exchanges.push_back(
      Exchange(0, 1'000'000, 10'000));  // slowest: dropped
  CorrectionReport report;
  const std::vector<CondensedPoint> points =
      CondenseSessions({session}, PostmortemOptions{}, &report);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(report.slow_exchanges_dropped, 1);
  EXPECT_EQ(points[0].exchanges, 9);
  EXPECT_EQ(points[0].session_id, 4);
  // local: (1.5 + 10.5 + 20 + 6 · 100.5) / 9 = 635 / 9 = 70.555...
  EXPECT_EQ(points[0].local.whole_ns, 70);
  EXPECT_DOUBLE_EQ(points[0].local.frac_ns, 5.0 / 9);
  // global: (5 + 6 + 7 + 48) / 9 = 66 / 9 = 7.333...
  EXPECT_EQ(points[0].global.whole_ns, 7);
  EXPECT_DOUBLE_EQ(points[0].global.frac_ns, 3.0 / 9);
}

TEST(PostmortemTest, DropsTheSlowestTenPercent) {
  auto session = [](int64_t id, int n, int64_t base_rtt) {
    SyncSession s{id, {}};
    for (int i = 0; i < n; ++i) {
      s.exchanges.push_back(Exchange(id * 1'000'000'000, id * 1'000'000'000 + 7,
                                     id * 1'000'000'000 + base_rtt + i));
    }
    return s;
  };
  // Per session for spline: floor(9 · 0.1) = 0, floor(30 · 0.1) = 3.
  CorrectionReport report;
  CondenseSessions({session(1, 9, 100), session(2, 30, 100)},
                   PostmortemOptions{}, &report);
  EXPECT_EQ(report.slow_exchanges_dropped, 3);
  // Over all exchanges for linear: floor(39 · 0.1) = 3, all from the slower
  // session 2.
  const auto linear = Make(CorrectionKind::kLinear,
                           {session(1, 9, 100), session(2, 30, 10'000)});
  ASSERT_NE(linear, nullptr);
  EXPECT_EQ(linear->report().slow_exchanges_dropped, 3);
  EXPECT_EQ(linear->report().exchanges_used, 36);
  PostmortemOptions none;
  none.slow_fraction = 0;
  report = CorrectionReport{};
  CondenseSessions({session(2, 30, 100)}, none, &report);
  EXPECT_EQ(report.slow_exchanges_dropped, 0);
}

TEST(PostmortemTest, OneSessionGivesOffsetOnly) {
  SyncSession session{0, {}};
  for (int i = 0; i < 10; ++i) {
    // Midpoint kLocalEpochNs + 1000·i + 50, master 2 µs ahead.
    const int64_t s = kLocalEpochNs + 1000 * i;
    session.exchanges.push_back(Exchange(s, s + 50 + 2000, s + 100));
  }
  for (CorrectionKind method : kAllMethods) {
    SCOPED_TRACE(CorrectionKindName(method));
    const auto c = Make(method, {session});
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(c->report().offset_only);
    EXPECT_FALSE(c->report().clean());
    EXPECT_EQ(c->MinRate(), 1.0);
    EXPECT_NE(c->report().ToString().find("OFFSET ONLY"), std::string::npos);
    for (int64_t x : {kLocalEpochNs - kSecondNs * 3600, kLocalEpochNs,
                      kLocalEpochNs + kSecondNs * 86400}) {
      EXPECT_EQ(c->ToGlobalNs(x), x + 2000);
    }
  }
}

TEST(PostmortemTest, SessionsWithoutUsableExchangeAreSkipped) {
  std::mt19937_64 rng(3);
  const LinearClock clock;
  std::vector<SyncSession> sessions =
      LinearClockSessions(clock, 4, 60 * kSecondNs, rng);
  sessions.insert(sessions.begin() + 1, SyncSession{100, {}});
  sessions.push_back(
      SyncSession{101, {Exchange(50, 60, 40), Exchange(70, 80, 69)}});  // r < s
  for (CorrectionKind method : kAllMethods) {
    SCOPED_TRACE(CorrectionKindName(method));
    const auto c = Make(method, sessions);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->report().empty_sessions, (std::vector<int64_t>{100, 101}));
    EXPECT_EQ(c->report().invalid_exchanges, 2);
    EXPECT_FALSE(c->report().offset_only);
    EXPECT_NE(c->report().ToString().find("without usable exchange (100 101)"),
              std::string::npos)
        << c->report().ToString();
    EXPECT_NEAR(static_cast<double>(c->ToGlobalNs(kLocalEpochNs)),
                static_cast<double>(clock.GlobalNs(kLocalEpochNs)), 1.0);
  }
  // Nothing usable at all: an error, not a mapping.
  for (CorrectionKind method : kAllMethods) {
    absl::StatusOr<std::unique_ptr<PostmortemCorrection>> c =
        FitPostmortemCorrection(
            method, {SyncSession{1, {}}, SyncSession{2, {Exchange(5, 5, 4)}}});
    EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(c.status().message().find("none of the 2 sync sessions"),
              std::string::npos);
  }
}

TEST(PostmortemTest, EqualLocalTimesAreMerged) {
  // Sessions 1 and 2 condense to the same local time: one knot, master times
  // averaged by exchange count.
  const std::vector<SyncSession> sessions = {
      {0, {Exchange(kLocalEpochNs, kLocalEpochNs + 100, kLocalEpochNs)}},
      {1,
       {Exchange(kLocalEpochNs + 1000, kLocalEpochNs + 1100,
                 kLocalEpochNs + 1000)}},
      {2,
       {Exchange(kLocalEpochNs + 1000, kLocalEpochNs + 1130,
                 kLocalEpochNs + 1000),
        Exchange(kLocalEpochNs + 999, kLocalEpochNs + 1130,
                 kLocalEpochNs + 1001)}},
      {3,
       {Exchange(kLocalEpochNs + 2000, kLocalEpochNs + 2100,
                 kLocalEpochNs + 2000)}},
  };
  for (CorrectionKind method :
       {CorrectionKind::kSpline, CorrectionKind::kPiecewise}) {
    const auto c = Make(method, sessions);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->report().merged_points, 1);
    ASSERT_EQ(c->knots().size(), 3u);
    EXPECT_EQ(c->knots()[1].exchanges, 3);
    EXPECT_EQ(c->knots()[1].global.whole_ns,
              kLocalEpochNs + 1120);  // (1100 + 2·1130) / 3
    EXPECT_EQ(c->ToGlobalNs(kLocalEpochNs + 1000), kLocalEpochNs + 1120);
  }
  // All at one local time: offset only.
  const std::vector<SyncSession> same = {
      {0, {Exchange(kLocalEpochNs, kLocalEpochNs + 100, kLocalEpochNs)}},
      {1, {Exchange(kLocalEpochNs, kLocalEpochNs + 300, kLocalEpochNs)}},
  };
  for (CorrectionKind method : kAllMethods) {
    const auto c = Make(method, same);
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(c->report().offset_only);
    EXPECT_EQ(c->ToGlobalNs(kLocalEpochNs + 5), kLocalEpochNs + 205);
  }
}

TEST(PostmortemTest, NonMonotonicPointsAreDroppedAndReported) {
  auto point = [](int64_t id, int64_t local_s, int64_t global_offset_ns) {
    const int64_t x = kLocalEpochNs + local_s * kSecondNs;
    return SyncSession{id, {Exchange(x, x + global_offset_ns, x)}};
  };
  // Session 3's master time jumps back below session 2's: dropped; the rest
  // is an exact line again.
  std::vector<SyncSession> sessions;
  for (int64_t i = 0; i < 8; ++i) {
    sessions.push_back(point(i, 60 * i, i == 3 ? -70 * kSecondNs : 500));
  }
  for (CorrectionKind method :
       {CorrectionKind::kSpline, CorrectionKind::kPiecewise}) {
    SCOPED_TRACE(CorrectionKindName(method));
    const auto c = Make(method, sessions);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->report().inconsistent_sessions, (std::vector<int64_t>{3}));
    EXPECT_EQ(c->knots().size(), 7u);
    EXPECT_NE(c->report().ToString().find("1 non-monotonic points dropped (3)"),
              std::string::npos)
        << c->report().ToString();
    for (int64_t t = -100; t < 500; ++t) {
      const int64_t x = kLocalEpochNs + t * kSecondNs;
      EXPECT_EQ(c->ToGlobalNs(x), x + 500);
    }
  }
  // Session 5 makes the master run at 0.3x from session 4: one of the two
  // must go (either leaves a consistent chain of the same length).
  sessions[3] = point(3, 180, 500);
  sessions[5] = point(5, 300, 500 - 42 * kSecondNs);
  for (CorrectionKind method :
       {CorrectionKind::kSpline, CorrectionKind::kPiecewise}) {
    SCOPED_TRACE(CorrectionKindName(method));
    const auto c = Make(method, sessions);
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->report().inconsistent_sessions.size(), 1u);
    const int64_t dropped = c->report().inconsistent_sessions[0];
    EXPECT_TRUE(dropped == 4 || dropped == 5) << dropped;
    const auto& knots = c->knots();
    ASSERT_EQ(knots.size(), 7u);
    for (size_t k = 0; k + 1 < knots.size(); ++k) {
      EXPECT_GT(DifferenceNs(knots[k + 1].global, knots[k].global),
                kMinRate * DifferenceNs(knots[k + 1].local, knots[k].local));
    }
    EXPECT_GE(c->MinRate(), kMinRate / 8);
  }
  // A master running backwards makes the linear slope negative: rejected,
  // offset only.
  const std::vector<SyncSession> backwards = {point(0, 0, 0),
                                              point(1, 60, -120 * kSecondNs)};
  const auto linear = Make(CorrectionKind::kLinear, backwards);
  ASSERT_NE(linear, nullptr);
  EXPECT_TRUE(linear->report().slope_rejected);
  EXPECT_TRUE(linear->report().offset_only);
  EXPECT_EQ(linear->MinRate(), 1.0);
  EXPECT_NE(linear->report().ToString().find("slope <= 0.5 rejected"),
            std::string::npos)
      << linear->report().ToString();
}

TEST(PostmortemTest, OutOfOrderSessionsAreSortedByLocalTime) {
  auto point = [](int64_t id, int64_t local_s) {
    const int64_t x = kLocalEpochNs + local_s * kSecondNs;
    return SyncSession{id, {Exchange(x, x + 700, x)}};
  };
  const auto c = Make(CorrectionKind::kSpline, {point(0, 0), point(1, 120),
                                                point(2, 60), point(3, 180)});
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->report().out_of_order_sessions, (std::vector<int64_t>{2}));
  ASSERT_EQ(c->knots().size(), 4u);
  EXPECT_EQ(c->knots()[1].session_id, 2);
  EXPECT_EQ(c->ToGlobalNs(kLocalEpochNs + 90 * kSecondNs),
            kLocalEpochNs + 90 * kSecondNs + 700);
}

TEST(PostmortemTest, MethodNamesAndOptions) {
  for (CorrectionKind method : kAllMethods) {
    absl::StatusOr<CorrectionKind> parsed =
        ParseCorrectionKind(CorrectionKindName(method));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, method);
  }
  absl::StatusOr<CorrectionKind> bad = ParseCorrectionKind("cubic");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'cubic'"), std::string::npos);

  const std::vector<SyncSession> one = {{0, {Exchange(10, 20, 30)}}};
  for (CorrectionKind not_postmortem :
       {CorrectionKind::kNone, CorrectionKind::kOnline}) {
    EXPECT_EQ(FitPostmortemCorrection(not_postmortem, one).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  absl::StatusOr<CorrectionKind> piecewise = ParseCorrectionKind("piecewise");
  ASSERT_TRUE(piecewise.ok());
  absl::StatusOr<std::unique_ptr<PostmortemCorrection>> by_name =
      FitPostmortemCorrection(*piecewise, one);
  ASSERT_TRUE(by_name.ok());
  EXPECT_EQ((*by_name)->report().method, CorrectionKind::kPiecewise);
  PostmortemOptions options;
  options.slow_fraction = 1.0;
  EXPECT_EQ(FitPostmortemCorrection(CorrectionKind::kSpline, one, options)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace clocksync::hull
