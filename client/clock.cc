// client/clock.cc: opening, validating and re-mapping clocksyncd's segment
// for clocksync::Clock; the hot path is inline in clock.h.

#include "client/clock.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace clocksync {
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

// A segment file opened and checked: its descriptor, identity and header.
struct CheckedFile {
  int fd = -1;
  struct stat st = {};
};

// Opens `path` read-only and checks its size and header. Returns 0 and fills
// *file (the caller closes file->fd), or a negative code and *message.
int OpenAndCheck(const std::string& path, CheckedFile* file,
                 std::string* message) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error_number = errno;
    if (error_number == ENOENT) {
      *message = absl::StrCat(
          "CLOCKSYNC_ENODAEMON: no clocksync daemon publishes at ", path,
          ": the file does not exist (is clocksyncd running, with this "
          "--shm_path?)");
      return CLOCKSYNC_ENODAEMON;
    }
    *message = absl::StrCat("CLOCKSYNC_EIO: cannot open ", path, ": ",
                            ErrnoText(error_number));
    return CLOCKSYNC_EIO;
  }
  auto fail = [&](int code, std::string text) {
    close(fd);
    *message = std::move(text);
    return code;
  };
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return fail(CLOCKSYNC_EIO, absl::StrCat("CLOCKSYNC_EIO: cannot stat ", path,
                                            ": ", ErrnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(CLOCKSYNC_EBADMAGIC,
                absl::StrCat("CLOCKSYNC_EBADMAGIC: ", path,
                             " is not a regular file, so not a clocksync "
                             "segment"));
  }
  if (st.st_size < static_cast<off_t>(sizeof(clocksync_shm))) {
    return fail(CLOCKSYNC_EBADSIZE,
                absl::StrCat("CLOCKSYNC_EBADSIZE: ", path, " has ", st.st_size,
                             " bytes, a clocksync segment has ",
                             sizeof(clocksync_shm)));
  }
  // The header is immutable once the writer renamed the file into place.
  clocksync_shm_header header;
  const ssize_t got = pread(fd, &header, sizeof(header), 0);
  if (got != static_cast<ssize_t>(sizeof(header))) {
    return fail(CLOCKSYNC_EIO,
                absl::StrCat("CLOCKSYNC_EIO: cannot read the header of ", path,
                             ": ", got < 0 ? ErrnoText(errno) : "short read"));
  }
  if (header.magic != CLOCKSYNC_SHM_MAGIC) {
    return fail(CLOCKSYNC_EBADMAGIC,
                absl::StrFormat("CLOCKSYNC_EBADMAGIC: %s is not a clocksync "
                                "segment (magic 0x%016x, expected 0x%016x)",
                                path, header.magic, CLOCKSYNC_SHM_MAGIC));
  }
  if (header.layout_version != CLOCKSYNC_SHM_LAYOUT_VERSION) {
    return fail(
        CLOCKSYNC_EVERSION,
        absl::StrCat("CLOCKSYNC_EVERSION: ", path,
                     " has shared-memory layout version ",
                     header.layout_version, ", this library reads version ",
                     CLOCKSYNC_SHM_LAYOUT_VERSION,
                     " (daemon and client library differ)"));
  }
  if (header.segment_size != sizeof(clocksync_shm) ||
      header.mapping_offset != offsetof(clocksync_shm, mapping)) {
    return fail(CLOCKSYNC_EBADSIZE,
                absl::StrCat("CLOCKSYNC_EBADSIZE: ", path,
                             " declares segment size ", header.segment_size,
                             " and mapping offset ", header.mapping_offset,
                             ", expected ", sizeof(clocksync_shm), " and ",
                             offsetof(clocksync_shm, mapping)));
  }
  file->fd = fd;
  file->st = st;
  return CLOCKSYNC_OK;
}

absl::Status CodeToStatus(int code, const std::string& message) {
  switch (code) {
    case CLOCKSYNC_ENODAEMON:
      return absl::NotFoundError(message);
    case CLOCKSYNC_EINVAL:
      return absl::InvalidArgumentError(message);
    case CLOCKSYNC_ENOMEM:
      return absl::ResourceExhaustedError(message);
    case CLOCKSYNC_EBADMAGIC:
    case CLOCKSYNC_EVERSION:
    case CLOCKSYNC_EBADSIZE:
      return absl::FailedPreconditionError(message);
    default:
      return absl::UnavailableError(message);
  }
}

}  // namespace

// Slow-path state, heap-allocated so that its mutex and atomics keep their
// address when the Clock moves.
struct Clock::Remapper {
  ~Remapper() {
    if (base != nullptr) munmap(base, length);
  }

