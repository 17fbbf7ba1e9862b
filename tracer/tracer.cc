// tracer/tracer.cc: the in-process tracer (see tracer.h).
//
// Layout of this file:
//   1. small helpers (clocks, environment parsing, warnings)
//   2. Segment: the node's clocksyncd segment, mapped by the tracer itself
//      at a fixed address so that the hot path reads its seqlock sequence
//      word through a constant pointer, and a restarted daemon's new file
//      is mapped in place (MAP_FIXED) without readers ever faulting
//   3. the modeled clock (test feature) and the ground truth
//   4. SyncRunner: sync sessions with the master over the probe protocol
//   5. per-thread state, the process-wide globals the hot path reads, and
//      the Impl that owns one tracing session (writer, definitions, mapping
//      records, sessions, service thread, signal handling)
//   6. the recording functions (the hot path)
//   7. Tracer's static members
//
// Locks (never nested except in the fatal-signal path, which only tries):
//   g_lifecycle_mutex  Init, Finalize, thread attach and thread exit
//   Impl::writer_mutex_ the Otf2Writer (flushes, Finish)
//   Impl::state_mutex_  definitions, mapping records, sessions
//   Impl::sync_mutex_   the SyncRunner (one session at a time)

#include "tracer/tracer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/clock.h"
#include "shm/shm_layout.h"
#include "probe/requester.h"
#include "hull/sim/clock_model.h"
#include "hull/trace_stamp.h"
#include "trace/otf2_writer.h"
#include "trace/trace.h"

namespace clocksync {
namespace {

using trace::CollectiveKind;
using trace::Event;
using trace::EventKind;

// ============================================================================
// 1. Helpers
// ============================================================================

// Host CLOCK_MONOTONIC_RAW, ns (vDSO).
inline int64_t RawNowNs() noexcept { return Clock::RawNowNs(); }

// The kernel's id of the calling thread (for lock-owner checks in signal
// handlers; gettid is async-signal-safe).
inline int32_t ThreadId() noexcept {
  return static_cast<int32_t>(syscall(SYS_gettid));
}

// One line on stderr, prefixed. Not for signal handlers.
void Warn(const std::string& message) {
  std::fprintf(stderr, "clocksync tracer: %s\n", message.c_str());
  std::fflush(stderr);
}

constexpr int64_t kNsPerMs = 1'000'000;
// Bounds of the numeric options.
constexpr int64_t kMinBufferEvents = 16;
constexpr int64_t kMaxBufferEvents = int64_t{1} << 26;
constexpr int32_t kMaxSyncMessages = 1'000'000;
constexpr int64_t kMaxSyncDurationMs = 3'600'000;       // 1 h
constexpr int64_t kMaxSyncPeriodMs = 24 * 3'600'000;    // 1 day
// Communicators: id 0 (the world) .. kMaxCommunicators - 1.
constexpr uint32_t kMaxCommunicators = 1024;
// The service thread looks at the segment this often when the mapping is
// closed, stale or absent, ns.
constexpr int64_t kSegmentWatchNs = 200'000'000;
// A mapping not updated for this long makes the watch look for a new file.
constexpr int64_t kSegmentStaleNs = 5'000'000'000;
// Alternate signal stack per recording thread that has none.
constexpr size_t kAltStackBytes = 256 * 1024;
// How long a fatal-signal handler waits for a lock held by another thread.
constexpr int kSignalLockWaitMs = 2000;

// Parses an integer environment variable into [min, max]; leaves *out alone
// when the variable is unset.
absl::Status EnvInt(const char* name, int64_t min, int64_t max, int64_t* out) {
  const char* value = std::getenv(name);
  if (value == nullptr) return absl::OkStatus();
  int64_t parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed) || parsed < min || parsed > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected an integer in ", min, "..", max,
                     ", got '", value, "'"));
  }
  *out = parsed;
  return absl::OkStatus();
}

void EnvString(const char* name, std::string* out) {
  if (const char* value = std::getenv(name)) *out = value;
}

// ============================================================================
// 2. Segment
// ============================================================================

// The node's segment, mapped read-only at one fixed address for the whole
// tracing session. Before a daemon's file is mapped (or when there is
// none), the address holds an anonymous zero page: the sequence word reads
// 0 and the magic is wrong, so readers see "no mapping". Remap() replaces
// the page with a new file in place. The page is unmapped only at Finalize,
// when nothing reads it any more.
class Segment {
 public:
  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment() {
    if (base_ != nullptr) munmap(base_, length_);
  }

  // Reserves the address. Errors only when mmap fails.
  absl::Status Reserve(const std::string& path) {
    path_ = path;
    length_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (length_ < sizeof(clocksync_shm)) length_ = sizeof(clocksync_shm);
    void* base = mmap(nullptr, length_, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    if (base == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("mmap of ", length_, " bytes: ", strerror(errno)));
    }
    base_ = base;
    return absl::OkStatus();
  }

  // Maps the file at the path in place when it is a valid segment other
  // than the one mapped. Returns OK when a segment is mapped afterwards;
  // otherwise a status naming the path (the zero page or the previous file
  // stays mapped).
  absl::Status Remap() {
    const int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int error = errno;
      const std::string message =
          absl::StrCat("open ", path_, ": ", strerror(error));
      return error == ENOENT ? absl::NotFoundError(message)
                             : absl::UnavailableError(message);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
      const int error = errno;
      close(fd);
      return absl::UnavailableError(
          absl::StrCat("fstat ", path_, ": ", strerror(error)));
    }
    if (mapped_ && st.st_dev == dev_ && st.st_ino == ino_) {
      close(fd);
      return absl::OkStatus();
    }
    clocksync_shm_header header;
    if (st.st_size < static_cast<off_t>(sizeof(clocksync_shm)) ||
        pread(fd, &header, sizeof(header), 0) !=
            static_cast<ssize_t>(sizeof(header))) {
      close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat(path_, ": too small for a clocksync segment"));
    }
    if (header.magic != CLOCKSYNC_SHM_MAGIC ||
        header.layout_version != CLOCKSYNC_SHM_LAYOUT_VERSION ||
        header.mapping_offset != offsetof(clocksync_shm, mapping)) {
      close(fd);
      return absl::FailedPreconditionError(absl::StrCat(
          path_, ": not a clocksync segment of layout version ",
          CLOCKSYNC_SHM_LAYOUT_VERSION));
    }
    void* mapped = mmap(base_, length_, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    const int error = errno;
    close(fd);
    if (mapped == MAP_FAILED) {
      return absl::UnavailableError(
          absl::StrCat("mmap ", path_, ": ", strerror(error)));
    }
    mapped_ = true;
    dev_ = st.st_dev;
    ino_ = st.st_ino;
    ++remaps_;
    return absl::OkStatus();
  }

  // The sequence word the hot path compares.
  const uint64_t* seq_word() const {
    return &static_cast<const clocksync_shm*>(base_)->mapping.seq;
  }

  // A consistent read of the mapping and the sequence value it was read
  // under. False when no segment is mapped or writes kept overlapping.
  bool Read(MappingValues* values, uint64_t* seq) const noexcept {
    const clocksync_shm* shm = static_cast<const clocksync_shm*>(base_);
    if (shm::LoadRelaxed(shm->header.magic) != CLOCKSYNC_SHM_MAGIC) {
      return false;
    }
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const uint64_t before = shm::LoadAcquire(shm->mapping.seq);
      if (shm::TryReadSection(&shm->mapping, values) &&
          shm::LoadRelaxed(shm->mapping.seq) == before) {
        *seq = before;
        return true;
      }
      shm::CpuRelax();
    }
    return false;
  }

  bool mapped() const { return mapped_; }
  // Files mapped so far.
  uint64_t remaps() const { return remaps_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* base_ = nullptr;
  size_t length_ = 0;
  bool mapped_ = false;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  uint64_t remaps_ = 0;
};


// ============================================================================
// 3. The modeled clock (test feature) and the ground truth
// ============================================================================

// A node's modeled local clock, as its clocksyncd describes it in
// <shm_path>.model.
struct ModelSpec {
  int64_t origin_raw_ns = 0;
  std::string spec;
  hull::ClockModelParams params;
};

// Reads "origin_raw_ns=<int64> spec=<spec>". Errors name the file.
absl::StatusOr<ModelSpec> ReadModelFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read clock model file ", path));
  }
  std::string line;
  std::getline(in, line);
  line = std::string(absl::StripAsciiWhitespace(line));
  ModelSpec model;
  bool have_origin = false;
  bool have_spec = false;
  // The spec is everything after "spec=" (it holds no spaces, but may hold
  // '=' and ','), so split only at the first space of each field.
  absl::string_view rest = line;
  while (!rest.empty()) {
    const size_t space = rest.find(' ');
    absl::string_view field = rest.substr(0, space);
    rest = space == absl::string_view::npos ? absl::string_view()
                                            : rest.substr(space + 1);
    if (absl::ConsumePrefix(&field, "origin_raw_ns=")) {
      if (!absl::SimpleAtoi(field, &model.origin_raw_ns)) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": origin_raw_ns: not an integer: '", field, "'"));
      }
      have_origin = true;
    } else if (absl::ConsumePrefix(&field, "spec=")) {
      model.spec = std::string(field);
      have_spec = true;
    }
  }
  if (!have_origin || !have_spec) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": expected 'origin_raw_ns=<int64> spec=<clock model>', got '",
        line, "'"));
  }
  const std::string error = hull::ParseClockModel(model.spec, &model.params);
  if (!error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": spec: ", error));
  }
  return model;
}

