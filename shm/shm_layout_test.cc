// shm/shm_layout_test.cc: the shared-memory layout (sizes, offsets,
// magic, state values) and the seqlock helpers, single-threaded.
// Concurrency is covered by seqlock_stress_test.cc.

#include "shm/shm_layout.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "gtest/gtest.h"
#include "proto/clocksync.pb.h"

namespace clocksync {
namespace {

TEST(ShmLayoutTest, SizesAndOffsetsAreFixed) {
  // Any change here breaks readers of version 2: bump the layout version.
  // (Version 1 is the same without the TSC section: 128 bytes.)
  EXPECT_EQ(sizeof(clocksync_shm_header), 64u);
  EXPECT_EQ(sizeof(clocksync_shm_mapping), 64u);
  EXPECT_EQ(alignof(clocksync_shm_mapping), 64u);
  EXPECT_EQ(sizeof(clocksync_shm_tsc), 64u);
  EXPECT_EQ(sizeof(clocksync_shm), 192u);
  EXPECT_EQ(offsetof(clocksync_shm, header), 0u);
  EXPECT_EQ(offsetof(clocksync_shm, mapping), 64u);
  EXPECT_EQ(offsetof(clocksync_shm, tsc), 128u);
  EXPECT_EQ(CLOCKSYNC_SHM_SIZE_VERSION_1, 128u);
  EXPECT_EQ(offsetof(clocksync_shm_tsc, anchor_tsc), 8u);
  EXPECT_EQ(offsetof(clocksync_shm_tsc, anchor_raw_ns), 16u);
  EXPECT_EQ(offsetof(clocksync_shm_tsc, raw_ns_per_tick_q32), 24u);
  EXPECT_EQ(offsetof(clocksync_shm_tsc, max_ticks), 32u);
  EXPECT_EQ(offsetof(clocksync_shm_tsc, error_ns), 40u);
  EXPECT_EQ(offsetof(clocksync_shm_tsc, generation), 48u);

  EXPECT_EQ(offsetof(clocksync_shm_header, magic), 0u);
  EXPECT_EQ(offsetof(clocksync_shm_header, layout_version), 8u);
  EXPECT_EQ(offsetof(clocksync_shm_header, segment_size), 12u);
  EXPECT_EQ(offsetof(clocksync_shm_header, mapping_offset), 16u);
  EXPECT_EQ(offsetof(clocksync_shm_header, writer_pid), 20u);
  EXPECT_EQ(offsetof(clocksync_shm_header, writer_start_raw_ns), 24u);
  EXPECT_EQ(offsetof(clocksync_shm_header, writer_start_realtime_ns), 32u);
  EXPECT_EQ(offsetof(clocksync_shm_header, tree_id), 40u);
  EXPECT_EQ(offsetof(clocksync_shm_header, reserved), 48u);

  EXPECT_EQ(offsetof(clocksync_shm_mapping, seq), 0u);
  EXPECT_EQ(offsetof(clocksync_shm_mapping, anchor_raw_ns), 8u);
  EXPECT_EQ(offsetof(clocksync_shm_mapping, anchor_global_ns), 16u);
  EXPECT_EQ(offsetof(clocksync_shm_mapping, rate_adj_q64), 24u);
  EXPECT_EQ(offsetof(clocksync_shm_mapping, bound_at_anchor_ns), 32u);
  EXPECT_EQ(offsetof(clocksync_shm_mapping, bound_growth_q36), 40u);
  EXPECT_EQ(offsetof(clocksync_shm_mapping, status), 44u);
  EXPECT_EQ(offsetof(clocksync_shm_mapping, depth), 46u);
  EXPECT_EQ(offsetof(clocksync_shm_mapping, update_raw_ns), 48u);
  EXPECT_EQ(offsetof(clocksync_shm_mapping, generation), 56u);
}

TEST(ShmLayoutTest, MagicSpellsClksyncmInFileByteOrder) {
  clocksync_shm_header header = {};
  header.magic = CLOCKSYNC_SHM_MAGIC;
  EXPECT_EQ(std::memcmp(&header, "CLKSYNCM", 8), 0);
  EXPECT_EQ(CLOCKSYNC_SHM_LAYOUT_VERSION, 2u);
}

TEST(ShmLayoutTest, StatesMirrorTheProtoSyncState) {
  EXPECT_EQ(CLOCKSYNC_STATE_UNSPECIFIED, SYNC_STATE_UNSPECIFIED);
  EXPECT_EQ(CLOCKSYNC_STATE_UNSYNCED, SYNC_STATE_UNSYNCED);
  EXPECT_EQ(CLOCKSYNC_STATE_SYNCED, SYNC_STATE_SYNCED);
  EXPECT_EQ(CLOCKSYNC_STATE_RECOVERING, SYNC_STATE_RECOVERING);
  EXPECT_EQ(CLOCKSYNC_STATE_HOLDOVER, SYNC_STATE_HOLDOVER);
  // Every proto state fits the status word's state byte.
  EXPECT_LE(SyncState_MAX, static_cast<int>(CLOCKSYNC_STATUS_STATE_MASK));
}

TEST(ShmLayoutTest, StatusFlagsStayOutOfTheStateByte) {
  for (unsigned flag : {CLOCKSYNC_STATUS_STEPPED, CLOCKSYNC_STATUS_CLOSED,
                        CLOCKSYNC_STATUS_STALE}) {
    EXPECT_EQ(flag & CLOCKSYNC_STATUS_STATE_MASK, 0u) << flag;
    EXPECT_LE(flag, 0xFFFFu) << "flags fit the 16-bit status field";
  }
  EXPECT_NE(CLOCKSYNC_STATUS_STEPPED, CLOCKSYNC_STATUS_CLOSED);
  EXPECT_NE(CLOCKSYNC_STATUS_CLOSED, CLOCKSYNC_STATUS_STALE);
}

MappingValues SampleValues() {
  MappingValues v;
  v.anchor_raw_ns = 123'456'789'012;
  v.anchor_global_ns = 1'700'000'000'123'456'789;
  v.rate_adj_q64 = -59'951'918'239'556;  // about -3.25 ppm
  v.bound_at_anchor_ns = 4321;
  v.bound_growth_q36 = 859;
  v.status = CLOCKSYNC_STATE_HOLDOVER | CLOCKSYNC_STATUS_STEPPED;
  v.depth = 3;
  v.update_raw_ns = 123'456'999'999;
  v.generation = 77;
  return v;
}

TEST(ShmLayoutTest, WriteThenReadRoundTripsEveryField) {
  clocksync_shm_mapping section = {};
  const MappingValues in = SampleValues();
  shm::WriteSection(&section, in);
  EXPECT_EQ(section.seq, 2u) << "one write moves seq by 2 and leaves it even";

  MappingValues out;
  ASSERT_TRUE(shm::TryReadSection(&section, &out));
  EXPECT_EQ(out.anchor_raw_ns, in.anchor_raw_ns);
  EXPECT_EQ(out.anchor_global_ns, in.anchor_global_ns);
  EXPECT_EQ(out.rate_adj_q64, in.rate_adj_q64);
  EXPECT_EQ(out.bound_at_anchor_ns, in.bound_at_anchor_ns);
  EXPECT_EQ(out.bound_growth_q36, in.bound_growth_q36);
  EXPECT_EQ(out.status, in.status);
  EXPECT_EQ(out.depth, in.depth);
  EXPECT_EQ(out.update_raw_ns, in.update_raw_ns);
  EXPECT_EQ(out.generation, in.generation);
  // The fields land at their documented places in the struct.
  EXPECT_EQ(section.anchor_global_ns, in.anchor_global_ns);
  EXPECT_EQ(section.depth, 3);
}

TEST(ShmLayoutTest, EvaluationReadCopiesAllButDepthAndGeneration) {
  clocksync_shm_mapping section = {};
  const MappingValues in = SampleValues();
  shm::WriteSection(&section, in);
  MappingValues out;
  out.depth = 999;
  out.generation = 12345;
  ASSERT_TRUE(shm::TryReadSectionForEvaluation(&section, &out));
  EXPECT_EQ(out.anchor_raw_ns, in.anchor_raw_ns);
  EXPECT_EQ(out.anchor_global_ns, in.anchor_global_ns);
  EXPECT_EQ(out.rate_adj_q64, in.rate_adj_q64);
  EXPECT_EQ(out.bound_at_anchor_ns, in.bound_at_anchor_ns);
  EXPECT_EQ(out.bound_growth_q36, in.bound_growth_q36);
  EXPECT_EQ(out.status, in.status);
  EXPECT_EQ(out.update_raw_ns, in.update_raw_ns);
  EXPECT_EQ(out.depth, 999) << "left alone";
  EXPECT_EQ(out.generation, 12345u) << "left alone";
  section.seq += 1;
  EXPECT_FALSE(shm::TryReadSectionForEvaluation(&section, &out));
}

TEST(ShmLayoutTest, ReadFailsWhileAWriteIsInProgress) {
  clocksync_shm_mapping section = {};
  shm::WriteSection(&section, SampleValues());
  MappingValues out;
  section.seq += 1;  // what a writer stopped between its two seq stores leaves
  EXPECT_FALSE(shm::TryReadSection(&section, &out));
  section.seq += 1;
  EXPECT_TRUE(shm::TryReadSection(&section, &out));
}

TEST(ShmLayoutTest, WriteKeepsAnArbitraryEvenStartingSequence) {
  clocksync_shm_mapping section = {};
  section.seq = 1'000'000'000'000;  // a writer's start time, made even
  shm::WriteSection(&section, SampleValues());
  shm::WriteSection(&section, SampleValues());
  EXPECT_EQ(section.seq, 1'000'000'000'004u);
}

TEST(ShmLayoutTest, RateAdjFixedPointHasGoldenValuesAndRoundTrips) {
  EXPECT_EQ(shm::RateAdjToQ64(0.0), 0);
  EXPECT_EQ(shm::RateAdjToQ64(std::ldexp(1.0, -20)), int64_t{1} << 44);
  // 1 ppb = 2^64 / 1e9 = 18446744073.709... units, rounded to nearest.
  EXPECT_EQ(shm::RateAdjToQ64(1e-9), 18'446'744'074);
  EXPECT_EQ(shm::RateAdjToQ64(-1e-9), -18'446'744'074);
  // 0.01 * 2^64 in double arithmetic (doubles are 32 apart there).
  EXPECT_EQ(shm::RateAdjToQ64(0.01), 184'467'440'737'095'520);
  for (double rate : {1e-9, -3.25e-6, 1.2345678e-5, -0.0099}) {
    EXPECT_NEAR(shm::RateAdjFromQ64(shm::RateAdjToQ64(rate)), rate,
                std::ldexp(1.0, -64) + std::fabs(rate) * 1e-15)
        << rate;
  }
}

TEST(ShmLayoutTest, BoundGrowthFixedPointRoundsUpByAtMostTwoUnits) {
  const double unit_ppb = 1e9 / 68719476736.0;  // 2^-36 ns/ns in ppb
  EXPECT_NEAR(unit_ppb, 0.014551915228366852, 1e-18);
  EXPECT_EQ(shm::BoundGrowthPpbToQ36(0.0), 0u);
  // 50 ppb = 3435.97... units, rounded up.
  EXPECT_EQ(shm::BoundGrowthPpbToQ36(50.0), 3436u);
  for (double ppb : {0.001, 0.5, 1.0, 3.0, 50.0, 1234.5678, 1e6, 5e7}) {
    const uint32_t q = shm::BoundGrowthPpbToQ36(ppb);
    EXPECT_GE(shm::BoundGrowthQ36ToPpb(q), ppb) << ppb;
    EXPECT_LT(shm::BoundGrowthQ36ToPpb(q), ppb + 2 * unit_ppb) << ppb;
  }
}

}  // namespace
}  // namespace clocksync
