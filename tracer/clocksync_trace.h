/*
 * tracer/clocksync_trace.h: the C API of clocksync's in-process tracer (the
 * C++ API, with the full description, is tracer/tracer.h).
 *
 *   cs_trace_options options;
 *   cs_trace_options_init(&options);
 *   options.trace_dir = "/tmp/traces";
 *   options.rank = rank;
 *   options.world_size = size;
 *   if (cs_trace_init(&options) < 0) {
 *     fprintf(stderr, "%s\n", cs_trace_last_error());  // names the cause
 *   }
 *   int32_t compute = cs_trace_region_def("compute");
 *   cs_trace_enter(compute);
 *   ...
 *   cs_trace_leave(compute);
 *   cs_trace_send(1, 7, 4096, CS_TRACE_COMM_WORLD);
 *   cs_trace_timesync();
 *   cs_trace_finalize();
 *
 * CLOCKSYNC_* environment variables override the options unless
 * read_environment is 0; docs/TRACER.md lists them.
 *
 * All functions return 0 (or an id >= 0) or a negative CLOCKSYNC_E* code
 * (client/clocksync_errors.h, the codes of clocksync's C APIs; described by
 * clocksync_strerror). cs_trace_last_error() says what failed.
 *
 * The recording functions (enter, leave, send, recv, collective_begin/end)
 * take no lock, allocate nothing and make no system call beyond the vDSO
 * clock read in steady state; they are thread-safe, as is cs_trace_abort.
 * init and finalize must not overlap with other calls.
 */
#ifndef CLOCKSYNC_TRACER_CLOCKSYNC_TRACE_H_
#define CLOCKSYNC_TRACER_CLOCKSYNC_TRACE_H_

#include <stddef.h>
#include <stdint.h>

#include "client/clocksync_errors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The world communicator: every rank of the program, in order. */
#define CS_TRACE_COMM_WORLD 0u

/* Collective operations (the values of clocksync::trace::CollectiveKind). */
typedef enum cs_trace_collective {
  CS_TRACE_BARRIER = 0,
  CS_TRACE_BCAST = 1,
  CS_TRACE_GATHER = 2,
  CS_TRACE_SCATTER = 3,
  CS_TRACE_REDUCE = 4,
  CS_TRACE_ALLREDUCE = 5,
  CS_TRACE_ALLTOALL = 6,
  CS_TRACE_ALLGATHER = 7,
  CS_TRACE_OTHER_COLLECTIVE = 8
} cs_trace_collective;

/* Tracer configuration; fill with cs_trace_options_init first. Strings
 * NULL: the default. Copied by cs_trace_init. */
typedef struct cs_trace_options {
  /* Directory the archive goes into (default "."). */
  const char* trace_dir;
  /* Archive name: <trace_dir>/<name>.r<rank> (default: the program name). */
  const char* name;
  /* This process's rank (default -1: the collector assigns one, 0 without
   * a collector; cs_trace_rank() tells) and the program's size (0:
   * unknown). The collector is set by CLOCKSYNC_COLLECTOR
   * (docs/COLLECTOR.md). */
  int32_t rank;
  int32_t world_size;
  /* The node's clocksyncd segment (default CLOCKSYNC_DEFAULT_SHM_PATH). */
  const char* shm_path;
  /* clocksyncd node id, recorded in the trace (default none). */
  const char* node_id;
  /* The master's probe address "host:port" (default none: no sessions). */
  const char* master_probe;
  /* The tree's shared probe key file, when the master authenticates probes
   * (clocksyncd --probe_key_file; default none). */
  const char* probe_key_file;
  /* Test features: the modeled-clock side file (default <shm_path>.model
   * if it exists; "none": never) and the master's segment for the ground
   * truth (default none). */
  const char* clock_model_file;
  const char* truth_master_shm;
  /* Most exchanges per sync session (default 100). */
  int32_t sync_max_messages;
  /* Complete the archive on SIGSEGV, SIGABRT, SIGPIPE, SIGINT, SIGTERM
     (default 1). */
  int32_t install_signal_handlers;
  /* Longest sync session, ns (default 1 s). */
  int64_t sync_max_duration_ns;
  /* Period of background sync sessions, ns (default 0: none). */
  int64_t sync_period_ns;
  /* Events per thread buffer (default 65536, 40 bytes each). */
  int64_t buffer_events;
  /* Let CLOCKSYNC_* environment variables override these (default 1). */
  int32_t read_environment;
  /* Zero. */
  int32_t reserved;
} cs_trace_options;

