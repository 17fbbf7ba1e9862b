// Timelines, corrections, message matching, truth errors and profiles on
// the synthetic two-process trace with known answers.

#include "trace/timeline.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trace/export.h"
#include "trace/otf2_reader.h"
#include "trace/synthetic_trace.h"

namespace clocksync::trace {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class SyntheticTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") +
                            "/timeline_synthetic";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    absl::StatusOr<SyntheticAnswers> written = WriteSyntheticTraces(dir);
    ASSERT_TRUE(written.ok()) << written.status();
    answers_ = new SyntheticAnswers(*written);
    traces_ = new std::vector<ProcessTrace>;
    for (const std::string& archive : {written->rank0_dir, written->rank1_dir}) {
      absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(archive);
      ASSERT_TRUE(trace.ok()) << trace.status();
      ASSERT_FALSE(trace->truncated) << trace->truncation_note;
      traces_->push_back(*std::move(trace));
    }
  }
  static void TearDownTestSuite() {
    delete answers_;
    delete traces_;
  }

  CorrectionSummary Summary(hull::CorrectionKind kind) {
    absl::StatusOr<Timeline> timeline = BuildTimeline(*traces_, kind);
    EXPECT_TRUE(timeline.ok()) << timeline.status();
    absl::StatusOr<MessageMatch> messages = MatchMessages(*traces_);
    EXPECT_TRUE(messages.ok()) << messages.status();
    absl::StatusOr<CorrectionSummary> summary =
        Summarize(*traces_, *timeline, *messages, 0);
    EXPECT_TRUE(summary.ok()) << summary.status();
    return *summary;
  }

  static SyntheticAnswers* answers_;
  static std::vector<ProcessTrace>* traces_;
};

SyntheticAnswers* SyntheticTrace::answers_ = nullptr;
std::vector<ProcessTrace>* SyntheticTrace::traces_ = nullptr;

TEST_F(SyntheticTrace, EveryMessageIsMatched) {
  absl::StatusOr<MessageMatch> messages = MatchMessages(*traces_);
  ASSERT_TRUE(messages.ok()) << messages.status();
  EXPECT_EQ(static_cast<int64_t>(messages->pairs.size()), answers_->messages);
  EXPECT_EQ(messages->unmatched_sends, 0);
  EXPECT_EQ(messages->unmatched_recvs, 0);
  EXPECT_EQ(messages->unknown_peers, 0);
}

TEST_F(SyntheticTrace, NoCorrectionShowsTheKnownViolations) {
  const CorrectionSummary none = Summary(hull::CorrectionKind::kNone);
  EXPECT_TRUE(none.available);
  EXPECT_EQ(none.clock_condition.messages, answers_->messages);
  EXPECT_EQ(none.clock_condition.reversed, answers_->reversed_without_correction);
  // Rank 1 is ~3 ms ahead, so a 20 us message looks ~3 ms early.
  EXPECT_LT(none.clock_condition.worst_latency_ns, -2'900'000);
  EXPECT_EQ(none.truth_events, answers_->events_rank0 + answers_->events_rank1);
  EXPECT_GT(none.max_abs_error_ns, 1'000'000'000'000'000'000);  // no offset
}

TEST_F(SyntheticTrace, OnlineHasTheKnownErrors) {
  const CorrectionSummary online = Summary(hull::CorrectionKind::kOnline);
  EXPECT_TRUE(online.available) << online.unavailable_reason;
  EXPECT_EQ(online.clock_condition.reversed, 0);
  EXPECT_EQ(online.clock_condition.below_min_latency, 0);
  EXPECT_NEAR(online.max_abs_error_ns, 200, 1);
  EXPECT_NEAR(online.rms_error_ns, answers_->online_rms_error_ns, 1.0);
}

TEST_F(SyntheticTrace, PostmortemCorrectionsRecoverLinearClocks) {
  for (hull::CorrectionKind kind :
       {hull::CorrectionKind::kLinear, hull::CorrectionKind::kSpline,
        hull::CorrectionKind::kPiecewise}) {
    const CorrectionSummary s = Summary(kind);
    EXPECT_TRUE(s.available) << hull::CorrectionKindName(kind);
    EXPECT_EQ(s.clock_condition.reversed, 0) << hull::CorrectionKindName(kind);
    EXPECT_LE(s.max_abs_error_ns, 3) << hull::CorrectionKindName(kind);
  }
}

