// tracer/session.cc: a tracing session's parts put together, its mapping
// records, its sync sessions and its service thread (session.h).

#include "tracer/session.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/clock.h"
#include "tracer/fatal_signals.h"
#include "tracer/options.h"
#include "tracer/recording.h"
#include "tracer/warn.h"

namespace clocksync {
namespace tracer {
namespace {

// The service thread looks at the segment this often when the mapping is
// closed, stale or absent, ns.
constexpr int64_t kSegmentWatchNs = 200'000'000;
// A mapping not updated for this long makes the watch look for a new file.
constexpr int64_t kSegmentStaleNs = 5'000'000'000;

}  // namespace

std::atomic<TracingSession*> g_session{nullptr};
std::atomic<int> g_session_pid{0};

absl::Status CheckNotForkedSession() {
  const int owner = g_session_pid.load(std::memory_order_acquire);
  if (g_session.load(std::memory_order_acquire) == nullptr || owner == 0 ||
      owner == getpid()) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "tracer: this process (pid ", getpid(), ") was forked from a traced "
      "process (pid ", owner, ") and did not exec: it holds a copy of that "
      "tracer without its threads; exec the child (or fork before the "
      "tracer's init) to trace it"));
}
std::mutex g_lifecycle_mutex;

TracingSession::TracingSession(SessionParts parts, uint64_t generation)
    : options_(std::move(parts.options)),
      info_(std::move(parts.info)),
      has_model_(parts.model.has_value()),
      segment_(std::move(parts.segment)),
      streaming_(parts.streaming),
      collector_note_(std::move(parts.collector_note)),
      generation_(generation),
      records_(options_.world_size),
      threads_(static_cast<uint32_t>(options_.buffer_events), info_.origin_ns,
               parts.model, info_.process_name),
      archive_(std::move(parts.writer), &threads_, &records_,
               std::move(parts.truth)),
      sync_(options_, parts.model, parts.probe_key),
      cold_clock_(parts.model) {}

TracingSession::~TracingSession() { StopThreads(); }

void TracingSession::NoteMappingChange(ThreadState* state) {
  MappingValues values;
  uint64_t seq = 0;
  if (!segment_->ReadMapping(&values, &seq)) {
    // No segment (zero page) or a writer kept it busy: look again at the
    // next event only if something is mapped.
    state->last_seq = shm::LoadAcquire(*g_hot.seq_word);
    return;
  }
  const int64_t raw_ns = Clock::RawNowNs();
  const int64_t local_ns = state->clock.At(raw_ns);
  records_.RecordMapping(values, raw_ns, local_ns);
  state->last_seq = seq;
}

void TracingSession::NoteMappingChangeCold() {
  MappingValues values;
  uint64_t seq = 0;
  if (!segment_->ReadMapping(&values, &seq)) return;
  std::lock_guard<std::mutex> lock(cold_clock_mutex_);
  const int64_t raw_ns = Clock::RawNowNs();
  records_.RecordMapping(values, raw_ns, cold_clock_.At(raw_ns));
}

absl::Status TracingSession::RunSession(trace::SyncSessionKind kind) {
  if (options_.master_probe.empty()) return absl::OkStatus();
  trace::SyncSession session;
  absl::Status status = sync_.Run(kind, &session);
  records_.AddSession(std::move(session));
  return status;
}

absl::Status TracingSession::StartThreads() {
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("eventfd: ", strerror(errno)));
  }
  eventfd_ = fd;
  // Block every signal in the tracer's threads, so that asynchronous ones
  // go to the application's threads (and to the tracer's handler there).
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  service_ = std::thread([this] { ServiceLoop(); });
  archive_.StartThread();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  SetServiceEventFd(fd);
  return absl::OkStatus();
}

void TracingSession::StopThreads() {
  SetServiceEventFd(-1);
  if (eventfd_ >= 0) {
    stop_service_.store(true, std::memory_order_release);
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t written = write(eventfd_, &one, sizeof(one));
    if (service_.joinable()) service_.join();
    close(eventfd_);
    eventfd_ = -1;
  }
  archive_.StopThread();
}

