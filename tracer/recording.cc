// tracer/recording.cc: the recording path (the hot path): Tracer::Enter,
// Leave, Send, Recv, CollectiveBegin and CollectiveEnd. One clock read
// (an rdtsc through the daemon's TSC mapping, else the vDSO's
// clock_gettime), one load of the segment's sequence word, a stamp and a
// store into the thread's buffer; no lock, no allocation, no system call in
// steady state. Everything else is out of line: a thread's first event
// (AttachThread), a new mapping, a full buffer, a refused argument.

#include <cstdint>

#include "client/clock.h"
#include "hull/trace_stamp.h"
#include "shm/shm_layout.h"
#include "trace/trace.h"
#include "tracer/recording.h"
#include "tracer/session.h"
#include "tracer/thread_buffers.h"
#include "tracer/tracer.h"

namespace clocksync {
namespace tracer {

constinit HotGlobals g_hot;
constinit std::array<std::atomic<int32_t>, kMaxCommunicators> g_comm_size{};
constinit thread_local ThreadSlot t_slot;

namespace {

using trace::CollectiveKind;
using trace::Event;
using trace::EventKind;

__attribute__((noinline)) void MappingChanged(ThreadState* state) noexcept {
  if (TracingSession* session = g_session.load(std::memory_order_acquire)) {
    try {
      session->NoteMappingChange(state);
    } catch (...) {
      // Out of memory for the record: look again at the next event.
    }
  }
}

__attribute__((noinline)) void BufferFull(ThreadState* state) noexcept {
  if (TracingSession* session = g_session.load(std::memory_order_acquire)) {
    session->archive().BufferFull(state);
  }
}

__attribute__((noinline)) void Rejected() noexcept {
  if (TracingSession* session = g_session.load(std::memory_order_acquire)) {
    session->AddRejected();
  }
}

// The calling thread's state, or nullptr when no session is active.
inline ThreadState* CurrentThread() noexcept {
  // Generations start at 1, and a slot with generation 0 holds no state:
  // equal generations give this session's state, or nullptr when no
  // session is active and the thread never attached.
  // Acquire (a plain load on x86-64): pairs with the release in
  // TracingSession::PublishRemap, so that a segment mapped in place is seen
  // whole.
  if (__builtin_expect(t_slot.generation ==
                           g_hot.generation.load(std::memory_order_acquire),
                       1)) {
    return t_slot.state;
  }
  if (g_hot.generation.load(std::memory_order_relaxed) == 0) return nullptr;
  return AttachThread();
}

// The raw clock now: one rdtsc through the daemon's TSC mapping where it
// publishes one (within its error_ns, tens of ns), else clock_gettime.
// Kept from going back within a thread (across a switch between the two
// paths).
inline int64_t RawNowNs(ThreadState* state) noexcept {
#if defined(__x86_64__)
  if (g_hot.tsc != nullptr) {
    TscValues t;
    int64_t raw_ns;
    if (__builtin_expect(shm::TryReadTscSection(g_hot.tsc, &t), 1) &&
        __builtin_expect(shm::TscToRaw(t, __builtin_ia32_rdtsc(), &raw_ns),
                         1)) {
      if (__builtin_expect(raw_ns < state->last_tsc_raw_ns, 0)) {
        raw_ns = state->last_tsc_raw_ns;
      }
      state->last_tsc_raw_ns = raw_ns;
      return raw_ns;
    }
  }
#endif
  return Clock::RawNowNs();
}

// Records one event on `state` now.
inline void Append(ThreadState* state, EventKind kind, uint32_t region,
                   int32_t peer, uint32_t tag, uint32_t comm,
                   CollectiveKind collective, uint64_t bytes) noexcept {
  const int64_t raw_ns = RawNowNs(state);
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
          (root >= 0 &&
           root < g_comm_size[comm].load(std::memory_order_relaxed)));
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

ThreadState* CurrentThreadState() noexcept { return CurrentThread(); }

}  // namespace tracer

using tracer::RecordCollective;
using tracer::RecordMessage;
using tracer::RecordRegion;
using trace::EventKind;

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

}  // namespace clocksync
