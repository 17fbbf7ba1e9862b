// Level-of-detail timelines: exact region time per bin (intervals split
// across bin edges, nesting, collectives), event counts, coarser levels as
// sums, ranges, options, text and JSON.
#include "trace/lod.h"

#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "hull/trace_stamp.h"

namespace clocksync::trace {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

Event At(int64_t ns, EventKind kind, uint32_t region = 0) {
  Event e;
  e.stamp = hull::PackStamp(static_cast<uint64_t>(ns), 0);
  e.kind = kind;
  e.region = region;
  return e;
}

// One process, local = global (correction none), origin 0, 1 ns ticks.
//   main:   A [0, 1000) with B nested in [100, 300); a send at 1001;
//           A again [1500, 2000)
//   helper: a barrier [500, 700)
std::vector<ProcessTrace> Traces() {
  ProcessTrace trace;
  trace.info.rank = 3;
  trace.info.origin_ns = 0;
  trace.info.tick_period_ns = 1.0;
  trace.regions = {{7, "A"}, {9, "B"}};
  ThreadTrace main;
  main.thread_index = 0;
  main.name = "main";
  main.events = {At(0, EventKind::kEnter, 7),    At(100, EventKind::kEnter, 9),
                 At(300, EventKind::kLeave, 9),  At(1000, EventKind::kLeave, 7),
                 At(1001, EventKind::kSend),     At(1500, EventKind::kEnter, 7),
                 At(2000, EventKind::kLeave, 7)};
  main.events[4].peer = 0;
  ThreadTrace helper;
  helper.thread_index = 1;
  helper.name = "helper";
  Event begin = At(500, EventKind::kCollectiveBegin);
  begin.collective = CollectiveKind::kBarrier;
  Event end = At(700, EventKind::kCollectiveEnd);
  end.collective = CollectiveKind::kBarrier;
  helper.events = {begin, end};
  trace.threads = {main, helper};
  return {trace};
}

class LodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    traces_ = Traces();
    absl::StatusOr<Timeline> timeline =
        BuildTimeline(traces_, hull::CorrectionKind::kNone);
    ASSERT_TRUE(timeline.ok()) << timeline.status();
    timeline_ = *std::move(timeline);
  }
  std::vector<ProcessTrace> traces_;
  Timeline timeline_;
};

TEST_F(LodTest, RegionTimeIsSplitExactlyAtBinEdges) {
  LodOptions options;
  options.bins = 4;
  options.levels = 2;
  absl::StatusOr<Lod> lod = BuildLod(traces_, timeline_, options);
  ASSERT_TRUE(lod.ok()) << lod.status();
  EXPECT_EQ(lod->from_ns, 0);
  EXPECT_EQ(lod->to_ns, 2001);
  ASSERT_EQ(lod->rows.size(), 2u);
  EXPECT_EQ(lod->rows[0].rank, 3);
  EXPECT_EQ(lod->rows[1].name, "helper");
  // Regions in order of first appearance.
  EXPECT_THAT(lod->regions, ElementsAre("A", "B", "collective barrier"));

  const LodLevel& fine = lod->levels[0];
  EXPECT_EQ(fine.bins, 4);
  EXPECT_EQ(fine.bin_ns, 501);  // ceil(2001 / 4): [0,501) [501,1002) ...
  const std::vector<LodBin>& main = fine.rows[0];
  EXPECT_THAT(main[0].region_ns, ElementsAre(Pair(0u, 100 + 201), Pair(1u, 200)));
  EXPECT_THAT(main[1].region_ns, ElementsAre(Pair(0u, 499)));
  EXPECT_THAT(main[2].region_ns, ElementsAre(Pair(0u, 3)));
  EXPECT_THAT(main[3].region_ns, ElementsAre(Pair(0u, 497)));
  EXPECT_EQ(main[0].events, 3);
  EXPECT_EQ(main[1].events, 2);
  EXPECT_EQ(main[1].sends, 1);
  EXPECT_EQ(main[1].recvs, 0);
  EXPECT_EQ(main[3].events, 1);
  EXPECT_EQ(main[0].dominant(), 0);
  EXPECT_EQ(main[0].busy_ns(), 501);
  const std::vector<LodBin>& helper = fine.rows[1];
  EXPECT_THAT(helper[0].region_ns, ElementsAre(Pair(2u, 1)));
  EXPECT_THAT(helper[1].region_ns, ElementsAre(Pair(2u, 199)));
  EXPECT_EQ(helper[2].dominant(), -1);

  // The coarser level is the sum of pairs.
  const LodLevel& coarse = lod->levels[1];
  EXPECT_EQ(coarse.bins, 2);
  EXPECT_EQ(coarse.bin_ns, 1002);
  EXPECT_THAT(coarse.rows[0][0].region_ns,
              ElementsAre(Pair(0u, 800), Pair(1u, 200)));
  EXPECT_EQ(coarse.rows[0][0].events, 5);
  EXPECT_THAT(coarse.rows[0][1].region_ns, ElementsAre(Pair(0u, 500)));
  EXPECT_EQ(lod->unmatched_leaves, 0);
}

