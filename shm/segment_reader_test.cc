// shm/segment_reader_test.cc: SegmentReader refuses every kind of broken
// file naming the path, reserves an address that reads as "no segment",
// and maps a restarted daemon's new file in place at the same address.

#include "shm/segment_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/shm_layout.h"
#include "shm/shm_publisher.h"

namespace clocksync {
namespace shm {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void WriteFile(const std::string& path, const void* data, size_t size) {
  unlink(path.c_str());
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, data, size), static_cast<ssize_t>(size));
  close(fd);
}

clocksync_shm ValidSegment() {
  clocksync_shm shm = {};
  shm.header.magic = CLOCKSYNC_SHM_MAGIC;
  shm.header.layout_version = CLOCKSYNC_SHM_LAYOUT_VERSION;
  shm.header.segment_size = sizeof(clocksync_shm);
  shm.header.mapping_offset = offsetof(clocksync_shm, mapping);
  return shm;
}

Mapping SyncedAt(int64_t anchor_global_ns) {
  Mapping m;
  m.anchor_raw_ns = 1000;
  m.anchor_global_ns = anchor_global_ns;
  m.bound_at_anchor_ns = 50;
  m.state = CLOCKSYNC_STATE_SYNCED;
  return m;
}

// Open() of `path`: the error, and the message when there is one.
SegmentError OpenError(const std::string& path, std::string* message) {
  std::unique_ptr<SegmentReader> reader;
  const SegmentError error = SegmentReader::Open(path, &reader, message);
  EXPECT_EQ(reader != nullptr, error == SegmentError::kNone);
  return error;
}

TEST(SegmentReaderTest, BrokenFilesAreRefusedNamingThePath) {
  std::string message;
  const std::string absent = TempPath("absent.shm");
  EXPECT_EQ(OpenError(absent, &message), SegmentError::kNoFile);
  EXPECT_THAT(message, HasSubstr(absent));

  const std::string path = TempPath("broken.shm");
  clocksync_shm shm = ValidSegment();
  WriteFile(path, &shm, sizeof(shm));
  EXPECT_EQ(OpenError(path, &message), SegmentError::kNone);

  shm.header.magic ^= 1;
  WriteFile(path, &shm, sizeof(shm));
  EXPECT_EQ(OpenError(path, &message), SegmentError::kBadMagic);
  EXPECT_THAT(message, HasSubstr(path));

  shm = ValidSegment();
  shm.header.layout_version += 1;
  WriteFile(path, &shm, sizeof(shm));
  EXPECT_EQ(OpenError(path, &message), SegmentError::kBadVersion);
  EXPECT_THAT(message, HasSubstr(path));

  shm = ValidSegment();
  shm.header.segment_size += 64;
  WriteFile(path, &shm, sizeof(shm));
  EXPECT_EQ(OpenError(path, &message), SegmentError::kBadSize);

  shm = ValidSegment();
  shm.header.mapping_offset = 0;
  WriteFile(path, &shm, sizeof(shm));
  EXPECT_EQ(OpenError(path, &message), SegmentError::kBadSize);

  shm = ValidSegment();
  WriteFile(path, &shm, sizeof(shm) - 1);
  EXPECT_EQ(OpenError(path, &message), SegmentError::kBadSize);
  EXPECT_THAT(message, HasSubstr(path));

  // Version 1 (no TSC section): exactly its 128 bytes, so that what a
  // reader finds at the TSC section's place is the zeros beyond the end of
  // the file (invalid), never bytes a writer left there.
  shm = ValidSegment();
  shm.header.layout_version = CLOCKSYNC_SHM_LAYOUT_VERSION_1;
  shm.header.segment_size = CLOCKSYNC_SHM_SIZE_VERSION_1;
  WriteFile(path, &shm, CLOCKSYNC_SHM_SIZE_VERSION_1);
  EXPECT_EQ(OpenError(path, &message), SegmentError::kNone) << message;
  shm.tsc.max_ticks = 1000;
  WriteFile(path, &shm, sizeof(shm));
  EXPECT_EQ(OpenError(path, &message), SegmentError::kBadSize);
  EXPECT_THAT(message, HasSubstr("version-1 segment has exactly 128"));

  const std::string dir = TempPath("a_directory.shm");
  mkdir(dir.c_str(), 0755);
  EXPECT_EQ(OpenError(dir, &message), SegmentError::kBadMagic);
}

