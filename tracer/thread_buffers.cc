// tracer/thread_buffers.cc: registering recording threads: their state,
// their alternate signal stack, their flush at exit (thread_buffers.h).

#include "tracer/thread_buffers.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#include <cstring>
#include <mutex>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tracer/recording.h"
#include "tracer/session.h"

namespace clocksync {
namespace tracer {
namespace {

// Alternate signal stack per recording thread that has none.
constexpr size_t kAltStackBytes = 256 * 1024;

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
    if (sigaltstack(nullptr, &current) == 0 &&
        !(current.ss_flags & SS_DISABLE) && current.ss_size >= 64 * 1024) {
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
    TracingSession* session = g_session.load(std::memory_order_acquire);
    if (session != nullptr && t_slot.state != nullptr &&
        t_slot.generation == session->generation()) {
      session->archive().RetireThread(t_slot.state);
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

}  // namespace

ThreadRegistry::ThreadRegistry(uint32_t buffer_events, int64_t origin_ns,
                               const std::optional<ClockModel>& model,
                               std::string process_name)
    : buffer_events_(buffer_events),
      origin_ns_(origin_ns),
      model_(model),
      process_name_(std::move(process_name)),
      creator_thread_id_(ThreadId()) {}

ThreadRegistry::~ThreadRegistry() {
  ThreadState* state = first_.load(std::memory_order_acquire);
  while (state != nullptr) {
    ThreadState* next = state->next;
    delete state;
    state = next;
  }
}

ThreadState* ThreadRegistry::Add() {
  auto state = std::make_unique<ThreadState>();
  state->capacity = buffer_events_;
  // Value-initialized: the pages are touched now, not on the hot path.
  state->chunk = std::make_unique<trace::Event[]>(state->capacity);
  state->events = state->chunk.get();
  state->origin_ns = origin_ns_;
  state->clock = LocalClock(model_);
  state->thread_index = next_thread_index_++;
  if (ThreadId() == creator_thread_id_) {
    state->name = "main";
  } else {
    char name[32] = {};
    if (pthread_getname_np(pthread_self(), name, sizeof(name)) == 0 &&
        name[0] != '\0' && process_name_.rfind(name, 0) != 0) {
      state->name = name;
    } else {
      state->name = absl::StrCat("thread ", state->thread_index);
    }
  }
  ThreadState* raw = state.release();
  raw->next = first_.load(std::memory_order_relaxed);
  first_.store(raw, std::memory_order_release);
  size_.fetch_add(1, std::memory_order_relaxed);
  return raw;
}

__attribute__((noinline)) ThreadState* AttachThread() noexcept {
  std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
  TracingSession* session = g_session.load(std::memory_order_acquire);
  if (session == nullptr) return nullptr;
  if (t_slot.state != nullptr && t_slot.generation == session->generation()) {
    return t_slot.state;
  }
  ThreadState* state = nullptr;
  try {
    state = session->threads().Add();
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  t_slot.state = state;
  t_slot.generation = session->generation();
  // The first use of t_resources registers its destructor: the thread's
  // buffer is flushed when it exits.
  t_resources.armed = true;
  if (session->options().install_signal_handlers) {
    t_resources.EnsureAltStack();
  }
  return state;
}

}  // namespace tracer
}  // namespace clocksync
