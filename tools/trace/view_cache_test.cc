// The view's index cache bound: indexes of archives gone or changed, old
// ones, the least recently used over the size limit and unfinished writes
// are removed; the indexes in use, fresh ones and other files are kept.

#include "tools/trace/view_cache.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/trace/view_data.h"

namespace clocksync::trace {
namespace {

namespace fs = std::filesystem;

class ViewCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = fs::path(tmp != nullptr ? tmp : "/tmp") /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_ / "idx");
    dir_ = (root_ / "idx").string();
  }

  // An archive directory with one file of `bytes` bytes.
  std::string Archive(const std::string& name, size_t bytes) {
    fs::create_directories(root_ / name);
    Write((root_ / name / "traces.def").string(), bytes);
    return (root_ / name).string();
  }

  static void Write(const std::string& path, size_t bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << std::string(bytes, 'x');
  }

  // An index of `archives` (its bytes are not read by the cache), used
  // `age` ago.
  std::string Index(const std::vector<std::string>& archives, hull::CorrectionKind kind,
                    size_t bytes, absl::Duration age) {
    const std::string path = IndexPath(dir_, archives, kind, hull::PostmortemOptions{});
    Write(path, bytes);
    EXPECT_TRUE(RecordIndexUse(path, archives, kind, hull::PostmortemOptions{}).ok());
    SetAge(path, age);
    return path;
  }

  void SetAge(const std::string& path, absl::Duration age) {
    const timespec when = absl::ToTimespec(now_ - age);
    const timespec times[2] = {when, when};
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
  }

  fs::path root_;
  std::string dir_;
  absl::Time now_ = absl::Now();
};

TEST_F(ViewCacheTest, RemovesIndexesOfArchivesGoneOrChanged) {
  const std::string a = Archive("a", 10), b = Archive("b", 10), c = Archive("c", 10);
  const std::string ab = Index({a, b}, hull::CorrectionKind::kOnline, 100, absl::Hours(1));
  const std::string ab_none = Index({a, b}, hull::CorrectionKind::kNone, 100, absl::Hours(1));
  const std::string cc = Index({c}, hull::CorrectionKind::kOnline, 100, absl::Hours(1));
  fs::remove_all(b);  // gone: both indexes of a + b
  Write(c + "/traces.def", 11);  // changed: c's index is stale
  const std::string fresh_c = Index({c}, hull::CorrectionKind::kOnline, 100, absl::Hours(1));
  ASSERT_NE(fresh_c, cc);
  absl::StatusOr<IndexCachePruned> pruned = PruneIndexCache(dir_, {}, {}, now_);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(pruned->stale, 3);
  EXPECT_EQ(pruned->bytes, 300);
  EXPECT_EQ(pruned->kept, 1);
  EXPECT_FALSE(fs::exists(ab));
  EXPECT_FALSE(fs::exists(ab + ".src"));
  EXPECT_FALSE(fs::exists(ab_none));
  EXPECT_FALSE(fs::exists(cc));
  EXPECT_TRUE(fs::exists(fresh_c));
  EXPECT_TRUE(fs::exists(fresh_c + ".src"));
}

TEST_F(ViewCacheTest, RemovesIndexesUnusedForLongerThanTheAgeLimit) {
  const std::string a = Archive("a", 10), b = Archive("b", 10);
  const std::string old_a = Index({a}, hull::CorrectionKind::kOnline, 100, absl::Hours(24 * 31));
  const std::string new_b = Index({b}, hull::CorrectionKind::kOnline, 100, absl::Hours(24 * 29));
  // From an older version: no .src; judged by its age only.
  const std::string legacy_old = dir_ + "/0123456789abcdef-none.lodidx";
  const std::string legacy_new = dir_ + "/fedcba9876543210-none.lodidx";
  Write(legacy_old, 50);
  Write(legacy_new, 50);
  SetAge(legacy_old, absl::Hours(24 * 40));
  SetAge(legacy_new, absl::Hours(1));
  IndexCacheLimits limits;
  limits.max_age = absl::Hours(24 * 30);
  absl::StatusOr<IndexCachePruned> pruned = PruneIndexCache(dir_, {}, limits, now_);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(pruned->old, 2);
  EXPECT_EQ(pruned->stale, 0);
  EXPECT_FALSE(fs::exists(old_a));
  EXPECT_FALSE(fs::exists(old_a + ".src"));
  EXPECT_FALSE(fs::exists(legacy_old));
  EXPECT_TRUE(fs::exists(new_b));
  EXPECT_TRUE(fs::exists(legacy_new));
  // No age limit: nothing more goes, however old.
  SetAge(new_b, absl::Hours(24 * 1000));
  limits.max_age = absl::ZeroDuration();
  pruned = PruneIndexCache(dir_, {}, limits, now_);
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(pruned->old + pruned->stale + pruned->over, 0);
  EXPECT_EQ(pruned->kept, 2);
}