/* Fills *options with the defaults. */
void cs_trace_options_init(cs_trace_options* options);

/* Starts tracing (NULL: defaults). 0, or CLOCKSYNC_EALREADY,
 * CLOCKSYNC_EINVAL, CLOCKSYNC_ECONFIG (a bad CLOCKSYNC_* variable),
 * CLOCKSYNC_EIO (the trace cannot be written: an unwritable directory, an
 * archive directory that is not empty), CLOCKSYNC_ENOMEM;
 * cs_trace_last_error() explains. */
int cs_trace_init(const cs_trace_options* options);

/* Server-init: this process serves the collector itself and traces as
 * rank 0 of options->world_size processes (required, >= 1); the contact
 * string for the others (their CLOCKSYNC_COLLECTOR) is written into
 * contact[size]. Its cs_trace_finalize waits for every rank, writes the
 * run's archive (CLOCKSYNC_COLLECTOR_OUTPUT, default
 * <trace_dir>/<name>.otf2), prints the collector's summary on stderr, and
 * returns CLOCKSYNC_EIO when not every rank finished. Codes as
 * cs_trace_init, and CLOCKSYNC_EINVAL (a bad world size or output, a
 * buffer too small: 512 bytes always suffice). */
int cs_trace_server_init(const cs_trace_options* options, char* contact,
                         size_t size);

/* Client-init of the reverse start-up: opens a listening endpoint on
 * `listen` ("HOST:PORT"; NULL: CLOCKSYNC_COLLECTOR_LISTEN, default
 * 0.0.0.0:0) and writes its contact string into contact[size], for
 * `clocksync-collector CONTACT...` (the i-th string is rank i). The next
 * cs_trace_init waits for the collector's dial (cs_trace_abort ends the
 * wait), then connects. 0, CLOCKSYNC_EINVAL (a bad address, a buffer too
 * small), CLOCKSYNC_EIO (cannot listen), CLOCKSYNC_EALREADY. */
int cs_trace_client_listen(const char* listen, char* contact, size_t size);

/* Stops tracing and completes the archive. 0, CLOCKSYNC_ENOTINIT, or
 * CLOCKSYNC_EIO when (part of) the trace could not be written (a full
 * disk). */
int cs_trace_finalize(void);

/* Ends a tracing phase: as cs_trace_finalize, and the next cs_trace_init
 * continues the trace as its next phase with the same rank (the collector
 * keeps the rank open between phases and joins them; without one each
 * phase has its own archive, <name>.r<rank>.p<phase> after the first).
 * Init and finalize_phase may repeat; cs_trace_finalize ends the last
 * phase (or the exit does). Codes as cs_trace_finalize. */
int cs_trace_finalize_phase(void);

/* From another thread: makes a cs_trace_init that waits for the collector
 * (nothing started), or a cs_trace_attach waiting for its children (the
 * group fails), return CLOCKSYNC_EABORTED within ~50 ms. 0 when one was
 * waiting, CLOCKSYNC_ENOTINIT when none was. */
int cs_trace_abort(void);

/* Defines a region; returns its id (>= 0; the same for the same name) or a
 * negative code (CLOCKSYNC_EINVAL, CLOCKSYNC_ENOTINIT, CLOCKSYNC_ENOMEM). */
int32_t cs_trace_region_def(const char* name);

/* Defines a communicator of `n` ranks: ranks[i] is the program rank of its
 * rank i. Returns its id (>= 1) or a negative code (CLOCKSYNC_EINVAL for
 * bad ranks, CLOCKSYNC_ENOTINIT, CLOCKSYNC_ENOMEM beyond 1023). */
int32_t cs_trace_comm_def(const char* name, const int32_t* ranks, int32_t n);

/* Recording. `peer` and `root` are ranks within `comm`; root -1: none.
 * 0, CLOCKSYNC_ENOTINIT, or CLOCKSYNC_EINVAL (an undefined region or
 * communicator, a peer or root outside the communicator, a collective end
 * without a begin; nothing recorded). */
