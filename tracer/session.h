// tracer/session.h: one tracing session (Init .. Finalize) and what owns
// it: TracingSession holds the options, the segment mapping, the records,
// the threads, the archive writer, the sync sessions and the service thread
// (the segment watch, periodic sync sessions, SIGINT/SIGTERM). The
// process-wide pointer to the active session and the lifecycle lock are
// here too.
//
// Locks (never nested except in the fatal-signal path, which only tries):
//   g_lifecycle_mutex          Init, Finalize, thread attach and thread exit
//   ArchiveWriter's mutex      the archive (flushes, Finish)
//   TraceRecords' mutex        definitions, mapping records, sessions
//   SyncSessionRunner's mutex  one sync session at a time
#ifndef CLOCKSYNC_TRACER_SESSION_H_
#define CLOCKSYNC_TRACER_SESSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "probe/auth.h"
#include "shm/segment_reader.h"
#include "collector/streaming_sink.h"
#include "trace/trace_sink.h"
#include "trace/trace.h"
#include "tracer/local_clock.h"
#include "tracer/sync_session.h"
#include "tracer/thread_buffers.h"
#include "tracer/trace_records.h"
#include "tracer/tracer.h"
#include "tracer/writer_thread.h"

namespace clocksync {
namespace tracer {

// What Init prepared for a session.
struct SessionParts {
  TracerOptions options;
  trace::ProcessInfo info;
  std::optional<ClockModel> model;
  std::optional<trace::GroundTruth> truth;
  std::optional<probe::ProbeKeys> probe_key;
  std::unique_ptr<shm::SegmentReader> segment;  // reserved, maybe mapped
  std::string collector_note;  // the collector was unreachable: why
  std::unique_ptr<trace::TraceSink> writer;  // local archive or collector
  // The collector stream when `writer` is one (owned by `writer`).
  collector::StreamingSink* streaming = nullptr;
};

class TracingSession {
 public:
  TracingSession(SessionParts parts, uint64_t generation);
  TracingSession(const TracingSession&) = delete;
  TracingSession& operator=(const TracingSession&) = delete;
  ~TracingSession();

  uint64_t generation() const { return generation_; }
  const TracerOptions& options() const { return options_; }
  int32_t rank() const { return info_.rank; }
  const shm::SegmentReader& segment() const { return *segment_; }
  TraceRecords& records() { return records_; }
  ThreadRegistry& threads() { return threads_; }
  ArchiveWriter& archive() { return archive_; }
  // The collector stream (in archive()); null with a local archive.
  collector::StreamingSink* streaming() { return streaming_; }

  // The segment's sequence word changed under `state`: read the mapping
  // and record it if it differs from the last one recorded.
  void NoteMappingChange(ThreadState* state);
  // Records the mapping now, from a thread without a ThreadState (Init,
  // the service thread).
  void NoteMappingChangeCold();

  // Runs one sync session and stores it (also when empty). Unavailable
  // when the master did not answer; OK without a master (nothing run).
  absl::Status RunSession(trace::SyncSessionKind kind);

  // Starts the service thread and the writer thread (with every signal
  // blocked, so that asynchronous ones go to the program's threads).
  absl::Status StartThreads();
  // Stops the service thread, then the writer thread.
  void StopThreads();

  // The bad arguments the recording functions refused.
  void AddRejected() {
    events_rejected_.fetch_add(1, std::memory_order_relaxed);
  }

  TracerStats Stats();

 private:
  void ServiceLoop();
  void WatchSegment(int64_t raw_now_ns);
  void PublishRemap();

  const TracerOptions options_;
  const trace::ProcessInfo info_;
  const bool has_model_;
  const std::unique_ptr<shm::SegmentReader> segment_;
  collector::StreamingSink* const streaming_;  // in archive_; may be null
  std::string collector_note_;  // why the collector is not used ("" none)
  const uint64_t generation_;
  TraceRecords records_;
  ThreadRegistry threads_;
  ArchiveWriter archive_;
  SyncSessionRunner sync_;

  std::mutex cold_clock_mutex_;
  LocalClock cold_clock_;  // the local clock for threads without a state

  std::atomic<uint64_t> events_rejected_{0};

  int eventfd_ = -1;
  std::atomic<bool> stop_service_{false};
  std::thread service_;
};

// The active session; nullptr while none is.
extern std::atomic<TracingSession*> g_session;
// Init, Finalize, thread attach and thread exit.
extern std::mutex g_lifecycle_mutex;
// The process that started the active session (set with g_session): a
// fork of a traced process that did not exec holds a copy of the session
// without its threads, and must not use it.
extern std::atomic<int> g_session_pid;
// FailedPrecondition naming both processes when the calling process is
// such a fork; OK otherwise.
absl::Status CheckNotForkedSession();
// Tracer::AbortInit's flag for a wait on the collector other than Init's
// (an Attach): BeginAbortableWait clears it and marks a wait AbortInit may
// end; EndAbortableWait unmarks it (tracer.cc).
const std::atomic<bool>* BeginAbortableWait();
void EndAbortableWait();

}  // namespace tracer
}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_SESSION_H_
