// shm/shm_publisher.cc: creating, updating and removing the
// shared-memory segment (see shm_publisher.h).

#include "shm/shm_publisher.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace clocksync {
namespace {

std::string ErrnoText(int error_number) {
  char buffer[256];
  // GNU strerror_r: returns a pointer to the message (maybe not `buffer`).
  return strerror_r(error_number, buffer, sizeof(buffer));
}

int64_t ReadClockNs(clockid_t clock_id) {
  struct timespec ts;
  clock_gettime(clock_id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

size_t MappingLength() {
  const long page_size = sysconf(_SC_PAGESIZE);
  const size_t page = page_size > 0 ? static_cast<size_t>(page_size) : 4096;
  return (sizeof(clocksync_shm) + page - 1) / page * page;
}

}  // namespace

ShmPublisher::ShmPublisher(std::string path, Options options,
                           clocksync_shm* shm, size_t length, dev_t dev,
                           ino_t ino)
    : path_(std::move(path)),
      options_(std::move(options)),
      shm_(shm),
      length_(length),
      dev_(dev),
      ino_(ino) {}

ShmPublisher::ShmPublisher(ShmPublisher&& other) noexcept
    : path_(std::move(other.path_)),
      options_(std::move(other.options_)),
      shm_(std::exchange(other.shm_, nullptr)),
      length_(other.length_),
      dev_(other.dev_),
      ino_(other.ino_),
      generation_(other.generation_),
      tsc_generation_(other.tsc_generation_),
      last_(other.last_) {}

ShmPublisher& ShmPublisher::operator=(ShmPublisher&& other) noexcept {
  if (this != &other) {
    Close();
    path_ = std::move(other.path_);
    options_ = std::move(other.options_);
    shm_ = std::exchange(other.shm_, nullptr);
    length_ = other.length_;
    dev_ = other.dev_;
    ino_ = other.ino_;
    generation_ = other.generation_;
    tsc_generation_ = other.tsc_generation_;
    last_ = other.last_;
  }
  return *this;
}

ShmPublisher::~ShmPublisher() { Close(); }

absl::StatusOr<ShmPublisher> ShmPublisher::Open(const std::string& path,
                                                Options options) {
  const bool version_1 =
      options.layout_version == CLOCKSYNC_SHM_LAYOUT_VERSION_1;
  if (!version_1 && options.layout_version != CLOCKSYNC_SHM_LAYOUT_VERSION) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared-memory file ", path, ": layout version ",
        options.layout_version, " is neither 1 nor ",
        CLOCKSYNC_SHM_LAYOUT_VERSION));
  }
  // Version 1 is the header and the mapping section only; its writer never
  // touches the bytes after them (past the end of the file, but in the
  // page every reader maps: they must stay zero).
  const uint32_t size =
      version_1 ? CLOCKSYNC_SHM_SIZE_VERSION_1 : sizeof(clocksync_shm);
  // A unique temporary name in the same directory, so rename() is atomic.
  std::string temp_path = path + ".XXXXXX";
  const int fd = mkostemp(temp_path.data(), O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create shared-memory file ", path, " (temporary ",
                     temp_path, "): ", ErrnoText(errno)));
  }
  const size_t length = MappingLength();
  void* base = MAP_FAILED;
  // Undoes the partial work and reports that `step` on the temporary file
  // failed, with errno's text (read first, before anything can change it).
  auto fail = [&](const char* step) {
    const std::string reason = ErrnoText(errno);
    if (base != MAP_FAILED) munmap(base, length);
    close(fd);
    unlink(temp_path.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot create shared-memory file ", path, ": ", step, " ",
                     temp_path, ": ", reason));
  };
  // mkostemp creates 0600; readers of any user need to read it.
  if (fchmod(fd, 0644) != 0) return fail("fchmod");
  if (ftruncate(fd, size) != 0) return fail("ftruncate");
  base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail("mmap");
  struct stat st;
  if (fstat(fd, &st) != 0) return fail("fstat");

  // Nobody can see the file yet: plain initialization, then the seqlock.
  auto* shm = static_cast<clocksync_shm*>(base);
  std::memset(shm, 0, size);
  shm->header.magic = CLOCKSYNC_SHM_MAGIC;
  shm->header.layout_version = options.layout_version;
  shm->header.segment_size = size;
  shm->header.mapping_offset = offsetof(clocksync_shm, mapping);
  shm->header.writer_pid = static_cast<int32_t>(getpid());
  const int64_t start_raw_ns = ReadClockNs(CLOCK_MONOTONIC_RAW);
  shm->header.writer_start_raw_ns = start_raw_ns;
  shm->header.writer_start_realtime_ns = ReadClockNs(CLOCK_REALTIME);
  shm->header.tree_id = options.tree_id;
  // An even sequence start from the real raw clock: successive daemons'
  // sequence values never coincide (see shm_layout.h).
  shm::StoreRelaxed(shm->mapping.seq,
                    static_cast<uint64_t>(start_raw_ns) & ~uint64_t{1});

  ShmPublisher publisher(path, std::move(options), shm, length, st.st_dev,
                         st.st_ino);
  // Identity mapping with an unknown bound until the first Publish().
  MappingValues initial;
  initial.bound_at_anchor_ns = kUnknownBoundNs;
  initial.status = CLOCKSYNC_STATE_UNSYNCED;
  initial.update_raw_ns = publisher.RawNowNs();
  shm::WriteSection(&shm->mapping, initial);
  publisher.last_ = initial;

  if (rename(temp_path.c_str(), path.c_str()) != 0) {
    publisher.shm_ = nullptr;  // fail() unmaps; nothing to close
    return fail("rename over the path");
  }
  close(fd);
  return publisher;
}