TEST_F(ViewCacheTest, KeepsTheSizeLimitDroppingTheLeastRecentlyUsedButNotThoseInUse) {
  std::vector<std::string> indexes;
  for (int i = 0; i < 4; ++i) {
    const std::string archive = Archive("r" + std::to_string(i), 10);
    // r0 used longest ago, r3 last.
    indexes.push_back(Index({archive}, hull::CorrectionKind::kOnline, 1000,
                            absl::Hours(10 - i)));
  }
  IndexCacheLimits limits;
  limits.max_bytes = 2500;
  // r0 is in use (this run's): kept although the oldest.
  absl::StatusOr<IndexCachePruned> pruned =
      PruneIndexCache(dir_, {indexes[0]}, limits, now_);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(pruned->over, 2);
  EXPECT_EQ(pruned->kept, 2);
  EXPECT_EQ(pruned->kept_bytes, 2000);
  EXPECT_TRUE(fs::exists(indexes[0]));
  EXPECT_FALSE(fs::exists(indexes[1]));
  EXPECT_FALSE(fs::exists(indexes[2]));
  EXPECT_TRUE(fs::exists(indexes[3]));
  // RecordIndexUse makes an index the most recent.
  EXPECT_TRUE(RecordIndexUse(indexes[0], {(root_ / "r0").string()},
                             hull::CorrectionKind::kOnline, {})
                  .ok());
  limits.max_bytes = 1500;
  pruned = PruneIndexCache(dir_, {}, limits, now_ + absl::Seconds(1));
  ASSERT_TRUE(pruned.ok());
  EXPECT_TRUE(fs::exists(indexes[0]));
  EXPECT_FALSE(fs::exists(indexes[3]));
}

TEST_F(ViewCacheTest, RemovesUnfinishedWritesAndOrphansAndNothingElse) {
  const std::string unfinished_old = dir_ + "/0123456789abcdef-none.lodidx.tmp.123";
  const std::string unfinished_new = dir_ + "/0123456789abcdef-online.lodidx.tmp.456";
  const std::string orphan = dir_ + "/aaaaaaaaaaaaaaaa-none.lodidx.src";
  const std::string other = dir_ + "/notes.txt";
  Write(unfinished_old, 10);
  Write(unfinished_new, 10);
  Write(orphan, 10);
  Write(other, 10);
  SetAge(unfinished_old, absl::Hours(2));
  SetAge(other, absl::Hours(24 * 365));
  absl::StatusOr<IndexCachePruned> pruned = PruneIndexCache(dir_, {}, {}, now_);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(pruned->temp, 1);
  EXPECT_EQ(pruned->stale, 1);
  EXPECT_FALSE(fs::exists(unfinished_old));
  EXPECT_TRUE(fs::exists(unfinished_new));  // may be a write going on now
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_TRUE(fs::exists(other));
}

TEST_F(ViewCacheTest, AMissingDirectoryIsAnErrorNamingIt) {
  absl::StatusOr<IndexCachePruned> pruned =
      PruneIndexCache(dir_ + "/none-here", {}, {}, now_);
  ASSERT_FALSE(pruned.ok());
  EXPECT_NE(pruned.status().message().find("none-here"), std::string::npos);
}

}  // namespace
}  // namespace clocksync::trace
