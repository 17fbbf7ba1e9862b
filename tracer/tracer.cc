// tracer/tracer.cc: the tracer's lifecycle (see tracer.h): Init puts a
// tracing session together, Finalize completes and ends it; the other
// static members of Tracer except the recording functions (recording.cc).
//
// The tracer's files, one concern each:
//   options          TracerOptions' bounds, the CLOCKSYNC_* variables
//   local_clock      the clock events are stamped with (raw or modeled),
//                    the ground truth
//   sync_session     sync sessions with the master
//   thread_buffers   per-thread state and registration
//   recording        the hot path
//   trace_records    definitions, mapping records, sessions
//   writer_thread    the writer thread, flushes, the archive's completion
//   fatal_signals    completing the archive when a signal kills the process
//   session          one tracing session and its service thread
//   start_modes      server-init, client-listen
//   attach           dynamic spawning: attach contacts, Attach, Attached
//   clocksync_trace  the C API

#include "tracer/tracer.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/clock.h"
#include "collector/contact.h"
#include "collector/streaming_sink.h"
#include "probe/auth.h"
#include "tracer/attach.h"
#include "shm/segment_reader.h"
#include "trace/otf2_writer.h"
#include "tracer/fatal_signals.h"
#include "tracer/local_clock.h"
#include "tracer/options.h"
#include "tracer/recording.h"
#include "tracer/session.h"
#include "tracer/start_modes.h"
#include "tracer/warn.h"