TEST_F(SyntheticTrace, MergedOrderKeepsEveryThreadsOrder) {
  for (hull::CorrectionKind kind : hull::AllCorrectionKinds()) {
    absl::StatusOr<Timeline> timeline = BuildTimeline(*traces_, kind);
    ASSERT_TRUE(timeline.ok()) << timeline.status();
    std::vector<TimedEvent> merged = MergedEvents(*timeline);
    EXPECT_EQ(static_cast<int64_t>(merged.size()),
              answers_->events_rank0 + answers_->events_rank1);
    std::map<std::pair<int32_t, uint32_t>, int64_t> last;
    int64_t previous_ns = INT64_MIN;
    for (const TimedEvent& e : merged) {
      auto key = std::make_pair(e.process, e.thread);
      auto it = last.find(key);
      if (it != last.end()) {
        EXPECT_EQ(e.index, it->second + 1);
      }
      last[key] = e.index;
      EXPECT_GE(e.global_ns, previous_ns);
      previous_ns = e.global_ns;
    }
  }
}

TEST_F(SyntheticTrace, ProfileOnTheTruthfulTimelineMeasuresRawDurations) {
  absl::StatusOr<Timeline> online =
      BuildTimeline(*traces_, hull::CorrectionKind::kOnline);
  ASSERT_TRUE(online.ok());
  const Profile profile = ProfileRegions(*traces_, *online);
  EXPECT_EQ(profile.unmatched_leaves, 0);
  EXPECT_EQ(profile.open_enters, 0);
  bool found = false;
  for (const RegionProfile& r : profile.regions) {
    if (r.name != "work") continue;
    found = true;
    EXPECT_EQ(r.process, 1);
    EXPECT_EQ(r.calls, answers_->messages / 2);
    EXPECT_NEAR(r.min_ns, 1'999'000, 1);
    EXPECT_NEAR(r.max_ns, 1'999'000, 1);
  }
  EXPECT_TRUE(found);
  // On local time, rank 1's clock runs 50 ppm fast.
  absl::StatusOr<Timeline> none =
      BuildTimeline(*traces_, hull::CorrectionKind::kNone);
  ASSERT_TRUE(none.ok());
  for (const RegionProfile& r : ProfileRegions(*traces_, *none).regions) {
    if (r.name == "work") {
      EXPECT_NEAR(r.mean_ns(), 1'999'000 * 1.00005, 1.5);
    }
  }
}

TEST_F(SyntheticTrace, PostmortemOptionsReachTheCorrections) {
  hull::PostmortemOptions keep_all;
  keep_all.slow_fraction = 0;
  hull::PostmortemOptions drop_half;
  drop_half.slow_fraction = 0.5;
  for (hull::CorrectionKind kind :
       {hull::CorrectionKind::kLinear, hull::CorrectionKind::kSpline,
        hull::CorrectionKind::kPiecewise}) {
    absl::StatusOr<Timeline> all = BuildTimeline(*traces_, kind, keep_all);
    absl::StatusOr<Timeline> half = BuildTimeline(*traces_, kind, drop_half);
    ASSERT_TRUE(all.ok() && half.ok()) << hull::CorrectionKindName(kind);
    EXPECT_THAT(all->processes[0].report, HasSubstr(" 0 slow dropped"));
    EXPECT_THAT(half->processes[0].report,
                Not(HasSubstr(" 0 slow dropped")));
    EXPECT_THAT(half->processes[0].report, HasSubstr("slow dropped"));
  }
}

TEST_F(SyntheticTrace, ChromeJsonHasOneFlowPairPerMessage) {
  absl::StatusOr<Timeline> timeline =
      BuildTimeline(*traces_, hull::CorrectionKind::kLinear);
  ASSERT_TRUE(timeline.ok());
  absl::StatusOr<MessageMatch> messages = MatchMessages(*traces_);
  ASSERT_TRUE(messages.ok());
  std::ostringstream out;
  WriteChromeJson(*traces_, *timeline, *messages, out);
  const std::string json = out.str();
  size_t starts = 0, finishes = 0;
  for (size_t at = json.find("\"ph\":\"s\""); at != std::string::npos;
       at = json.find("\"ph\":\"s\"", at + 1)) {
    ++starts;
  }
  for (size_t at = json.find("\"ph\":\"f\""); at != std::string::npos;
       at = json.find("\"ph\":\"f\"", at + 1)) {
    ++finishes;
  }
  EXPECT_EQ(static_cast<int64_t>(starts), answers_->messages);
  EXPECT_EQ(starts, finishes);
}

