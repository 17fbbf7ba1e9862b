// shm/shm_publisher_test.cc: ShmPublisher creates the segment
// atomically with a valid header, publishes every field under the seqlock,
// validates its input, and closes without removing a successor's file.

#include "shm/shm_publisher.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace clocksync {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// A fresh, empty directory under TEST_TMPDIR.
std::string FreshDir(const std::string& name) {
  const std::string dir = TempDir() + "/" + name;
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

int64_t RawNowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// A read-only view of a segment file, as a client maps it.
class ReadOnlySegment {
 public:
  explicit ReadOnlySegment(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    void* base =
        mmap(nullptr, sizeof(clocksync_shm), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (base != MAP_FAILED) shm_ = static_cast<const clocksync_shm*>(base);
  }
  ~ReadOnlySegment() {
    if (shm_ != nullptr) {
      munmap(const_cast<clocksync_shm*>(shm_), sizeof(clocksync_shm));
    }
  }
  bool ok() const { return shm_ != nullptr; }
  const clocksync_shm_header& header() const { return shm_->header; }
  MappingValues Read() const {
    MappingValues values;
    EXPECT_TRUE(shm::TryReadSection(&shm_->mapping, &values));
    return values;
  }
  uint64_t seq() const { return shm::LoadAcquire(shm_->mapping.seq); }
  const clocksync_shm_tsc& tsc() const { return shm_->tsc; }

 private:
  const clocksync_shm* shm_ = nullptr;
};

Mapping SampleMapping() {
  Mapping mapping;
  mapping.anchor_raw_ns = 5'000'000'000;
  mapping.anchor_global_ns = 1'700'000'000'000'000'000;
  mapping.rate_adj = 12.5e-6;
  mapping.bound_at_anchor_ns = 750;
  mapping.bound_growth_ppb = 3.0;
  mapping.state = CLOCKSYNC_STATE_SYNCED;
  mapping.stepped = true;
  mapping.depth = 4;
  return mapping;
}

TEST(ShmPublisherTest, CreatesA0644FileWithAValidHeader) {
  const std::string dir = FreshDir("create");
  const std::string path = dir + "/clocksync.shm";
  const int64_t before_ns = RawNowNs();
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  const int64_t after_ns = RawNowNs();
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  EXPECT_EQ(publisher->path(), path);
  EXPECT_EQ(publisher->generation(), 0u);

  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(st.st_size, static_cast<off_t>(sizeof(clocksync_shm)));
  // Only the final name: the temporary file was renamed, not copied.
  EXPECT_THAT(ListDir(dir), ElementsAre("clocksync.shm"));

  ReadOnlySegment segment(path);
  ASSERT_TRUE(segment.ok());
  EXPECT_EQ(segment.header().magic, CLOCKSYNC_SHM_MAGIC);
  EXPECT_EQ(segment.header().layout_version, CLOCKSYNC_SHM_LAYOUT_VERSION);
  EXPECT_EQ(segment.header().segment_size, sizeof(clocksync_shm));
  EXPECT_EQ(segment.header().mapping_offset, 64u);
  EXPECT_EQ(segment.header().writer_pid, getpid());
  EXPECT_GE(segment.header().writer_start_raw_ns, before_ns);
  EXPECT_LE(segment.header().writer_start_raw_ns, after_ns);
  EXPECT_GT(segment.header().writer_start_realtime_ns,
            int64_t{1'600'000'000} * 1'000'000'000);

  // Before the first Publish: an unsynced identity mapping, unknown bound.
  EXPECT_EQ(segment.seq() % 2, 0u);
  const MappingValues initial = segment.Read();
  EXPECT_EQ(initial.status, CLOCKSYNC_STATE_UNSYNCED);
  EXPECT_EQ(initial.generation, 0u);
  EXPECT_EQ(initial.bound_at_anchor_ns, ShmPublisher::kUnknownBoundNs);
  EXPECT_GE(initial.update_raw_ns, before_ns);
  EXPECT_LE(initial.update_raw_ns, after_ns);
}

// The tree id: 0 (unknown) by default, Options::tree_id from the start
// (a master), SetTreeId later (a node that attached), visible to a reader
// that mapped the file before; the hash is stable and never 0.
TEST(ShmPublisherTest, TreeIdIsWrittenAtOpenAndBySetTreeId) {
  const std::string dir = FreshDir("tree_id");
  const std::string path = dir + "/clocksync.shm";
  absl::StatusOr<ShmPublisher> unknown = ShmPublisher::Open(path);
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  {
    ReadOnlySegment segment(path);
    ASSERT_TRUE(segment.ok());
    EXPECT_EQ(shm::LoadAcquire(segment.header().tree_id), 0u);
    unknown->SetTreeId(ShmPublisher::TreeIdOfMaster("m0"));
    EXPECT_EQ(shm::LoadAcquire(segment.header().tree_id),
              ShmPublisher::TreeIdOfMaster("m0"));
    EXPECT_EQ(unknown->tree_id(), ShmPublisher::TreeIdOfMaster("m0"));
  }
  ShmPublisher::Options options;
  options.tree_id = ShmPublisher::TreeIdOfMaster("master-7");
  absl::StatusOr<ShmPublisher> master = ShmPublisher::Open(path, options);
  ASSERT_TRUE(master.ok()) << master.status();
  ReadOnlySegment segment(path);
  ASSERT_TRUE(segment.ok());
  EXPECT_EQ(segment.header().tree_id, ShmPublisher::TreeIdOfMaster("master-7"));
  // FNV-1a of "clocksync-tree:m0", computed once in Python: the value every
  // daemon version must keep (nodes of mixed versions share one tree).
  EXPECT_EQ(ShmPublisher::TreeIdOfMaster("m0"), 0x8a310f55694741b8u);
  EXPECT_NE(ShmPublisher::TreeIdOfMaster("m0"), ShmPublisher::TreeIdOfMaster("m1"));
  EXPECT_NE(ShmPublisher::TreeIdOfMaster(""), 0u);
}

// Layout version 1 (the daemon's --tsc=off, for older client libraries):
// 128 bytes, the header says so, no TSC section is ever written (the bytes
// after the file's end, in the page readers map, stay zero); version 2
// publishes the TSC section; any other version is refused.
TEST(ShmPublisherTest, WritesLayoutVersion1OrVersion2) {
  const std::string dir = FreshDir("versions");
  const std::string path = dir + "/clocksync.shm";
  ShmPublisher::Options options;
  options.layout_version = CLOCKSYNC_SHM_LAYOUT_VERSION_1;
  absl::StatusOr<ShmPublisher> v1 = ShmPublisher::Open(path, options);
  ASSERT_TRUE(v1.ok()) << v1.status();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 128);
  TscValues tsc;
  tsc.max_ticks = 1000;
  tsc.error_ns = 5;
  const absl::Status refused = v1->PublishTsc(tsc);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("no TSC section"));
  ASSERT_TRUE(v1->Publish(SampleMapping()).ok());
  {
    ReadOnlySegment segment(path);
    ASSERT_TRUE(segment.ok());
    EXPECT_EQ(segment.header().layout_version, 1u);
    EXPECT_EQ(segment.header().segment_size, 128u);
    EXPECT_EQ(segment.Read().anchor_global_ns,
              SampleMapping().anchor_global_ns);
    const clocksync_shm_tsc& section = segment.tsc();
    const auto* bytes = reinterpret_cast<const unsigned char*>(&section);
    for (size_t i = 0; i < sizeof(section); ++i) ASSERT_EQ(bytes[i], 0) << i;
  }
  v1->Close();

  absl::StatusOr<ShmPublisher> v2 = ShmPublisher::Open(path);
  ASSERT_TRUE(v2.ok()) << v2.status();
  ASSERT_TRUE(v2->PublishTsc(tsc).ok());
  EXPECT_EQ(v2->tsc_generation(), 1u);
  {
    ReadOnlySegment segment(path);
    ASSERT_TRUE(segment.ok());
    EXPECT_EQ(segment.header().layout_version, CLOCKSYNC_SHM_LAYOUT_VERSION);
    EXPECT_EQ(segment.header().segment_size, 192u);
    TscValues read;
    ASSERT_TRUE(shm::TryReadTscSection(&segment.tsc(), &read));
    EXPECT_EQ(read.max_ticks, 1000u);
    EXPECT_EQ(read.error_ns, 5);
    EXPECT_EQ(read.generation, 1u);
  }
  v2->Close();

  options.layout_version = 3;
  absl::StatusOr<ShmPublisher> v3 = ShmPublisher::Open(path, options);
  EXPECT_EQ(v3.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v3.status().message()),
              HasSubstr("layout version 3"));
}

