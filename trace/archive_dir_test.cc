// trace/archive_dir_test.cc: the archive directory's creation and the
// errno statuses both archive writers return.

#include "trace/archive_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace clocksync::trace {
namespace {

namespace fs = std::filesystem;

std::string Fresh(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / name;
  fs::remove_all(dir);
  return dir.string();
}

TEST(ArchiveDirTest, CreatesANewDirectory) {
  const std::string dir = Fresh("archive_dir_new");
  ASSERT_TRUE(CreateArchiveDirectory(dir).ok());
  EXPECT_TRUE(fs::is_directory(dir));
}

TEST(ArchiveDirTest, AcceptsAnExistingEmptyDirectory) {
  const std::string dir = Fresh("archive_dir_empty");
  fs::create_directory(dir);
  EXPECT_TRUE(CreateArchiveDirectory(dir).ok());
}

TEST(ArchiveDirTest, RefusesADirectoryWithEntries) {
  const std::string dir = Fresh("archive_dir_full");
  fs::create_directory(dir);
  std::ofstream(dir + "/old.evt") << "x";
  const absl::Status status = CreateArchiveDirectory(dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(status.message().find(dir), std::string::npos) << status;
  EXPECT_TRUE(fs::exists(dir + "/old.evt"));  // nothing of it is touched
}

TEST(ArchiveDirTest, RefusesAFileOfThatName) {
  const std::string path = Fresh("archive_dir_file");
  std::ofstream(path) << "x";
  EXPECT_EQ(CreateArchiveDirectory(path).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(ArchiveDirTest, MissingParentIsNotFoundNamingThePath) {
  const std::string dir = Fresh("archive_dir_no_parent") + "/trace";
  const absl::Status status = CreateArchiveDirectory(dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("cannot create trace directory " + dir),
            std::string::npos)
      << status;
}

TEST(ArchiveDirTest, ErrnoStatusCodes) {
  EXPECT_EQ(ErrnoStatus(ENOENT, "cannot open", "/x").code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus(ENOTDIR, "cannot open", "/x").code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus(EACCES, "cannot open", "/x").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus(EROFS, "cannot open", "/x").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus(ENOTEMPTY, "cannot open", "/x").code(),
            absl::StatusCode::kAlreadyExists);
  const absl::Status full = ErrnoStatus(ENOSPC, "cannot write", "/x/0.evt");
  EXPECT_EQ(full.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(full.message(), "cannot write /x/0.evt: No space left on device");
}

TEST(ArchiveDirTest, WriteFullyWritesEverything) {
  const std::string path = Fresh("archive_dir_write");
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  ASSERT_GE(fd, 0);
  const std::string text(1 << 20, 'x');
  EXPECT_TRUE(WriteFully(fd, text, path).ok());
  close(fd);
  EXPECT_EQ(fs::file_size(path), text.size());
}

TEST(ArchiveDirTest, WriteFullyNamesThePathOnAFullDisk) {
  const int fd = open("/dev/full", O_WRONLY);
  if (fd < 0) GTEST_SKIP() << "no /dev/full";
  const absl::Status status = WriteFully(fd, "record\n", "/dev/full");
  close(fd);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "cannot write /dev/full: No space left on device");
}

}  // namespace
}  // namespace clocksync::trace