// The local clock of one user (a thread, the sync runner): raw, or the
// model evaluated on a private ModeledClock (which is not thread-safe).
class LocalClockFn {
 public:
  LocalClockFn() = default;
  explicit LocalClockFn(const std::optional<ModelSpec>& model) {
    if (model) {
      origin_raw_ns_ = model->origin_raw_ns;
      model_.emplace(model->params);
    }
  }
  bool has_model() const { return model_.has_value(); }
  // Local ns at raw time raw_ns.
  int64_t At(int64_t raw_ns) {
    if (!model_) return raw_ns;
    // The model is defined for true time >= 0 (raw after the daemon's start).
    const int64_t since_origin_ns = std::max<int64_t>(raw_ns - origin_raw_ns_, 0);
    return origin_raw_ns_ + model_->LocalAt(since_origin_ns);
  }

 private:
  int64_t origin_raw_ns_ = 0;
  std::optional<hull::ModeledClock> model_;
};

// The master's raw->global offset from its segment (global = raw + offset
// on the master, which runs on the raw clock).
absl::StatusOr<int64_t> ReadMasterOffset(const std::string& path) {
  absl::StatusOr<Clock> master = Clock::Open(path);
  if (!master.ok()) return master.status();
  const int64_t raw_ns = RawNowNs();
  const TimeReading reading = master->At(raw_ns);
  if (reading.error != CLOCKSYNC_OK && reading.error != CLOCKSYNC_ESTALE) {
    return absl::UnavailableError(absl::StrCat(
        "master segment ", path, ": ", clocksync_strerror(reading.error)));
  }
  return reading.global_ns - raw_ns;
}

// ============================================================================
// 4. Sync sessions
// ============================================================================

// Runs sync sessions against the master's probe responder: one request at
// a time, each waited for up to reply_timeout, until max_messages exchanges
// or max_duration. Not thread-safe (the Impl serializes sessions).
class SyncRunner {
 public:
  SyncRunner(const TracerOptions& options,
             const std::optional<ModelSpec>& model,
             const std::optional<probe::ProbeKeys>& key)
      : options_(options), clock_(model), key_(key) {}

  // Runs one session into *session. Unavailable (naming the master) when no
  // exchange succeeded; the session is then empty.
  absl::Status Run(trace::SyncSessionKind kind, trace::SyncSession* session) {
    session->kind = kind;
    session->exchanges.clear();
    if (options_.sync_max_messages <= 0) return absl::OkStatus();
    if (requester_ == nullptr) {
      probe::ProbeRequester::Options requester_options;
      requester_options.parent_address = options_.master_probe;
      requester_options.node_id = static_cast<uint64_t>(getpid());
      requester_options.clock = &clock_;
      requester_options.expiry_ns = options_.sync_reply_timeout_ns;
      requester_options.key = key_;
      absl::StatusOr<std::unique_ptr<probe::ProbeRequester>> requester =
          probe::ProbeRequester::Create(requester_options);
      if (!requester.ok()) return Unreachable(requester.status().ToString());
      requester_ = std::move(*requester);
    }
    const int64_t start_ns = RawNowNs();
    const int64_t deadline_ns = start_ns + options_.sync_max_duration_ns;
    int consecutive_failures = 0;
    std::string last_problem = "no reply";
    for (int32_t sent = 0; sent < options_.sync_max_messages; ++sent) {
      const int64_t sent_ns = RawNowNs();
      if (sent_ns >= deadline_ns) break;
      bool answered = false;
      if (absl::Status status = requester_->SendProbe(); !status.ok()) {
        last_problem = status.ToString();
      } else {
        const int64_t wait_until_ns =
            std::min(deadline_ns, sent_ns + options_.sync_reply_timeout_ns);
        while (!answered) {
          const int64_t left_ns = wait_until_ns - RawNowNs();
          if (left_ns <= 0) break;
          const int timeout_ms = static_cast<int>(
              std::max<int64_t>(1, (left_ns + kNsPerMs - 1) / kNsPerMs));
          absl::StatusOr<int> delivered = requester_->Poll(
              timeout_ms, [&](const probe::ProbeResult& result) {
                hull::ProbeSample exchange = result.sample;
                exchange.parent_bound_ns = 0;  // the master
                session->exchanges.push_back(exchange);
                answered = true;
              });
          if (!delivered.ok()) {
            last_problem = delivered.status().ToString();
            break;
          }
        }
      }
      // A master that does not answer three requests in a row is not
      // there: do not spend the whole session waiting for it.
      consecutive_failures = answered ? 0 : consecutive_failures + 1;
      if (consecutive_failures >= 3 && session->exchanges.empty()) break;
    }
    if (session->exchanges.empty()) return Unreachable(last_problem);
    return absl::OkStatus();
  }

 private:
  absl::Status Unreachable(const std::string& why) {
    return absl::UnavailableError(
        absl::StrCat("sync session: master ", options_.master_probe,
                     " unreachable (", why, ")"));
  }

  // The probe requester's view of the local clock.
  class ProbeClock final : public probe::LocalClock {
   public:
    explicit ProbeClock(const std::optional<ModelSpec>& model) : fn_(model) {}
    int64_t LocalAt(int64_t raw_ns) override { return fn_.At(raw_ns); }

   private:
    LocalClockFn fn_;
  };

  const TracerOptions options_;
  ProbeClock clock_;
  const std::optional<probe::ProbeKeys> key_;
  std::unique_ptr<probe::ProbeRequester> requester_;
};

// ============================================================================
// 5. Per-thread state, globals, the Impl
// ============================================================================

// A spin lock for the few instructions of a buffer hand-off. A signal
// handler only tries it, for a bounded time (its holder may be the thread
// the signal interrupted).
class SwapLock {
 public:
  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
    }
  }
  bool TryLockBounded() noexcept {
    for (int i = 0; i < kSwapLockSignalSpins; ++i) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return true;
      __builtin_ia32_pause();
    }
    return false;
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSwapLockSignalSpins = 1 << 22;  // a few ms
  std::atomic<bool> locked_{false};
};

// The state of one recording thread. The hot fields are touched only by
// their thread; `count` is also read by flushers (Finalize, the fatal-signal
// path), which is why it is an atomic the owner release-stores after
// writing each event: a flusher reads exactly the committed events.
//
// Double buffering: when `events` fills, the owner hands it to the writer
// thread (`pending`), continues in the second buffer (`other`), and only
// waits when that one fills too before the writer is done with the first.
// The hand-off changes `events`, `other`, `pending` and `pending_count`
// under `swap_lock`; flushers read them under it too. `pending` is cleared
// (writer_mutex_ held) once its events are in the archive.
struct ThreadState {
  // --- hot: owner thread only ---
  Event* events = nullptr;            // the active buffer, `capacity` events
  uint32_t capacity = 0;
  std::atomic<uint32_t> count{0};     // committed, unflushed events
  uint64_t last_seq = ~uint64_t{0};   // segment sequence last looked at
  int64_t origin_ns = 0;              // local time of stamp tick 0
  hull::TraceStamper stamper;
  int32_t open_collectives = 0;       // CollectiveBegin without End yet
  LocalClockFn clock;                 // raw, or the modeled clock
  // --- hand-off ---
  SwapLock swap_lock;
  Event* other = nullptr;             // the second buffer (nullptr: none yet)
  std::atomic<Event*> pending{nullptr};  // full, waiting for the writer
  uint32_t pending_count = 0;         // events in `pending`
  // --- cold ---
  uint32_t thread_index = 0;
  std::string name;
  std::unique_ptr<Event[]> chunk;        // owns the first buffer
  std::unique_ptr<Event[]> other_chunk;  // owns the second one
  uint64_t flushed = 0;               // events handed to the writer (lock)
  ThreadState* next = nullptr;        // the Impl's list of every thread
};

// The hot path's view of the process-wide state, on its own cache line.
struct alignas(64) HotGlobals {
  // Id of the active tracing session; 0 while none is active.
  std::atomic<uint64_t> generation{0};
  // Regions defined so far: ids 0..region_count-1.
  std::atomic<uint32_t> region_count{0};
  // The segment's sequence word (a constant address during a session).
  const uint64_t* seq_word = nullptr;
};
constinit HotGlobals g_hot;

// Size of each communicator (0: undefined; INT32_MAX: any peer, for a
// world of unknown size).
constinit std::array<std::atomic<int32_t>, kMaxCommunicators> g_comm_size{};

// What a thread knows of its state. Trivially destructible so that the hot
// path's access needs no TLS-initialization guard.
struct ThreadSlot {
  ThreadState* state = nullptr;
  uint64_t generation = 0;  // of the session `state` belongs to
};
constinit thread_local ThreadSlot t_slot;

