// tracer/tracer.h: clocksync's in-process tracer (C++ API), in the spirit of
// the Intel Trace Collector's VT API. The C API is tracer/clocksync_trace.h;
// settings and environment variables: docs/TRACER.md.
//
// The tracer records what a program does (regions entered and left,
// messages sent and received, collective operations) with compact 51+13-bit
// stamps of the node's local clock (hull/trace_stamp.h), and everything
// needed to put those events on the cluster's global timescale afterwards:
//   - every raw->global mapping the node's clocksyncd published while the
//     program ran (the "online" correction: exact and recomputable later);
//   - sync sessions with the master: bursts of ping-pong exchanges at init,
//     at finalize, at every Timesync() and every sync_period (the classic
//     post-mortem linear and spline corrections, hull/postmortem.h);
//   - with a modeled clock (tests only), the ground truth.
// Each process writes one OTF2 archive, <trace_dir>/<name>.r<rank>
// (trace/otf2_writer.h; format docs/TRACE_FORMAT.md), streamed as per-thread
// buffers fill and completed at Finalize(), or from a fatal-signal handler.
// With a collector (TracerOptions::collector, CLOCKSYNC_COLLECTOR) the
// buffers are streamed to it instead (collector/streaming_sink.h,
// docs/COLLECTOR.md), falling back to the local archive if it is lost.
//
// Example:
//   clocksync::TracerOptions options;
//   options.trace_dir = "/tmp/traces";
//   options.rank = my_rank;
//   options.world_size = n;
//   if (absl::Status s = clocksync::Tracer::Init(options); !s.ok()) {
//     std::cerr << s << "\n";   // e.g. a bad CLOCKSYNC_* variable, named
//   }
//   const uint32_t compute = *clocksync::Tracer::DefineRegion("compute");
//   {
//     clocksync::ScopedRegion region(compute);   // Enter ... Leave
//     Work();
//   }
//   clocksync::Tracer::Send(/*peer=*/1, /*tag=*/7, /*bytes=*/4096);
//   clocksync::Tracer::Timesync();
//   absl::Status written = clocksync::Tracer::Finalize();
//
// Recording path (Enter, Leave, Send, Recv, CollectiveBegin/End): one vDSO
// read of CLOCK_MONOTONIC_RAW, one load of the daemon's seqlock sequence
// word, a stamp, a 40-byte store into the calling thread's preallocated
// buffer. No lock, no allocation, no system call in steady state. Slow paths:
//   - a thread's first event: its buffer is allocated and registered;
//   - the daemon published a new mapping (the sequence word changed): the
//     mapping is read and appended to the trace (under a mutex);
//   - the buffer is full: the thread hands it to the tracer's writer
//     thread and records on into its second buffer (allocated at the first
//     hand-off); it waits only if that one fills too before the writer is
//     done (TracerStats::writer_waits). The OTF2 encoding and the file
//     writes thus run beside the program, not on its threads (see
//     //tracer:tracer_benchmark).
// Events are never dropped silently: when the archive cannot be written
// (disk full, say) they are counted in TracerStats::events_dropped and
// Finalize() returns the error.
//
// Clocks. Events are stamped with the node's local clock: normally the
// host's CLOCK_MONOTONIC_RAW (local == raw). When the node's clocksyncd runs
// a modeled clock (test feature --clock_model), it leaves
// `<shm_path>.model` ("origin_raw_ns=<int64> spec=<hull clock model spec>",
// shm/model_file.h) beside its segment; the tracer then stamps events with that same modeled
// clock, local(raw) = origin + ModeledClock(spec).LocalAt(raw - origin), so
// that the post-mortem corrections have real offsets and drifts to correct,
// and with truth_master_shm it records the ground truth.
//
// Fail-safe: unless install_signal_handlers is false, SIGSEGV and SIGABRT
// (and SIGPIPE, SIGINT and SIGTERM when the program has no handler of its
// own for them) complete the archive before the process dies: every buffer is
// flushed and the archive finished once, then the signal's previous action
// runs. SIGSEGV/SIGABRT do it in the handler, on an alternate signal stack
// (sigaltstack, 256 KiB per recording thread that has none); SIGINT/SIGTERM
// hand it to the tracer's service thread (normal locks, no risk of a
// deadlock) and re-raise when it is done. Known limit: OTF2 allocates memory
// and uses stdio, so a crash inside malloc or inside the archive writer may
// hang or lose the tail; the writer's last complete chunk stays readable.
// SIGKILL cannot be caught: the service thread streams regions,
// communicators, mapping records and sessions to the archive's sidecar at
// least every 0.2 s, so that the reader can rebuild the definitions of an
// archive its process never finished and read the events on disk.
//
// Daemon absent at init: the trace is written all the same, without
// mapping records (no online correction); a daemon that appears or
// restarts later is picked up within ~0.2 s. Master unreachable: a warning
// on stderr and empty sync sessions; the program is never failed by it.
//
// Thread safety: the recording functions, DefineRegion,
// DefineCommunicator, Timesync, SetThreadName, Stats and AbortInit may be
// called from any thread at any time. Init and Finalize must not overlap
// with any other call: call Init before the threads that record start, Finalize after they
// stopped recording (joined threads flush their buffers when they exit).
// Recording calls before Init or after Finalize do nothing and return false.