TEST(SegmentReaderTest, OpenMapsAValidSegment) {
  const std::string path = TempPath("open.shm");
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok());
  ASSERT_TRUE(publisher->Publish(SyncedAt(777)).ok());
  std::unique_ptr<SegmentReader> reader;
  std::string message;
  ASSERT_EQ(SegmentReader::Open(path, &reader, &message), SegmentError::kNone)
      << message;
  EXPECT_TRUE(reader->mapped());
  EXPECT_EQ(reader->remaps(), 0u);
  EXPECT_EQ(reader->path(), path);
  MappingValues values;
  uint64_t seq = 1;
  ASSERT_TRUE(reader->ReadMapping(&values, &seq));
  EXPECT_EQ(values.anchor_global_ns, 777);
  EXPECT_EQ(seq % 2, 0u);
  // The same file again: nothing to do.
  EXPECT_EQ(reader->Remap(&message), SegmentError::kNone);
  EXPECT_EQ(reader->remaps(), 0u);
}

TEST(SegmentReaderTest, ReservedAddressReadsAsNoSegmentUntilAFileAppears) {
  const std::string path = TempPath("reserved.shm");
  unlink(path.c_str());
  absl::StatusOr<std::unique_ptr<SegmentReader>> reader =
      SegmentReader::Reserve(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const clocksync_shm* const segment = (*reader)->segment();
  EXPECT_FALSE((*reader)->mapped());
  EXPECT_EQ(LoadAcquire(segment->mapping.seq), 0u);
  MappingValues values;
  uint64_t seq = 0;
  EXPECT_FALSE((*reader)->ReadMapping(&values, &seq));
  std::string message;
  EXPECT_EQ((*reader)->Remap(&message), SegmentError::kNoFile);
  EXPECT_THAT(message, HasSubstr(path));
  EXPECT_FALSE((*reader)->mapped());

  // The daemon starts: mapped in place.
  absl::StatusOr<ShmPublisher> first = ShmPublisher::Open(path);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->Publish(SyncedAt(1)).ok());
  EXPECT_EQ((*reader)->Remap(&message), SegmentError::kNone) << message;
  EXPECT_TRUE((*reader)->mapped());
  EXPECT_EQ((*reader)->remaps(), 1u);
  EXPECT_EQ((*reader)->segment(), segment);
  ASSERT_TRUE((*reader)->ReadMapping(&values, &seq));
  EXPECT_EQ(values.anchor_global_ns, 1);

  // It restarts: a new file behind the path, mapped at the same address.
  absl::StatusOr<ShmPublisher> second = ShmPublisher::Open(path);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->Publish(SyncedAt(2)).ok());
  EXPECT_EQ((*reader)->Remap(&message), SegmentError::kNone) << message;
  EXPECT_EQ((*reader)->remaps(), 2u);
  EXPECT_EQ((*reader)->segment(), segment);
  ASSERT_TRUE((*reader)->ReadMapping(&values, &seq));
  EXPECT_EQ(values.anchor_global_ns, 2);

  // A broken file replacing it keeps the good one mapped.
  clocksync_shm broken = ValidSegment();
  broken.header.layout_version += 1;
  const std::string temp = path + ".broken";
  WriteFile(temp, &broken, sizeof(broken));
  ASSERT_EQ(rename(temp.c_str(), path.c_str()), 0);
  EXPECT_EQ((*reader)->Remap(&message), SegmentError::kBadVersion);
  EXPECT_TRUE((*reader)->mapped());
  ASSERT_TRUE((*reader)->ReadMapping(&values, &seq));
  EXPECT_EQ(values.anchor_global_ns, 2);
}

}  // namespace
}  // namespace shm
}  // namespace clocksync