  std::string path;
  // The read-only mapping; address and length never change.
  void* base = nullptr;
  size_t length = 0;
  int64_t recheck_interval_ns = 0;
  // Serializes looks at the path and re-maps.
  std::mutex mu;
  // Identity of the file currently mapped (guarded by mu).
  dev_t dev = 0;
  ino_t ino = 0;
  // Raw time before which the slow path does not look at the path again.
  std::atomic<int64_t> next_check_raw_ns{0};
  std::atomic<uint64_t> path_checks{0};
  std::atomic<uint64_t> remaps{0};
};

Clock::Clock(const clocksync_shm_mapping* section, const ClockOptions& options,
             std::unique_ptr<Remapper> remapper)
    : section_(section),
      stale_limit_ns_(options.stale_limit_ns),
      stale_growth_ppb_(options.stale_growth_ppb),
      max_read_attempts_(options.max_read_attempts),
      remapper_(std::move(remapper)) {}

Clock::Clock(Clock&& other) noexcept
    : section_(std::exchange(other.section_, nullptr)),
      stale_limit_ns_(other.stale_limit_ns_),
      stale_growth_ppb_(other.stale_growth_ppb_),
      max_read_attempts_(other.max_read_attempts_),
      remapper_(std::move(other.remapper_)) {}

Clock& Clock::operator=(Clock&& other) noexcept {
  if (this != &other) {
    section_ = std::exchange(other.section_, nullptr);
    stale_limit_ns_ = other.stale_limit_ns_;
    stale_growth_ppb_ = other.stale_growth_ppb_;
    max_read_attempts_ = other.max_read_attempts_;
    remapper_ = std::move(other.remapper_);
  }
  return *this;
}

Clock::~Clock() = default;

int Clock::OpenWithCode(const std::string& path, const ClockOptions& options,
                        std::unique_ptr<Clock>* out, std::string* message) {
  if (options.stale_limit_ns <= 0 || !(options.stale_growth_ppb >= 0.0) ||
      options.recheck_interval_ns < 0 || options.max_read_attempts < 1) {
    *message = absl::StrCat(
        "CLOCKSYNC_EINVAL: invalid options for ", path,
        ": stale_limit_ns=", options.stale_limit_ns,
        " (> 0), stale_growth_ppb=", options.stale_growth_ppb,
        " (>= 0), recheck_interval_ns=", options.recheck_interval_ns,
        " (>= 0), max_read_attempts=", options.max_read_attempts, " (>= 1)");
    return CLOCKSYNC_EINVAL;
  }
  CheckedFile file;
  if (const int code = OpenAndCheck(path, &file, message); code != 0) {
    return code;
  }
  const size_t length = MappingLength();
  void* base = mmap(nullptr, length, PROT_READ, MAP_SHARED, file.fd, 0);
  const int mmap_errno = errno;
  close(file.fd);
  if (base == MAP_FAILED) {
    *message = absl::StrCat("CLOCKSYNC_EIO: cannot map ", path, ": ",
                            ErrnoText(mmap_errno));
    return CLOCKSYNC_EIO;
  }
  auto remapper = std::make_unique<Remapper>();
  remapper->path = path;
  remapper->base = base;
  remapper->length = length;
  remapper->recheck_interval_ns = options.recheck_interval_ns;
  remapper->dev = file.st.st_dev;
  remapper->ino = file.st.st_ino;
  remapper->next_check_raw_ns.store(RawNowNs() + options.recheck_interval_ns,
                                    std::memory_order_relaxed);
  const auto* shm = static_cast<const clocksync_shm*>(base);
  out->reset(new Clock(&shm->mapping, options, std::move(remapper)));
  return CLOCKSYNC_OK;
}

absl::StatusOr<Clock> Clock::Open(const std::string& path,
                                  const ClockOptions& options) {
  std::unique_ptr<Clock> clock;
  std::string message;
  if (const int code = OpenWithCode(path, options, &clock, &message);
      code != CLOCKSYNC_OK) {
    return CodeToStatus(code, message);
  }
  return std::move(*clock);
}

bool Clock::ReadSectionRetrying(MappingValues* out) const noexcept {
  for (int attempt = 1; attempt < max_read_attempts_; ++attempt) {
    shm::CpuRelax();
    if (shm::TryReadSection(section_, out)) return true;
  }
  return false;
}

TimeReading Clock::BusyReading() noexcept {
  TimeReading reading;
  reading.error = CLOCKSYNC_EBUSY;
  return reading;
}

