/*
 * examples/collector_modes.c: the three start-up modes of trace collection
 * (docs/COLLECTOR.md), in C over the tracer's C API. A launcher forks N
 * processes (ranks), each traces a little work, and their traces end up in
 * one archive:
 *
 *   collector_modes first N       the collector was started first: every
 *                                 process gets its contact string in
 *                                 CLOCKSYNC_COLLECTOR (inherited) and the
 *                                 collector assigns the ranks
 *   collector_modes server N      server-init: the launcher is rank 0 and
 *                                 the collector (cs_trace_server_init); it
 *                                 hands its contact string to the N-1
 *                                 others through pipes; its finalize
 *                                 writes the run's archive
 *                                 (CLOCKSYNC_COLLECTOR_OUTPUT)
 *   collector_modes listen N COLLECTOR [FLAG...]
 *                                 reverse start-up: every process opens a
 *                                 listening endpoint (cs_trace_client_listen)
 *                                 and sends its contact string to the
 *                                 launcher through a pipe; the launcher
 *                                 starts the collector program COLLECTOR
 *                                 with FLAGs and the N contact strings, and
 *                                 each process's init waits for its dial
 *
 * The processes are forked before any tracer call (a fork copies no
 * tracer). Each records EVENTS_PER_RANK events of a region "work" and one
 * message around a ring. Exit status: 0 when every process (and the
 * collector it started) succeeded.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tracer/clocksync_trace.h"

enum { PAIRS_PER_RANK = 500, CONTACT_BYTES = 512, MAX_RANKS = 64 };

/* Traces one rank's work after its init succeeded. */
static int Work(void) {
  const int32_t rank = cs_trace_rank();
  const int32_t size = cs_trace_world_size();
  const int32_t work = cs_trace_region_def("work");
  if (work < 0) return 1;
  for (int i = 0; i < PAIRS_PER_RANK; ++i) {
    if (cs_trace_enter((uint32_t)work) != 0) return 1;
    if (cs_trace_leave((uint32_t)work) != 0) return 1;
  }
  if (size > 1) {
    cs_trace_send((rank + 1) % size, 1, 64, CS_TRACE_COMM_WORLD);
  }
  return 0;
}

static int Finalize(const char* what) {
  if (cs_trace_finalize() != 0) {
    fprintf(stderr, "%s: finalize: %s\n", what, cs_trace_last_error());
    return 1;
  }
  return 0;
}

static int InitAndWork(const char* what) {
  cs_trace_options options;
  cs_trace_options_init(&options);
  if (cs_trace_init(&options) != 0) {
    fprintf(stderr, "%s: init: %s\n", what, cs_trace_last_error());
    return 1;
  }
  const int failed = Work();
  return Finalize(what) | failed;
}

/* Reads a line (a contact string) from `fd` into `line`. */
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

static int WaitAll(const pid_t* pids, int n) {
  int failed = 0;
  for (int i = 0; i < n; ++i) {
    int status = 0;
    if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      ++failed;
    }
  }
  return failed;
}

static int First(int n) {
  pid_t pids[MAX_RANKS];
  for (int i = 0; i < n; ++i) {
    pids[i] = fork();
    if (pids[i] == 0) _exit(InitAndWork("first"));
  }
  return WaitAll(pids, n) == 0 ? 0 : 1;
}

static int Server(int n) {
  pid_t pids[MAX_RANKS];
  int pipes[MAX_RANKS][2];
  for (int i = 1; i < n; ++i) {
    if (pipe(pipes[i]) != 0) return 1;
    pids[i] = fork();
    if (pids[i] == 0) {
      char contact[CONTACT_BYTES];
      close(pipes[i][1]);
      if (ReadLine(pipes[i][0], contact, sizeof(contact)) != 0) _exit(1);
      setenv("CLOCKSYNC_COLLECTOR", contact, 1);
      _exit(InitAndWork("server mode, client"));
    }
    close(pipes[i][0]);
  }
  cs_trace_options options;
  cs_trace_options_init(&options);
  options.world_size = n;
  char contact[CONTACT_BYTES];
  int failed = 0;
  if (cs_trace_server_init(&options, contact, sizeof(contact)) != 0) {
    fprintf(stderr, "server-init: %s\n", cs_trace_last_error());
    contact[0] = '\0';
    failed = 1;
  }
  printf("server contact %s\n", contact);
  fflush(stdout);
  for (int i = 1; i < n; ++i) {
    dprintf(pipes[i][1], "%s\n", contact);
    close(pipes[i][1]);
  }
  if (!failed) {
    failed |= Work();
    /* Waits for every rank and writes the run's archive. */
    failed |= Finalize("server");
  }
  return (WaitAll(pids + 1, n - 1) == 0 && !failed) ? 0 : 1;
}

static int Listen(int n, char** collector_argv, int collector_argc) {
  pid_t pids[MAX_RANKS];
  int pipes[MAX_RANKS][2];
  for (int i = 0; i < n; ++i) {
    if (pipe(pipes[i]) != 0) return 1;
    pids[i] = fork();
    if (pids[i] == 0) {
      char contact[CONTACT_BYTES];
      close(pipes[i][0]);
      if (cs_trace_client_listen(NULL, contact, sizeof(contact)) != 0) {
        fprintf(stderr, "client-listen: %s\n", cs_trace_last_error());
        _exit(1);
      }
      dprintf(pipes[i][1], "%s\n", contact);
      close(pipes[i][1]);
      _exit(InitAndWork("listen mode"));  /* init waits for the dial */
    }
    close(pipes[i][1]);
  }
  /* The collector's command line: COLLECTOR FLAG... CONTACT... */
  char** argv = calloc((size_t)(collector_argc + n + 1), sizeof(char*));
  char contacts[MAX_RANKS][CONTACT_BYTES];
  for (int i = 0; i < collector_argc; ++i) argv[i] = collector_argv[i];
  for (int i = 0; i < n; ++i) {
    if (ReadLine(pipes[i][0], contacts[i], sizeof(contacts[i])) != 0) {
      fprintf(stderr, "rank %d sent no contact string\n", i);
      return 1;
    }
    close(pipes[i][0]);
    argv[collector_argc + i] = contacts[i];
  }
  const pid_t collector = fork();
  if (collector == 0) {
    execv(argv[0], argv);
    perror("exec of the collector");
    _exit(2);
  }
  free(argv);
  const int failed = WaitAll(pids, n);
  int status = 0;
  waitpid(collector, &status, 0);
  return failed == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  const int n = argc > 2 ? atoi(argv[2]) : 0;
  if (argc < 3 || n < 1 || n > MAX_RANKS) {
    fprintf(stderr,
            "usage: collector_modes first|server N | listen N COLLECTOR "
            "[FLAG...] (N 1..%d)\n",
            MAX_RANKS);
    return 2;
  }
  if (strcmp(argv[1], "first") == 0) return First(n);
  if (strcmp(argv[1], "server") == 0) return Server(n);
  if (strcmp(argv[1], "listen") == 0 && argc > 3) {
    return Listen(n, argv + 3, argc - 3);
  }
  fprintf(stderr, "collector_modes: unknown mode '%s'\n", argv[1]);
  return 2;
}
