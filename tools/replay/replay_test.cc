// Replay: CSV parsing and its errors (naming the line), the output rows,
// the accuracy summary, and the //tools/replay:replay binary on the bundled sample.

#include "tools/replay/replay.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace clocksync::hull {
namespace {

bool Parse(const std::string& text, std::vector<ReplaySample>* out,
           std::string* error) {
  std::istringstream in(text);
  return ParseSamplesCsv(in, "s.csv", out, error);
}

TEST(ReplayTest, ParsesWithAndWithoutTruth) {
  std::vector<ReplaySample> v;
  std::string error;
  ASSERT_TRUE(Parse("# comment\nt1,t2,t3,t4\n1,2,3,4\n\n5, 6 ,7,8\r\n", &v,
                    &error))
      << error;
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[1].sample.t2_ns, 6);
  EXPECT_FALSE(v[1].truth_ns.has_value());
  v.clear();
  ASSERT_TRUE(Parse("t1,t2,t3,t4,truth_ns\n1,2,3,4,9\n", &v, &error));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(*v[0].truth_ns, 9);
  // A daemon's sample_log: more columns, ignored; every line as wide.
  v.clear();
  ASSERT_TRUE(Parse("t1,t2,t3,t4,truth_ns,kernel_t1\n1,2,3,4,9,1\n", &v,
                    &error));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(*v[0].truth_ns, 9);
  v.clear();
  ASSERT_TRUE(Parse("t1,t2,t3,t4,kernel_t1\n1,2,3,4,1\n", &v, &error));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_FALSE(v[0].truth_ns.has_value());
  // truth_ns wherever it is after t4.
  v.clear();
  ASSERT_TRUE(Parse("t1,t2,t3,t4,delay_ns,truth_ns\n1,2,3,4,7,9\n", &v,
                    &error))
      << error;
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(*v[0].truth_ns, 9);
  EXPECT_FALSE(Parse("t1,t2,t3,t4,delay_ns,truth_ns\n1,2,3,4,7,x\n", &v,
                     &error));
  EXPECT_EQ(error, "s.csv:2: truth_ns is not an integer: 'x'");
  EXPECT_FALSE(Parse("t1,t2,t3,t4,x\n1,2,3,4\n", &v, &error));
  EXPECT_EQ(error, "s.csv:2: expected 5 fields, got 4");
}

TEST(ReplayTest, ErrorsNameTheLine) {
  std::vector<ReplaySample> v;
  std::string error;
  EXPECT_FALSE(Parse("t1,t2,t3,t4\n1,2,3,4\n1,2,x,4\n", &v, &error));
  EXPECT_EQ(error, "s.csv:3: t3 is not an integer: 'x'");
  EXPECT_FALSE(Parse("t1,t2,t3,t4\n1,2,3\n", &v, &error));
  EXPECT_EQ(error, "s.csv:2: expected 4 fields, got 3");
  EXPECT_FALSE(Parse("a,b,c,d\n", &v, &error));
  EXPECT_EQ(error, "s.csv:1: header column 1 is 'a', expected 't1'");
  EXPECT_FALSE(Parse("", &v, &error));
  EXPECT_EQ(error, "s.csv:1: empty file: expected the header t1,t2,t3,t4");
  EXPECT_FALSE(Parse("t1,t2,t3,t4\n1,2,3,99999999999999999999\n", &v, &error));
  EXPECT_EQ(error, "s.csv:2: t4 is not an integer: '99999999999999999999'");
}