TEST(ModelInverse, RoundTripsRawTimes) {
  std::mt19937_64 rng(3);
  for (const char* spec : {"offset=3ms,frequency_ppm=50",
                           "offset=-2s,frequency_ppm=-80,wander=2,seed=4",
                           "frequency_ppm=10,sine_ppb=500,sine_period_s=60"}) {
    absl::StatusOr<std::unique_ptr<ModelInverse>> inverse =
        ModelInverse::Create(GroundTruth{spec, 5'000'000'000, 0});
    ASSERT_TRUE(inverse.ok()) << inverse.status();
    for (int i = 0; i < 2000; ++i) {
      const int64_t raw = 5'000'000'000 + static_cast<int64_t>(rng() % 600'000'000'000);
      const int64_t local = (*inverse)->LocalAtRaw(raw);
      const int64_t back = (*inverse)->RawAtLocal(local);
      // Exact where the local clock advances every raw ns; a clock slower
      // than raw repeats some local ns, and then the largest raw is given.
      EXPECT_LE(std::abs(back - raw), 1) << spec << " raw " << raw;
      EXPECT_EQ((*inverse)->LocalAtRaw(back), local) << spec;
    }
  }
  EXPECT_FALSE(ModelInverse::Create(GroundTruth{"bogus=1", 0, 0}).ok());
}

TEST(Corrections, ParseNames) {
  for (hull::CorrectionKind kind : hull::AllCorrectionKinds()) {
    absl::StatusOr<hull::CorrectionKind> parsed =
        hull::ParseCorrectionKind(hull::CorrectionKindName(kind));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_FALSE(hull::ParseCorrectionKind("cubic").ok());
}

TEST(Corrections, MissingInputIsUnavailableWithAReason) {
  ProcessTrace trace;
  trace.info.rank = 7;
  Event e;
  e.stamp = 1 << 13;
  trace.threads.push_back(ThreadTrace{0, "main", {e}});
  for (hull::CorrectionKind kind :
       {hull::CorrectionKind::kOnline, hull::CorrectionKind::kSpline}) {
    absl::StatusOr<std::unique_ptr<hull::Correction>> c =
        MakeProcessCorrection(trace, kind, nullptr);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("rank 7"), std::string::npos)
        << c.status();
  }
  std::vector<ProcessTrace> traces = {trace};
  EXPECT_FALSE(BuildTimeline(traces, hull::CorrectionKind::kOnline).ok());
  EXPECT_TRUE(BuildTimeline(traces, hull::CorrectionKind::kNone).ok());
}

// Each process numbers its own communicators: the same group (name and
// ranks) under different ids in sender and receiver still matches, and one
// id naming different groups does not.
TEST(MatchMessages, CommunicatorsByNameAndRanksNotById) {
  auto process = [](int32_t rank, std::vector<Communicator> comms,
                    std::vector<Event> events) {
    ProcessTrace trace;
    trace.info.rank = rank;
    trace.communicators = std::move(comms);
    trace.threads.push_back(ThreadTrace{0, "main", std::move(events)});
    return trace;
  };
  auto message = [](EventKind kind, uint64_t tick, int32_t peer,
                    uint32_t comm) {
    Event e;
    e.kind = kind;
    e.stamp = tick << 13;
    e.peer = peer;
    e.comm = comm;
    e.tag = 1;
    return e;
  };
  const Communicator world{0, "world", {0}};
  // Rank 1 knows group "g" {1, 2} as id 3, rank 2 as id 1; both also have a
  // different group under the other's id.
  std::vector<ProcessTrace> traces = {
      process(1, {world, {1, "other", {1, 5}}, {3, "g", {1, 2}}},
              {message(EventKind::kSend, 10, 1, 3),
               message(EventKind::kSend, 11, 1, 1)}),
      process(2, {world, {1, "g", {1, 2}}, {3, "other", {5, 2}}},
              {message(EventKind::kRecv, 20, 0, 1),
               message(EventKind::kRecv, 21, 0, 3)}),
  };
  absl::StatusOr<MessageMatch> match = MatchMessages(traces);
  ASSERT_TRUE(match.ok()) << match.status();
  ASSERT_EQ(match->pairs.size(), 1u);
  EXPECT_EQ(match->pairs[0].send_index, 0u);
  EXPECT_EQ(match->pairs[0].recv_index, 0u);
  // The send to rank 5 in "other" and the receive from 5: peers not in
  // the run.
  EXPECT_EQ(match->unknown_peers, 2);
}

}  // namespace
}  // namespace clocksync::trace