TEST(ShmPublisherTest, MissingDirectoryErrorNamesThePathAndErrno) {
  const std::string path = TempDir() + "/no_such_dir/clocksync.shm";
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_FALSE(publisher.ok());
  EXPECT_EQ(publisher.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(publisher.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(publisher.status().message()),
              HasSubstr("No such file or directory"));
}

TEST(ShmPublisherTest, FailedRenameLeavesNoTemporaryFile) {
  // The path is an existing directory: rename() of a file over it fails.
  const std::string dir = FreshDir("rename_fails");
  const std::string path = dir + "/occupied";
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_FALSE(publisher.ok());
  EXPECT_THAT(std::string(publisher.status().message()), HasSubstr("rename"));
  EXPECT_THAT(std::string(publisher.status().message()), HasSubstr(path));
  EXPECT_THAT(ListDir(dir), ElementsAre("occupied"));
}

TEST(ShmPublisherTest, PublishWritesEveryFieldAndBumpsTheGeneration) {
  const std::string path = FreshDir("publish") + "/clocksync.shm";
  int64_t fake_raw_ns = 123'456;
  ShmPublisher::Options options;
  options.raw_clock_ns = [&fake_raw_ns] { return fake_raw_ns; };
  absl::StatusOr<ShmPublisher> publisher =
      ShmPublisher::Open(path, std::move(options));
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  ReadOnlySegment segment(path);
  ASSERT_TRUE(segment.ok());
  const uint64_t seq_before = segment.seq();

  fake_raw_ns = 9'999'999;
  const Mapping mapping = SampleMapping();
  ASSERT_TRUE(publisher->Publish(mapping).ok());
  EXPECT_EQ(publisher->generation(), 1u);
  EXPECT_EQ(segment.seq(), seq_before + 2);
  MappingValues v = segment.Read();
  EXPECT_EQ(v.anchor_raw_ns, mapping.anchor_raw_ns);
  EXPECT_EQ(v.anchor_global_ns, mapping.anchor_global_ns);
  // 12.5 ppm * 2^64, rounded to nearest; 3 ppb = 206.16 units, rounded up.
  EXPECT_EQ(v.rate_adj_q64, 230'584'300'921'369);
  EXPECT_EQ(v.bound_at_anchor_ns, mapping.bound_at_anchor_ns);
  EXPECT_EQ(v.bound_growth_q36, 207u);
  EXPECT_EQ(v.status, CLOCKSYNC_STATE_SYNCED | CLOCKSYNC_STATUS_STEPPED);
  EXPECT_EQ(v.depth, 4);
  EXPECT_EQ(v.update_raw_ns, 9'999'999);
  EXPECT_EQ(v.generation, 1u);

  Mapping holdover = mapping;
  holdover.state = CLOCKSYNC_STATE_HOLDOVER;
  holdover.stepped = false;
  ASSERT_TRUE(publisher->Publish(holdover).ok());
  v = segment.Read();
  EXPECT_EQ(v.status, CLOCKSYNC_STATE_HOLDOVER);
  EXPECT_EQ(v.generation, 2u);
}

TEST(ShmPublisherTest, BoundGrowthIsRoundedUpToTheFixedPointUnit) {
  const std::string path = FreshDir("growth") + "/clocksync.shm";
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok());
  ReadOnlySegment segment(path);
  const double unit_ppb = 1e9 / 68719476736.0;  // 2^-36 ns/ns
  for (double growth_ppb : {0.0, 0.1, 1.0 / 3.0, 123.456789, 9999.99999,
                            ShmPublisher::kMaxBoundGrowthPpb}) {
    Mapping mapping = SampleMapping();
    mapping.bound_growth_ppb = growth_ppb;
    ASSERT_TRUE(publisher->Publish(mapping).ok());
    const double stored_ppb =
        shm::BoundGrowthQ36ToPpb(segment.Read().bound_growth_q36);
    EXPECT_GE(stored_ppb, growth_ppb);
    EXPECT_LT(stored_ppb, growth_ppb + 2 * unit_ppb);
  }
}

