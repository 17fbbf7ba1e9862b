/*
 * examples/attach_tree.c: dynamic spawning (docs/COLLECTOR.md, "Dynamic
 * spawning") in C over the tracer's C API, as the Intel Trace Collector's
 * fork examples do it: a traced process forks children, hands each its
 * attach contact string through a pipe, and attaches them; each child does
 * the same in turn, down to a depth.
 *
 *   attach_tree DEPTH FANOUT [--shm_by_depth=A,B,...] [--fault=F]
 *
 * The root is started with CLOCKSYNC_COLLECTOR set (the collector first);
 * DEPTH 0 is the root alone, DEPTH 2 FANOUT 2 makes 1 + 2 + 4 processes.
 * Each child is fork() + exec() of this program (a fork of a traced
 * process must exec before tracing: it holds a copy of the tracer without
 * its threads) with two pipes: the parent sends the contact string and
 * then its messages down, the child answers up. In every group:
 *   - a broadcast in the group's parent+children communicator: the parent
 *     sends one message to each child (traced send, then the pipe), each
 *     child receives it;
 *   - a barrier in the children's communicator, relayed by the parent:
 *     each child sends "arrive" to the parent (a traced message in the
 *     family communicator), the parent answers "leave" when all arrived;
 *   - at the end each child reports the processes of its subtree.
 * --shm_by_depth: the clocksyncd segment of each depth (the processes of
 * depth d use the d-th, cyclically: nodes with different clocks).
 * --fault (the root's last child only): "never" exits before its init (the
 * root's attach times out naming its pid), "token" gets a contact string
 * with a wrong token (refused: it falls back to a local archive; the
 * attach times out naming it), "kill" kills itself (SIGKILL) right after
 * its attach (the others are told: cs_trace_peer_lost).
 * The root prints "processes N" (every process of the tree that finished),
 * "attach failed: <message>" or "lost rank R". Exit status 0 when every
 * process did its part.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tracer/clocksync_trace.h"

enum { CONTACT_BYTES = 512, MAX_FANOUT = 8, LINE_BYTES = 600 };
enum { TAG_BCAST = 1, TAG_ARRIVE = 2 };

static const char* g_program; /* /proc/self/exe, for the children's exec */
static const char* g_shm_by_depth = "";
static const char* g_fault = "";

/* Reads a line from `fd` into `line` (without the newline). */
static int ReadLine(int fd, char* line, size_t size) {
  size_t n = 0;
  while (n + 1 < size) {
    char c;
    if (read(fd, &c, 1) != 1) return -1;
    if (c == '\n') break;
    line[n++] = c;
  }
  line[n] = '\0';
  return 0;
}

/* CLOCKSYNC_SHM for `depth` from --shm_by_depth (cyclically). */
static void UseShmOfDepth(int depth) {
  if (g_shm_by_depth[0] == '\0') return;
  int count = 1;
  for (const char* p = g_shm_by_depth; *p; ++p) count += *p == ',';
  int want = depth % count;
  const char* start = g_shm_by_depth;
  while (want-- > 0) start = strchr(start, ',') + 1;
  const char* end = strchr(start, ',');
  char shm[LINE_BYTES];
  const size_t n = end ? (size_t)(end - start) : strlen(start);
  if (n >= sizeof(shm)) return;
  memcpy(shm, start, n);
  shm[n] = '\0';
  setenv("CLOCKSYNC_SHM", shm, 1);
}

static void Work(uint32_t region) {
  cs_trace_enter(region);
  volatile uint64_t sum = 0;
  for (int i = 0; i < 20000; ++i) sum += (uint64_t)i * i;
  cs_trace_leave(region);
}

/* A child's part in its parent's group (attached as child i). */
static int ChildOfGroup(int down, int up) {
  int32_t parent = -1;
  uint32_t children_comm = 0, family_comm = 0;
  if (cs_trace_attached(&parent, &children_comm, &family_comm) != 0) {
    fprintf(stderr, "attach_tree: rank %d was not attached\n", cs_trace_rank());
    return 1;
  }
  char line[LINE_BYTES];
  /* The broadcast from the parent (family rank 0). */
  cs_trace_collective_begin(CS_TRACE_BCAST, family_comm, 0, 0);
  if (ReadLine(down, line, sizeof(line)) != 0 || strcmp(line, "bcast") != 0) {
    return 1;
  }
  cs_trace_recv(0, TAG_BCAST, 8, family_comm);
  cs_trace_collective_end(CS_TRACE_BCAST, family_comm, 0, 8);
  if (strcmp(g_fault, "kill-me") == 0) raise(SIGKILL);
  /* The barrier among the children, relayed by the parent. */
  cs_trace_collective_begin(CS_TRACE_BARRIER, children_comm, -1, 0);
  cs_trace_send(0, TAG_ARRIVE, 8, family_comm);
  if (dprintf(up, "arrive\n") < 0) return 1;
  if (ReadLine(down, line, sizeof(line)) != 0 || strcmp(line, "leave") != 0) {
    return 1;
  }
  cs_trace_collective_end(CS_TRACE_BARRIER, children_comm, -1, 0);
  return 0;
}

