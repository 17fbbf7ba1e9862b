// tracer/recording.h: the process-wide state the tracer's recording path
// (recording.cc, the hot path) reads: the active session's generation, the
// defined regions and communicators, the segment's sequence word, and each
// thread's slot. Written by the cold paths (Init, Finalize, definitions,
// thread registration).
#ifndef CLOCKSYNC_TRACER_RECORDING_H_
#define CLOCKSYNC_TRACER_RECORDING_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "shm/shm_layout.h"
#include "tracer/thread_buffers.h"

namespace clocksync {
namespace tracer {

// Communicators: id 0 (the world) .. kMaxCommunicators - 1.
inline constexpr uint32_t kMaxCommunicators = 1024;

// The hot path's view of the process-wide state, on its own cache line.
struct alignas(64) HotGlobals {
  // Id of the active tracing session; 0 while none is active.
  std::atomic<uint64_t> generation{0};
  // Regions defined so far: ids 0..region_count-1.
  std::atomic<uint32_t> region_count{0};
  // The segment's sequence word (a constant address during a session).
  const uint64_t* seq_word = nullptr;
  // The segment's TSC section (shm/shm_layout.h) when events are stamped
  // through the TSC: null without (CLOCKSYNC_TSC=off, not x86-64).
  const clocksync_shm_tsc* tsc = nullptr;
};
extern constinit HotGlobals g_hot;

// Size of each communicator (0: undefined; INT32_MAX: any peer, for a
// world of unknown size).
extern constinit std::array<std::atomic<int32_t>, kMaxCommunicators>
    g_comm_size;

// What a thread knows of its state. Trivially destructible so that the hot
// path's access needs no TLS-initialization guard.
struct ThreadSlot {
  ThreadState* state = nullptr;
  uint64_t generation = 0;  // of the session `state` belongs to
};
extern constinit thread_local ThreadSlot t_slot;

// The calling thread's state in the active session (registered now if it
// has none); nullptr when no session is active. The hot path's lookup, out
// of line, for the cold paths.
ThreadState* CurrentThreadState() noexcept;

}  // namespace tracer
}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_RECORDING_H_