namespace clocksync {
namespace {

using tracer::g_hot;
using tracer::g_lifecycle_mutex;
using tracer::g_session;
using tracer::TracingSession;
using tracer::Warn;

uint64_t g_next_generation = 1;  // under g_lifecycle_mutex
// The current (or last) session's rank and world size (Tracer::Rank).
std::atomic<int32_t> g_rank{-1};
std::atomic<int32_t> g_world_size{0};

// Tracing phases (FinalizePhase), under g_lifecycle_mutex: the phase the
// next Init starts (0: a new trace), and what it continues.
uint32_t g_next_phase = 0;
int32_t g_phase_rank = -1;
int32_t g_phase_world_size = 0;
TracerOptions g_phase_options;     // the last phase's, for the end at exit
trace::ProcessInfo g_phase_info;
// The current (or last) session's phase (Stats).
std::atomic<uint32_t> g_phase{0};

// AbortInit: whether an Init waits for the collector, and the flag that
// tells it to stop (read by the StreamingSink).
std::mutex g_abort_mutex;
bool g_init_waiting = false;  // under g_abort_mutex
std::atomic<bool> g_abort_init{false};

// The last session's statistics, kept after Finalize.
std::mutex g_last_stats_mutex;
TracerStats g_last_stats;

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

absl::StatusOr<std::unique_ptr<collector::StreamingSink>> ConnectCollector(
    const TracerOptions& options, const trace::ProcessInfo& info,
    uint32_t phase);

// A process that exits between phases ends them: an empty last phase
// tells its collector the rank is done.
void EndPhasesAtExit() {
  std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
  if (g_next_phase == 0 || g_phase_options.collector.empty()) return;
  TracerOptions options = g_phase_options;
  options.rank = g_phase_rank;
  absl::StatusOr<std::unique_ptr<collector::StreamingSink>> sink =
      ConnectCollector(options, g_phase_info, g_next_phase);
  g_next_phase = 0;
  if (!sink.ok()) {
    Warn(absl::StrCat("ending the tracing phases at exit: ",
                      sink.status().message()));
    return;
  }
  const absl::Status status = (*sink)->Finish({}, {}, {}, {}, std::nullopt);
  if (!status.ok()) {
    Warn(absl::StrCat("ending the tracing phases at exit: ",
                      status.message()));
  }
}

// Finalize at exit for a program that forgot to.
void FinalizeAtExit() {
  if (Tracer::IsActive()) {
    const absl::Status status = Tracer::Finalize();
    if (!status.ok()) {
      Warn(absl::StrCat("finalize at exit: ", status.ToString()));
    }
  }
  EndPhasesAtExit();
}

// What a fatal-signal handler runs: complete the active session's archive.
void CompleteFromFatalSignal() {
  if (TracingSession* session = g_session.load(std::memory_order_acquire)) {
    session->archive().FlushAllAndFinish(/*from_signal=*/true).IgnoreError();
  }
}

// Connects to the collector of options.collector (validated).
absl::StatusOr<std::unique_ptr<collector::StreamingSink>> ConnectCollector(
    const TracerOptions& options, const trace::ProcessInfo& info,
    uint32_t phase) {
  absl::StatusOr<collector::Contact> contact =
      collector::ParseContact("CLOCKSYNC_COLLECTOR", options.collector);
  if (!contact.ok()) return contact.status();
  collector::StreamingOptions streaming;
  streaming.contact = *contact;
  // A child of an attach group gets its rank from the collector (an
  // inherited CLOCKSYNC_TRACE_RANK does not apply); later phases continue it.
  streaming.requested_rank =
      contact->attach_parent >= 0 && phase == 0 ? -1 : options.rank;
  streaming.phase = phase;
  streaming.abort = &g_abort_init;
  streaming.info = info;
  streaming.fallback_trace_dir = options.trace_dir;
  streaming.fallback_name = options.name;
  streaming.timeout_ns = options.collector_timeout_ns;
  streaming.tls_ca_file = options.collector_tls_ca_file;
  streaming.warn = [](const std::string& line) { Warn(line); };
  return collector::StreamingSink::Connect(streaming);
}

// The options after the environment, validated, the name defaulted.
absl::StatusOr<TracerOptions> EffectiveOptions(const TracerOptions& given) {
  TracerOptions options = given;
  if (options.read_environment) {
    if (absl::Status s = ApplyTracerEnvironment(&options); !s.ok()) return s;
  }
  if (options.name.empty()) options.name = program_invocation_short_name;
  if (absl::Status s = tracer::ValidateOptions(options); !s.ok()) return s;
  return options;
}

}  // namespace

namespace tracer {

const std::atomic<bool>* BeginAbortableWait() {
  std::lock_guard<std::mutex> lock(g_abort_mutex);
  g_abort_init.store(false, std::memory_order_release);
  g_init_waiting = true;
  return &g_abort_init;
}

void EndAbortableWait() {
  std::lock_guard<std::mutex> lock(g_abort_mutex);
  g_init_waiting = false;
}

}  // namespace tracer

absl::Status Tracer::Init(const TracerOptions& given) {
  // Before the lock: a fork may hold a copy of it locked by a thread it
  // does not have.
  if (absl::Status s = tracer::CheckNotForkedSession(); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
  if (g_session.load(std::memory_order_acquire) != nullptr) {
    return absl::FailedPreconditionError("tracer: already initialized");
  }
  tracer::SessionParts parts;
  {
    absl::StatusOr<TracerOptions> options = EffectiveOptions(given);
    if (!options.ok()) return options.status();
    parts.options = std::move(*options);
  }
  // A later phase continues the rank (and the world) of the first.
  const uint32_t phase = g_next_phase;
  if (phase > 0) {
    parts.options.rank = g_phase_rank;
    if (parts.options.world_size == 0) {
      parts.options.world_size = g_phase_world_size;
    }
  }
  const TracerOptions& options = parts.options;
  if (!options.probe_key_file.empty()) {
    absl::StatusOr<probe::ProbeKeys> key =
        probe::ReadProbeKeyFile(options.probe_key_file);
    if (!key.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("CLOCKSYNC_PROBE_KEY_FILE (probe_key_file): ",
                       key.status().message()));
    }
    parts.probe_key = *key;
  }
  if (absl::Status s = EnsureDirectory(options.trace_dir); !s.ok()) return s;

  // The modeled clock (test feature).
  {
    absl::StatusOr<std::optional<tracer::ClockModel>> model =
        tracer::LoadClockModel(options);
    if (!model.ok()) return model.status();
    parts.model = std::move(*model);
  }

  // The segment: absent is fine (no online correction).
  {
    absl::StatusOr<std::unique_ptr<shm::SegmentReader>> segment =
        shm::SegmentReader::Reserve(options.shm_path);
    if (!segment.ok()) return segment.status();
    parts.segment = std::move(*segment);
    std::string message;
    if (parts.segment->Remap(&message) != shm::SegmentError::kNone) {
      Warn(absl::StrCat("no clocksyncd mapping (", message,
                        "): tracing without online correction until one "
                        "appears"));
    }
  }

  // The ground truth (test feature).
  parts.truth = tracer::ReadGroundTruth(options, parts.model);

  // The archive: a stream to the collector, or the local one.
  trace::ProcessInfo& info = parts.info;
  info.process_name = options.name;
  info.pid = getpid();
  info.hostname = HostName();
  info.node_id = options.node_id;
  info.shm_path = options.shm_path;
  info.tick_period_ns = 1.0;
  info.origin_ns = tracer::LocalClock(parts.model).At(Clock::RawNowNs());
  {
    std::lock_guard<std::mutex> lock(g_abort_mutex);
    g_abort_init.store(false, std::memory_order_release);
    g_init_waiting = true;
  }
  // The reverse start-up: the collector's dial says where it is.
  const absl::Status dialed =
      tracer::AwaitDialIfListening(&parts.options, &g_abort_init);
  if (!dialed.ok()) {
    std::lock_guard<std::mutex> lock(g_abort_mutex);
    g_init_waiting = false;
    return dialed;
  }
  if (options.collector.empty()) {
    std::lock_guard<std::mutex> lock(g_abort_mutex);
    g_init_waiting = false;
  } else {
    absl::StatusOr<std::unique_ptr<collector::StreamingSink>> sink =
        ConnectCollector(options, info, phase);
    {
      std::lock_guard<std::mutex> lock(g_abort_mutex);
      g_init_waiting = false;
    }
    if (sink.ok()) {
      parts.options.rank = (*sink)->rank();
      if (parts.options.world_size == 0) {
        parts.options.world_size = (*sink)->world_size();
      }
      parts.streaming = sink->get();
      parts.writer = *std::move(sink);
    } else if (sink.status().code() == absl::StatusCode::kInvalidArgument ||
               sink.status().code() == absl::StatusCode::kCancelled) {
      return sink.status();  // a configuration error (a TLS file), abort
    } else {
      parts.collector_note = std::string(sink.status().message());
      Warn(absl::StrCat("no collector (", sink.status().message(),
                        "): writing the local archive instead"));
    }
  }
  if (parts.writer == nullptr) {
    if (parts.options.rank < 0) parts.options.rank = 0;
    const std::string archive_dir = collector::LocalArchiveDir(
        options.trace_dir, options.name, parts.options.rank, phase);
    info.rank = parts.options.rank;
    absl::StatusOr<std::unique_ptr<trace::Otf2Writer>> writer =
        trace::Otf2Writer::Create(archive_dir, info);
    if (!writer.ok()) return writer.status();
    parts.writer = std::move(*writer);
  }
  info.rank = parts.options.rank;

  g_rank.store(parts.options.rank, std::memory_order_relaxed);
  g_world_size.store(parts.options.world_size, std::memory_order_relaxed);
  g_phase.store(phase, std::memory_order_relaxed);
  g_phase_options = parts.options;
  g_phase_info = info;
  const uint64_t generation = g_next_generation++;
  auto session =
      std::make_unique<TracingSession>(std::move(parts), generation);
  g_hot.seq_word = &session->segment().segment()->mapping.seq;
  // Events stamped through the TSC section unless options.tsc is off; it
  // reads as invalid (zeros) until a daemon publishes a TSC mapping.
  g_hot.tsc = session->options().tsc == "off"
                  ? nullptr
                  : &session->segment().segment()->tsc;
  session->records().DefineWorld();
  tracer::NoteAttachAtInit(session.get(), phase);
  session->NoteMappingChangeCold();

  if (session->options().master_probe.empty()) {
    Warn("no master probe address (CLOCKSYNC_MASTER_PROBE): no sync "
         "sessions, the post-mortem corrections will be unavailable");
  } else {
    // An unreachable master was reported (Warn); tracing goes on.
    session->RunSession(trace::SyncSessionKind::kInit).IgnoreError();
  }
  session->archive().StreamSidecar();
  if (absl::Status s = session->StartThreads(); !s.ok()) {
    g_hot.seq_word = nullptr;
    g_hot.tsc = nullptr;
    return s;
  }

  tracer::ResetSignalState();
  tracer::g_session_pid.store(getpid(), std::memory_order_release);
  g_session.store(session.get(), std::memory_order_release);
  if (session->options().install_signal_handlers) {
    tracer::InstallSignalHandlers(CompleteFromFatalSignal);
  }
  g_hot.generation.store(generation, std::memory_order_release);
  session.release();
  static std::once_flag at_exit_once;
  std::call_once(at_exit_once, [] { std::atexit(FinalizeAtExit); });
  return absl::OkStatus();
}

absl::Status Tracer::Finalize() { return FinalizeSession(false); }

absl::Status Tracer::FinalizePhase() { return FinalizeSession(true); }

bool Tracer::AbortInit() noexcept {
  std::lock_guard<std::mutex> lock(g_abort_mutex);
  if (!g_init_waiting) return false;
  g_abort_init.store(true, std::memory_order_release);
  return true;
}

absl::Status Tracer::FinalizeSession(bool more_phases) {
  std::unique_ptr<TracingSession> session;
  {
    std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
    session.reset(g_session.load(std::memory_order_acquire));
    if (session == nullptr) {
      return absl::FailedPreconditionError("tracer: not initialized");
    }
    const uint32_t phase = g_phase.load(std::memory_order_relaxed);
    g_next_phase = more_phases ? phase + 1 : 0;
    g_phase_rank = session->rank();
    g_phase_world_size = session->options().world_size;
    if (session->streaming() != nullptr) {
      session->streaming()->set_more_phases(more_phases);
    }
    // No new thread attaches from now on; recording calls return false.
    g_hot.generation.store(0, std::memory_order_release);
  }
  // From here on Finalize completes the archive: SIGINT/SIGTERM wait for
  // it, fatal signals on other threads too. Unless a signal got there
  // first: its handler (or the service thread) completes the archive and
  // ends the process.
  const bool mine = tracer::ClaimCompletion();
  session->StopThreads();
  session->RunSession(trace::SyncSessionKind::kFinalize).IgnoreError();
  const absl::Status status =
      mine ? session->archive().FlushAllAndFinish(/*from_signal=*/false)
           : absl::AbortedError("tracer: a signal is completing the trace");
  tracer::RestoreSignalHandlers();
  {
    std::lock_guard<std::mutex> lock(g_last_stats_mutex);
    g_last_stats = session->Stats();
    g_last_stats.phase = g_phase.load(std::memory_order_relaxed);
  }
  {
    std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
    g_session.store(nullptr, std::memory_order_release);
    g_hot.seq_word = nullptr;
    g_hot.tsc = nullptr;
    tracer::t_slot = tracer::ThreadSlot();
  }
  session.reset();
  if (mine) tracer::EndCompletion();
  if (!more_phases) {
    // A server-init process: every rank's end, then the run's archive.
    const absl::Status served = tracer::EndServerRole();
    if (status.ok() && !served.ok()) return served;
  }
  return status;
}

bool Tracer::IsActive() noexcept {
  return g_hot.generation.load(std::memory_order_acquire) != 0;
}

std::vector<int32_t> Tracer::LostPeers() { return Stats().lost_peers; }

int32_t Tracer::Rank() noexcept {
  return g_rank.load(std::memory_order_relaxed);
}

int32_t Tracer::WorldSize() noexcept {
  return g_world_size.load(std::memory_order_relaxed);
}

absl::StatusOr<uint32_t> Tracer::DefineRegion(absl::string_view name) {
  TracingSession* session = g_session.load(std::memory_order_acquire);
  if (session == nullptr) {
    return absl::FailedPreconditionError("tracer: not initialized");
  }
  return session->records().DefineRegion(name);
}

absl::StatusOr<uint32_t> Tracer::DefineCommunicator(
    absl::string_view name, absl::Span<const int32_t> ranks) {
  TracingSession* session = g_session.load(std::memory_order_acquire);
  if (session == nullptr) {
    return absl::FailedPreconditionError("tracer: not initialized");
  }
  return session->records().DefineCommunicator(name, ranks);
}

absl::Status Tracer::Timesync() {
  TracingSession* session = g_session.load(std::memory_order_acquire);
  if (session == nullptr) {
    return absl::FailedPreconditionError("tracer: not initialized");
  }
  if (session->options().master_probe.empty()) {
    return absl::FailedPreconditionError(
        "tracer: no master probe address (CLOCKSYNC_MASTER_PROBE)");
  }
  return session->RunSession(trace::SyncSessionKind::kTimesync);
}

void Tracer::SetThreadName(absl::string_view name) {
  tracer::ThreadState* state = tracer::CurrentThreadState();
  if (state == nullptr) return;
  if (TracingSession* session = g_session.load(std::memory_order_acquire)) {
    session->archive().SetThreadName(state, name);
  }
}

TracerStats Tracer::Stats() {
  {
    std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
    if (TracingSession* session = g_session.load(std::memory_order_acquire)) {
      TracerStats stats = session->Stats();
      stats.phase = g_phase.load(std::memory_order_relaxed);
      return stats;
    }
  }
  std::lock_guard<std::mutex> lock(g_last_stats_mutex);
  return g_last_stats;
}

}  // namespace clocksync