/* Waits up to 5 s for the collector to tell that `rank` was lost. */
static int ToldLost(int32_t rank) {
  for (int i = 0; i < 100; ++i) {
    int32_t lost[64];
    const int32_t n = cs_trace_peer_lost(lost, 64);
    for (int32_t j = 0; j < n && j < 64; ++j) {
      if (lost[j] == rank) return 1;
    }
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  return 0;
}

/* Forks, contacts and attaches `fanout` children of depth `depth`, runs the
 * group, and returns the processes of their subtrees (-1: failed). */
static int ParentOfGroup(int depth, int remaining, int fanout, int root,
                         uint32_t region) {
  char contact[CONTACT_BYTES];
  if (cs_trace_attach_contact(contact, sizeof(contact)) != 0) {
    fprintf(stderr, "attach_tree: attach contact: %s\n", cs_trace_last_error());
    return -1;
  }
  int down[MAX_FANOUT], up[MAX_FANOUT];
  int64_t pids[MAX_FANOUT];
  for (int i = 0; i < fanout; ++i) {
    int d[2], u[2];
    if (pipe2(d, O_CLOEXEC) != 0 || pipe2(u, O_CLOEXEC) != 0) return -1;
    const char* fault = root && i == fanout - 1 ? g_fault : "";
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      /* The child keeps its two ends across the exec. */
      fcntl(d[0], F_SETFD, 0);
      fcntl(u[1], F_SETFD, 0);
      char args[5][32];
      snprintf(args[0], sizeof(args[0]), "%d", remaining - 1);
      snprintf(args[1], sizeof(args[1]), "%d", fanout);
      snprintf(args[2], sizeof(args[2]), "%d", d[0]);
      snprintf(args[3], sizeof(args[3]), "%d", u[1]);
      snprintf(args[4], sizeof(args[4]), "%d", depth + 1);
      char shm_flag[LINE_BYTES + 32], fault_flag[64];
      snprintf(shm_flag, sizeof(shm_flag), "--shm_by_depth=%s", g_shm_by_depth);
      snprintf(fault_flag, sizeof(fault_flag), "--fault=%s",
               strcmp(fault, "kill") == 0 ? "kill-me" : fault);
      execl(g_program, g_program, "--child", args[0], args[1], args[2],
            args[3], args[4], shm_flag, fault_flag, (char*)NULL);
      _exit(127);
    }
    close(d[0]);
    close(u[1]);
    down[i] = d[1];
    up[i] = u[0];
    pids[i] = pid;
    if (strcmp(fault, "token") == 0) {
      /* Another token: the first hex digit changed. */
      char wrong[CONTACT_BYTES];
      snprintf(wrong, sizeof(wrong), "%s", contact);
      wrong[0] = wrong[0] == '0' ? '1' : '0';
      dprintf(down[i], "%s\n", wrong);
    } else {
      dprintf(down[i], "%s\n", contact);
    }
  }
  uint32_t children_comm = 0, family_comm = 0;
  int processes = 0;
  int failed = 0;
  if (cs_trace_attach(fanout, pids, &children_comm, &family_comm) != 0) {
    printf("attach failed: %s\n", cs_trace_last_error());
    fflush(stdout);
    failed = 1;
  } else {
    Work(region);
    /* Broadcast to every child. */
    cs_trace_collective_begin(CS_TRACE_BCAST, family_comm, 0, 8);
    for (int i = 0; i < fanout; ++i) {
      cs_trace_send(i + 1, TAG_BCAST, 8, family_comm);
      dprintf(down[i], "bcast\n");
    }
    cs_trace_collective_end(CS_TRACE_BCAST, family_comm, 0, 0);
    /* Relay the children's barrier. */
    int arrived = 0;
    for (int i = 0; i < fanout; ++i) {
      char line[LINE_BYTES];
      if (ReadLine(up[i], line, sizeof(line)) == 0 &&
          strcmp(line, "arrive") == 0) {
        cs_trace_recv(i + 1, TAG_ARRIVE, 8, family_comm);
        ++arrived;
      }
    }
    for (int i = 0; i < fanout; ++i) dprintf(down[i], "leave\n");
    if (arrived != fanout) failed = 1;
  }
  /* The subtrees' sizes, once each child finished. */
  for (int i = 0; i < fanout; ++i) {
    char line[LINE_BYTES];
    int n = 0;
    if (ReadLine(up[i], line, sizeof(line)) == 0 &&
        sscanf(line, "done %d", &n) == 1) {
      processes += n;
    } else {
      failed = 1;
    }
    int status = 0;
    waitpid((pid_t)pids[i], &status, 0);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && root &&
        strcmp(g_fault, "kill") == 0 && i == fanout - 1) {
      /* The child killed after its attach: its rank is fanout after the
       * run's world, told by the collector. */
      const int32_t rank = cs_trace_world_size() + i;
      if (ToldLost(rank)) {
        printf("lost rank %d\n", rank);
        fflush(stdout);
      } else {
        fprintf(stderr, "attach_tree: not told that rank %d was lost\n", rank);
      }
    }
    close(down[i]);
    close(up[i]);
  }
  return failed ? -1 : processes;
}