std::mutex g_lifecycle_mutex;
uint64_t g_next_generation = 1;  // under g_lifecycle_mutex

// A mutex whose owner is known, so that a fatal-signal handler can tell
// "held by the crashing thread itself" (never wait) from "held by another
// thread" (wait a bit), and can try without blocking forever.
class OwnedMutex {
 public:
  void lock() {
    mutex_.lock();
    owner_.store(ThreadId(), std::memory_order_relaxed);
  }
  void unlock() {
    owner_.store(0, std::memory_order_relaxed);
    mutex_.unlock();
  }
  // For signal handlers: false at once when the caller holds it, else tries
  // for up to kSignalLockWaitMs.
  bool TryLockForSignal() {
    if (owner_.load(std::memory_order_relaxed) == ThreadId()) return false;
    for (int waited_ms = 0; waited_ms < kSignalLockWaitMs; ++waited_ms) {
      if (mutex_.try_lock()) {
        owner_.store(ThreadId(), std::memory_order_relaxed);
        return true;
      }
      const struct timespec one_ms = {0, 1'000'000};
      nanosleep(&one_ms, nullptr);
    }
    return false;
  }

 private:
  std::mutex mutex_;
  std::atomic<int32_t> owner_{0};
};

// Signals the tracer completes the archive on. Synchronous ones are handled
// in the handler; asynchronous ones (SIGINT, SIGTERM) by the service thread.
constexpr int kSyncSignals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
constexpr int kAsyncSignals[] = {SIGINT, SIGTERM};

class Impl;
std::atomic<Impl*> g_impl{nullptr};
// Who completes the archive: 0 nobody yet; 1 someone is (a fatal-signal
// handler, the service thread on SIGINT/SIGTERM, or Finalize), the kernel
// thread id in g_completing_tid; 2 a signal completed it.
std::atomic<int> g_signal_flush_state{0};
std::atomic<int32_t> g_completing_tid{0};
// The previous action of each signal the tracer installed a handler for.
struct sigaction g_previous_action[NSIG];
bool g_installed[NSIG] = {};
// The service thread's eventfd (-1: none); the async handler writes to it.
std::atomic<int> g_service_eventfd{-1};
// An asynchronous signal handed to the service thread, which completes the
// archive and raises it again.
std::atomic<int> g_service_signal{0};
// An asynchronous signal that arrived while Finalize completed the archive;
// Finalize raises it again at its end.
std::atomic<int> g_pending_signal{0};

void FatalSignalHandler(int signo, siginfo_t* info, void* context);
void AsyncSignalHandler(int signo, siginfo_t* info, void* context);

// One tracing session (Init .. Finalize).
class Impl {
 public:
  Impl(TracerOptions options, trace::ProcessInfo info,
       std::optional<ModelSpec> model, std::optional<trace::GroundTruth> truth,
       std::unique_ptr<Segment> segment,
       std::unique_ptr<trace::Otf2Writer> writer, uint64_t generation)
      : options_(std::move(options)),
        info_(std::move(info)),
        model_(std::move(model)),
        truth_(std::move(truth)),
        segment_(std::move(segment)),
        writer_(std::move(writer)),
        generation_(generation),
        cold_clock_(model_),
        init_thread_id_(ThreadId()) {
    stats_.archive_dir = writer_->archive_dir();
    stats_.has_model = model_.has_value();
  }

  ~Impl() {
    ThreadState* state = threads_.load(std::memory_order_acquire);
    while (state != nullptr) {
      ThreadState* next = state->next;
      delete state;
      state = next;
    }
  }

  uint64_t generation() const { return generation_; }
  // The master's probe key, for sync sessions (before the first one).
  void SetProbeKey(const std::optional<probe::ProbeKeys>& key) {
    probe_key_ = key;
  }
  const TracerOptions& options() const { return options_; }
  const Segment& segment() const { return *segment_; }

  // --- definitions ----------------------------------------------------------

  void DefineWorld() {
    std::lock_guard<OwnedMutex> lock(state_mutex_);
    trace::Communicator world;
    world.id = trace::kWorldCommunicator;
    world.name = "world";
    for (int32_t r = 0; r < options_.world_size; ++r) world.ranks.push_back(r);
    communicators_.push_back(world);
    sidecar_dirty_ = true;
    for (auto& size : g_comm_size) size.store(0, std::memory_order_relaxed);
    g_comm_size[0].store(options_.world_size > 0 ? options_.world_size
                                                  : INT32_MAX,
                         std::memory_order_release);
  }

  uint32_t DefineRegion(absl::string_view name) {
    std::lock_guard<OwnedMutex> lock(state_mutex_);
    for (const trace::Region& region : regions_) {
      if (region.name == name) return region.id;
    }
    const uint32_t id = static_cast<uint32_t>(regions_.size());
    regions_.push_back(trace::Region{id, std::string(name)});
    sidecar_dirty_ = true;
    g_hot.region_count.store(id + 1, std::memory_order_release);
    return id;
  }

