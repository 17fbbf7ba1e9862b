// shm/segment_reader.cc: opening, validating and (re-)mapping clocksyncd's
// segment for its readers (segment_reader.h).

#include "shm/segment_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace clocksync {
namespace shm {
namespace {

std::string ErrnoText(int error_number) {
  char buffer[256];
  // GNU strerror_r: returns a pointer to the message (maybe not `buffer`).
  return strerror_r(error_number, buffer, sizeof(buffer));
}

size_t MappingLength() {
  const long page_size = sysconf(_SC_PAGESIZE);
  const size_t page = page_size > 0 ? static_cast<size_t>(page_size) : 4096;
  return (sizeof(clocksync_shm) + page - 1) / page * page;
}

// A segment file opened and checked: its descriptor and identity.
struct CheckedFile {
  int fd = -1;
  struct stat st = {};
};

// Opens `path` read-only and checks the file and its header. Returns kNone
// and fills *file (the caller closes file->fd), or an error and *message.
SegmentError OpenAndCheck(const std::string& path, CheckedFile* file,
                          std::string* message) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error_number = errno;
    if (error_number == ENOENT) {
      *message = absl::StrCat(
          "no clocksync daemon publishes at ", path,
          ": the file does not exist (is clocksyncd running, with this "
          "--shm_path?)");
      return SegmentError::kNoFile;
    }
    *message =
        absl::StrCat("cannot open ", path, ": ", ErrnoText(error_number));
    return SegmentError::kIo;
  }
  auto fail = [&](SegmentError error, std::string text) {
    close(fd);
    *message = std::move(text);
    return error;
  };
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return fail(SegmentError::kIo,
                absl::StrCat("cannot stat ", path, ": ", ErrnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(SegmentError::kBadMagic,
                absl::StrCat(path,
                             " is not a regular file, so not a clocksync "
                             "segment"));
  }
  if (st.st_size < static_cast<off_t>(CLOCKSYNC_SHM_SIZE_VERSION_1)) {
    return fail(SegmentError::kBadSize,
                absl::StrCat(path, " has ", st.st_size,
                             " bytes, a clocksync segment has at least ",
                             CLOCKSYNC_SHM_SIZE_VERSION_1));
  }
  // The header is immutable once the writer renamed the file into place.
  clocksync_shm_header header;
  const ssize_t got = pread(fd, &header, sizeof(header), 0);
  if (got != static_cast<ssize_t>(sizeof(header))) {
    return fail(SegmentError::kIo,
                absl::StrCat("cannot read the header of ", path, ": ",
                             got < 0 ? ErrnoText(errno) : "short read"));
  }
  if (header.magic != CLOCKSYNC_SHM_MAGIC) {
    return fail(SegmentError::kBadMagic,
                absl::StrFormat("%s is not a clocksync segment (magic "
                                "0x%016x, expected 0x%016x)",
                                path, header.magic, CLOCKSYNC_SHM_MAGIC));
  }
  const bool version_1 =
      header.layout_version == CLOCKSYNC_SHM_LAYOUT_VERSION_1;
  if (header.layout_version != CLOCKSYNC_SHM_LAYOUT_VERSION && !version_1) {
    return fail(SegmentError::kBadVersion,
                absl::StrCat(path, " has shared-memory layout version ",
                             header.layout_version,
                             ", this library reads versions 1 and ",
                             CLOCKSYNC_SHM_LAYOUT_VERSION,
                             " (daemon and client library differ)"));
  }
  if (st.st_size < static_cast<off_t>(header.segment_size)) {
    return fail(SegmentError::kBadSize,
                absl::StrCat(path, " has ", st.st_size,
                             " bytes, its header declares ",
                             header.segment_size));
  }
  // A version-1 file is exactly 128 bytes (as every version-1 writer
  // sized it): the page beyond reads as zeros, which readers take for an
  // invalid TSC section. Longer, its bytes 128.. could read as one.
  if (version_1 &&
      st.st_size != static_cast<off_t>(CLOCKSYNC_SHM_SIZE_VERSION_1)) {
    return fail(SegmentError::kBadSize,
                absl::StrCat(path, " has ", st.st_size,
                             " bytes, a version-1 segment has exactly ",
                             CLOCKSYNC_SHM_SIZE_VERSION_1));
  }
  const uint32_t expected_size =
      version_1 ? CLOCKSYNC_SHM_SIZE_VERSION_1 : sizeof(clocksync_shm);
  if (header.segment_size != expected_size ||
      header.mapping_offset != offsetof(clocksync_shm, mapping)) {
    return fail(SegmentError::kBadSize,
                absl::StrCat(path, " declares segment size ",
                             header.segment_size, " and mapping offset ",
                             header.mapping_offset, ", expected ",
                             expected_size, " and ",
                             offsetof(clocksync_shm, mapping)));
  }
  file->fd = fd;
  file->st = st;
  return SegmentError::kNone;
}

}  // namespace

