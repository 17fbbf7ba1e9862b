// shm/model_file_test.cc: the model file round-trips through its writer and
// parser; malformed files are refused naming the file and the line.

#include "shm/model_file.h"

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace clocksync {
namespace shm {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(ModelFileTest, PathIsBesideTheSegment) {
  EXPECT_EQ(ModelFilePath("/run/clocksyncd/clocksync.shm"),
            "/run/clocksyncd/clocksync.shm.model");
}

TEST(ModelFileTest, RoundTripsThroughTheFile) {
  const std::string path = TempPath("round_trip.shm.model");
  for (const int64_t origin : {int64_t{0}, int64_t{123456789012345},
                               int64_t{-5}, INT64_MAX, INT64_MIN}) {
    const ModelFile model{origin,
                          "offset=1500ms,frequency_ppm=80,wander=1,seed=4"};
    ASSERT_TRUE(WriteModelFile(path, model).ok());
    absl::StatusOr<ModelFile> read = ReadModelFile(path);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->origin_raw_ns, origin);
    EXPECT_EQ(read->spec, model.spec);
  }
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(ModelFileTest, TheFormatIsOneLine) {
  EXPECT_EQ(FormatModelFile({42, "offset=1ms"}),
            "origin_raw_ns=42 spec=offset=1ms\n");
  // Field order, surrounding blanks and trailing blank lines do not matter.
  absl::StatusOr<ModelFile> read =
      ParseModelFile("  spec=a=1,b=2   origin_raw_ns=-7 \n\n", "f");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->origin_raw_ns, -7);
  EXPECT_EQ(read->spec, "a=1,b=2");
}

TEST(ModelFileTest, MalformedTextNamesTheFileAndLine) {
  struct Case {
    const char* text;
    const char* where;  // "<file>:<line>"
    const char* says;
  };
  const Case cases[] = {
      {"", "m.model:1:", "expected 'origin_raw_ns=<int64> spec="},
      {"origin_raw_ns=5\n", "m.model:1:", "expected"},
      {"spec=offset=1ms\n", "m.model:1:", "expected"},
      {"origin_raw_ns=five spec=x\n", "m.model:1:", "not an int64, got 'five'"},
      {"origin_raw_ns=99999999999999999999 spec=x\n", "m.model:1:",
       "not an int64"},
      {"origin_raw_ns=1 spec=\n", "m.model:1:", "spec: empty"},
      {"origin_raw_ns=1 spec=x spec=y\n", "m.model:1:", "spec given twice"},
      {"origin_raw_ns=1 origin_raw_ns=2 spec=x\n", "m.model:1:",
       "origin_raw_ns given twice"},
      {"origin_raw_ns=1 spec=x colour=red\n", "m.model:1:",
       "unknown field, got 'colour=red'"},
      {"origin_raw_ns=1 spec=x\nmore\n", "m.model:2:",
       "expected the end of the file, got 'more'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ModelFile> read = ParseModelFile(c.text, "m.model");
    ASSERT_FALSE(read.ok()) << c.text;
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(read.status().message()), HasSubstr(c.where))
        << c.text;
    EXPECT_THAT(std::string(read.status().message()), HasSubstr(c.says))
        << c.text;
  }
}

TEST(ModelFileTest, MissingFileIsNotFoundNamingIt) {
  const std::string path = TempPath("absent.model");
  absl::StatusOr<ModelFile> read = ReadModelFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(path));
}

TEST(ModelFileTest, WriterRefusesWhatCannotBeReadBack) {
  const std::string path = TempPath("refused.model");
  EXPECT_EQ(WriteModelFile(path, {1, ""}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteModelFile(path, {1, "offset=1ms seed=2"}).code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status unwritable =
      WriteModelFile("/proc/clocksync-no-such-dir/x.model", {1, "offset=1ms"});
  EXPECT_EQ(unwritable.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(unwritable.message()),
              HasSubstr("/proc/clocksync-no-such-dir/x.model"));
}

}  // namespace
}  // namespace shm
}  // namespace clocksync