#ifndef CLOCKSYNC_TRACER_TRACER_H_
#define CLOCKSYNC_TRACER_TRACER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "shm/shm_layout.h"
#include "trace/trace.h"

namespace clocksync {

// Configuration of the tracer. Most fields can be overridden by a
// CLOCKSYNC_* environment variable (Init applies them unless
// read_environment is false); the one table of them is in
// tracer/options.cc, documented in docs/TRACER.md. A bad value is an error
// naming the variable and the value.
struct TracerOptions {
  // Directory the archive goes into (created if missing, one level).
  std::string trace_dir = ".";
  // Archive name; the archive is <trace_dir>/<name>.r<rank>. Empty: the
  // program's name.
  std::string name;
  // This process's rank in the program (0..world_size-1); -1: the
  // collector assigns one (Tracer::Rank() tells which), 0 without a
  // collector.
  int32_t rank = -1;
  // Ranks in the program (the world communicator, id 0); 0: unknown (the
  // world then lists the ranks seen).
  int32_t world_size = 0;
  // The node's clocksyncd segment.
  std::string shm_path = CLOCKSYNC_DEFAULT_SHM_PATH;
  // clocksyncd node id, for the trace's process info ("" unknown).
  std::string node_id;
  // Test feature: the modeled-clock side file (shm/model_file.h). Empty:
  // <shm_path>.model if it exists; "none": never a model.
  std::string clock_model_file;
  // Test feature: the master's segment, read at init for the ground truth
  // (global = raw + offset). Empty: no ground truth.
  std::string truth_master_shm;
  // The master's probe address "host:port" for sync sessions. Empty: no
  // sync sessions (a warning at init).
  std::string master_probe;
  // The tree's shared probe key file (clocksyncd --probe_key_file), when
  // the master authenticates probes. Empty: none.
  std::string probe_key_file;
  // Most exchanges per sync session (0: sessions are empty).
  int32_t sync_max_messages = 100;
  // Longest sync session, ns (its variable is in ms).
  int64_t sync_max_duration_ns = 1'000'000'000;
  // Longest wait for one reply before the next request, ns (no variable).
  int64_t sync_reply_timeout_ns = 100'000'000;
  // Period of background sync sessions, ns (its variable is in ms); 0:
  // none.
  int64_t sync_period_ns = 0;
  // Events per thread buffer (40 bytes each; each recording thread has two
  // once its first buffer filled, one being written while it records into
  // the other). 16..2^26.
  int64_t buffer_events = 65536;
  // Complete the archive on fatal signals (see "Fail-safe" above).
  bool install_signal_handlers = true;
  // "auto": stamp events with one rdtsc through the daemon's TSC mapping
  // where it publishes one (shm/shm_layout.h), else clock_gettime; "off":
  // always clock_gettime. The same variable (CLOCKSYNC_TSC) and values as
  // the client library's.
  std::string tsc = "auto";
  // The collector's contact string TOKEN@HOST:PORT (clocksync-collector
  // prints it; docs/COLLECTOR.md): the trace is streamed to it while the
  // program runs instead of written locally. Empty: the local archive.
  // Unreachable at Init, or lost later: the local archive, with a warning
  // (no event is lost).
  std::string collector;
  // The longest wait for the collector: to connect and be welcomed, for a
  // write, for an ack the back-pressure window waits on; then the local
  // archive takes over. ns (its variable is in ms).
  int64_t collector_timeout_ns = 10'000'000'000;
  // TLS to the collector: the PEM file of the certificate authority its
  // certificate chains to. Empty: plaintext.
  std::string collector_tls_ca_file;
  // Let CLOCKSYNC_* variables override the fields above at Init (no
  // variable).
  bool read_environment = true;
};

// Overrides fields of *options from the CLOCKSYNC_* variables
// (docs/TRACER.md). InvalidArgument names the variable and the bad value:
// "CLOCKSYNC_TRACE_BUFFER_EVENTS: expected an integer in 16..67108864, got
// 'lots'".
absl::Status ApplyTracerEnvironment(TracerOptions* options);

// Counters of the current (or last) tracing session.
struct TracerStats {
  uint64_t events_recorded = 0;  // accepted by the recording functions
  uint64_t events_written = 0;   // handed to the archive successfully
  uint64_t events_dropped = 0;   // lost because the archive failed
  uint64_t events_rejected = 0;  // bad arguments (undefined region, ...)
  uint64_t mapping_records = 0;  // mapping changes recorded
  uint64_t sync_sessions = 0;    // sessions run (empty ones included)
  uint64_t sync_exchanges = 0;   // exchanges over all sessions
  uint64_t threads = 0;          // threads that recorded
  uint64_t flushes = 0;          // buffers written before Finalize
  uint64_t writer_waits = 0;     // full buffers that waited for the writer
  bool has_model = false;        // events are on a modeled clock
  std::string archive_dir;       // where the archive goes ("collector
                                 // HOST:PORT" while streaming)
  uint64_t events_streamed = 0;  // acknowledged (stored) by the collector
  bool collector_fallback = false;  // the collector was unreachable or lost:
                                    // the local archive took over
  std::string collector_note;    // why ("" none)
  uint32_t phase = 0;            // the tracing phase (FinalizePhase)
  std::vector<int32_t> lost_peers;  // ranks the collector said were lost
  std::string first_error;       // first archive error ("" none)
};

// Dynamic spawning: an attach group (Tracer::Attach, Tracer::Attached).
struct AttachResult {
  int32_t parent_rank = -1;       // the rank that attached the children
  uint32_t group = 0;             // its attach's number (0, 1, ...)
  std::vector<int32_t> children;  // the children's ranks, ascending
  // The two communicators of the group, defined in this process's trace:
  // the children among themselves (child i is its rank i), and the parent
  // (its rank 0) with the children (child i is its rank i + 1).
  uint32_t children_comm = 0;
  uint32_t family_comm = 0;
};

// The process-wide tracer. All members are static: there is one tracer per
// process (signal handlers and per-thread buffers are process-wide), and it
// can be initialized again after Finalize (a new archive).
class Tracer {
 public:
  Tracer() = delete;

