// tracer/thread_buffers.h: per-thread state of the tracer: each recording
// thread's two event buffers and its hand-off to the writer thread
// (ThreadState), the list of every thread of a tracing session
// (ThreadRegistry), and a thread's registration at its first event
// (AttachThread: its state, an alternate signal stack, and a flush when the
// thread exits).
#ifndef CLOCKSYNC_TRACER_THREAD_BUFFERS_H_
#define CLOCKSYNC_TRACER_THREAD_BUFFERS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "hull/trace_stamp.h"
#include "trace/trace.h"
#include "tracer/local_clock.h"
#include "tracer/locks.h"

namespace clocksync {
namespace tracer {

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
// (the archive writer's mutex held) once its events are in the archive.
struct ThreadState {
  // --- hot: owner thread only ---
  trace::Event* events = nullptr;     // the active buffer, `capacity` events
  uint32_t capacity = 0;
  std::atomic<uint32_t> count{0};     // committed, unflushed events
  uint64_t last_seq = ~uint64_t{0};   // segment sequence last looked at
  int64_t origin_ns = 0;              // local time of stamp tick 0
  int64_t last_tsc_raw_ns = 0;        // raw of the last TSC-read event
  hull::TraceStamper stamper;
  int32_t open_collectives = 0;       // CollectiveBegin without End yet
  LocalClock clock;                   // raw, or the modeled clock
  // --- hand-off ---
  SwapLock swap_lock;
  trace::Event* other = nullptr;      // the second buffer (nullptr: none yet)
  std::atomic<trace::Event*> pending{nullptr};  // full, waiting for the writer
  uint32_t pending_count = 0;         // events in `pending`
  // --- cold ---
  uint32_t thread_index = 0;
  std::string name;
  std::unique_ptr<trace::Event[]> chunk;        // owns the first buffer
  std::unique_ptr<trace::Event[]> other_chunk;  // owns the second one
  uint64_t flushed = 0;  // events handed to the writer (its mutex held)
  ThreadState* next = nullptr;  // the registry's list of every thread
};

// Every thread that recorded in one tracing session (push-front only; the
// states live as long as the registry).
class ThreadRegistry {
 public:
  ThreadRegistry(uint32_t buffer_events, int64_t origin_ns,
                 const std::optional<ClockModel>& model,
                 std::string process_name);
  ThreadRegistry(const ThreadRegistry&) = delete;
  ThreadRegistry& operator=(const ThreadRegistry&) = delete;
  ~ThreadRegistry();

  // A new state for the calling thread, its first buffer allocated and
  // touched (under the tracer's lifecycle mutex). Its name: "main" for the
  // thread that created the registry, else the thread's system name or
  // "thread <index>". Throws std::bad_alloc.
  ThreadState* Add();

  // The first state (then ->next); safe from any thread.
  ThreadState* first() const { return first_.load(std::memory_order_acquire); }
  uint64_t size() const { return size_.load(std::memory_order_relaxed); }

 private:
  const uint32_t buffer_events_;
  const int64_t origin_ns_;
  const std::optional<ClockModel> model_;
  const std::string process_name_;
  const int32_t creator_thread_id_;
  std::atomic<ThreadState*> first_{nullptr};
  uint32_t next_thread_index_ = 0;  // under the lifecycle mutex
  std::atomic<uint64_t> size_{0};
};

// The calling thread's state in the active session, registered at its
// first event (with an alternate signal stack when the session installs
// signal handlers, and a flush of its buffers when the thread exits);
// nullptr when no session is active or memory ran out. The hot path's slow
// path: not inline.
ThreadState* AttachThread() noexcept;

}  // namespace tracer
}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_THREAD_BUFFERS_H_