TEST(ShmPublisherTest, InvalidMappingsAreRejectedAndNotWritten) {
  const std::string path = FreshDir("invalid") + "/clocksync.shm";
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok());
  ReadOnlySegment segment(path);
  const uint64_t seq_before = segment.seq();

  struct Case {
    const char* field;
    Mapping mapping;
  };
  std::vector<Case> cases;
  Mapping m = SampleMapping();
  m.state = CLOCKSYNC_STATE_UNSPECIFIED;
  cases.push_back({"state", m});
  m = SampleMapping();
  m.state = static_cast<clocksync_state>(5);
  cases.push_back({"state", m});
  m = SampleMapping();
  m.rate_adj = 0.02;
  cases.push_back({"rate_adj", m});
  m = SampleMapping();
  m.rate_adj = std::nan("");
  cases.push_back({"rate_adj", m});
  m = SampleMapping();
  m.bound_at_anchor_ns = -1;
  cases.push_back({"bound_at_anchor_ns", m});
  m = SampleMapping();
  m.bound_at_anchor_ns = ShmPublisher::kUnknownBoundNs + 1;
  cases.push_back({"bound_at_anchor_ns", m});
  m = SampleMapping();
  m.bound_growth_ppb = -0.5;
  cases.push_back({"bound_growth_ppb", m});
  m = SampleMapping();
  m.bound_growth_ppb = 2e8;
  cases.push_back({"bound_growth_ppb", m});
  m = SampleMapping();
  m.bound_growth_ppb = std::nan("");
  cases.push_back({"bound_growth_ppb", m});
  m = SampleMapping();
  m.depth = 70'000;
  cases.push_back({"depth", m});

  for (const Case& c : cases) {
    const absl::Status status = publisher->Publish(c.mapping);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
    EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  }
  EXPECT_EQ(segment.seq(), seq_before) << "nothing was written";
  EXPECT_EQ(publisher->generation(), 0u);
  EXPECT_TRUE(publisher->Publish(SampleMapping()).ok());
}

