// tracer/fatal_signals.cc: the signal handlers and the completion state
// machine (fatal_signals.h).

#include "tracer/fatal_signals.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "tracer/locks.h"

namespace clocksync {
namespace tracer {
namespace {

// Signals the tracer completes the archive on. Synchronous ones are handled
// in the handler; asynchronous ones (SIGINT, SIGTERM) by the service thread.
constexpr int kSyncSignals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
// Synchronous too, but only at its default action (death): a write to a
// socket or pipe whose reader is gone. A program that ignores or handles
// SIGPIPE keeps doing so.
constexpr int kSyncSignalsIfDefault[] = {SIGPIPE};
constexpr int kAsyncSignals[] = {SIGINT, SIGTERM};

// Who completes the archive: 0 nobody yet; 1 someone is (a fatal-signal
// handler, the service thread on SIGINT/SIGTERM, or Finalize), the kernel
// thread id in g_completing_tid; 2 a signal completed it.
std::atomic<int> g_signal_flush_state{0};
std::atomic<int32_t> g_completing_tid{0};
// The previous action of each signal the tracer installed a handler for.
struct sigaction g_previous_action[NSIG];
bool g_installed[NSIG] = {};
// The service thread's eventfd (-1: none); the async handler writes to it.
std::atomic<int> g_service_eventfd{-1};
// An asynchronous signal handed to the service thread, which completes the
// archive and raises it again.
std::atomic<int> g_service_signal{0};
// An asynchronous signal that arrived while Finalize completed the archive;
// Finalize raises it again at its end.
std::atomic<int> g_pending_signal{0};
// What a fatal-signal handler runs.
std::atomic<CompleteFromSignalFn> g_complete{nullptr};

// Restores the previous action of `signo` and makes the signal pending
// again, so that it takes that action once the handler returns (the signal
// is blocked while its handler runs).
void ReRaise(int signo) {
  sigaction(signo, &g_previous_action[signo], nullptr);
  g_installed[signo] = false;
  raise(signo);
}

void FatalSignalHandler(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  int expected = 0;
  if (g_signal_flush_state.compare_exchange_strong(expected, 1)) {
    g_completing_tid.store(ThreadId(), std::memory_order_relaxed);
    if (CompleteFromSignalFn complete =
            g_complete.load(std::memory_order_acquire)) {
      complete();
    }
    g_signal_flush_state.store(2, std::memory_order_release);
  } else if (expected == 1 &&
             g_completing_tid.load(std::memory_order_relaxed) != ThreadId()) {
    // Another thread is completing the archive: let it finish first (but
    // never wait for ourselves: a crash inside Finalize's own writing).
    for (int waited_ms = 0;
         waited_ms < 10 * kSignalLockWaitMs &&
         g_signal_flush_state.load(std::memory_order_acquire) == 1;
         ++waited_ms) {
      SleepOneMs();
    }
  }
  ReRaise(signo);
  errno = saved_errno;
}

void AsyncSignalHandler(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const int fd = g_service_eventfd.load(std::memory_order_acquire);
  int expected = 0;
  if (fd >= 0 && g_signal_flush_state.compare_exchange_strong(expected, 1)) {
    // The service thread completes the archive and re-raises; this thread
    // goes on meanwhile (it may hold a lock the service thread needs).
    g_service_signal.store(signo, std::memory_order_release);
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t written = write(fd, &one, sizeof(one));
  } else if (expected == 1) {
    // Finalize (or a fatal signal) is completing the archive: Finalize
    // raises the signal again when it is done; a fatal signal ends the
    // process anyway.
    g_pending_signal.store(signo, std::memory_order_release);
  } else {
    // No service thread and nobody completing: the previous action now.
    ReRaise(signo);
  }
  errno = saved_errno;
}

void Install(int signo, void (*handler)(int, siginfo_t*, void*),
             bool only_if_default) {
  struct sigaction previous;
  if (sigaction(signo, nullptr, &previous) != 0) return;
  const bool is_default =
      !(previous.sa_flags & SA_SIGINFO) && previous.sa_handler == SIG_DFL;
  const bool is_ignored =
      !(previous.sa_flags & SA_SIGINFO) && previous.sa_handler == SIG_IGN;
  // An ignored signal stays ignored; the program's own SIGINT/SIGTERM
  // handler stays in charge (it is expected to call Finalize).
  if (is_ignored || (only_if_default && !is_default)) return;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = handler;
  sigfillset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  g_previous_action[signo] = previous;
  if (sigaction(signo, &action, nullptr) == 0) g_installed[signo] = true;
}

}  // namespace

void InstallSignalHandlers(CompleteFromSignalFn complete) {
  g_complete.store(complete, std::memory_order_release);
  for (int signo : kSyncSignals) Install(signo, FatalSignalHandler, false);
  for (int signo : kSyncSignalsIfDefault) {
    Install(signo, FatalSignalHandler, true);
  }
  for (int signo : kAsyncSignals) Install(signo, AsyncSignalHandler, true);
}

void RestoreSignalHandlers() {
  for (int signo = 1; signo < NSIG; ++signo) {
    if (!g_installed[signo]) continue;
    sigaction(signo, &g_previous_action[signo], nullptr);
    g_installed[signo] = false;
  }
}

void ResetSignalState() {
  g_signal_flush_state.store(0, std::memory_order_relaxed);
  g_pending_signal.store(0, std::memory_order_relaxed);
  g_service_signal.store(0, std::memory_order_relaxed);
}

void SetServiceEventFd(int fd) {
  g_service_eventfd.store(fd, std::memory_order_release);
}

int TakeServiceSignal() { return g_service_signal.exchange(0); }

void CompleteAndReRaise(int signo, void (*complete)(void*), void* arg) {
  g_completing_tid.store(ThreadId(), std::memory_order_relaxed);
  complete(arg);
  g_signal_flush_state.store(2, std::memory_order_release);
  RestoreSignalHandlers();
  // Delivered to a thread that does not block it: the previous (default)
  // action ends the process.
  kill(getpid(), signo);
  // Should the program survive it (it installed a handler meanwhile), this
  // thread has nothing left to do.
  pause();
}

bool ClaimCompletion() {
  int expected = 0;
  const bool mine = g_signal_flush_state.compare_exchange_strong(expected, 1);
  if (mine) g_completing_tid.store(ThreadId(), std::memory_order_relaxed);
  return mine;
}

void EndCompletion() {
  g_completing_tid.store(0, std::memory_order_relaxed);
  g_signal_flush_state.store(0, std::memory_order_release);
  // A SIGINT/SIGTERM that arrived meanwhile takes its (restored) action.
  if (const int signo = g_pending_signal.exchange(0)) raise(signo);
}

}  // namespace tracer
}  // namespace clocksync
