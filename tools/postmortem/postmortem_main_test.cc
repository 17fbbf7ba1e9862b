// tools/postmortem/postmortem_main_test.cc: tests of the //tools/postmortem:postmortem tool: its
// CSV parsing and error messages (file and line) through the library, and
// the binary itself run on files (exit status, output, --help).

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/postmortem/postmortem_csv.h"

namespace clocksync::hull {
namespace {

using ::testing::HasSubstr;

// Two sessions a minute apart against a master 2 µs ahead and 50 ppm fast:
// global = local + 2000 + (local - 1e18) / 20000, exact at these midpoints.
constexpr char kSessions[] =
    "session,s,m,r\n"
    "0,999999999999999000,1000000000000002000,1000000000000001000\n"
    "0,1000000000000999000,1000000000001002050,1000000000001001000\n"
    "\r\n"
    " 1 , 1000000060000000000 , 1000000060003002000 , 1000000060000000000 \r\n"
    "1,1000000060001000000,1000000060004002050,1000000060001000000\n";

TEST(PostmortemCsvTest, ParsesSessions) {
  absl::StatusOr<std::vector<SyncSession>> sessions =
      ParseSessionsCsv(kSessions, "sessions.csv");
  ASSERT_TRUE(sessions.ok()) << sessions.status();
  ASSERT_EQ(sessions->size(), 2u);
  EXPECT_EQ((*sessions)[0].id, 0);
  ASSERT_EQ((*sessions)[0].exchanges.size(), 2u);
  // s -> t1, m -> t2 = t3, r -> t4.
  EXPECT_EQ((*sessions)[0].exchanges[1].t1_ns, 1000000000000999000);
  EXPECT_EQ((*sessions)[0].exchanges[1].t2_ns, 1000000000001002050);
  EXPECT_EQ((*sessions)[0].exchanges[1].t3_ns, 1000000000001002050);
  EXPECT_EQ((*sessions)[0].exchanges[1].t4_ns, 1000000000001001000);
  EXPECT_EQ((*sessions)[1].id, 1);
  EXPECT_EQ((*sessions)[1].exchanges[0].t2_ns, 1000000060003002000);
  EXPECT_EQ((*sessions)[1].exchanges[0].t3_ns, 1000000060003002000);
}

TEST(PostmortemCsvTest, GroupsRowsBySessionNumber) {
  absl::StatusOr<std::vector<SyncSession>> sessions =
      ParseSessionsCsv("session,s,m,r\n7,1,2,3\n-2,4,5,6\n7,7,8,9\n", "x.csv");
  ASSERT_TRUE(sessions.ok()) << sessions.status();
  ASSERT_EQ(sessions->size(), 2u);
  EXPECT_EQ((*sessions)[0].id, -2);
  EXPECT_EQ((*sessions)[1].id, 7);
  EXPECT_EQ((*sessions)[1].exchanges.size(), 2u);
}

TEST(PostmortemCsvTest, SessionErrorsNameFileAndLine) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"", "s.csv:1: empty file, expected the header 'session,s,m,r'"},
      {"\n\n", "s.csv:1: empty file, expected the header 'session,s,m,r'"},
      {"session,s,r,m\n1,2,3,4\n",
       "s.csv:1: expected the header 'session,s,m,r', got 'session,s,r,m'"},
      {"\nsession,s,m,r\n", "s.csv:2: no exchanges after the header"},
      {"session,s,m,r\n1,2,3,4\n\n1,2,3\n",
       "s.csv:4: expected 4 fields (session,s,m,r), got 3"},
      {"session,s,m,r\n1,2,3,4,5\n",
       "s.csv:2: expected 4 fields (session,s,m,r), got 5"},
      {"session,s,m,r\n1,2,x3,4\n",
       "s.csv:2: field 'm': 'x3' is not a 64-bit integer"},
      {"session,s,m,r\n1,2,3,\n",
       "s.csv:2: field 'r': '' is not a 64-bit integer"},
      {"session,s,m,r\n1,2,3,4.5\n",
       "s.csv:2: field 'r': '4.5' is not a 64-bit integer"},
      {"session,s,m,r\n1,9223372036854775808,3,4\n",
       "s.csv:2: field 's': '9223372036854775808' is not a 64-bit integer"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<SyncSession>> sessions =
        ParseSessionsCsv(c.text, "s.csv");
    ASSERT_FALSE(sessions.ok()) << c.text;
    EXPECT_EQ(sessions.status().message(), c.error);
  }
}

TEST(PostmortemCsvTest, ParsesQueries) {
  absl::StatusOr<std::vector<int64_t>> query =
      ParseQueryCsv("local_ns\n5\n-3\n\n 9223372036854775807 \n", "q.csv");
  ASSERT_TRUE(query.ok()) << query.status();
  EXPECT_EQ(*query, (std::vector<int64_t>{5, -3, 9223372036854775807}));
  query = ParseQueryCsv("local_ns\n", "q.csv");
  ASSERT_TRUE(query.ok());
  EXPECT_TRUE(query->empty());
  EXPECT_EQ(ParseQueryCsv("local\n5\n", "q.csv").status().message(),
            "q.csv:1: expected the header 'local_ns', got 'local'");
  EXPECT_EQ(ParseQueryCsv("local_ns\n5\n6,7\n", "q.csv").status().message(),
            "q.csv:3: expected 1 field (local_ns), got 2");
  EXPECT_EQ(ParseQueryCsv("local_ns\n5\nabc\n", "q.csv").status().message(),
            "q.csv:3: field 'local_ns': 'abc' is not a 64-bit integer");
}

