// client/clocksync_errors.cc: clocksync_strerror, the one description of
// every CLOCKSYNC_E* code (clocksync_errors.h).

#include "client/clocksync_errors.h"

extern "C" const char* clocksync_strerror(int code) {
  switch (code) {
    case CLOCKSYNC_OK:
      return "success";
    case CLOCKSYNC_EINVAL:
      return "invalid argument";
    case CLOCKSYNC_ENODAEMON:
      return "no clocksync daemon: the shared-memory file does not exist";
    case CLOCKSYNC_EIO:
      return "cannot open, map or write a file";
    case CLOCKSYNC_EBADMAGIC:
      return "not a clocksync shared-memory segment (bad magic)";
    case CLOCKSYNC_EVERSION:
      return "unsupported shared-memory layout version";
    case CLOCKSYNC_EBADSIZE:
      return "shared-memory segment has the wrong size";
    case CLOCKSYNC_EBUSY:
      return "seqlock retry limit reached (writer busy)";
    case CLOCKSYNC_ESTALE:
      return "mapping is stale (daemon not updating); bound widened";
    case CLOCKSYNC_ENOTSYNCED:
      return "daemon is not synchronized yet";
    case CLOCKSYNC_ENOMEM:
      return "out of memory or limit reached";
    case CLOCKSYNC_ENOTINIT:
      return "tracer not initialized";
    case CLOCKSYNC_EALREADY:
      return "tracer already initialized";
    case CLOCKSYNC_ECONFIG:
      return "bad CLOCKSYNC_* environment variable";
    case CLOCKSYNC_ENOMASTER:
      return "master not configured or not answering";
    case CLOCKSYNC_EABORTED:
      return "tracer init aborted from another thread";
    case CLOCKSYNC_ETIMEDOUT:
      return "tracer attach timed out: not every child connected";
    default:
      return "unknown error";
  }
}
