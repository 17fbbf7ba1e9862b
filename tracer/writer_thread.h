// tracer/writer_thread.h: the tracer's side of the archive: the writer
// thread that appends the buffers recording threads hand off, the flushes
// done on other threads (a thread's exit, Finalize, a fatal signal, no
// writer thread), the sidecar streamed for a process that may be killed,
// and the archive's completion. Errors writing the archive are counted,
// never thrown at the program.
#ifndef CLOCKSYNC_TRACER_WRITER_THREAD_H_
#define CLOCKSYNC_TRACER_WRITER_THREAD_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "trace/trace_sink.h"
#include "trace/trace.h"
#include "tracer/locks.h"
#include "tracer/thread_buffers.h"
#include "tracer/trace_records.h"
#include "tracer/tracer.h"

namespace clocksync {
namespace tracer {

// Locks: writer_mutex_ (the Otf2Writer, the counters, ThreadState::flushed
// and `pending` clearing), then at most a thread's swap lock or the
// records' mutex; handoff_mutex_ alone. Only the fatal-signal path tries
// instead of waiting.
class ArchiveWriter {
 public:
  // Writes into `writer` (the local archive, or a stream to a collector)
  // the events of the threads of `threads`, and the
  // records of `records` (both outlive this).
  ArchiveWriter(std::unique_ptr<trace::TraceSink> writer,
                const ThreadRegistry* threads, TraceRecords* records,
                std::optional<trace::GroundTruth> truth);
  ArchiveWriter(const ArchiveWriter&) = delete;
  ArchiveWriter& operator=(const ArchiveWriter&) = delete;
  ~ArchiveWriter();

  // Starts the writer thread (with the caller's signal mask).
  void StartThread();
  // Stops the writer thread once it wrote every buffer handed to it; later
  // full buffers are written by their own threads.
  void StopThread();

  // The owner's buffer is full: hand it to the writer thread and go on in
  // the second buffer, waiting first if the writer still has the second
  // one. Without a writer thread (stopped) or a second buffer (out of
  // memory), writes the buffer on the calling thread.
  void BufferFull(ThreadState* state);
  // Names a thread unless its first events were written already.
  void SetThreadName(ThreadState* state, absl::string_view name);
  // The thread is exiting: flush and release its buffers. Later flushers
  // skip it (events == nullptr).
  void RetireThread(ThreadState* state);

  // Flushes every thread's committed events and finishes the archive, once
  // (the first caller wins: Finalize, a fatal-signal handler or the service
  // thread on SIGINT/SIGTERM; later calls are FailedPrecondition).
  // `from_signal`: a fatal-signal handler; locks are only tried (see
  // OwnedMutex), and what cannot be locked is skipped (without the records'
  // lock, the archive names the regions and communicators its events use
  // "region N", "comm N"). Returns the first error the archive had.
  absl::Status FlushAllAndFinish(bool from_signal);

  // Appends to the archive's sidecar the records it lacks, so that a
  // process killed before finishing (SIGKILL) leaves them behind; the
  // reader then rebuilds the archive's definitions. Nothing after Finish.
  void StreamSidecar();

  // events_recorded, events_written, events_dropped, flushes,
  // writer_waits, first_error, archive_dir (the sink's: a collector's
  // address, or the local archive after a fallback).
  void AddStats(TracerStats* stats);

  const std::string& archive_dir() const { return archive_dir_; }

 private:
  void FlushThread(ThreadState* state);
  void FlushLocked(ThreadState* state, bool from_signal);
  void WritePendingLocked(ThreadState* state, bool wake_owner);
  void WriteLocked(ThreadState* state, const trace::Event* events, uint32_t n);
  void NoteWriterError(const absl::Status& status, uint64_t lost_events);
  void WriterLoop();

  const std::unique_ptr<trace::TraceSink> writer_;
  const std::string archive_dir_;
  const ThreadRegistry* const threads_;
  TraceRecords* const records_;
  const std::optional<trace::GroundTruth> truth_;

  OwnedMutex writer_mutex_;  // writer_ and the members down to truth_streamed_
  uint64_t events_written_ = 0;
  uint64_t events_dropped_ = 0;
  uint64_t flushes_ = 0;
  absl::Status first_error_;
  bool truth_streamed_ = false;  // the sidecar holds the truth
  std::atomic<bool> finish_started_{false};

  std::mutex handoff_mutex_;  // the members down to writer_waits_
  std::condition_variable work_cv_;     // buffers handed off, or stop
  std::condition_variable handoff_cv_;  // a pending buffer was written
  uint64_t handoffs_waiting_ = 0;
  bool stop_writer_ = false;
  bool writer_running_ = false;
  uint64_t writer_waits_ = 0;  // full buffers that waited for the writer
  std::thread thread_;
};

}  // namespace tracer
}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_WRITER_THREAD_H_