  absl::StatusOr<uint32_t> DefineCommunicator(absl::string_view name,
                                              absl::Span<const int32_t> ranks) {
    if (ranks.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("communicator '", name, "': no ranks"));
    }
    std::vector<int32_t> sorted(ranks.begin(), ranks.end());
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (sorted[i] < 0 ||
          (options_.world_size > 0 && sorted[i] >= options_.world_size)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "communicator '", name, "': rank ", sorted[i],
            " outside the world (size ",
            options_.world_size > 0 ? absl::StrCat(options_.world_size)
                                    : std::string("unknown"),
            ")"));
      }
      if (i > 0 && sorted[i] == sorted[i - 1]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "communicator '", name, "': rank ", sorted[i], " listed twice"));
      }
    }
    std::lock_guard<OwnedMutex> lock(state_mutex_);
    if (communicators_.size() >= kMaxCommunicators) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "communicator '", name, "': at most ", kMaxCommunicators - 1,
          " communicators"));
    }
    const uint32_t id = static_cast<uint32_t>(communicators_.size());
    communicators_.push_back(trace::Communicator{
        id, std::string(name), std::vector<int32_t>(ranks.begin(), ranks.end())});
    sidecar_dirty_ = true;
    g_comm_size[id].store(static_cast<int32_t>(ranks.size()),
                          std::memory_order_release);
    return id;
  }

  // --- threads --------------------------------------------------------------

  // A new state for the calling thread (under g_lifecycle_mutex).
  ThreadState* NewThread() {
    auto state = std::make_unique<ThreadState>();
    state->capacity = static_cast<uint32_t>(options_.buffer_events);
    // Value-initialized: the pages are touched now, not on the hot path.
    state->chunk = std::make_unique<Event[]>(state->capacity);
    state->events = state->chunk.get();
    state->origin_ns = info_.origin_ns;
    state->clock = LocalClockFn(model_);
    state->thread_index = next_thread_index_++;
    if (ThreadId() == init_thread_id_) {
      state->name = "main";
    } else {
      char name[32] = {};
      if (pthread_getname_np(pthread_self(), name, sizeof(name)) == 0 &&
          name[0] != '\0' && info_.process_name.rfind(name, 0) != 0) {
        state->name = name;
      } else {
        state->name = absl::StrCat("thread ", state->thread_index);
      }
    }
    ThreadState* raw = state.release();
    raw->next = threads_.load(std::memory_order_relaxed);
    threads_.store(raw, std::memory_order_release);
    thread_count_.fetch_add(1, std::memory_order_relaxed);
    return raw;
  }

  // The owner's buffer is full: hand it to the writer thread and go on in
  // the second buffer, waiting first if the writer still has the second
  // one. Without a writer thread (stopped) or a second buffer (out of
  // memory), writes the buffer on the calling thread.
  void BufferFull(ThreadState* state) {
    if (state->other == nullptr) {
      // The first hand-off of this thread allocates the second buffer.
      state->other_chunk.reset(new (std::nothrow) Event[state->capacity]());
      if (state->other_chunk == nullptr) return FlushThread(state);
      state->other = state->other_chunk.get();
    }
    {
      std::unique_lock<std::mutex> lock(handoff_mutex_);
      if (state->pending.load(std::memory_order_acquire) != nullptr &&
          writer_running_) {
        ++writer_waits_;
        handoff_cv_.wait(lock, [&] {
          return state->pending.load(std::memory_order_acquire) == nullptr ||
                 !writer_running_;
        });
      }
      if (!writer_running_) {
        lock.unlock();
        return FlushThread(state);
      }
    }
    {
      std::lock_guard<SwapLock> swap(state->swap_lock);
      state->pending_count = state->count.load(std::memory_order_relaxed);
      state->pending.store(state->events, std::memory_order_release);
      std::swap(state->events, state->other);
      state->count.store(0, std::memory_order_release);
    }
    std::lock_guard<std::mutex> lock(handoff_mutex_);
    ++handoffs_waiting_;
    work_cv_.notify_one();
  }

  // Writes every committed event of a thread on the calling thread.
  void FlushThread(ThreadState* state) {
    std::lock_guard<OwnedMutex> lock(writer_mutex_);
    FlushLocked(state, /*from_signal=*/false);
    ++flushes_;
  }

  // Names a thread unless its first events were written already.
  void SetThreadName(ThreadState* state, absl::string_view name) {
    std::lock_guard<OwnedMutex> lock(writer_mutex_);
    if (state->flushed == 0) state->name = std::string(name);
  }

  // The thread is exiting: flush and release its buffer. Later flushers
  // skip it (events == nullptr).
  void RetireThread(ThreadState* state) {
    std::lock_guard<OwnedMutex> lock(writer_mutex_);
    FlushLocked(state, /*from_signal=*/false);
    std::lock_guard<SwapLock> swap(state->swap_lock);
    state->events = nullptr;
    state->other = nullptr;
    state->capacity = 0;
    state->chunk.reset();
    state->other_chunk.reset();
  }

  // --- mapping records ------------------------------------------------------

  // The segment's sequence word changed under `state`: read the mapping and
  // record it if it differs from the last one recorded.
  void NoteMappingChange(ThreadState* state) {
    MappingValues values;
    uint64_t seq = 0;
    if (!segment_->Read(&values, &seq)) {
      // No segment (zero page) or a writer kept it busy: look again at the
      // next event only if something is mapped.
      state->last_seq = shm::LoadAcquire(*g_hot.seq_word);
      return;
    }
    const int64_t raw_ns = RawNowNs();
    const int64_t local_ns = state->clock.At(raw_ns);
    RecordMapping(values, raw_ns, local_ns);
    state->last_seq = seq;
  }

  // Records the mapping now, from a thread that has no ThreadState (Init,
  // the service thread).
  void NoteMappingChangeCold() {
    MappingValues values;
    uint64_t seq = 0;
    if (!segment_->Read(&values, &seq)) return;
    std::lock_guard<std::mutex> lock(cold_clock_mutex_);
    const int64_t raw_ns = RawNowNs();
    RecordMapping(values, raw_ns, cold_clock_.At(raw_ns));
  }

  // --- sync sessions --------------------------------------------------------

  // Runs one session and stores it (also when empty). Unavailable when the
  // master did not answer; OK without a master configured (nothing run).
  absl::Status RunSession(trace::SyncSessionKind kind) {
    if (options_.master_probe.empty()) return absl::OkStatus();
    std::lock_guard<std::mutex> lock(sync_mutex_);
    if (!sync_runner_) sync_runner_.emplace(options_, model_, probe_key_);
    trace::SyncSession session;
    absl::Status status = sync_runner_->Run(kind, &session);
    if (!status.ok()) {
      // Warn when the master goes away, not at every periodic session.
      if (master_reachable_) Warn(absl::StrCat(status.message(), "; kind ",
                                               trace::SyncSessionKindName(kind),
                                               ": empty session recorded"));
      master_reachable_ = false;
    } else {
      if (!master_reachable_ && sessions_run_ > 0) {
        Warn(absl::StrCat("master ", options_.master_probe, " answers again"));
      }
      master_reachable_ = true;
    }
    ++sessions_run_;
    std::lock_guard<OwnedMutex> state_lock(state_mutex_);
    exchanges_ += session.exchanges.size();
    sessions_.push_back(std::move(session));
    sidecar_dirty_ = true;
    return status;
  }

  // --- the service thread ---------------------------------------------------

  absl::Status StartService() {
    const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("eventfd: ", strerror(errno)));
    }
    eventfd_ = fd;
    // Block every signal in the service thread, so that asynchronous ones
    // go to the application's threads (and to AsyncSignalHandler there).
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    service_ = std::thread([this] { ServiceLoop(); });
    writer_running_ = true;
    writer_thread_ = std::thread([this] { WriterLoop(); });
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    g_service_eventfd.store(fd, std::memory_order_release);
    return absl::OkStatus();
  }

  void StopService() {
    g_service_eventfd.store(-1, std::memory_order_release);
    if (eventfd_ < 0) return;
    stop_service_.store(true, std::memory_order_release);
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t written = write(eventfd_, &one, sizeof(one));
    if (service_.joinable()) service_.join();
    close(eventfd_);
    eventfd_ = -1;
  }

  // Stops the writer thread once it wrote every buffer handed to it; later
  // full buffers are written by their own threads.
  void StopWriter() {
    {
      std::lock_guard<std::mutex> lock(handoff_mutex_);
      if (!writer_running_) return;
      stop_writer_ = true;
      work_cv_.notify_one();
    }
    if (writer_thread_.joinable()) writer_thread_.join();
    std::lock_guard<std::mutex> lock(handoff_mutex_);
    writer_running_ = false;
    handoff_cv_.notify_all();
  }

  // --- signals --------------------------------------------------------------

  void InstallSignalHandlers() {
    if (!options_.install_signal_handlers) return;
    for (int signo : kSyncSignals) Install(signo, FatalSignalHandler, false);
    for (int signo : kAsyncSignals) Install(signo, AsyncSignalHandler, true);
  }

  static void RestoreSignalHandlers() {
    for (int signo = 1; signo < NSIG; ++signo) {
      if (!g_installed[signo]) continue;
      sigaction(signo, &g_previous_action[signo], nullptr);
      g_installed[signo] = false;
    }
  }

  // --- completing the archive -----------------------------------------------

  // Flushes every thread's committed events and finishes the archive, once
  // per session (the first caller wins: Finalize, a fatal-signal handler or
  // the service thread on SIGINT/SIGTERM). `from_signal`: a fatal-signal
  // handler; locks are only tried (see OwnedMutex), and what cannot be
  // locked is skipped.
  absl::Status FlushAllAndFinish(bool from_signal) {
    if (finish_started_.exchange(true)) {
      return absl::FailedPreconditionError("trace already finished");
    }
    if (from_signal) {
      if (!writer_mutex_.TryLockForSignal()) {
        return absl::UnavailableError("archive writer busy");
      }
    } else {
      writer_mutex_.lock();
    }
    for (ThreadState* state = threads_.load(std::memory_order_acquire);
         state != nullptr; state = state->next) {
      FlushLocked(state, from_signal);
    }
    // The definitions, records and sessions: with the state lock, or, when
    // a signal handler cannot have it, none (the writer then names the
    // regions and communicators the events use "region N", "comm N").
    static const std::vector<trace::Region> kNoRegions;
    static const std::vector<trace::Communicator> kNoCommunicators;
    static const std::vector<trace::MappingRecord> kNoMappings;
    static const std::vector<trace::SyncSession> kNoSessions;
    const bool have_state =
        from_signal ? state_mutex_.TryLockForSignal() : (state_mutex_.lock(), true);
    absl::Status status = writer_->Finish(
        have_state ? regions_ : kNoRegions,
        have_state ? communicators_ : kNoCommunicators,
        have_state ? mappings_ : kNoMappings,
        have_state ? sessions_ : kNoSessions, truth_);
    if (have_state) state_mutex_.unlock();
    if (!status.ok()) NoteWriterError(status, 0);
    if (first_error_.ok()) first_error_ = status;
    const absl::Status result = first_error_;
    writer_mutex_.unlock();
    return result;
  }

  // Appends to the archive's sidecar the records it lacks (regions,
  // communicators, mapping records, sessions, the truth), so that a
  // process killed before Finalize (SIGKILL) leaves them behind; the reader
  // then rebuilds the archive's definitions. Run by the service thread at
  // least every kSegmentWatchNs, and at Init.
  void StreamSidecar() {
    std::lock_guard<OwnedMutex> writer_lock(writer_mutex_);
    if (finish_started_.load(std::memory_order_acquire)) return;
    std::lock_guard<OwnedMutex> state_lock(state_mutex_);
    if (!sidecar_dirty_ && sidecar_truth_streamed_) return;
    sidecar_dirty_ = false;
    sidecar_truth_streamed_ = true;
    const absl::Status status = writer_->StreamRecords(
        regions_, communicators_, mappings_, sessions_, truth_);
    if (!status.ok()) NoteWriterError(status, 0);
  }

  // --- statistics -----------------------------------------------------------

  void AddRejected() {
    events_rejected_.fetch_add(1, std::memory_order_relaxed);
  }

  TracerStats Stats() {
    TracerStats stats;
    {
      std::lock_guard<OwnedMutex> lock(writer_mutex_);
      stats = stats_;
      stats.events_written = events_written_;
      stats.events_dropped = events_dropped_;
      stats.flushes = flushes_;
      stats.first_error =
          first_error_.ok() ? std::string() : first_error_.ToString();
      for (ThreadState* state = threads_.load(std::memory_order_acquire);
           state != nullptr; state = state->next) {
        std::lock_guard<SwapLock> swap(state->swap_lock);
        stats.events_recorded +=
            state->flushed + state->count.load(std::memory_order_acquire);
        if (state->pending.load(std::memory_order_acquire) != nullptr) {
          stats.events_recorded += state->pending_count;
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(handoff_mutex_);
      stats.writer_waits = writer_waits_;
    }
    stats.events_rejected = events_rejected_.load(std::memory_order_relaxed);
    stats.threads = thread_count_.load(std::memory_order_relaxed);
    std::lock_guard<OwnedMutex> lock(state_mutex_);
    stats.mapping_records = mappings_.size();
    stats.sync_sessions = sessions_.size();
    stats.sync_exchanges = exchanges_;
    return stats;
  }

 private:
  void Install(int signo, void (*handler)(int, siginfo_t*, void*),
               bool only_if_default) {
    struct sigaction previous;
    if (sigaction(signo, nullptr, &previous) != 0) return;
    const bool is_default =
        !(previous.sa_flags & SA_SIGINFO) && previous.sa_handler == SIG_DFL;
    const bool is_ignored =
        !(previous.sa_flags & SA_SIGINFO) && previous.sa_handler == SIG_IGN;
    // An ignored signal stays ignored; the program's own SIGINT/SIGTERM
    // handler stays in charge (it is expected to call Finalize).
    if (is_ignored || (only_if_default && !is_default)) return;
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = handler;
    sigfillset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    g_previous_action[signo] = previous;
    if (sigaction(signo, &action, nullptr) == 0) g_installed[signo] = true;
  }

  // Hands a thread's committed events to the archive, the pending buffer's
  // first (writer_mutex_ held). `from_signal`: a fatal-signal handler, which
  // only tries the thread's swap lock and wakes nobody.
  void FlushLocked(ThreadState* state, bool from_signal) {
    if (from_signal) {
      if (!state->swap_lock.TryLockBounded()) return;
    } else {
      state->swap_lock.lock();
    }
    Event* const events = state->events;
    const uint32_t n = state->count.load(std::memory_order_acquire);
    state->swap_lock.unlock();
    WritePendingLocked(state, !from_signal);
    if (events == nullptr || n == 0) return;
    WriteLocked(state, events, n);
    state->count.store(0, std::memory_order_release);
  }

  // Writes the thread's pending buffer, if it has one, and gives it back to
  // the owner (writer_mutex_ held). Only the owner sets `pending`, and only
  // while it is null, so it cannot change under a writer that holds
  // writer_mutex_ and found it set.
  void WritePendingLocked(ThreadState* state, bool wake_owner) {
    Event* const pending = state->pending.load(std::memory_order_acquire);
    if (pending == nullptr) return;
    WriteLocked(state, pending, state->pending_count);
    state->pending.store(nullptr, std::memory_order_release);
    if (wake_owner) {
      std::lock_guard<std::mutex> lock(handoff_mutex_);
      handoff_cv_.notify_all();
    }
  }

  // Appends `n` events of `state` to the archive (writer_mutex_ held).
  void WriteLocked(ThreadState* state, const Event* events, uint32_t n) {
    absl::Status status;
    try {
      status = writer_->AppendEvents(state->thread_index, state->name,
                                     absl::MakeConstSpan(events, n));
    } catch (const std::bad_alloc&) {
      status = absl::ResourceExhaustedError(absl::StrCat(
          "trace ", writer_->archive_dir(), ": out of memory writing events"));
    }
    if (status.ok()) {
      events_written_ += n;
    } else {
      NoteWriterError(status, n);
    }
    state->flushed += n;
  }

  // The writer thread: writes the buffers recording threads hand off.
  void WriterLoop() {
    std::unique_lock<std::mutex> lock(handoff_mutex_);
    while (true) {
      work_cv_.wait(lock, [&] { return handoffs_waiting_ > 0 || stop_writer_; });
      if (handoffs_waiting_ == 0) break;  // stopping, nothing left
      handoffs_waiting_ = 0;
      lock.unlock();
      for (ThreadState* state = threads_.load(std::memory_order_acquire);
           state != nullptr; state = state->next) {
        if (state->pending.load(std::memory_order_acquire) == nullptr) continue;
        std::lock_guard<OwnedMutex> writer_lock(writer_mutex_);
        if (state->pending.load(std::memory_order_acquire) == nullptr) continue;
        WritePendingLocked(state, /*wake_owner=*/true);
        ++flushes_;
      }
      lock.lock();
    }
  }

  // The archive failed: count the lost events, keep the first error, warn
  // once (not from a signal handler's point of view: Warn uses stdio, which
  // the writer already does).
  void NoteWriterError(const absl::Status& status, uint64_t lost_events) {
    events_dropped_ += lost_events;
    if (first_error_.ok()) {
      first_error_ = status;
      Warn(absl::StrCat("cannot write the trace, events are dropped from now "
                        "on: ",
                        status.ToString()));
    }
  }

  void RecordMapping(const MappingValues& v, int64_t raw_ns, int64_t local_ns) {
    std::lock_guard<OwnedMutex> lock(state_mutex_);
    if (have_last_mapping_ && last_mapping_.anchor_raw_ns == v.anchor_raw_ns &&
        last_mapping_.anchor_global_ns == v.anchor_global_ns &&
        last_mapping_.rate_adj_q64 == v.rate_adj_q64 &&
        last_mapping_.bound_at_anchor_ns == v.bound_at_anchor_ns &&
        last_mapping_.bound_growth_q36 == v.bound_growth_q36 &&
        last_mapping_.status == v.status) {
      return;  // republished unchanged
    }
    // Records stay in raw order even when two threads race to record.
    if (!mappings_.empty() && raw_ns < mappings_.back().raw_ns) {
      raw_ns = mappings_.back().raw_ns;
      local_ns = std::max(local_ns, mappings_.back().local_ns);
    }
    trace::MappingRecord record;
    record.local_ns = local_ns;
    record.raw_ns = raw_ns;
    record.anchor_raw_ns = v.anchor_raw_ns;
    record.anchor_global_ns = v.anchor_global_ns;
    record.rate_adj = shm::RateAdjFromQ64(v.rate_adj_q64);
    record.bound_at_anchor_ns = v.bound_at_anchor_ns;
    record.bound_growth_ppb = shm::BoundGrowthQ36ToPpb(v.bound_growth_q36);
    record.state = v.status & CLOCKSYNC_STATUS_STATE_MASK;
    record.flags = v.status & ~uint32_t{CLOCKSYNC_STATUS_STATE_MASK};
    mappings_.push_back(record);
    sidecar_dirty_ = true;
    last_mapping_ = v;
    have_last_mapping_ = true;
  }

  // The service thread: the segment watch, periodic sync sessions, and
  // SIGINT/SIGTERM (completes the archive, then re-raises).
  void ServiceLoop() {
    int64_t next_periodic_ns = options_.sync_period_ns > 0
                                   ? RawNowNs() + options_.sync_period_ns
                                   : INT64_MAX;
    int64_t next_watch_ns = RawNowNs() + kSegmentWatchNs;
    while (!stop_service_.load(std::memory_order_acquire)) {
      const int64_t now_ns = RawNowNs();
      const int64_t wake_ns = std::min(next_periodic_ns, next_watch_ns);
      const int timeout_ms = static_cast<int>(std::clamp<int64_t>(
          (wake_ns - now_ns + kNsPerMs - 1) / kNsPerMs, 0, 1000));
      struct pollfd pfd = {eventfd_, POLLIN, 0};
      if (poll(&pfd, 1, timeout_ms) > 0) {
        uint64_t value = 0;
        [[maybe_unused]] ssize_t got = read(eventfd_, &value, sizeof(value));
      }
      if (const int signo = g_service_signal.exchange(0)) {
        HandleAsyncSignal(signo);  // does not return
      }
      if (stop_service_.load(std::memory_order_acquire)) break;
      const int64_t after_ns = RawNowNs();
      if (after_ns >= next_watch_ns) {
        WatchSegment(after_ns);
        next_watch_ns = after_ns + kSegmentWatchNs;
      }
      if (after_ns >= next_periodic_ns) {
        RunSession(trace::SyncSessionKind::kPeriodic).IgnoreError();
        next_periodic_ns = RawNowNs() + options_.sync_period_ns;
      }
      StreamSidecar();
    }
  }

  // Maps a new segment when the current one is absent, closed (its daemon
  // stopped) or stale (its daemon died): a restarted daemon leaves a new
  // file behind the path.
  void WatchSegment(int64_t raw_now_ns) {
    MappingValues values;
    uint64_t seq = 0;
    if (segment_->Read(&values, &seq)) {
      const bool closed = (values.status & CLOCKSYNC_STATUS_CLOSED) != 0;
      const bool stale = raw_now_ns - values.update_raw_ns > kSegmentStaleNs;
      if (!closed && !stale) return;
    }
    const bool was_mapped = segment_->mapped();
    const uint64_t remaps = segment_->remaps();
    const bool ok = segment_->Remap().ok();
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
  // ended) that every event's acquire load of the generation reads. The
  // page swap itself is atomic (mmap MAP_FIXED), so this only matters to
  // the memory model and ThreadSanitizer (which sees the mmap as a write).
  void PublishRemap() {
    uint64_t expected = generation_;
    g_hot.generation.compare_exchange_strong(expected, generation_,
                                             std::memory_order_release,
                                             std::memory_order_relaxed);
  }

  void HandleAsyncSignal(int signo) {
    g_completing_tid.store(ThreadId(), std::memory_order_relaxed);
    FlushAllAndFinish(/*from_signal=*/false).IgnoreError();
    g_signal_flush_state.store(2, std::memory_order_release);
    RestoreSignalHandlers();
    // Delivered to a thread that does not block it: the previous (default)
    // action ends the process.
    kill(getpid(), signo);
    // Should the program survive it (it installed a handler meanwhile),
    // this thread has nothing left to do.
    pause();
  }

  const TracerOptions options_;
  const trace::ProcessInfo info_;
  const std::optional<ModelSpec> model_;
  const std::optional<trace::GroundTruth> truth_;
  const std::unique_ptr<Segment> segment_;
  const std::unique_ptr<trace::Otf2Writer> writer_;
  const uint64_t generation_;

  // Every thread that ever recorded in this session (push-front only).
  std::atomic<ThreadState*> threads_{nullptr};
  uint32_t next_thread_index_ = 0;  // under g_lifecycle_mutex
  std::atomic<uint64_t> thread_count_{0};

  OwnedMutex writer_mutex_;  // writer_, the counters below, ThreadState::flushed
  uint64_t events_written_ = 0;
  uint64_t events_dropped_ = 0;
  uint64_t flushes_ = 0;
  absl::Status first_error_;
  std::atomic<bool> finish_started_{false};

  OwnedMutex state_mutex_;  // the members down to exchanges_
  std::vector<trace::Region> regions_;
  std::vector<trace::Communicator> communicators_;
  std::vector<trace::MappingRecord> mappings_;
  MappingValues last_mapping_;
  bool have_last_mapping_ = false;
  std::vector<trace::SyncSession> sessions_;
  uint64_t exchanges_ = 0;
  bool sidecar_dirty_ = false;  // records the sidecar does not hold yet
  bool sidecar_truth_streamed_ = false;

  std::mutex cold_clock_mutex_;
  LocalClockFn cold_clock_;  // the local clock for threads without a state

  std::optional<probe::ProbeKeys> probe_key_;  // set before the first session
  std::mutex sync_mutex_;  // the members down to sessions_run_
  std::optional<SyncRunner> sync_runner_;
  bool master_reachable_ = true;
  uint64_t sessions_run_ = 0;

  std::atomic<uint64_t> events_rejected_{0};
  TracerStats stats_;  // constant parts
  const int32_t init_thread_id_;

  int eventfd_ = -1;
  std::atomic<bool> stop_service_{false};
  std::thread service_;

  std::mutex handoff_mutex_;  // the members down to writer_waits_
  std::condition_variable work_cv_;     // buffers handed off, or stop
  std::condition_variable handoff_cv_;  // a pending buffer was written
  uint64_t handoffs_waiting_ = 0;
  bool stop_writer_ = false;
  bool writer_running_ = false;
  uint64_t writer_waits_ = 0;  // full buffers that waited for the writer
  std::thread writer_thread_;
};

// --- signal handlers --------------------------------------------------------

// Restores the previous action of `signo` and makes the signal pending
// again, so that it takes that action once the handler returns (the signal
// is blocked while its handler runs).
void ReRaise(int signo) {
  sigaction(signo, &g_previous_action[signo], nullptr);
  g_installed[signo] = false;
  raise(signo);
}

void FatalSignalHandler(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  int expected = 0;
  if (g_signal_flush_state.compare_exchange_strong(expected, 1)) {
    g_completing_tid.store(ThreadId(), std::memory_order_relaxed);
    if (Impl* impl = g_impl.load(std::memory_order_acquire)) {
      impl->FlushAllAndFinish(/*from_signal=*/true).IgnoreError();
    }
    g_signal_flush_state.store(2, std::memory_order_release);
  } else if (expected == 1 &&
             g_completing_tid.load(std::memory_order_relaxed) != ThreadId()) {
    // Another thread is completing the archive: let it finish first (but
    // never wait for ourselves: a crash inside Finalize's own writing).
    for (int waited_ms = 0;
         waited_ms < 10 * kSignalLockWaitMs &&
         g_signal_flush_state.load(std::memory_order_acquire) == 1;
         ++waited_ms) {
      const struct timespec one_ms = {0, 1'000'000};
      nanosleep(&one_ms, nullptr);
    }
  }
  ReRaise(signo);
  errno = saved_errno;
}

void AsyncSignalHandler(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const int fd = g_service_eventfd.load(std::memory_order_acquire);
  int expected = 0;
  if (fd >= 0 && g_signal_flush_state.compare_exchange_strong(expected, 1)) {
    // The service thread completes the archive and re-raises; this thread
    // goes on meanwhile (it may hold a lock the service thread needs).
    g_service_signal.store(signo, std::memory_order_release);
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t written = write(fd, &one, sizeof(one));
  } else if (expected == 1) {
    // Finalize (or a fatal signal) is completing the archive: Finalize
    // raises the signal again when it is done; a fatal signal ends the
    // process anyway.
    g_pending_signal.store(signo, std::memory_order_release);
  } else {
    // No service thread and nobody completing: the previous action now.
    ReRaise(signo);
  }
  errno = saved_errno;
}

// --- thread registration ----------------------------------------------------

// Per-thread resources that outlive a tracing session: the alternate signal
// stack, and the hook that flushes the thread's buffer when it exits.
struct ThreadResources {
  void* altstack = nullptr;
  bool armed = false;  // set at attach: registers the destructor

  ~ThreadResources();

  // Gives the thread an alternate signal stack unless it has one.
  void EnsureAltStack() {
    if (altstack != nullptr) return;
    stack_t current;
    if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE) &&
        current.ss_size >= 64 * 1024) {
      return;  // the program's (or a sanitizer's) own, big enough
    }
    void* stack = mmap(nullptr, kAltStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack == MAP_FAILED) return;
    stack_t ss;
    ss.ss_sp = stack;
    ss.ss_size = kAltStackBytes;
    ss.ss_flags = 0;
    if (sigaltstack(&ss, nullptr) != 0) {
      munmap(stack, kAltStackBytes);
      return;
    }
    altstack = stack;
  }
};
thread_local ThreadResources t_resources;

