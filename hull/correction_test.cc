// Tests of the correction kinds, the one factory, identity and online.

#include "hull/correction.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hull/online_correction.h"
#include "hull/postmortem.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kEpochNs = 1'700'000'000'000'000'000;

TEST(CorrectionTest, KindNamesRoundTrip) {
  const std::vector<std::string> names = {"none", "online", "linear", "spline",
                                          "piecewise"};
  ASSERT_EQ(AllCorrectionKinds().size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const CorrectionKind kind = AllCorrectionKinds()[i];
    EXPECT_EQ(CorrectionKindName(kind), names[i]);
    absl::StatusOr<CorrectionKind> parsed = ParseCorrectionKind(names[i]);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
    EXPECT_EQ(IsPostmortem(kind), i >= 2) << names[i];
  }
  absl::StatusOr<CorrectionKind> bad = ParseCorrectionKind("cubic");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "unknown correction 'cubic' (expected none, online, linear, "
            "spline or piecewise)");
}

TEST(CorrectionTest, NoneIsIdentity) {
  std::string report;
  absl::StatusOr<std::unique_ptr<Correction>> c =
      MakeCorrection(CorrectionKind::kNone, CorrectionInput{}, &report);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->ToGlobalNs(kEpochNs + 17), kEpochNs + 17);
  EXPECT_EQ((*c)->MinRate(), 1.0);
  EXPECT_EQ(report, "none: local time as is");
}

TEST(CorrectionTest, SegmentEvaluation) {
  const MappingSegment s{0, kEpochNs, 2 * kEpochNs, 1e-6};
  EXPECT_EQ(s.GlobalAtRaw(kEpochNs), 2 * kEpochNs);
  EXPECT_EQ(s.GlobalAtRaw(kEpochNs + 1'000'000'000),
            2 * kEpochNs + 1'000'000'000 + 1'000);
  EXPECT_EQ(s.GlobalAtRaw(kEpochNs - 1'000'000'000),
            2 * kEpochNs - 1'000'000'000 - 1'000);
  // Saturates instead of overflowing.
  const MappingSegment far{0, 0, INT64_MAX - 10, 0.0};
  EXPECT_EQ(far.GlobalAtRaw(1'000), INT64_MAX);
}

TEST(CorrectionTest, OnlineTakesTheSegmentInForce) {
  // Given out of order: sorted by from_raw_ns.
  const std::vector<MappingSegment> segments = {
      {kEpochNs + 1'000, kEpochNs, kEpochNs + 500, 0.0},
      {kEpochNs, kEpochNs, kEpochNs + 100, -1e-4},
  };
  CorrectionInput input;
  input.segments = segments;
  absl::StatusOr<std::unique_ptr<Correction>> c =
      MakeCorrection(CorrectionKind::kOnline, input);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->ToGlobalNs(kEpochNs - 10'000), kEpochNs - 10'000 + 100 + 1);
  EXPECT_EQ((*c)->ToGlobalNs(kEpochNs + 999), kEpochNs + 999 + 100);
  EXPECT_EQ((*c)->ToGlobalNs(kEpochNs + 1'000), kEpochNs + 1'000 + 500);
  EXPECT_DOUBLE_EQ((*c)->MinRate(), 1.0 - 1e-4);

  // Through a local-to-raw function: raw = local - 50.
  input.raw_at_local = [](int64_t local_ns) { return local_ns - 50; };
  c = MakeCorrection(CorrectionKind::kOnline, input);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->ToGlobalNs(kEpochNs + 1'050), kEpochNs + 1'000 + 500);
  EXPECT_DOUBLE_EQ((*c)->MinRate(), (1.0 - 1e-4) * 0.999);

  EXPECT_EQ(MakeCorrection(CorrectionKind::kOnline, CorrectionInput{})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(CorrectionTest, FactoryBuildsThePostmortemFits) {
  std::vector<SyncSession> sessions;
  for (int64_t i = 0; i < 5; ++i) {
    const int64_t x = kEpochNs + i * 60'000'000'000;
    // Master stamps t2 != t3: the fit uses their mean (odd sums truncate).
    sessions.push_back(SyncSession{
        i,
        {ProbeSample{x - 100, x + 7'000 + i, x + 7'003 + i * i, x + 100},
         ProbeSample{x - 90, x + 7'001, x + 7'002, x + 120}}});
  }
  CorrectionInput input;
  input.sessions = sessions;
  for (CorrectionKind kind : {CorrectionKind::kLinear, CorrectionKind::kSpline,
                              CorrectionKind::kPiecewise}) {
    SCOPED_TRACE(CorrectionKindName(kind));
    std::string report;
    absl::StatusOr<std::unique_ptr<Correction>> made =
        MakeCorrection(kind, input, &report);
    ASSERT_TRUE(made.ok()) << made.status();
    absl::StatusOr<std::unique_ptr<PostmortemCorrection>> fit =
        FitPostmortemCorrection(kind, sessions);
    ASSERT_TRUE(fit.ok());
    EXPECT_EQ(report, (*fit)->report().ToString());
    for (int64_t x = kEpochNs - 1'000'000; x < kEpochNs + 300'000'000'000;
         x += 7'777'777'777) {
      EXPECT_EQ((*made)->ToGlobalNs(x), (*fit)->ToGlobalNs(x));
    }
  }
  // No session at all.
  EXPECT_EQ(MakeCorrection(CorrectionKind::kSpline, CorrectionInput{})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  // Invalid options.
  input.postmortem.slow_fraction = 1.0;
  EXPECT_EQ(MakeCorrection(CorrectionKind::kLinear, input).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CorrectionTest, MasterMidpointTruncatesWithoutOverflow) {
  EXPECT_EQ(MasterMidpointNs(ProbeSample{0, 3, 4, 0}), 3);
  EXPECT_EQ(MasterMidpointNs(ProbeSample{0, -3, -4, 0}), -3);
  EXPECT_EQ(MasterMidpointNs(ProbeSample{0, INT64_MAX, INT64_MAX, 0}),
            INT64_MAX);
  EXPECT_EQ(ProbeSample::OneMasterStamp(1, 2, 3), (ProbeSample{1, 2, 2, 3, 0}));
}

}  // namespace
}  // namespace clocksync::hull