  // Starts tracing: reads the environment (see TracerOptions), creates the
  // archive directory, maps the daemon's segment (absent: a warning), reads
  // a modeled clock if there is one, runs the init sync session, starts the
  // service thread (segment watch, periodic sessions, SIGINT/SIGTERM) and
  // the writer thread (full buffers), and installs the signal handlers. Errors: InvalidArgument (options or
  // environment), AlreadyExists (the archive directory is not empty; or
  // FailedPrecondition when the tracer is already initialized, or in a
  // fork of a traced process that did not exec: that names both pids), and
  // the writer's errors naming the path. On error nothing is left running.
  static absl::Status Init(const TracerOptions& options = TracerOptions());

  // Stops tracing: runs the finalize sync session, flushes every buffer,
  // and finishes the archive. Returns the first error writing the archive
  // had (events were then counted as dropped); FailedPrecondition when not
  // initialized. The tracer is stopped in every case.
  static absl::Status Finalize();

  // Server-init (the client-server model's third start-up): this process
  // serves the collector in-process (collector/in_process.h) and traces as
  // rank 0 of options.world_size processes (required, >= 1); returns the
  // contact string to hand to the others (their CLOCKSYNC_COLLECTOR). Its
  // Finalize then waits for every rank, writes the run's archive
  // (CLOCKSYNC_COLLECTOR_OUTPUT, default <trace_dir>/<name>.otf2) and
  // prints the collector's summary on stderr; DataLoss when not every
  // rank finished. Serves on CLOCKSYNC_COLLECTOR_LISTEN (default
  // 0.0.0.0:0), naming CLOCKSYNC_COLLECTOR_ADVERTISE (default this
  // machine's name) in the contact string.
  static absl::StatusOr<std::string> ServerInit(const TracerOptions& options);