ThreadResources::~ThreadResources() {
  {
    std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
    Impl* impl = g_impl.load(std::memory_order_acquire);
    if (impl != nullptr && t_slot.state != nullptr &&
        t_slot.generation == impl->generation()) {
      impl->RetireThread(t_slot.state);
    }
    t_slot = ThreadSlot();
  }
  if (altstack != nullptr) {
    stack_t ss;
    std::memset(&ss, 0, sizeof(ss));
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, nullptr);
    munmap(altstack, kAltStackBytes);
    altstack = nullptr;
  }
}

// The calling thread's state in the active session, created at its first
// event; nullptr when no session is active.
__attribute__((noinline)) ThreadState* AttachThread() noexcept {
  std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
  Impl* impl = g_impl.load(std::memory_order_acquire);
  if (impl == nullptr) return nullptr;
  if (t_slot.state != nullptr && t_slot.generation == impl->generation()) {
    return t_slot.state;
  }
  ThreadState* state = nullptr;
  try {
    state = impl->NewThread();
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  t_slot.state = state;
  t_slot.generation = impl->generation();
  // The first use of t_resources registers its destructor: the thread's
  // buffer is flushed when it exits.
  t_resources.armed = true;
  if (impl->options().install_signal_handlers) t_resources.EnsureAltStack();
  return state;
}

// The last session's statistics, kept after Finalize.
std::mutex g_last_stats_mutex;
TracerStats g_last_stats;

// Finalize at exit for a program that forgot to.
void FinalizeAtExit() {
  if (Tracer::IsActive()) {
    const absl::Status status = Tracer::Finalize();
    if (!status.ok()) Warn(absl::StrCat("finalize at exit: ", status.ToString()));
  }
}

// ============================================================================
// 6. The hot path
// ============================================================================

__attribute__((noinline)) void MappingChanged(ThreadState* state) noexcept {
  if (Impl* impl = g_impl.load(std::memory_order_acquire)) {
    try {
      impl->NoteMappingChange(state);
    } catch (...) {
      // Out of memory for the record: look again at the next event.
    }
  }
}

__attribute__((noinline)) void BufferFull(ThreadState* state) noexcept {
  if (Impl* impl = g_impl.load(std::memory_order_acquire)) {
    impl->BufferFull(state);
  }
}

__attribute__((noinline)) void Rejected() noexcept {
  if (Impl* impl = g_impl.load(std::memory_order_acquire)) impl->AddRejected();
}

// The calling thread's state, or nullptr when no session is active.
inline ThreadState* CurrentThread() noexcept {
  // Generations start at 1, and a slot with generation 0 holds no state:
  // equal generations give this session's state, or nullptr when no
  // session is active and the thread never attached.
  // Acquire (a plain load on x86-64): pairs with the release in
  // PublishRemap, so that a segment mapped in place is seen whole.
  if (__builtin_expect(t_slot.generation ==
                           g_hot.generation.load(std::memory_order_acquire),
                       1)) {
    return t_slot.state;
  }
  if (g_hot.generation.load(std::memory_order_relaxed) == 0) return nullptr;
  return AttachThread();
}

// Records one event on `state` now.
inline void Append(ThreadState* state, EventKind kind, uint32_t region,
                   int32_t peer, uint32_t tag, uint32_t comm,
                   CollectiveKind collective, uint64_t bytes) noexcept {
  const int64_t raw_ns = RawNowNs();
  int64_t local_ns = raw_ns;
  if (__builtin_expect(state->clock.has_model(), 0)) {
    local_ns = state->clock.At(raw_ns);
  }
  if (__builtin_expect(shm::LoadAcquire(*g_hot.seq_word) != state->last_seq,
                       0)) {
    MappingChanged(state);
  }
  const int64_t tick = local_ns - state->origin_ns;
  const uint64_t stamp =
      state->stamper.Stamp(tick > 0 ? static_cast<uint64_t>(tick) : 0);
  const uint32_t n = state->count.load(std::memory_order_relaxed);
  Event& e = state->events[n];
  e.stamp = stamp;
  e.bytes = bytes;
  e.region = region;
  e.peer = peer;
  e.tag = tag;
  e.comm = comm;
  e.kind = kind;
  e.collective = collective;
  state->count.store(n + 1, std::memory_order_release);
  if (__builtin_expect(n + 1 >= state->capacity, 0)) BufferFull(state);
}

inline bool ValidPeer(uint32_t comm, int32_t peer) noexcept {
  return comm < kMaxCommunicators && peer >= 0 &&
         peer < g_comm_size[comm].load(std::memory_order_relaxed);
}

inline bool ValidRoot(uint32_t comm, int32_t root) noexcept {
  return comm < kMaxCommunicators &&
         g_comm_size[comm].load(std::memory_order_relaxed) > 0 &&
         (root == -1 ||
          (root >= 0 && root < g_comm_size[comm].load(std::memory_order_relaxed)));
}

inline bool RecordRegion(EventKind kind, uint32_t region) noexcept {
  ThreadState* state = CurrentThread();
  if (__builtin_expect(state == nullptr, 0)) return false;
  if (__builtin_expect(
          region >= g_hot.region_count.load(std::memory_order_relaxed), 0)) {
    Rejected();
    return false;
  }
  Append(state, kind, region, -1, 0, 0, CollectiveKind::kOther, 0);
  return true;
}

inline bool RecordMessage(EventKind kind, int32_t peer, uint32_t tag,
                          uint64_t bytes, uint32_t comm) noexcept {
  ThreadState* state = CurrentThread();
  if (__builtin_expect(state == nullptr, 0)) return false;
  if (__builtin_expect(!ValidPeer(comm, peer), 0)) {
    Rejected();
    return false;
  }
  Append(state, kind, 0, peer, tag, comm, CollectiveKind::kOther, bytes);
  return true;
}

inline bool RecordCollective(EventKind kind, CollectiveKind collective,
                             uint32_t comm, int32_t root,
                             uint64_t bytes) noexcept {
  ThreadState* state = CurrentThread();
  if (__builtin_expect(state == nullptr, 0)) return false;
  const bool end = kind == EventKind::kCollectiveEnd;
  if (__builtin_expect(
          static_cast<uint8_t>(collective) >
                  static_cast<uint8_t>(CollectiveKind::kOther) ||
              !ValidRoot(comm, root) || (end && state->open_collectives == 0),
          0)) {
    Rejected();
    return false;
  }
  state->open_collectives += end ? -1 : 1;
  Append(state, kind, 0, root, 0, comm, collective, bytes);
  return true;
}

}  // namespace