/* One process of the tree: init, its part in its parent's group, its own
 * group, finalize. Returns the processes of its subtree (-1: failed). */
static int Node(int depth, int remaining, int fanout, int down, int up) {
  UseShmOfDepth(depth);
  if (down >= 0) {
    char contact[CONTACT_BYTES];
    if (ReadLine(down, contact, sizeof(contact)) != 0) return -1;
    if (strcmp(g_fault, "never") == 0) return -1; /* never connects */
    setenv("CLOCKSYNC_COLLECTOR", contact, 1);
  }
  cs_trace_options options;
  cs_trace_options_init(&options);
  if (cs_trace_init(&options) != 0) {
    fprintf(stderr, "attach_tree: init: %s\n", cs_trace_last_error());
    return -1;
  }
  const int32_t region = cs_trace_region_def("work");
  int failed = region < 0;
  Work((uint32_t)region);
  if (down >= 0 && ChildOfGroup(down, up) != 0) failed = 1;
  int processes = 1;
  if (remaining > 0) {
    const int sub = ParentOfGroup(depth, remaining, fanout, down < 0,
                                  (uint32_t)region);
    if (sub < 0) {
      failed = 1;
    } else {
      processes += sub;
    }
  }
  if (cs_trace_finalize() != 0) {
    fprintf(stderr, "attach_tree: finalize: %s\n", cs_trace_last_error());
    failed = 1;
  }
  return failed ? -1 : processes;
}

int main(int argc, char** argv) {
  g_program = "/proc/self/exe";
  /* A write to a child that died (--fault=kill) fails instead of killing. */
  signal(SIGPIPE, SIG_IGN);
  int child = argc > 1 && strcmp(argv[1], "--child") == 0;
  const int first = child ? 2 : 1;
  const int positional = child ? 5 : 2;
  if (argc < first + positional) {
    fprintf(stderr,
            "usage: attach_tree DEPTH FANOUT [--shm_by_depth=A,B,...] "
            "[--fault=never|token|kill]\n");
    return 2;
  }
  for (int i = first + positional; i < argc; ++i) {
    if (strncmp(argv[i], "--shm_by_depth=", 15) == 0) {
      g_shm_by_depth = argv[i] + 15;
    } else if (strncmp(argv[i], "--fault=", 8) == 0) {
      g_fault = argv[i] + 8;
    } else {
      fprintf(stderr, "attach_tree: unknown flag '%s'\n", argv[i]);
      return 2;
    }
  }
  const int remaining = atoi(argv[first]);
  const int fanout = atoi(argv[first + 1]);
  if (remaining < 0 || remaining > 4 || fanout < 1 || fanout > MAX_FANOUT) {
    fprintf(stderr, "attach_tree: DEPTH 0..4, FANOUT 1..%d\n", MAX_FANOUT);
    return 2;
  }
  if (!child) {
    const int processes = Node(0, remaining, fanout, -1, -1);
    if (processes > 0) printf("processes %d\n", processes);
    return processes > 0 ? 0 : 1;
  }
  const int down = atoi(argv[first + 2]);
  const int up = atoi(argv[first + 3]);
  const int depth = atoi(argv[first + 4]);
  const int processes = Node(depth, remaining, fanout, down, up);
  if (processes > 0) dprintf(up, "done %d\n", processes);
  return processes > 0 ? 0 : 1;
}