TEST_F(LodTest, ARangeClipsIntervalsAndEvents) {
  LodOptions options;
  options.from_ns = 200;
  options.to_ns = 600;
  options.bins = 2;  // [200, 400) [400, 600)
  absl::StatusOr<Lod> lod = BuildLod(traces_, timeline_, options);
  ASSERT_TRUE(lod.ok()) << lod.status();
  const std::vector<LodBin>& main = lod->levels[0].rows[0];
  EXPECT_THAT(main[0].region_ns, ElementsAre(Pair(0u, 100), Pair(1u, 100)));
  EXPECT_THAT(main[1].region_ns, ElementsAre(Pair(0u, 200)));
  EXPECT_EQ(main[0].events, 1);  // the leave at 300
  EXPECT_EQ(main[1].events, 0);
  EXPECT_THAT(lod->levels[0].rows[1][1].region_ns, ElementsAre(Pair(2u, 100)));
}

TEST_F(LodTest, BadOptionsAreErrorsNamingThem) {
  LodOptions options;
  options.bins = 0;
  EXPECT_THAT(std::string(BuildLod(traces_, timeline_, options).status().message()),
              HasSubstr("bins"));
  options.bins = 10;
  options.levels = 31;
  EXPECT_THAT(std::string(BuildLod(traces_, timeline_, options).status().message()),
              HasSubstr("levels"));
  options.levels = 1;
  options.from_ns = 500;
  options.to_ns = 500;
  EXPECT_EQ(BuildLod(traces_, timeline_, options).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(LodTest, TextShowsTheDominantRegionPerBin) {
  LodOptions options;
  options.bins = 4;
  absl::StatusOr<Lod> lod = BuildLod(traces_, timeline_, options);
  ASSERT_TRUE(lod.ok());
  const std::string text = FormatLodText(*lod, 0);
  // A has the most time: 'A'; the barrier 'C' (B is second).
  EXPECT_THAT(text, HasSubstr("A A "));
  EXPECT_THAT(text, HasSubstr("rank 3 main   |AAAA|\n"));
  EXPECT_THAT(text, HasSubstr("rank 3 helper |CC..|\n"));
}

TEST_F(LodTest, JsonParsesWithEveryLevel) {
  LodOptions options;
  options.bins = 4;
  options.levels = 3;
  absl::StatusOr<Lod> lod = BuildLod(traces_, timeline_, options);
  ASSERT_TRUE(lod.ok());
  std::ostringstream out;
  WriteLodJson(*lod, out);
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out.str(), &parsed).ok())
      << out.str();
  const auto& levels = parsed.fields().at("levels").list_value().values();
  ASSERT_EQ(levels.size(), 3);
  EXPECT_EQ(levels[2].struct_value().fields().at("bins").number_value(), 1);
  const auto& bin = levels[2]
                        .struct_value()
                        .fields()
                        .at("rows")
                        .list_value()
                        .values(0)
                        .list_value()
                        .values(0)
                        .struct_value();
  EXPECT_EQ(bin.fields().at("busy_ns").number_value(), 1500);
  EXPECT_EQ(bin.fields().at("events").number_value(), 7);
  EXPECT_EQ(bin.fields().at("dominant").number_value(), 0);
}

}  // namespace
}  // namespace clocksync::trace
