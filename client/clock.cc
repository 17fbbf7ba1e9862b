// client/clock.cc: clocksync::Clock's slow paths: opening the segment and
// re-mapping a restarted daemon's file (through shm/segment_reader.h), stale
// and unsynced readings; the hot path is inline in clock.h.

#include "client/clock.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "shm/segment_reader.h"

namespace clocksync {
namespace {

// The CLOCKSYNC_E* code of a segment error.
int SegmentErrorCode(shm::SegmentError error) {
  switch (error) {
    case shm::SegmentError::kNone:
      return CLOCKSYNC_OK;
    case shm::SegmentError::kNoFile:
      return CLOCKSYNC_ENODAEMON;
    case shm::SegmentError::kBadMagic:
      return CLOCKSYNC_EBADMAGIC;
    case shm::SegmentError::kBadVersion:
      return CLOCKSYNC_EVERSION;
    case shm::SegmentError::kBadSize:
      return CLOCKSYNC_EBADSIZE;
    case shm::SegmentError::kIo:
    default:
      return CLOCKSYNC_EIO;
  }
}

// The name of a code, which starts our messages (tests and people grep
// for it).
const char* CodeName(int code) {
  switch (code) {
    case CLOCKSYNC_ENODAEMON:
      return "CLOCKSYNC_ENODAEMON";
    case CLOCKSYNC_EBADMAGIC:
      return "CLOCKSYNC_EBADMAGIC";
    case CLOCKSYNC_EVERSION:
      return "CLOCKSYNC_EVERSION";
    case CLOCKSYNC_EBADSIZE:
      return "CLOCKSYNC_EBADSIZE";
    default:
      return "CLOCKSYNC_EIO";
  }
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
  // The read-only mapping (shm/segment_reader.h); its address never
  // changes. Remap() and the file identity are guarded by mu.
  std::unique_ptr<shm::SegmentReader> reader;
  int64_t recheck_interval_ns = 0;
  // Serializes looks at the path and re-maps.
  std::mutex mu;
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
      tsc_section_(std::exchange(other.tsc_section_, nullptr)),
      stale_limit_ns_(other.stale_limit_ns_),
      stale_growth_ppb_(other.stale_growth_ppb_),
      max_read_attempts_(other.max_read_attempts_),
      remapper_(std::move(other.remapper_)) {}

Clock& Clock::operator=(Clock&& other) noexcept {
  if (this != &other) {
    section_ = std::exchange(other.section_, nullptr);
    tsc_section_ = std::exchange(other.tsc_section_, nullptr);
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
  // The process-wide switch of the TSC read path (shared with the tracer).
  const char* env = std::getenv("CLOCKSYNC_TSC");
  const std::string env_tsc = env != nullptr ? env : "auto";
  if (env_tsc != "auto" && env_tsc != "off") {
    *message = absl::StrCat("CLOCKSYNC_EINVAL: CLOCKSYNC_TSC='", env_tsc,
                            "' in the environment is neither auto nor off");
    return CLOCKSYNC_EINVAL;
  }
  const bool env_off = env_tsc == "off";
  std::unique_ptr<shm::SegmentReader> reader;
  if (const shm::SegmentError error =
          shm::SegmentReader::Open(path, &reader, message);
      error != shm::SegmentError::kNone) {
    const int code = SegmentErrorCode(error);
    *message = absl::StrCat(CodeName(code), ": ", *message);
    return code;
  }
  auto remapper = std::make_unique<Remapper>();
  remapper->recheck_interval_ns = options.recheck_interval_ns;
  remapper->next_check_raw_ns.store(RawNowNs() + options.recheck_interval_ns,
                                    std::memory_order_relaxed);
  remapper->reader = std::move(reader);
  const clocksync_shm_mapping* section =
      &remapper->reader->segment()->mapping;
  const clocksync_shm_tsc* tsc = &remapper->reader->segment()->tsc;
  out->reset(new Clock(section, options, std::move(remapper)));
#if defined(__x86_64__)
  if (options.use_tsc && !env_off) (*out)->tsc_section_ = tsc;
#else
  (void)tsc;
  (void)env_off;
#endif
  return CLOCKSYNC_OK;
}

bool Clock::UsesTsc() const noexcept {
  int64_t raw_ns, error_ns;
  return TscRawNow(&raw_ns, &error_ns);
}

TimeReading Clock::Widened(TimeReading r, int64_t extra_bound_ns) noexcept {
  if (r.error == CLOCKSYNC_OK || r.error == CLOCKSYNC_ESTALE ||
      r.error == CLOCKSYNC_ENOTSYNCED) {
    r.earliest_ns = internal::SaturatingSub(r.earliest_ns, extra_bound_ns);
    r.latest_ns = internal::SaturatingAdd(r.latest_ns, extra_bound_ns);
  }
  return r;
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
  if (internal::OutOfRange(v, raw_ns)) {
    // 73 years or more from the mapping (a garbage raw time) or values no
    // daemon writes: no time can be given.
    TimeReading reading;
    reading.error = CLOCKSYNC_EINVAL;
    return reading;
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

  // No file (a daemon between stop and start), the same file, or a broken
  // one: keep extrapolating the mapping we have. A new valid file replaces
  // the pages under the same address: readers never see a hole.
  const uint64_t remaps_before = r.reader->remaps();
  std::string message;  // only built on failure
  r.reader->Remap(&message);
  if (r.reader->remaps() != remaps_before) {
    r.remaps.fetch_add(1, std::memory_order_relaxed);
  }
}

int Clock::ReadMapping(MappingSnapshot* out) const noexcept {
  // Holding the lock keeps a re-map from swapping the header underneath.
  std::lock_guard<std::mutex> lock(remapper_->mu);
  if (!shm::TryReadSection(section_, &out->values) &&
      !ReadSectionRetrying(&out->values)) {
    return CLOCKSYNC_EBUSY;
  }
  const clocksync_shm* shm = remapper_->reader->segment();
  out->writer_pid = shm->header.writer_pid;
  out->writer_start_raw_ns = shm->header.writer_start_raw_ns;
  out->tree_id = shm::LoadAcquire(shm->header.tree_id);
  return CLOCKSYNC_OK;
}

const std::string& Clock::path() const { return remapper_->reader->path(); }

uint64_t Clock::path_check_count() const {
  return remapper_->path_checks.load(std::memory_order_relaxed);
}

uint64_t Clock::remap_count() const {
  return remapper_->remaps.load(std::memory_order_relaxed);
}

}  // namespace clocksync