absl::StatusOr<ShmPublisher> ShmPublisher::Open(const std::string& path) {
  return Open(path, Options());
}

int64_t ShmPublisher::RawNowNs() const {
  return options_.raw_clock_ns ? options_.raw_clock_ns()
                               : ReadClockNs(CLOCK_MONOTONIC_RAW);
}

uint64_t ShmPublisher::TreeIdOfMaster(std::string_view master_node_id) {
  // FNV-1a, 64 bits: simple, stable across compilers and hosts.
  uint64_t hash = 0xcbf29ce484222325u;
  auto add = [&hash](std::string_view bytes) {
    for (const char c : bytes) {
      hash ^= static_cast<uint8_t>(c);
      hash *= 0x100000001b3u;
    }
  };
  add("clocksync-tree:");
  add(master_node_id);
  return hash != 0 ? hash : 1;  // 0 means "unknown"
}

void ShmPublisher::SetTreeId(uint64_t tree_id) {
  options_.tree_id = tree_id;
  if (shm_ != nullptr) shm::StoreRelease(shm_->header.tree_id, tree_id);
}

absl::Status ShmPublisher::PublishTsc(const TscValues& tsc) {
  if (shm_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("PublishTsc to ", path_, ": the publisher is closed"));
  }
  if (options_.layout_version == CLOCKSYNC_SHM_LAYOUT_VERSION_1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PublishTsc to ", path_, ": a version-1 segment has no TSC section"));
  }
  TscValues values = tsc;
  values.generation = ++tsc_generation_;
  shm::WriteTscSection(&shm_->tsc, values);
  return absl::OkStatus();
}

absl::Status ShmPublisher::Publish(const Mapping& mapping) {
  if (shm_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("Publish to ", path_, ": the publisher is closed"));
  }
  auto invalid = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("Publish to ", path_, ": ", parts...));
  };
  if (mapping.state < CLOCKSYNC_STATE_UNSYNCED ||
      mapping.state > CLOCKSYNC_STATE_HOLDOVER) {
    return invalid("state ", static_cast<int>(mapping.state),
                   " is not UNSYNCED..HOLDOVER");
  }
  if (!(std::fabs(mapping.rate_adj) <= kMaxRateAdj)) {
    return invalid("rate_adj ", mapping.rate_adj, " is not within +-0.01");
  }
  if (mapping.bound_at_anchor_ns < 0 ||
      mapping.bound_at_anchor_ns > kUnknownBoundNs) {
    return invalid("bound_at_anchor_ns ", mapping.bound_at_anchor_ns,
                   " is not within [0, 2^61]");
  }
  if (!(mapping.bound_growth_ppb >= 0.0 &&
        mapping.bound_growth_ppb <= kMaxBoundGrowthPpb)) {
    return invalid("bound_growth_ppb ", mapping.bound_growth_ppb,
                   " is not within [0, 5e7]");
  }
  if (mapping.depth > UINT16_MAX) {
    return invalid("depth ", mapping.depth, " exceeds 65535");
  }
  MappingValues values;
  values.anchor_raw_ns = mapping.anchor_raw_ns;
  values.anchor_global_ns = mapping.anchor_global_ns;
  values.rate_adj_q64 = shm::RateAdjToQ64(mapping.rate_adj);
  values.bound_at_anchor_ns = mapping.bound_at_anchor_ns;
  values.bound_growth_q36 = shm::BoundGrowthPpbToQ36(mapping.bound_growth_ppb);
  values.status = static_cast<uint16_t>(
      mapping.state | (mapping.stepped ? CLOCKSYNC_STATUS_STEPPED : 0u));
  values.depth = static_cast<uint16_t>(mapping.depth);
  values.update_raw_ns = RawNowNs();
  values.generation = ++generation_;
  shm::WriteSection(&shm_->mapping, values);
  last_ = values;
  return absl::OkStatus();
}

void ShmPublisher::Close() {
  if (shm_ == nullptr) return;
  // Tell readers nobody updates this segment any more; they extrapolate the
  // last mapping and look for a successor's file.
  MappingValues closed = last_;
  closed.status =
      static_cast<uint16_t>(closed.status | CLOCKSYNC_STATUS_CLOSED);
  closed.generation = ++generation_;
  shm::WriteSection(&shm_->mapping, closed);
  // Remove the file only if the path still names ours: a successor that
  // already renamed its file over the path keeps it.
  struct stat st;
  if (stat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) {
    unlink(path_.c_str());
  }
  munmap(shm_, length_);
  shm_ = nullptr;
}

}  // namespace clocksync