TEST(ShmPublisherTest, CloseMarksClosedRemovesTheFileAndRefusesPublish) {
  const std::string path = FreshDir("close") + "/clocksync.shm";
  absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok());
  ASSERT_TRUE(publisher->Publish(SampleMapping()).ok());
  ReadOnlySegment segment(path);  // a client's mapping outlives the file
  ASSERT_TRUE(segment.ok());

  publisher->Close();
  EXPECT_FALSE(publisher->is_open());
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0);
  const MappingValues v = segment.Read();
  EXPECT_NE(v.status & CLOCKSYNC_STATUS_CLOSED, 0u);
  EXPECT_EQ(v.status & CLOCKSYNC_STATUS_STATE_MASK, CLOCKSYNC_STATE_SYNCED);
  EXPECT_EQ(v.anchor_global_ns, SampleMapping().anchor_global_ns)
      << "the last mapping stays readable for extrapolation";
  EXPECT_EQ(publisher->Publish(SampleMapping()).code(),
            absl::StatusCode::kFailedPrecondition);
  publisher->Close();  // idempotent
}

TEST(ShmPublisherTest, ReopenGivesANewInodeAndTheOldCloseKeepsIt) {
  const std::string path = FreshDir("reopen") + "/clocksync.shm";
  absl::StatusOr<ShmPublisher> first = ShmPublisher::Open(path);
  ASSERT_TRUE(first.ok());
  struct stat first_st;
  ASSERT_EQ(stat(path.c_str(), &first_st), 0);
  ReadOnlySegment first_segment(path);

  absl::StatusOr<ShmPublisher> second = ShmPublisher::Open(path);
  ASSERT_TRUE(second.ok());
  struct stat second_st;
  ASSERT_EQ(stat(path.c_str(), &second_st), 0);
  EXPECT_NE(second_st.st_ino, first_st.st_ino);
  ReadOnlySegment second_segment(path);
  // Sequence values of successive writers never coincide.
  EXPECT_GT(second_segment.seq(), first_segment.seq());

  first->Close();
  struct stat after_st;
  ASSERT_EQ(stat(path.c_str(), &after_st), 0) << "successor's file kept";
  EXPECT_EQ(after_st.st_ino, second_st.st_ino);
  second->Close();
  EXPECT_NE(stat(path.c_str(), &after_st), 0);
}

TEST(ShmPublisherTest, MovedPublisherOwnsTheSegment) {
  const std::string path = FreshDir("move") + "/clocksync.shm";
  absl::StatusOr<ShmPublisher> opened = ShmPublisher::Open(path);
  ASSERT_TRUE(opened.ok());
  ShmPublisher publisher = std::move(*opened);
  EXPECT_FALSE(opened->is_open());
  ASSERT_TRUE(publisher.Publish(SampleMapping()).ok());
  ReadOnlySegment segment(path);
  EXPECT_EQ(segment.Read().generation, 1u);
  {
    ShmPublisher moved_away = std::move(publisher);
    EXPECT_FALSE(publisher.is_open());
  }  // its destructor closes the segment
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0);
}

}  // namespace
}  // namespace clocksync
