// hull/trace_stamp_test.cc: tests of the 51+13-bit stamp layout, the
// stamper, the exact and legacy conversions to seconds, and the
// order-keeping local-to-global conversion (random inputs, seeds printed).

#include "hull/trace_stamp.h"

#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "hull/postmortem.h"

namespace clocksync::hull {
namespace {

// An exchange whose master gave one stamp m (t2 = t3 = m): local send s,
// local receive r.
constexpr ProbeSample Exchange(int64_t s, int64_t m, int64_t r) {
  return ProbeSample::OneMasterStamp(s, m, r);
}

constexpr int64_t kLocalEpochNs = 1'700'000'000'000'000'000;
constexpr int64_t kSecondNs = 1'000'000'000;

TEST(TraceStampTest, Layout) {
  EXPECT_EQ(kStampTickBits, 51);
  EXPECT_EQ(kStampMaxEvent, 8191u);
  EXPECT_EQ(PackStamp(1, 0), 8192u);
  EXPECT_EQ(PackStamp(0, 5), 5u);
  EXPECT_EQ(PackStamp(kStampMaxTick, kStampMaxEvent),
            std::numeric_limits<uint64_t>::max());
  const uint64_t stamp = PackStamp(123456789, 4321);
  EXPECT_EQ(StampTick(stamp), 123456789u);
  EXPECT_EQ(StampEvent(stamp), 4321u);
  // Ordered by tick first, then by event number.
  EXPECT_LT(PackStamp(7, kStampMaxEvent), PackStamp(8, 0));
}

TEST(TraceStampTest, EqualTicksRaiseTheCounter) {
  TraceStamper stamper;
  EXPECT_EQ(stamper.Stamp(5), PackStamp(5, 0));
  EXPECT_EQ(stamper.Stamp(5), PackStamp(5, 1));
  EXPECT_EQ(stamper.Stamp(5), PackStamp(5, 2));
  EXPECT_EQ(stamper.Stamp(6), PackStamp(6, 0));
  EXPECT_EQ(stamper.Stamp(9), PackStamp(9, 0));
  EXPECT_EQ(stamper.max_event_count(), 2u);
  EXPECT_EQ(stamper.artificial_ticks(), 0u);
  EXPECT_FALSE(stamper.overflowed());
}

TEST(TraceStampTest, FineClockNeedsNoCounter) {
  TraceStamper stamper;
  for (uint64_t tick = 100; tick < 10'000; tick += 3) {
    EXPECT_EQ(stamper.Stamp(tick), PackStamp(tick, 0));
  }
  EXPECT_EQ(stamper.max_event_count(), 0u);
}

TEST(TraceStampTest, CounterOverflowAdvancesTheTick) {
  TraceStamper stamper;
  uint64_t last = 0;
  for (uint64_t i = 0; i < kStampMaxEvent + 1 + 5; ++i) {
    last = stamper.Stamp(10);
  }
  // 8192 events fill tick 10; the next five go to an artificial tick 11.
  EXPECT_EQ(last, PackStamp(11, 4));
  EXPECT_EQ(stamper.artificial_ticks(), 1u);
  EXPECT_EQ(stamper.max_event_count(), kStampMaxEvent);
  // The real tick 11 continues after them; tick 12 starts afresh.
  EXPECT_EQ(stamper.Stamp(11), PackStamp(11, 5));
  EXPECT_EQ(stamper.Stamp(12), PackStamp(12, 0));
  EXPECT_EQ(stamper.backward_ticks(), 0u);
}

TEST(TraceStampTest, BackwardTicksAreCountedAndStillOrdered) {
  TraceStamper stamper;
  EXPECT_EQ(stamper.Stamp(100), PackStamp(100, 0));
  EXPECT_EQ(stamper.Stamp(90), PackStamp(100, 1));
  EXPECT_EQ(stamper.Stamp(101), PackStamp(101, 0));
  EXPECT_EQ(stamper.backward_ticks(), 1u);
}

TEST(TraceStampTest, TickOverflowIsReported) {
  TraceStamper stamper;
  EXPECT_EQ(stamper.Stamp(kStampMaxTick + 10), PackStamp(kStampMaxTick, 0));
  EXPECT_TRUE(stamper.overflowed());
  TraceStamper full;
  full.Stamp(kStampMaxTick);
  for (uint64_t i = 0; i < kStampMaxEvent; ++i) full.Stamp(kStampMaxTick);
  EXPECT_FALSE(full.overflowed());
  EXPECT_EQ(full.Stamp(kStampMaxTick), std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(full.overflowed());
}

TEST(TraceStampTest, RandomStreamsGiveStrictlyIncreasingStamps) {
  constexpr uint64_t kBaseSeed = 4242;
  std::cout << "Stamper: seeds " << kBaseSeed << ".." << kBaseSeed + 49 << "\n";
  for (uint64_t seed = kBaseSeed; seed < kBaseSeed + 50; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed=" << seed);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> burst(1, 20000);
    std::uniform_int_distribution<uint64_t> step(0, 3);
    TraceStamper stamper;
    uint64_t tick = 1'000'000;
    uint64_t previous = 0;
    for (int b = 0; b < 30; ++b) {
      const int n = burst(rng);
      for (int i = 0; i < n; ++i) {
        tick += step(rng) == 0 ? 1 : 0;  // mostly equal ticks
        const uint64_t stamp = stamper.Stamp(tick);
        ASSERT_GT(stamp, previous);
        ASSERT_GE(StampTick(stamp), tick);
        previous = stamp;
      }
      tick += step(rng) * 100;
    }
    EXPECT_GT(stamper.max_event_count(), 0u);
  }
}

TEST(TraceStampTest, SecondsExactVersusLegacy) {
  constexpr double kPeriodS = 1e-6;  // a 1 MHz clock
  // Event 0: both ways agree exactly (the word is the tick times 2^13).
  EXPECT_EQ(StampToSeconds(PackStamp(123'456'789, 0), kPeriodS),
            StampToSecondsLegacy(PackStamp(123'456'789, 0), kPeriodS));
  EXPECT_DOUBLE_EQ(StampToSeconds(PackStamp(123'456'789, 0), kPeriodS),
                   123.456789);
  // Event c: the legacy way puts it c/8192 of a tick late, up to a whole
  // tick; the exact way keeps every event of a tick at the tick's time.
  for (uint64_t c : {1u, 4096u, 8191u}) {
    const uint64_t stamp = PackStamp(123'456'789, c);
    EXPECT_DOUBLE_EQ(StampToSeconds(stamp, kPeriodS), 123.456789);
    const double late_s =
        StampToSecondsLegacy(stamp, kPeriodS) - StampToSeconds(stamp, kPeriodS);
    EXPECT_NEAR(late_s, kPeriodS * static_cast<double>(c) / 8192, 1e-12) << c;
  }
  // Near the top of the tick range the 64-bit word no longer fits a double:
  // the legacy way rounds it to 2048 word units (1/4 tick), so events 1 and
  // 1023 of a tick get the tick's own time and event 5000 lands 1/2 of a
  // tick late instead of 5000/8192 (0.61). (A period of 1 keeps the
  // results in ticks, exact in a double.)
  const uint64_t big_tick = uint64_t{1} << 50;
  const double exact = StampToSeconds(PackStamp(big_tick, 0), 1.0);
  EXPECT_EQ(exact, 0x1p50);
  EXPECT_EQ(StampToSecondsLegacy(PackStamp(big_tick, 1), 1.0), exact);
  EXPECT_EQ(StampToSecondsLegacy(PackStamp(big_tick, 1023), 1.0), exact);
  EXPECT_EQ(StampToSecondsLegacy(PackStamp(big_tick, 5000), 1.0), exact + 0.5);
  EXPECT_EQ(StampToSeconds(PackStamp(big_tick, 5000), 1.0), exact);
}

TEST(TraceStampTest, StampClockConversions) {
  const StampClock clock{kLocalEpochNs, 2.5};
  EXPECT_EQ(clock.TickToNs(0), kLocalEpochNs);
  EXPECT_EQ(clock.TickToNs(4), kLocalEpochNs + 10);
  EXPECT_EQ(clock.TickToNs(kStampMaxTick),
            kLocalEpochNs + static_cast<int64_t>(kStampMaxTick) * 5 / 2 + 1);
  EXPECT_EQ(clock.NsToTick(kLocalEpochNs + 10), 4u);
  EXPECT_EQ(clock.NsToTick(kLocalEpochNs + 12), 4u);
  bool clamped = false;
  EXPECT_EQ(clock.NsToTick(kLocalEpochNs - 1, &clamped), 0u);
  EXPECT_TRUE(clamped);
  EXPECT_EQ(clock.NsToTick(std::numeric_limits<int64_t>::max(), &clamped),
            kStampMaxTick);
  EXPECT_TRUE(clamped);
  EXPECT_EQ(clock.NsToTick(kLocalEpochNs, &clamped), 0u);
  EXPECT_FALSE(clamped);
}

TEST(TraceStampTest, ChoosesAFineEnoughGlobalPeriod) {
  EXPECT_EQ(ChooseGlobalTickPeriodNs(1.0, 0.99999), 1);
  EXPECT_EQ(ChooseGlobalTickPeriodNs(0.4, 1.0), 1);  // ns resolution at best
  EXPECT_EQ(ChooseGlobalTickPeriodNs(100.0, 1.0), 100);
  EXPECT_EQ(ChooseGlobalTickPeriodNs(1000.0, 0.9999), 500);
  EXPECT_EQ(ChooseGlobalTickPeriodNs(250.0, 1.0001), 200);
}

// global = local * num / den + offset: a correction for tests that can
// compress time so much that many local ns share one global ns.
class ScaledCorrection : public Correction {
 public:
  ScaledCorrection(int64_t num, int64_t den, int64_t offset_ns)
      : num_(num), den_(den), offset_ns_(offset_ns) {}
  int64_t ToGlobalNs(int64_t local_ns) const override {
    const __int128 rel = static_cast<__int128>(local_ns) - kLocalEpochNs;
    __int128 scaled = rel * num_ / den_;
    if (scaled * den_ > rel * num_) --scaled;  // floor
    return static_cast<int64_t>(kLocalEpochNs + scaled + offset_ns_);
  }
  double MinRate() const override {
    return static_cast<double>(num_) / static_cast<double>(den_);
  }

 private:
  int64_t num_;
  int64_t den_;
  int64_t offset_ns_;
};

// A stamp stream as a tracer makes it: a fine or coarse local clock, bursts.
std::vector<uint64_t> RandomLocalStamps(std::mt19937_64& rng, size_t count) {
  std::uniform_int_distribution<uint64_t> step(0, 5);
  std::uniform_int_distribution<uint64_t> pause(0, 2000);
  TraceStamper stamper;
  std::vector<uint64_t> stamps;
  uint64_t tick = 1000;
  while (stamps.size() < count) {
    const uint64_t s = step(rng);
    tick += s == 0 ? 0 : (s == 5 ? pause(rng) : s);
    stamps.push_back(stamper.Stamp(tick));
  }
  return stamps;
}

TEST(TraceStampTest, GlobalConversionNeverSwapsOrMergesEvents) {
  constexpr uint64_t kBaseSeed = 777;
  std::cout << "GlobalConversion: seeds " << kBaseSeed << ".." << kBaseSeed + 29
            << "\n";
  const StampClock local{kLocalEpochNs, 1.0};
  for (uint64_t seed = kBaseSeed; seed < kBaseSeed + 30; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed=" << seed);
    std::mt19937_64 rng(seed);
    const std::vector<uint64_t> stamps = RandomLocalStamps(rng, 50'000);
    // From faithful to brutal: a slightly fast clock, a clock at half speed
    // (two local ns per global ns), one at 1/1000 (a thousand local ns per
    // global ns: the counter must carry events of different local ticks).
    const std::pair<int64_t, int64_t> kRates[] = {
        {1'000'037, 1'000'000}, {1, 2}, {1, 1000}};
    for (const auto& [num, den] : kRates) {
      SCOPED_TRACE(testing::Message() << "rate " << num << "/" << den);
      const ScaledCorrection correction(num, den, 12345);
      const StampClock global{kLocalEpochNs,
                              static_cast<double>(ChooseGlobalTickPeriodNs(
                                  local.tick_period_ns, correction.MinRate()))};
      GlobalStampConverter one_by_one(correction, local, global);
      GlobalStampConverter batched(correction, local, global);
      std::vector<uint64_t> out(stamps.size());
      batched.ConvertAll(stamps, absl::MakeSpan(out));
      for (size_t i = 0; i < stamps.size(); ++i) {
        ASSERT_EQ(out[i], one_by_one.Convert(stamps[i])) << i;
        if (i > 0) {
          ASSERT_LT(out[i - 1], out[i]) << i;  // never swapped or merged
        }
        // Never earlier than the event's own global time.
        const int64_t global_ns =
            correction.ToGlobalNs(local.TickToNs(StampTick(stamps[i])));
        ASSERT_GE(StampTick(out[i]), global.NsToTick(global_ns)) << i;
      }
      EXPECT_EQ(batched.unordered_inputs(), 0u);
      EXPECT_EQ(batched.clamped(), 0u);
      EXPECT_EQ(batched.raised(), one_by_one.raised());
      if (den == 1'000'000) {
        // A fine global tick: every event keeps its tick, and events keep
        // their event numbers.
        EXPECT_EQ(batched.raised(), 0u);
      }
    }
  }
}

TEST(TraceStampTest, CoarseCorrectionOverflowIsRaisedAndCounted) {
  // 10,000 events on 10,000 distinct local ns that a correction squeezes
  // into one global ns: 8192 fit on that tick, the rest go to the next one.
  const StampClock local{kLocalEpochNs, 1.0};
  const ScaledCorrection squeeze(1, 1'000'000, 0);
  GlobalStampConverter converter(squeeze, local,
                                 StampClock{kLocalEpochNs, 1.0});
  uint64_t previous = 0;
  for (uint64_t tick = 0; tick < 10'000; ++tick) {
    const uint64_t stamp = converter.Convert(PackStamp(tick, 0));
    if (tick > 0) {
      ASSERT_LT(previous, stamp);
    }
    previous = stamp;
  }
  EXPECT_EQ(previous, PackStamp(1, 10'000 - 8192 - 1));
  EXPECT_EQ(converter.raised(), 10'000u - 8192u);
  EXPECT_EQ(converter.max_raise_ticks(), 1u);
}

TEST(TraceStampTest, UnorderedInputsAndOutOfRangeAreCounted) {
  const StampClock local{kLocalEpochNs, 1.0};
  const ScaledCorrection identity(1, 1, 0);
  GlobalStampConverter converter(identity, local,
                                 StampClock{kLocalEpochNs + kSecondNs, 1.0});
  const uint64_t a = converter.Convert(PackStamp(5, 0));  // before the origin
  EXPECT_EQ(a, PackStamp(0, 0));
  EXPECT_EQ(converter.clamped(), 1u);
  const uint64_t b = converter.Convert(PackStamp(2 * kSecondNs, 0));
  const uint64_t c = converter.Convert(PackStamp(kSecondNs + 10, 0));  // back
  EXPECT_EQ(converter.unordered_inputs(), 1u);
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);  // still strictly increasing
}

TEST(TraceStampTest, SplineCorrectedStampsKeepOrderAndTime) {
  // A real spline from sessions with a 40 ppm fast master.
  std::vector<SyncSession> sessions;
  for (int64_t i = 0; i < 11; ++i) {
    const int64_t x = kLocalEpochNs + i * 60 * kSecondNs;
    const int64_t offset = 5000 + (x - kLocalEpochNs) / 25'000;  // 40 ppm
    sessions.push_back(
        SyncSession{i, {Exchange(x - 100, x + offset, x + 100)}});
  }
  absl::StatusOr<std::unique_ptr<PostmortemCorrection>> spline =
      FitPostmortemCorrection(CorrectionKind::kSpline, sessions);
  ASSERT_TRUE(spline.ok()) << spline.status();
  const StampClock local{kLocalEpochNs, 1.0};
  const StampClock global{
      kLocalEpochNs,
      static_cast<double>(ChooseGlobalTickPeriodNs(1.0, (*spline)->MinRate()))};
  EXPECT_EQ(global.tick_period_ns, 1.0);
  std::mt19937_64 rng(31337);
  std::cout << "SplineCorrectedStamps: seed=31337\n";
  std::vector<uint64_t> stamps = RandomLocalStamps(rng, 200'000);
  std::vector<uint64_t> out(stamps.size());
  GlobalStampConverter converter(**spline, local, global);
  converter.ConvertAll(stamps, absl::MakeSpan(out));
  EXPECT_EQ(converter.raised(), 0u);
  for (size_t i = 0; i < out.size(); ++i) {
    if (i > 0) {
      ASSERT_LT(out[i - 1], out[i]);
    }
    // Within the global tick of the corrected time.
    const int64_t local_ns = local.TickToNs(StampTick(stamps[i]));
    EXPECT_EQ(global.TickToNs(StampTick(out[i])),
              (*spline)->ToGlobalNs(local_ns));
    // And the event number kept.
    EXPECT_EQ(StampEvent(out[i]), StampEvent(stamps[i]));
  }
}

}  // namespace
}  // namespace clocksync::hull