// ============================================================================
// 7. Tracer
// ============================================================================

absl::Status ApplyTracerEnvironment(TracerOptions* options) {
  EnvString("CLOCKSYNC_TRACE_DIR", &options->trace_dir);
  EnvString("CLOCKSYNC_TRACE_NAME", &options->name);
  EnvString("CLOCKSYNC_SHM", &options->shm_path);
  EnvString("CLOCKSYNC_NODE_ID", &options->node_id);
  EnvString("CLOCKSYNC_CLOCK_MODEL_FILE", &options->clock_model_file);
  EnvString("CLOCKSYNC_TRUTH_MASTER_SHM", &options->truth_master_shm);
  EnvString("CLOCKSYNC_MASTER_PROBE", &options->master_probe);
  EnvString("CLOCKSYNC_PROBE_KEY_FILE", &options->probe_key_file);
  int64_t value = options->rank;
  if (absl::Status s = EnvInt("CLOCKSYNC_TRACE_RANK", 0, INT32_MAX, &value);
      !s.ok()) {
    return s;
  }
  options->rank = static_cast<int32_t>(value);
  value = options->world_size;
  if (absl::Status s =
          EnvInt("CLOCKSYNC_TRACE_WORLD_SIZE", 0, INT32_MAX, &value);
      !s.ok()) {
    return s;
  }
  options->world_size = static_cast<int32_t>(value);
  value = options->sync_max_messages;
  if (absl::Status s = EnvInt("CLOCKSYNC_SYNC_MAX_MESSAGES", 0,
                              kMaxSyncMessages, &value);
      !s.ok()) {
    return s;
  }
  options->sync_max_messages = static_cast<int32_t>(value);
  value = options->sync_max_duration_ns / kNsPerMs;
  if (std::getenv("CLOCKSYNC_SYNC_MAX_DURATION_MS") != nullptr) {
    if (absl::Status s = EnvInt("CLOCKSYNC_SYNC_MAX_DURATION_MS", 1,
                                kMaxSyncDurationMs, &value);
        !s.ok()) {
      return s;
    }
    options->sync_max_duration_ns = value * kNsPerMs;
  }
  if (std::getenv("CLOCKSYNC_SYNC_PERIOD_MS") != nullptr) {
    value = 0;
    if (absl::Status s =
            EnvInt("CLOCKSYNC_SYNC_PERIOD_MS", 0, kMaxSyncPeriodMs, &value);
        !s.ok()) {
      return s;
    }
    options->sync_period_ns = value * kNsPerMs;
  }
  value = options->buffer_events;
  if (absl::Status s = EnvInt("CLOCKSYNC_TRACE_BUFFER_EVENTS", kMinBufferEvents,
                              kMaxBufferEvents, &value);
      !s.ok()) {
    return s;
  }
  options->buffer_events = value;
  value = options->install_signal_handlers ? 1 : 0;
  if (absl::Status s = EnvInt("CLOCKSYNC_TRACE_SIGNALS", 0, 1, &value);
      !s.ok()) {
    return s;
  }
  options->install_signal_handlers = value != 0;
  return absl::OkStatus();
}