  // Client-init of the reverse start-up: opens a listening endpoint on
  // `listen` (empty: CLOCKSYNC_COLLECTOR_LISTEN, default 0.0.0.0:0) and
  // returns its contact string; the application hands every process's
  // string to `clocksync-collector CONTACT...`, which dials them. The next
  // Init (with no collector set) waits for that dial (at most
  // collector_timeout_ns; AbortInit ends the wait), takes the rank and
  // world size it says, and connects; with no dial in time, a warning and
  // the local archive.
  static absl::StatusOr<std::string> ClientListen(
      const std::string& listen = "");

  // Dynamic spawning (docs/COLLECTOR.md). The contact string for the
  // children of this process's next attach: each child passes it to its
  // Init (CLOCKSYNC_COLLECTOR, or TracerOptions::collector) and waits
  // there until the attach took it; the collector gives it a rank after
  // the run's. FailedPrecondition when not initialized or not streaming
  // to a collector (no attach with a local archive).
  static absl::StatusOr<std::string> AttachContact();
  // Connects the `children` processes started with AttachContact()'s
  // string into the run: waits until every one joined (at most
  // collector_timeout_ns), then defines the group's two communicators
  // (AttachResult) here, as each child does at its Init. `pids`: the
  // children's process ids when known (fork): only those are taken, in
  // that order, and a timeout names the missing ones. DeadlineExceeded
  // names the children that never connected (the group fails: those that
  // did fall back to local archives); FailedPrecondition without a
  // collector; Cancelled when AbortInit ends the wait (the group fails).
  // The next AttachContact() is a new group's. Must not overlap Init or
  // Finalize.
  static absl::StatusOr<AttachResult> Attach(
      int32_t children, absl::Span<const int64_t> pids = {});
  // In a child: the group that attached this process (its communicators
  // defined at Init); nullopt for a process that was not attached.
  static std::optional<AttachResult> Attached();

  // Ends a tracing phase: as Finalize, and the next Init continues the
  // program's trace as its next phase (Stats().phase + 1) with the same
  // rank: the collector keeps the rank open between phases (the run is
  // not done) and joins the phases into the rank's one trace in its
  // archive; without a collector each phase has its own local archive,
  // <name>.r<rank> then <name>.r<rank>.p<phase>. Init/FinalizePhase may
  // repeat any number of times; Finalize ends the last phase. A process
  // that exits between phases ends them at exit (an empty last phase).
  static absl::Status FinalizePhase();