TEST(ReplayTest, RowsEmptyUntilSynchronizedThenBounded) {
  std::vector<ReplaySample> v;
  const int64_t offset = 1'000'000;
  for (int64_t i = 0; i < 5; ++i) {
    const int64_t t1 = 1'000'000'000 * (i + 1);
    v.push_back({{t1, t1 + offset + 100, t1 + offset + 110, t1 + 210},
                 t1 + 210 + offset});
  }
  std::ostringstream out;
  AdaptiveConfig c;
  c.base.wander_ppb_per_sqrt_s = 0;
  c.levels = 1;
  const ReplaySummary s = Replay(v, c, 0, &out);
  std::istringstream lines(out.str());
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "t4,estimate_ns,earliest_ns,latest_ns");
  std::getline(lines, line);
  EXPECT_EQ(line, "1000000210,,,");  // One sample: unsynchronized.
  std::getline(lines, line);
  // Two samples, 100 ns each way: at the second t4 the bound runs from the
  // response point (θ − 100) to the steepest line through the first
  // response and second request, θ + 100 + 200 * 210 / (1e9 − 210),
  // rounded outwards.
  EXPECT_EQ(line, "2000000210,2001000210,2001000110,2001000311");
  EXPECT_EQ(s.samples, 5u);
  EXPECT_EQ(s.synced_rows, 4u);
  EXPECT_EQ(s.checks, 4u);
  EXPECT_EQ(s.bound_violations, 0u);
  EXPECT_EQ(s.max_abs_error_ns, 0);
}

TEST(ReplayTest, BinaryReplaysTheBundledSample) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string out = dir + "/out.csv", err = dir + "/err.txt";
  const std::string cmd = "tools/replay/replay --input=tools/replay/testdata/chrony_default_10min.csv"
                          " --output=" + out + " 2>" + err;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream summary(err);
  std::string text((std::istreambuf_iterator<char>(summary)),
                   std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("605 samples, 0 rejected"), std::string::npos) << text;
  // The library's estimator by default.
  EXPECT_NE(text.find("5 windows, 600 s down to 37.5 s"), std::string::npos)
      << text;
  EXPECT_NE(text.find("bound_violations=0 of"), std::string::npos) << text;
  std::ifstream rows(out);
  int n = 0;
  std::string line;
  while (std::getline(rows, line)) ++n;
  EXPECT_EQ(n, 606);  // Header + one row per sample.
  // Levels down to 37.5 s from another longest window; a fixed one.
  const auto summary_of = [&](const std::string& flags) {
    const std::string c =
        "tools/replay/replay --input=tools/replay/testdata/"
        "chrony_default_10min.csv --output=/dev/null " + flags + " 2>" + err;
    EXPECT_EQ(std::system(c.c_str()), 0) << flags;
    std::ifstream f(err);
    return std::string((std::istreambuf_iterator<char>(f)),
                       std::istreambuf_iterator<char>());
  };
  EXPECT_NE(summary_of("--window_s=300").find("4 windows, 300 s down to 37.5 s"),
            std::string::npos);
  EXPECT_NE(summary_of("--window_s=300 --levels=1").find("a fixed window of 300 s"),
            std::string::npos);
  const std::string levels_cmd =
      "tools/replay/replay --input=tools/replay/testdata/chrony_default_10min.csv"
      " --levels=9 2>" + err;
  EXPECT_EQ(WEXITSTATUS(std::system(levels_cmd.c_str())), 2);
  {
    std::ifstream e(err);
    std::getline(e, line);
    EXPECT_EQ(line, "replay: bad option: --levels=9: 0 (down to 37.5 s) or 1 to 8");
  }
  const std::string window_cmd =
      "tools/replay/replay --input=tools/replay/testdata/chrony_default_10min.csv"
      " --window_s=-5 2>" + err;
  EXPECT_EQ(WEXITSTATUS(std::system(window_cmd.c_str())), 2);
  {
    std::ifstream e(err);
    std::getline(e, line);
    EXPECT_EQ(line, "replay: bad option: --window_s=-5: must be positive (seconds)");
  }
  // A bad file: the error names it and the line, exit status 1.
  const std::string bad = dir + "/bad.csv";
  std::ofstream(bad) << "t1,t2,t3,t4\n1,2,3,4\noops\n";
  const std::string bad_cmd = "tools/replay/replay --input=" + bad + " 2>" + err;
  EXPECT_EQ(WEXITSTATUS(std::system(bad_cmd.c_str())), 1);
  std::ifstream e(err);
  std::getline(e, line);
  EXPECT_EQ(line, "replay: " + bad + ":3: expected 4 fields, got 1");
}

}  // namespace
}  // namespace clocksync::hull