namespace {

// Checks options after the environment was applied; names the field.
absl::Status ValidateOptions(const TracerOptions& o) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("tracer options: ", what));
  };
  if (o.trace_dir.empty()) return bad("trace_dir is empty");
  if (o.name.find('/') != std::string::npos) {
    return bad(absl::StrCat("name '", o.name, "' contains '/'"));
  }
  if (o.rank < 0) return bad(absl::StrCat("rank ", o.rank, " < 0"));
  if (o.world_size < 0) return bad(absl::StrCat("world_size ", o.world_size, " < 0"));
  if (o.world_size > 0 && o.rank >= o.world_size) {
    return bad(absl::StrCat("rank ", o.rank, " outside world_size ",
                            o.world_size));
  }
  if (o.sync_max_messages < 0 || o.sync_max_messages > kMaxSyncMessages) {
    return bad(absl::StrCat("sync_max_messages ", o.sync_max_messages,
                            " outside 0..", kMaxSyncMessages));
  }
  if (o.sync_max_duration_ns <= 0 ||
      o.sync_max_duration_ns > kMaxSyncDurationMs * kNsPerMs) {
    return bad(absl::StrCat("sync_max_duration_ns ", o.sync_max_duration_ns,
                            " outside 1..", kMaxSyncDurationMs * kNsPerMs));
  }
  if (o.sync_reply_timeout_ns <= 0) {
    return bad(absl::StrCat("sync_reply_timeout_ns ", o.sync_reply_timeout_ns,
                            " <= 0"));
  }
  if (o.sync_period_ns < 0 || o.sync_period_ns > kMaxSyncPeriodMs * kNsPerMs) {
    return bad(absl::StrCat("sync_period_ns ", o.sync_period_ns,
                            " outside 0..", kMaxSyncPeriodMs * kNsPerMs));
  }
  if (o.buffer_events < kMinBufferEvents || o.buffer_events > kMaxBufferEvents) {
    return bad(absl::StrCat("buffer_events ", o.buffer_events, " outside ",
                            kMinBufferEvents, "..", kMaxBufferEvents));
  }
  return absl::OkStatus();
}

