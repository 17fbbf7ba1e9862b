/*
 * client/clocksync_errors.h: the error codes of clocksync's C APIs, the time
 * reader (client/clocksync.h) and the tracer (tracer/clocksync_trace.h),
 * defined once, with one message function.
 *
 * Every function of those APIs returns 0 (or, for the tracer's *_def
 * functions, an id >= 0) on success and a negative CLOCKSYNC_E* code on
 * failure. A code means the same wherever it is returned; the comment of
 * each says which API returns it. clocksync_strerror gives a static
 * description of any code; the per-call messages that name paths and
 * causes are clocksync_open_error() and cs_trace_last_error().
 */
#ifndef CLOCKSYNC_CLIENT_CLOCKSYNC_ERRORS_H_
#define CLOCKSYNC_CLIENT_CLOCKSYNC_ERRORS_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: 0 is success, every error is negative. */
enum {
  CLOCKSYNC_OK = 0,
  /* A NULL pointer or an invalid option or argument was passed (tracer: an
   * undefined region or communicator, a peer or root outside the
   * communicator, a collective end without a begin). */
  CLOCKSYNC_EINVAL = -1,
  /* Reader: the segment file does not exist: no clocksyncd publishes at
   * the path. */
  CLOCKSYNC_ENODAEMON = -2,
  /* A file cannot be used. Reader: open/fstat/mmap of the segment failed
   * (e.g. permission denied). Tracer: the trace cannot be written (an
   * unwritable directory, a full disk, an archive directory that is not
   * empty). The last-error message names the path. */
  CLOCKSYNC_EIO = -3,
  /* Reader: the file is not a clocksync segment (wrong magic). */
  CLOCKSYNC_EBADMAGIC = -4,
  /* Reader: the segment has a layout version this library does not read. */
  CLOCKSYNC_EVERSION = -5,
  /* Reader: the file is smaller than its header or its sizes are
   * inconsistent. */
  CLOCKSYNC_EBADSIZE = -6,
  /* Reader: the seqlock retry limit was hit (a writer kept the section
   * busy). */
  CLOCKSYNC_EBUSY = -7,
  /* Reader: the mapping was last updated longer ago than the staleness
   * limit; the out-struct holds the extrapolated time with a widened bound
   * and the CLOCKSYNC_STATUS_STALE flag. */
  CLOCKSYNC_ESTALE = -8,
  /* Reader: the daemon has no estimate of global time yet
   * (UNSYNCED/UNSPECIFIED); the out-struct holds what the daemon
   * published, with its status. */
  CLOCKSYNC_ENOTSYNCED = -9,
  /* Out of memory (reader: for the handle), or a limit reached (tracer:
   * e.g. communicators). */
  CLOCKSYNC_ENOMEM = -10,
  /* Tracer: not initialized (or already finalized). */
  CLOCKSYNC_ENOTINIT = -11,
  /* Tracer: cs_trace_init while the tracer is already initialized. */
  CLOCKSYNC_EALREADY = -12,
  /* Tracer: a CLOCKSYNC_* environment variable has a bad value (named by
   * cs_trace_last_error). */
  CLOCKSYNC_ECONFIG = -13,
  /* Tracer: cs_trace_timesync found no master configured, or it did not
   * answer; an empty session was recorded. Tracing goes on. */
  CLOCKSYNC_ENOMASTER = -14,
  /* Tracer: cs_trace_init was aborted by cs_trace_abort from another
   * thread while it waited for the collector; nothing was started. */
  CLOCKSYNC_EABORTED = -15,
  /* Tracer: cs_trace_attach waited in vain: not every child connected in
   * time (cs_trace_last_error names those that did not). */
  CLOCKSYNC_ETIMEDOUT = -16
};

/* A static description of an error code ("unknown error" for others). */
const char* clocksync_strerror(int code);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CLOCKSYNC_CLIENT_CLOCKSYNC_ERRORS_H_ */