TracerStats TracingSession::Stats() {
  TracerStats stats;
  stats.has_model = has_model_;
  archive_.AddStats(&stats);
  stats.collector_fallback = !collector_note_.empty();
  stats.collector_note = collector_note_;
  if (streaming_ != nullptr) {
    stats.events_streamed = streaming_->events_acknowledged();
    stats.lost_peers = streaming_->lost_peers();
    if (streaming_->fell_back()) {
      stats.collector_fallback = true;
      stats.collector_note = streaming_->fallback_reason();
    }
  }
  stats.events_rejected = events_rejected_.load(std::memory_order_relaxed);
  stats.threads = threads_.size();
  records_.AddStats(&stats);
  return stats;
}

// The service thread: the segment watch, periodic sync sessions, the
// sidecar, and SIGINT/SIGTERM (completes the archive, then re-raises).
void TracingSession::ServiceLoop() {
  int64_t next_periodic_ns = options_.sync_period_ns > 0
                                 ? Clock::RawNowNs() + options_.sync_period_ns
                                 : INT64_MAX;
  int64_t next_watch_ns = Clock::RawNowNs() + kSegmentWatchNs;
  while (!stop_service_.load(std::memory_order_acquire)) {
    const int64_t now_ns = Clock::RawNowNs();
    const int64_t wake_ns = std::min(next_periodic_ns, next_watch_ns);
    const int timeout_ms = static_cast<int>(std::clamp<int64_t>(
        (wake_ns - now_ns + kNsPerMs - 1) / kNsPerMs, 0, 1000));
    struct pollfd pfd = {eventfd_, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) > 0) {
      uint64_t value = 0;
      [[maybe_unused]] ssize_t got = read(eventfd_, &value, sizeof(value));
    }
    if (const int signo = TakeServiceSignal()) {
      CompleteAndReRaise(
          signo,
          [](void* session) {
            static_cast<TracingSession*>(session)
                ->archive_.FlushAllAndFinish(/*from_signal=*/false)
                .IgnoreError();
          },
          this);
    }
    if (stop_service_.load(std::memory_order_acquire)) break;
    const int64_t after_ns = Clock::RawNowNs();
    if (after_ns >= next_watch_ns) {
      WatchSegment(after_ns);
      next_watch_ns = after_ns + kSegmentWatchNs;
    }
    if (after_ns >= next_periodic_ns) {
      RunSession(trace::SyncSessionKind::kPeriodic).IgnoreError();
      next_periodic_ns = Clock::RawNowNs() + options_.sync_period_ns;
    }
    archive_.StreamSidecar();
  }
}

// Maps a new segment when the current one is absent, closed (its daemon
// stopped) or stale (its daemon died): a restarted daemon leaves a new file
// behind the path.
void TracingSession::WatchSegment(int64_t raw_now_ns) {
  MappingValues values;
  uint64_t seq = 0;
  if (segment_->ReadMapping(&values, &seq)) {
    const bool closed = (values.status & CLOCKSYNC_STATUS_CLOSED) != 0;
    const bool stale = raw_now_ns - values.update_raw_ns > kSegmentStaleNs;
    if (!closed && !stale) return;
  }
  const bool was_mapped = segment_->mapped();
  const uint64_t remaps = segment_->remaps();
  std::string message;
  const bool ok = segment_->Remap(&message) == shm::SegmentError::kNone;
  if (segment_->remaps() != remaps) PublishRemap();
  if (ok && !was_mapped) {
    Warn(absl::StrCat("clocksyncd segment ", segment_->path(),
                      " appeared: mapping records start now"));
  }
  // A new file changed the sequence word: threads record the mapping at
  // their next event; record it now too, for a quiet program.
  NoteMappingChangeCold();
}

// Orders the in-place mapping of a new segment before the recording
// threads' next reads of it: a release write of the session's generation
// (its own value; a compare-and-swap, so a session Finalize ended stays
// ended) that every event's acquire load of the generation reads. The page
// swap itself is atomic (mmap MAP_FIXED), so this only matters to the
// memory model and ThreadSanitizer (which sees the mmap as a write).
void TracingSession::PublishRemap() {
  uint64_t expected = generation_;
  g_hot.generation.compare_exchange_strong(expected, generation_,
                                           std::memory_order_release,
                                           std::memory_order_relaxed);
}

}  // namespace tracer
}  // namespace clocksync