  // Makes an Init that waits for the collector (connecting, or for the
  // Welcome: up to collector_timeout_ns), or an Attach waiting for its
  // children, return Cancelled within ~50 ms,
  // from another thread: for a program that decided the run failed.
  // Nothing of that Init is left running. True when an Init was waiting
  // and is told; false when none was (nothing happens).
  static bool AbortInit() noexcept;

  // Fail-safe: the ranks of the program the collector said were lost
  // (killed, cut off, or refused by it), in the order told; the tracer
  // also warns once for each. Empty without a collector. A program may
  // poll it, e.g. when a peer stops answering, to learn which one failed.
  // The current session's (the last one's after Finalize).
  static std::vector<int32_t> LostPeers();

  // Whether Init succeeded and Finalize has not run.
  static bool IsActive() noexcept;

  // This process's rank in the current (or last) session: the one asked
  // for, or the one the collector assigned; -1 before any Init.
  static int32_t Rank() noexcept;
  // Ranks in the program as the session knows them (options, or the
  // collector's); 0: unknown.
  static int32_t WorldSize() noexcept;

  // Defines a region and returns its id (the same id for the same name).
  // FailedPrecondition when not initialized.
  static absl::StatusOr<uint32_t> DefineRegion(absl::string_view name);

  // Defines a communicator: `ranks[i]` is the program rank of its rank i
  // (each in 0..world_size-1 when world_size is known, no duplicates).
  // Returns its id (1, 2, ...; 0 is the world). At most 1023.
  static absl::StatusOr<uint32_t> DefineCommunicator(
      absl::string_view name, absl::Span<const int32_t> ranks);

  // --- recording (the hot path) ---------------------------------------------
  // Each records one event now on the calling thread and returns true, or
  // returns false and records nothing when the tracer is not active or an
  // argument is invalid (an undefined region or communicator, a peer or
  // root outside the communicator, a collective end without a begin;
  // counted in events_rejected). `peer` and `root` are ranks within `comm`.

  static bool Enter(uint32_t region) noexcept;
  static bool Leave(uint32_t region) noexcept;
  static bool Send(int32_t peer, uint32_t tag, uint64_t bytes,
                   uint32_t comm = trace::kWorldCommunicator) noexcept;
  static bool Recv(int32_t peer, uint32_t tag, uint64_t bytes,
                   uint32_t comm = trace::kWorldCommunicator) noexcept;
  // root: -1 for collectives without one. bytes_sent: this process's
  // contribution.
  static bool CollectiveBegin(trace::CollectiveKind kind, uint32_t comm,
                              int32_t root, uint64_t bytes_sent) noexcept;
  // Must follow this thread's CollectiveBegin (they nest).
  static bool CollectiveEnd(trace::CollectiveKind kind, uint32_t comm,
                            int32_t root, uint64_t bytes_received) noexcept;

  // --- the rest -------------------------------------------------------------

  // Runs a sync session with the master now (blocks for up to
  // sync_max_duration_ns). An unreachable master gives a warning and an
  // empty session, and Unavailable here; FailedPrecondition when not
  // initialized. Never fails the trace.
  static absl::Status Timesync();

  // Names the calling thread in the trace (before its first buffer is
  // written; later names are ignored). Default: "main" for the thread that
  // called Init, else the thread's system name or "thread <index>".
  static void SetThreadName(absl::string_view name);

  // Counters of the current session (of the last one after Finalize).
  static TracerStats Stats();

 private:
  static absl::Status FinalizeSession(bool more_phases);
};

// Enter on construction, Leave on destruction.
class ScopedRegion {
 public:
  explicit ScopedRegion(uint32_t region) noexcept : region_(region) {
    Tracer::Enter(region_);
  }
  ~ScopedRegion() { Tracer::Leave(region_); }
  ScopedRegion(const ScopedRegion&) = delete;
  ScopedRegion& operator=(const ScopedRegion&) = delete;

 private:
  uint32_t region_;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_TRACER_H_