// mkdir of the trace directory if it does not exist (one level).
absl::Status EnsureDirectory(const std::string& path) {
  if (mkdir(path.c_str(), 0777) == 0 || errno == EEXIST) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return absl::OkStatus();
    }
    return absl::FailedPreconditionError(
        absl::StrCat("trace_dir ", path, ": not a directory"));
  }
  const int error = errno;
  const std::string message =
      absl::StrCat("cannot create trace_dir ", path, ": ", strerror(error));
  if (error == EACCES || error == EPERM || error == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  if (error == ENOENT) return absl::NotFoundError(message);
  return absl::UnavailableError(message);
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

absl::Status Tracer::Init(const TracerOptions& given) {
  std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
  if (g_impl.load(std::memory_order_acquire) != nullptr) {
    return absl::FailedPreconditionError("tracer: already initialized");
  }
  TracerOptions options = given;
  if (options.read_environment) {
    if (absl::Status s = ApplyTracerEnvironment(&options); !s.ok()) return s;
  }
  if (options.name.empty()) options.name = program_invocation_short_name;
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  std::optional<probe::ProbeKeys> probe_key;
  if (!options.probe_key_file.empty()) {
    absl::StatusOr<probe::ProbeKeys> key =
        probe::ReadProbeKeyFile(options.probe_key_file);
    if (!key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CLOCKSYNC_PROBE_KEY_FILE (probe_key_file): ", key.status().message()));
    }
    probe_key = *key;
  }
  if (absl::Status s = EnsureDirectory(options.trace_dir); !s.ok()) return s;

  // The modeled clock (test feature).
  std::optional<ModelSpec> model;
  std::string model_file = options.clock_model_file;
  const bool explicit_model = !model_file.empty() && model_file != "none";
  if (model_file.empty()) model_file = options.shm_path + ".model";
  if (model_file != "none" &&
      (explicit_model || access(model_file.c_str(), F_OK) == 0)) {
    absl::StatusOr<ModelSpec> read = ReadModelFile(model_file);
    if (!read.ok()) return read.status();
    model = std::move(*read);
  }

  // The segment: absent is fine (no online correction).
  auto segment = std::make_unique<Segment>();
  if (absl::Status s = segment->Reserve(options.shm_path); !s.ok()) return s;
  if (absl::Status s = segment->Remap(); !s.ok()) {
    Warn(absl::StrCat("no clocksyncd mapping (", s.message(),
                      "): tracing without online correction until one "
                      "appears"));
  }

  // The ground truth (test feature).
  std::optional<trace::GroundTruth> truth;
  if (!options.truth_master_shm.empty()) {
    absl::StatusOr<int64_t> offset = ReadMasterOffset(options.truth_master_shm);
    if (!offset.ok()) {
      Warn(absl::StrCat("no ground truth: ", offset.status().ToString()));
    } else {
      trace::GroundTruth t;
      t.master_offset_ns = *offset;
      if (model) {
        t.clock_model_spec = model->spec;
        t.model_origin_raw_ns = model->origin_raw_ns;
      }
      truth = t;
    }
  }

  // The archive.
  trace::ProcessInfo info;
  info.rank = options.rank;
  info.process_name = options.name;
  info.pid = getpid();
  info.hostname = HostName();
  info.node_id = options.node_id;
  info.shm_path = options.shm_path;
  info.tick_period_ns = 1.0;
  {
    LocalClockFn clock(model);
    info.origin_ns = clock.At(RawNowNs());
  }
  const std::string archive_dir =
      absl::StrCat(options.trace_dir, "/", options.name, ".r", options.rank);
  absl::StatusOr<std::unique_ptr<trace::Otf2Writer>> writer =
      trace::Otf2Writer::Create(archive_dir, info);
  if (!writer.ok()) return writer.status();

  const uint64_t generation = g_next_generation++;
  auto impl = std::make_unique<Impl>(options, info, std::move(model),
                                     std::move(truth), std::move(segment),
                                     std::move(*writer), generation);
  g_hot.seq_word = impl->segment().seq_word();
  g_hot.region_count.store(0, std::memory_order_relaxed);
  impl->SetProbeKey(probe_key);
  impl->DefineWorld();
  impl->NoteMappingChangeCold();

  if (options.master_probe.empty()) {
    Warn("no master probe address (CLOCKSYNC_MASTER_PROBE): no sync "
         "sessions, the post-mortem corrections will be unavailable");
  } else {
    // An unreachable master was reported (Warn); tracing goes on.
    impl->RunSession(trace::SyncSessionKind::kInit).IgnoreError();
  }
  impl->StreamSidecar();
  if (absl::Status s = impl->StartService(); !s.ok()) {
    g_hot.seq_word = nullptr;
    return s;
  }

  g_signal_flush_state.store(0, std::memory_order_relaxed);
  g_pending_signal.store(0, std::memory_order_relaxed);
  g_service_signal.store(0, std::memory_order_relaxed);
  g_impl.store(impl.get(), std::memory_order_release);
  impl->InstallSignalHandlers();
  g_hot.generation.store(generation, std::memory_order_release);
  impl.release();
  static std::once_flag at_exit_once;
  std::call_once(at_exit_once, [] { std::atexit(FinalizeAtExit); });
  return absl::OkStatus();
}

absl::Status Tracer::Finalize() {
  std::unique_ptr<Impl> impl;
  {
    std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
    impl.reset(g_impl.load(std::memory_order_acquire));
    if (impl == nullptr) {
      return absl::FailedPreconditionError("tracer: not initialized");
    }
    // No new thread attaches from now on; recording calls return false.
    g_hot.generation.store(0, std::memory_order_release);
  }
  // From here on Finalize completes the archive: SIGINT/SIGTERM wait for
  // it (g_pending_signal), fatal signals on other threads too. Unless a
  // signal got there first: its handler (or the service thread) completes
  // the archive and ends the process.
  int expected = 0;
  const bool mine = g_signal_flush_state.compare_exchange_strong(expected, 1);
  if (mine) g_completing_tid.store(ThreadId(), std::memory_order_relaxed);
  impl->StopService();
  impl->StopWriter();
  impl->RunSession(trace::SyncSessionKind::kFinalize).IgnoreError();
  const absl::Status status =
      mine ? impl->FlushAllAndFinish(/*from_signal=*/false)
           : absl::AbortedError("tracer: a signal is completing the trace");
  Impl::RestoreSignalHandlers();
  {
    std::lock_guard<std::mutex> lock(g_last_stats_mutex);
    g_last_stats = impl->Stats();
  }
  {
    std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
    g_impl.store(nullptr, std::memory_order_release);
    g_hot.seq_word = nullptr;
    t_slot = ThreadSlot();
  }
  impl.reset();
  if (mine) {
    g_completing_tid.store(0, std::memory_order_relaxed);
    g_signal_flush_state.store(0, std::memory_order_release);
    // A SIGINT/SIGTERM that arrived meanwhile takes its (restored) action.
    if (const int signo = g_pending_signal.exchange(0)) raise(signo);
  }
  return status;
}

bool Tracer::IsActive() noexcept {
  return g_hot.generation.load(std::memory_order_acquire) != 0;
}

absl::StatusOr<uint32_t> Tracer::DefineRegion(absl::string_view name) {
  Impl* impl = g_impl.load(std::memory_order_acquire);
  if (impl == nullptr) {
    return absl::FailedPreconditionError("tracer: not initialized");
  }
  return impl->DefineRegion(name);
}

absl::StatusOr<uint32_t> Tracer::DefineCommunicator(
    absl::string_view name, absl::Span<const int32_t> ranks) {
  Impl* impl = g_impl.load(std::memory_order_acquire);
  if (impl == nullptr) {
    return absl::FailedPreconditionError("tracer: not initialized");
  }
  return impl->DefineCommunicator(name, ranks);
}

bool Tracer::Enter(uint32_t region) noexcept {
  return RecordRegion(EventKind::kEnter, region);
}

bool Tracer::Leave(uint32_t region) noexcept {
  return RecordRegion(EventKind::kLeave, region);
}

bool Tracer::Send(int32_t peer, uint32_t tag, uint64_t bytes,
                  uint32_t comm) noexcept {
  return RecordMessage(EventKind::kSend, peer, tag, bytes, comm);
}

bool Tracer::Recv(int32_t peer, uint32_t tag, uint64_t bytes,
                  uint32_t comm) noexcept {
  return RecordMessage(EventKind::kRecv, peer, tag, bytes, comm);
}

bool Tracer::CollectiveBegin(trace::CollectiveKind kind, uint32_t comm,
                             int32_t root, uint64_t bytes_sent) noexcept {
  return RecordCollective(EventKind::kCollectiveBegin, kind, comm, root,
                          bytes_sent);
}

bool Tracer::CollectiveEnd(trace::CollectiveKind kind, uint32_t comm,
                           int32_t root, uint64_t bytes_received) noexcept {
  return RecordCollective(EventKind::kCollectiveEnd, kind, comm, root,
                          bytes_received);
}

absl::Status Tracer::Timesync() {
  Impl* impl = g_impl.load(std::memory_order_acquire);
  if (impl == nullptr) {
    return absl::FailedPreconditionError("tracer: not initialized");
  }
  if (impl->options().master_probe.empty()) {
    return absl::FailedPreconditionError(
        "tracer: no master probe address (CLOCKSYNC_MASTER_PROBE)");
  }
  return impl->RunSession(trace::SyncSessionKind::kTimesync);
}

void Tracer::SetThreadName(absl::string_view name) {
  ThreadState* state = CurrentThread();
  if (state == nullptr) return;
  if (Impl* impl = g_impl.load(std::memory_order_acquire)) {
    impl->SetThreadName(state, name);
  }
}

TracerStats Tracer::Stats() {
  {
    std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
    if (Impl* impl = g_impl.load(std::memory_order_acquire)) return impl->Stats();
  }
  std::lock_guard<std::mutex> lock(g_last_stats_mutex);
  return g_last_stats;
}

}  // namespace clocksync
