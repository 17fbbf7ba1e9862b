// clocksyncd/wander_state.h: the file's text both ways, bad files named
// by line, and the write's rename.

#include "clocksyncd/wander_state.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace clocksync {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name + "." +
         std::to_string(getpid());
}

TEST(WanderStateTest, TextRoundTrips) {
  const WanderState state{0.0843, 1764650000};
  const absl::StatusOr<WanderState> parsed =
      ParseWanderState(FormatWanderState(state));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_DOUBLE_EQ(parsed->wander_ppb_per_sqrt_s, 0.0843);
  EXPECT_EQ(parsed->saved_unix_s, 1764650000);
}

TEST(WanderStateTest, CommentsBlankLinesAndTabs) {
  const absl::StatusOr<WanderState> parsed = ParseWanderState(
      "# a comment\n\n  wander_ppb_per_sqrt_s\t2.5e-2  \nsaved_unix_s 7\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_DOUBLE_EQ(parsed->wander_ppb_per_sqrt_s, 0.025);
  EXPECT_EQ(parsed->saved_unix_s, 7);
}

TEST(WanderStateTest, BadTextIsNamedByLine) {
  const struct {
    const char* text;
    const char* error;
  } cases[] = {
      {"wander_ppb_per_sqrt_s 0\nsaved_unix_s 1\n",
       "line 1: wander_ppb_per_sqrt_s: '0' is not a finite number > 0"},
      {"wander_ppb_per_sqrt_s -1\nsaved_unix_s 1\n",
       "line 1: wander_ppb_per_sqrt_s: '-1' is not a finite number > 0"},
      {"wander_ppb_per_sqrt_s nan\nsaved_unix_s 1\n",
       "line 1: wander_ppb_per_sqrt_s: 'nan' is not a finite number > 0"},
      {"wander_ppb_per_sqrt_s 0.1\nsaved_unix_s x\n",
       "line 2: saved_unix_s: 'x' is not an integer"},
      {"wander_ppb_per_sqrt_s 0.1\nfrequency_ppm 3\n",
       "line 2: unknown key 'frequency_ppm'"},
      {"wander_ppb_per_sqrt_s 0.1 2\n",
       "line 1: expected 'key value', got 'wander_ppb_per_sqrt_s 0.1 2'"},
      {"saved_unix_s 1\n", "missing wander_ppb_per_sqrt_s"},
      {"wander_ppb_per_sqrt_s 0.1\n", "missing saved_unix_s"},
      {"", "missing wander_ppb_per_sqrt_s"},
  };
  for (const auto& c : cases) {
    const absl::StatusOr<WanderState> parsed = ParseWanderState(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), c.error) << c.text;
  }
}

TEST(WanderStateTest, WritesThroughARenameAndReadsBack) {
  const std::string path = TempPath("wander");
  ASSERT_TRUE(WriteWanderState(path, {0.31, 42}).ok());
  std::ifstream tmp(path + ".tmp");
  EXPECT_FALSE(tmp.good()) << "the .tmp file is renamed over the file";
  absl::StatusOr<WanderState> read = ReadWanderState(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_DOUBLE_EQ(read->wander_ppb_per_sqrt_s, 0.31);
  EXPECT_EQ(read->saved_unix_s, 42);
  // A second write replaces the first.
  ASSERT_TRUE(WriteWanderState(path, {0.05, 43}).ok());
  read = ReadWanderState(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_DOUBLE_EQ(read->wander_ppb_per_sqrt_s, 0.05);
  std::remove(path.c_str());
}

TEST(WanderStateTest, MissingCorruptAndUnwritableFiles) {
  const std::string path = TempPath("wander_missing");
  std::remove(path.c_str());
  EXPECT_EQ(ReadWanderState(path).status().code(), absl::StatusCode::kNotFound);

  const std::string corrupt = TempPath("wander_corrupt");
  {
    std::ofstream out(corrupt);
    out << "wander_ppb_per_sqrt_s 0.1\nsaved_unix_s 1\ngarbage\n";
  }
  const absl::StatusOr<WanderState> read = ReadWanderState(corrupt);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(read.status().message(),
            corrupt + ": line 3: expected 'key value', got 'garbage'");
  std::remove(corrupt.c_str());

  const absl::Status written =
      WriteWanderState("/proc/no/such/dir/wander", {0.1, 1});
  EXPECT_FALSE(written.ok());
  EXPECT_NE(written.message().find("cannot create /proc/no/such/dir/wander.tmp"),
            std::string::npos)
      << written;
}

}  // namespace
}  // namespace clocksync