SegmentReader::SegmentReader(std::string path, void* base, size_t length)
    : path_(std::move(path)),
      base_(base),
      length_(length),
      segment_(static_cast<const clocksync_shm*>(base)) {}

SegmentReader::~SegmentReader() { munmap(base_, length_); }

SegmentError SegmentReader::Open(const std::string& path,
                                 std::unique_ptr<SegmentReader>* out,
                                 std::string* message) {
  CheckedFile file;
  if (const SegmentError error = OpenAndCheck(path, &file, message);
      error != SegmentError::kNone) {
    return error;
  }
  const size_t length = MappingLength();
  void* base = mmap(nullptr, length, PROT_READ, MAP_SHARED, file.fd, 0);
  const int mmap_errno = errno;
  close(file.fd);
  if (base == MAP_FAILED) {
    *message = absl::StrCat("cannot map ", path, ": ", ErrnoText(mmap_errno));
    return SegmentError::kIo;
  }
  out->reset(new SegmentReader(path, base, length));
  (*out)->mapped_ = true;
  (*out)->dev_ = file.st.st_dev;
  (*out)->ino_ = file.st.st_ino;
  return SegmentError::kNone;
}

absl::StatusOr<std::unique_ptr<SegmentReader>> SegmentReader::Reserve(
    const std::string& path) {
  const size_t length = MappingLength();
  void* base =
      mmap(nullptr, length, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "mmap of ", length, " bytes for ", path, ": ", ErrnoText(errno)));
  }
  return std::unique_ptr<SegmentReader>(new SegmentReader(path, base, length));
}

SegmentError SegmentReader::Remap(std::string* message) {
  // The same file as mapped: nothing to do, without opening it.
  struct stat st;
  if (mapped_ && stat(path_.c_str(), &st) == 0 && st.st_dev == dev_ &&
      st.st_ino == ino_) {
    return SegmentError::kNone;
  }
  CheckedFile file;
  if (const SegmentError error = OpenAndCheck(path_, &file, message);
      error != SegmentError::kNone) {
    return error;
  }
  if (mapped_ && file.st.st_dev == dev_ && file.st.st_ino == ino_) {
    close(file.fd);
    return SegmentError::kNone;
  }
  // Replace the pages under the same address: readers never see a hole.
  void* mapped =
      mmap(base_, length_, PROT_READ, MAP_SHARED | MAP_FIXED, file.fd, 0);
  const int mmap_errno = errno;
  close(file.fd);
  if (mapped == MAP_FAILED) {
    // Older kernels may have removed the old mapping already; keep the
    // address readable (zeros: magic 0, seq 0, update 0, so readers see no
    // segment or a stale, unsynced mapping) and retry at the next look.
    mmap(base_, length_, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
         -1, 0);
    mapped_ = false;
    dev_ = 0;
    ino_ = 0;
    *message = absl::StrCat("cannot map ", path_, ": ", ErrnoText(mmap_errno));
    return SegmentError::kIo;
  }
  mapped_ = true;
  dev_ = file.st.st_dev;
  ino_ = file.st.st_ino;
  ++remaps_;
  return SegmentError::kNone;
}

bool SegmentReader::ReadMapping(MappingValues* values, uint64_t* seq,
                                int max_attempts) const noexcept {
  if (LoadRelaxed(segment_->header.magic) != CLOCKSYNC_SHM_MAGIC) return false;
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    const uint64_t before = LoadAcquire(segment_->mapping.seq);
    if (TryReadSection(&segment_->mapping, values) &&
        LoadRelaxed(segment_->mapping.seq) == before) {
      *seq = before;
      return true;
    }
    CpuRelax();
  }
  return false;
}

}  // namespace shm
}  // namespace clocksync