TEST(PostmortemCsvTest, RunsTheToolOnText) {
  const std::string query =
      "local_ns\n1000000030000000000\n1000000000000000000\n";
  for (const char* method : {"linear", "spline", "piecewise"}) {
    absl::StatusOr<PostmortemToolResult> result =
        RunPostmortemTool(kSessions, "s.csv", query, "q.csv", method);
    ASSERT_TRUE(result.ok()) << result.status();
    // 30 s after 1e18: 2000 + 30e9 / 20000 = 1'502'000 ns ahead; unsorted
    // queries keep their order.
    EXPECT_EQ(result->output_csv,
              "local_ns,global_ns\n"
              "1000000030000000000,1000000030001502000\n"
              "1000000000000000000,1000000000000002000\n")
        << method;
    EXPECT_TRUE(result->report.clean()) << result->report.ToString();
  }
  EXPECT_EQ(RunPostmortemTool(kSessions, "s.csv", query, "q.csv", "cubic")
                .status()
                .message(),
            "unknown correction method 'cubic' (expected linear, spline or "
            "piecewise)");
  EXPECT_EQ(RunPostmortemTool("session,s,m,r\n1,10,20,5\n", "s.csv", query,
                              "q.csv", "spline")
                .status()
                .message(),
            "s.csv: spline correction: none of the 1 sync sessions has a "
            "usable exchange (r >= s)");
  EXPECT_EQ(
      RunPostmortemTool(kSessions, "s.csv", "local_ns\nx\n", "q.csv", "linear")
          .status()
          .message(),
      "q.csv:2: field 'local_ns': 'x' is not a 64-bit integer");
}

// The binary, as `bazel run` would start it.
class PostmortemBinaryTest : public ::testing::Test {
 protected:
  struct Result {
    int exit_code = -1;
    std::string output;  // stdout and stderr
  };

  static std::string TmpPath(const std::string& name) {
    return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  }
  static void WriteFile(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static Result Run(const std::string& args) {
    const std::string binary =
        absl::StrCat(std::getenv("TEST_SRCDIR"), "/",
                     std::getenv("TEST_WORKSPACE"), "/tools/postmortem/postmortem");
    const std::string command = absl::StrCat(binary, " ", args, " 2>&1");
    Result result;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return result;
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
      result.output.append(buffer, n);
    }
    const int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
  }
};

TEST_F(PostmortemBinaryTest, ConvertsFiles) {
  const std::string sessions = TmpPath("sessions.csv");
  const std::string query = TmpPath("query.csv");
  const std::string out = TmpPath("out.csv");
  WriteFile(sessions, kSessions);
  WriteFile(query, "local_ns\n1000000000000000000\n1000000030000000000\n");
  const Result r = Run(absl::StrCat("--sessions=", sessions, " --query=", query,
                                    " --method=spline --output=", out));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("postmortem: spline: 2 sessions, 4 exchanges"));
  EXPECT_EQ(ReadFile(out),
            "local_ns,global_ns\n"
            "1000000000000000000,1000000000000002000\n"
            "1000000030000000000,1000000030001502000\n");
  // Without --output: to standard output.
  const Result to_stdout = Run(absl::StrCat(
      "--sessions=", sessions, " --query=", query, " --method=linear"));
  EXPECT_EQ(to_stdout.exit_code, 0) << to_stdout.output;
  EXPECT_THAT(to_stdout.output,
              HasSubstr("1000000030000000000,1000000030001502000\n"));
}

TEST_F(PostmortemBinaryTest, ErrorsNameFileAndLine) {
  const std::string bad = TmpPath("bad_sessions.csv");
  const std::string query = TmpPath("query2.csv");
  WriteFile(bad, "session,s,m,r\n1,2,3,4\n1,2,three,4\n");
  WriteFile(query, "local_ns\n1\n");
  Result r = Run(
      absl::StrCat("--sessions=", bad, " --query=", query, " --method=linear"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output,
              HasSubstr(absl::StrCat(
                  bad, ":3: field 'm': 'three' is not a 64-bit integer")));

  const std::string missing = TmpPath("no_such_file.csv");
  r = Run(absl::StrCat("--sessions=", missing, " --query=", query,
                       " --method=linear"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat(missing, ": cannot read: ")));

  r = Run(
      absl::StrCat("--sessions=", bad, " --query=", query, " --method=cubic"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("unknown correction method 'cubic'"));

  r = Run(absl::StrCat("--sessions=", bad, " --method=linear"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output,
              HasSubstr("--sessions, --query and --method are required"));

  r = Run(absl::StrCat("--sessions=", bad, " --query=", query,
                       " --method=linear stray"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("unexpected argument 'stray'"));
}

TEST_F(PostmortemBinaryTest, HelpDescribesTheTool) {
  const Result r = Run("--help");
  EXPECT_THAT(r.output, HasSubstr("--method=linear|spline|piecewise"));
  EXPECT_THAT(r.output, HasSubstr("-sessions"));
  EXPECT_THAT(r.output, HasSubstr("-query"));
  EXPECT_THAT(r.output, HasSubstr("-output"));
  EXPECT_THAT(r.output, HasSubstr("-slow_fraction"));
}

}  // namespace
}  // namespace clocksync::hull
