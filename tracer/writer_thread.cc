// tracer/writer_thread.cc: the writer thread, the flushes and the
// archive's completion (writer_thread.h).

#include "tracer/writer_thread.h"

#include <new>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "tracer/warn.h"

namespace clocksync {
namespace tracer {

using trace::Event;

ArchiveWriter::ArchiveWriter(std::unique_ptr<trace::TraceSink> writer,
                             const ThreadRegistry* threads,
                             TraceRecords* records,
                             std::optional<trace::GroundTruth> truth)
    : writer_(std::move(writer)),
      archive_dir_(writer_->archive_dir()),
      threads_(threads),
      records_(records),
      truth_(std::move(truth)) {}

ArchiveWriter::~ArchiveWriter() { StopThread(); }

void ArchiveWriter::StartThread() {
  writer_running_ = true;
  thread_ = std::thread([this] { WriterLoop(); });
}

void ArchiveWriter::StopThread() {
  {
    std::lock_guard<std::mutex> lock(handoff_mutex_);
    if (!writer_running_) return;
    stop_writer_ = true;
    work_cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(handoff_mutex_);
  writer_running_ = false;
  handoff_cv_.notify_all();
}

void ArchiveWriter::BufferFull(ThreadState* state) {
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
void ArchiveWriter::FlushThread(ThreadState* state) {
  std::lock_guard<OwnedMutex> lock(writer_mutex_);
  FlushLocked(state, /*from_signal=*/false);
  ++flushes_;
}

void ArchiveWriter::SetThreadName(ThreadState* state, absl::string_view name) {
  std::lock_guard<OwnedMutex> lock(writer_mutex_);
  if (state->flushed == 0) state->name = std::string(name);
}

void ArchiveWriter::RetireThread(ThreadState* state) {
  std::lock_guard<OwnedMutex> lock(writer_mutex_);
  FlushLocked(state, /*from_signal=*/false);
  std::lock_guard<SwapLock> swap(state->swap_lock);
  state->events = nullptr;
  state->other = nullptr;
  state->capacity = 0;
  state->chunk.reset();
  state->other_chunk.reset();
}

absl::Status ArchiveWriter::FlushAllAndFinish(bool from_signal) {
  if (finish_started_.exchange(true)) {
    return absl::FailedPreconditionError("trace already finished");
  }
  if (!writer_mutex_.LockUnlessSignal(from_signal)) {
    return absl::UnavailableError("archive writer busy");
  }
  for (ThreadState* state = threads_->first(); state != nullptr;
       state = state->next) {
    FlushLocked(state, from_signal);
  }
  static const std::vector<trace::Region> kNoRegions;
  static const std::vector<trace::Communicator> kNoCommunicators;
  static const std::vector<trace::MappingRecord> kNoMappings;
  static const std::vector<trace::SyncSession> kNoSessions;
  const bool have_records = records_->mutex().LockUnlessSignal(from_signal);
  absl::Status status = writer_->Finish(
      have_records ? records_->regions() : kNoRegions,
      have_records ? records_->communicators() : kNoCommunicators,
      have_records ? records_->mappings() : kNoMappings,
      have_records ? records_->sessions() : kNoSessions, truth_);
  if (have_records) records_->mutex().unlock();
  if (!status.ok()) NoteWriterError(status, 0);
  if (first_error_.ok()) first_error_ = status;
  const absl::Status result = first_error_;
  writer_mutex_.unlock();
  return result;
}

void ArchiveWriter::StreamSidecar() {
  std::lock_guard<OwnedMutex> writer_lock(writer_mutex_);
  if (finish_started_.load(std::memory_order_acquire)) return;
  std::lock_guard<OwnedMutex> records_lock(records_->mutex());
  if (!records_->TakeDirty() && truth_streamed_) return;
  truth_streamed_ = true;
  const absl::Status status = writer_->StreamRecords(
      records_->regions(), records_->communicators(), records_->mappings(),
      records_->sessions(), truth_);
  if (!status.ok()) NoteWriterError(status, 0);
}

void ArchiveWriter::AddStats(TracerStats* stats) {
  {
    std::lock_guard<OwnedMutex> lock(writer_mutex_);
    stats->archive_dir = writer_->archive_dir();
    stats->events_written = events_written_;
    stats->events_dropped = events_dropped_;
    stats->flushes = flushes_;
    stats->first_error =
        first_error_.ok() ? std::string() : first_error_.ToString();
    for (ThreadState* state = threads_->first(); state != nullptr;
         state = state->next) {
      std::lock_guard<SwapLock> swap(state->swap_lock);
      stats->events_recorded +=
          state->flushed + state->count.load(std::memory_order_acquire);
      if (state->pending.load(std::memory_order_acquire) != nullptr) {
        stats->events_recorded += state->pending_count;
      }
    }
  }
  std::lock_guard<std::mutex> lock(handoff_mutex_);
  stats->writer_waits = writer_waits_;
}

// Hands a thread's committed events to the archive, the pending buffer's
// first (writer_mutex_ held). `from_signal`: a fatal-signal handler, which
// only tries the thread's swap lock and wakes nobody.
void ArchiveWriter::FlushLocked(ThreadState* state, bool from_signal) {
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
void ArchiveWriter::WritePendingLocked(ThreadState* state, bool wake_owner) {
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
void ArchiveWriter::WriteLocked(ThreadState* state, const Event* events,
                                uint32_t n) {
  absl::Status status;
  try {
    status = writer_->AppendEvents(state->thread_index, state->name,
                                   absl::MakeConstSpan(events, n));
  } catch (const std::bad_alloc&) {
    status = absl::ResourceExhaustedError(absl::StrCat(
        "trace ", archive_dir_, ": out of memory writing events"));
  }
  if (status.ok()) {
    events_written_ += n;
  } else {
    NoteWriterError(status, n);
  }
  state->flushed += n;
}

// The archive failed: count the lost events, keep the first error, warn
// once.
void ArchiveWriter::NoteWriterError(const absl::Status& status,
                                    uint64_t lost_events) {
  events_dropped_ += lost_events;
  if (first_error_.ok()) {
    first_error_ = status;
    Warn(absl::StrCat("cannot write the trace, events are dropped from now "
                      "on: ",
                      status.ToString()));
  }
}

// The writer thread: writes the buffers recording threads hand off.
void ArchiveWriter::WriterLoop() {
  std::unique_lock<std::mutex> lock(handoff_mutex_);
  while (true) {
    work_cv_.wait(lock, [&] { return handoffs_waiting_ > 0 || stop_writer_; });
    if (handoffs_waiting_ == 0) break;  // stopping, nothing left
    handoffs_waiting_ = 0;
    lock.unlock();
    for (ThreadState* state = threads_->first(); state != nullptr;
         state = state->next) {
      if (state->pending.load(std::memory_order_acquire) == nullptr) continue;
      std::lock_guard<OwnedMutex> writer_lock(writer_mutex_);
      if (state->pending.load(std::memory_order_acquire) == nullptr) continue;
      WritePendingLocked(state, /*wake_owner=*/true);
      ++flushes_;
    }
    lock.lock();
  }
}

}  // namespace tracer
}  // namespace clocksync