int cs_trace_enter(uint32_t region);
int cs_trace_leave(uint32_t region);
int cs_trace_send(int32_t peer, uint32_t tag, uint64_t bytes, uint32_t comm);
int cs_trace_recv(int32_t peer, uint32_t tag, uint64_t bytes, uint32_t comm);
int cs_trace_collective_begin(cs_trace_collective kind, uint32_t comm,
                              int32_t root, uint64_t bytes_sent);
int cs_trace_collective_end(cs_trace_collective kind, uint32_t comm,
                            int32_t root, uint64_t bytes_received);

/* Runs a sync session with the master now (blocks up to
 * sync_max_duration_ns). 0, CLOCKSYNC_ENOTINIT or CLOCKSYNC_ENOMASTER (no
 * master configured, or it did not answer: an empty session is recorded
 * and tracing goes on). */
int cs_trace_timesync(void);

/* This process's rank in the current (or last) tracing session: the one
 * asked for or the collector's; -1 before any cs_trace_init. */
int32_t cs_trace_rank(void);
/* Ranks in the program as the session knows them; 0: unknown. */
int32_t cs_trace_world_size(void);
/* Fail-safe: the ranks the collector said were lost (killed, cut off),
 * in the order told: up to `capacity` of them into ranks[]; returns how
 * many there are (may exceed capacity; 0 without a collector), or
 * CLOCKSYNC_EINVAL. The current session's (the last one's after
 * finalize). A program may poll it when a peer stops answering. */
int32_t cs_trace_peer_lost(int32_t* ranks, int32_t capacity);

/* Dynamic spawning (docs/COLLECTOR.md, "Dynamic spawning"): a process
 * streaming to a collector starts children and connects them into the run.
 *
 *   char contact[512];
 *   cs_trace_attach_contact(contact, sizeof(contact));
 *   ... start the children; each gets `contact` (through a pipe, say) and
 *       calls cs_trace_init with CLOCKSYNC_COLLECTOR=contact ...
 *   uint32_t children, family;
 *   cs_trace_attach(n, pids, &children, &family);
 *
 * The contact string for the children of this process's next attach into
 * contact[size] (512 bytes always suffice). 0, CLOCKSYNC_ENOTINIT,
 * CLOCKSYNC_EINVAL (buffer), CLOCKSYNC_EIO (the trace goes to a local
 * archive: no collector to attach to). */
int cs_trace_attach_contact(char* contact, size_t size);
/* Waits until the n children started with that contact string joined (at
 * most CLOCKSYNC_COLLECTOR_TIMEOUT_MS); the collector gives them the ranks
 * after the run's. pids: the children's process ids (only those are
 * taken, and a timeout names the missing ones), or NULL. Defines the
 * group's two communicators in this process's trace and writes their ids:
 * *children_comm the children among themselves (child i is its rank i),
 * *family_comm this process (rank 0) and the children (i + 1); either
 * pointer may be NULL. 0, CLOCKSYNC_ENOTINIT, CLOCKSYNC_EINVAL,
 * CLOCKSYNC_ETIMEDOUT (not every child came; cs_trace_last_error names
 * them; those that did fall back to local archives), CLOCKSYNC_EABORTED
 * (cs_trace_abort from another thread), CLOCKSYNC_EIO (no
 * collector, or it refused). The next cs_trace_attach_contact is a new
 * group's. */
int cs_trace_attach(int32_t n, const int64_t* pids, uint32_t* children_comm,
                    uint32_t* family_comm);
/* In a child: the group that attached it, its communicators defined at its
 * cs_trace_init as in the parent. 0 and the parent's rank and the ids (any
 * pointer may be NULL), or CLOCKSYNC_ENOTINIT when this process was not
 * attached (or not initialized). */
int cs_trace_attached(int32_t* parent_rank, uint32_t* children_comm,
                      uint32_t* family_comm);

/* The message of the last failed cs_trace_init, cs_trace_finalize,
 * cs_trace_*_def, cs_trace_timesync or cs_trace_attach* on the calling
 * thread; "" if none.
 * Valid until the next such call on this thread. */
const char* cs_trace_last_error(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CLOCKSYNC_TRACER_CLOCKSYNC_TRACE_H_ */
