// tracer/fatal_signals.h: completing the archive when the process is about
// to die of a signal. Synchronous fatal signals (SIGSEGV, SIGABRT, SIGBUS,
// SIGFPE, SIGILL, and SIGPIPE while at its default action) complete it in
// their handler, on the thread's alternate
// stack; SIGINT and SIGTERM (only when the program has no handler of its
// own) hand it to the tracer's service thread, which completes it with
// normal locks and raises the signal again. Exactly one party completes
// the archive of a session: Finalize, a fatal-signal handler, or the
// service thread (ClaimCompletion decides).
//
// The signal handlers are process-wide; everything here is async-signal-
// safe except Install/Restore.
#ifndef CLOCKSYNC_TRACER_FATAL_SIGNALS_H_
#define CLOCKSYNC_TRACER_FATAL_SIGNALS_H_

namespace clocksync {
namespace tracer {

// Completes the archive from a fatal-signal handler (locks only tried).
using CompleteFromSignalFn = void (*)();

// Installs the handlers: for the synchronous signals unless ignored; for
// SIGINT and SIGTERM only where the action is the default. `complete` runs
// in a fatal signal's handler.
void InstallSignalHandlers(CompleteFromSignalFn complete);
// Puts back the actions Install found.
void RestoreSignalHandlers();

// Clears the state of a previous session (Init).
void ResetSignalState();

// The service thread's eventfd, which the SIGINT/SIGTERM handler writes to
// (-1: none, the handler then takes the previous action at once).
void SetServiceEventFd(int fd);
// The SIGINT/SIGTERM handed to the service thread (0: none), cleared.
int TakeServiceSignal();

// The service thread's completion on SIGINT/SIGTERM: runs `complete` with
// normal locks, restores the previous actions and raises `signo` again,
// which ends the process (the service thread then waits for that).
void CompleteAndReRaise(int signo, void (*complete)(void*),
                                     void* arg);

// Finalize: claims the completion of the archive. False when a signal got
// there first (its handler or the service thread completes the archive and
// ends the process).
bool ClaimCompletion();
// Finalize, after completing (only when it claimed): lets signals through
// again; a SIGINT/SIGTERM that arrived meanwhile takes its (restored)
// action now.
void EndCompletion();

}  // namespace tracer
}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_FATAL_SIGNALS_H_
