// tracer/locks.h: the two locks of the tracer that a fatal-signal handler
// can take without risking a deadlock: SwapLock (a spin lock for a buffer
// hand-off, tried for a bounded time) and OwnedMutex (a mutex that knows
// its owner, so a handler never waits for the thread it interrupted).
#ifndef CLOCKSYNC_TRACER_LOCKS_H_
#define CLOCKSYNC_TRACER_LOCKS_H_

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace clocksync {
namespace tracer {

// How long a fatal-signal handler waits for a lock held by another thread.
inline constexpr int kSignalLockWaitMs = 2000;

// The kernel's id of the calling thread (for lock-owner checks in signal
// handlers; gettid is async-signal-safe).
inline int32_t ThreadId() noexcept {
  return static_cast<int32_t>(syscall(SYS_gettid));
}

// Sleeps 1 ms (async-signal-safe).
inline void SleepOneMs() noexcept {
  const struct timespec one_ms = {0, 1'000'000};
  nanosleep(&one_ms, nullptr);
}

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
      SleepOneMs();
    }
    return false;
  }
  // lock() or, from a fatal-signal handler, TryLockForSignal().
  bool LockUnlessSignal(bool from_signal) {
    if (from_signal) return TryLockForSignal();
    lock();
    return true;
  }

 private:
  std::mutex mutex_;
  std::atomic<int32_t> owner_{0};
};

}  // namespace tracer
}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_LOCKS_H_