TimeReading Clock::AtRetrying(int64_t raw_ns) const noexcept {
  MappingValues v;
  if (!ReadSectionRetrying(&v)) return BusyReading();
  if (NeedsSlowPath(v, raw_ns)) return AtSlow(raw_ns);
  return internal::Evaluate(v, raw_ns, 0);
}

TimeReading Clock::AtSlow(int64_t raw_ns) const noexcept {
  MaybeRemap();
  MappingValues v;
  if (!shm::TryReadSection(section_, &v) && !ReadSectionRetrying(&v)) {
    return BusyReading();
  }
  const int64_t age_ns = internal::WrapSub(raw_ns, v.update_raw_ns);
  if (age_ns > stale_limit_ns_) {
    // Nobody has confirmed the mapping since its update: allow the local
    // oscillator to wander by stale_growth_ppb since then.
    double extra_ns = static_cast<double>(age_ns) * stale_growth_ppb_ * 1e-9;
    extra_ns = extra_ns < static_cast<double>(internal::kMaxBoundNs)
                   ? extra_ns
                   : static_cast<double>(internal::kMaxBoundNs);
    TimeReading reading = internal::Evaluate(
        v, raw_ns, static_cast<int64_t>(std::ceil(extra_ns)));
    reading.status |= CLOCKSYNC_STATUS_STALE;
    reading.error = CLOCKSYNC_ESTALE;
    return reading;
  }
  TimeReading reading = internal::Evaluate(v, raw_ns, 0);
  if ((v.status & CLOCKSYNC_STATUS_STATE_MASK) < CLOCKSYNC_STATE_SYNCED) {
    reading.error = CLOCKSYNC_ENOTSYNCED;
  }
  return reading;
}

void Clock::MaybeRemap() const noexcept {
  Remapper& r = *remapper_;
  const int64_t now_ns = RawNowNs();
  if (now_ns < r.next_check_raw_ns.load(std::memory_order_relaxed)) return;
  // Another thread is looking already: go on with the current mapping.
  std::unique_lock<std::mutex> lock(r.mu, std::try_to_lock);
  if (!lock.owns_lock()) return;
  if (now_ns < r.next_check_raw_ns.load(std::memory_order_relaxed)) return;
  r.next_check_raw_ns.store(now_ns + r.recheck_interval_ns,
                            std::memory_order_relaxed);
  r.path_checks.fetch_add(1, std::memory_order_relaxed);

  struct stat st;
  // No file (a daemon between stop and start) or the same file: keep
  // extrapolating the mapping we have.
  if (stat(r.path.c_str(), &st) != 0) return;
  if (st.st_dev == r.dev && st.st_ino == r.ino) return;

  CheckedFile file;
  std::string message;  // only built on failure, which keeps the old map
  if (OpenAndCheck(r.path, &file, &message) != CLOCKSYNC_OK) return;
  // Replace the pages under the same address: readers never see a hole.
  void* mapped =
      mmap(r.base, r.length, PROT_READ, MAP_SHARED | MAP_FIXED, file.fd, 0);
  close(file.fd);
  if (mapped == MAP_FAILED) {
    // Older kernels may have removed the old mapping already; keep the
    // address readable (zeros: seq 0, update 0, so readers see a stale,
    // unsynced mapping) and retry at the next look.
    mmap(r.base, r.length, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
         -1, 0);
    r.dev = 0;
    r.ino = 0;
    return;
  }
  r.dev = file.st.st_dev;
  r.ino = file.st.st_ino;
  r.remaps.fetch_add(1, std::memory_order_relaxed);
}

int Clock::ReadMapping(MappingSnapshot* out) const noexcept {
  // Holding the lock keeps a re-map from swapping the header underneath.
  std::lock_guard<std::mutex> lock(remapper_->mu);
  if (!shm::TryReadSection(section_, &out->values) &&
      !ReadSectionRetrying(&out->values)) {
    return CLOCKSYNC_EBUSY;
  }
  const auto* shm = static_cast<const clocksync_shm*>(remapper_->base);
  out->writer_pid = shm->header.writer_pid;
  out->writer_start_raw_ns = shm->header.writer_start_raw_ns;
  return CLOCKSYNC_OK;
}

const std::string& Clock::path() const { return remapper_->path; }

uint64_t Clock::path_check_count() const {
  return remapper_->path_checks.load(std::memory_order_relaxed);
}

uint64_t Clock::remap_count() const {
  return remapper_->remaps.load(std::memory_order_relaxed);
}

}  // namespace clocksync
