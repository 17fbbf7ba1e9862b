// lttng/event_benchmark.cc: the cost of an LTTng-UST event stamped by
// libclocksync-lttng.so beside one stamped by LTTng's default clock
// (CLOCK_MONOTONIC), side by side in one run. LTTng-UST takes its clock
// once per process, so two worker processes (this program with --worker)
// record the events, one with LTTNG_UST_CLOCK_PLUGIN set and one without;
// the driver hands them rounds of --events events in turn (the order
// alternating from round to round, so load that comes and goes hits both),
// each worker timing its own round in its thread's CPU time. Needs an lttng-sessiond with a started
// session that enables clocksync_bench:* for both (deploy/lttng_benchmark.sh
// sets one up, in flight-recorder mode: every event is written, none
// discarded), and, for the plugin's global time, a synchronized clocksyncd
// at CLOCKSYNC_SHM. Prints
//   FIGURE lttng_event_default_clock_ns <median over rounds> ns
//   FIGURE lttng_event_plugin_ns <median over rounds> ns
//   FIGURE lttng_event_plugin_vs_default_ratio <median of the rounds' ratios> x
// and fails (exit 1) when a worker's clock is not the one it should have.

#include <lttng/ust-clock.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "client/clock.h"
#include "lttng/bench_tp.h"

ABSL_FLAG(std::string, plugin, "", "path of libclocksync-lttng.so (required)");
ABSL_FLAG(int, rounds, 100, "rounds per worker (after 3 warm-up rounds), 1..10000");
ABSL_FLAG(int, events, 50000, "events per round, 1000..100000000");
ABSL_FLAG(bool, worker, false, "internal: run as a worker (commands on stdin)");

namespace {

int64_t NowNs(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Worker: first line "clock <value>" (LTTng's clock now, through the
// callback LTTng-UST uses), then for each line "N" on stdin records N events
// and answers with the ns per event; "q" ends.
int RunWorker() {
  lttng_ust_clock_read64_function read64 = nullptr;
  if (lttng_ust_trace_clock_get_read64_cb(&read64) != 0 || read64 == nullptr) {
    std::fprintf(stderr, "event_benchmark: worker: no LTTng clock callback\n");
    return 1;
  }
  std::printf("clock %llu\n", static_cast<unsigned long long>(read64()));
  std::fflush(stdout);
  char line[64];
  while (std::fgets(line, sizeof(line), stdin) != nullptr) {
    if (line[0] == 'q') break;
    const long long n = std::atoll(line);
    // CPU time of this thread: time while preempted (the shared machine's
    // other load) does not count.
    const int64_t start_ns = NowNs(CLOCK_THREAD_CPUTIME_ID);
    for (long long i = 0; i < n; ++i) {
      lttng_ust_tracepoint(clocksync_bench, event, static_cast<uint64_t>(i));
    }
    const int64_t end_ns = NowNs(CLOCK_THREAD_CPUTIME_ID);
    std::printf("%.4f\n", static_cast<double>(end_ns - start_ns) / static_cast<double>(n));
    std::fflush(stdout);
  }
  return 0;
}

// A worker process and its pipes.
struct Worker {
  pid_t pid = -1;
  FILE* to = nullptr;
  FILE* from = nullptr;
  uint64_t clock_value = 0;
};

bool StartWorker(const char* self, bool with_plugin, const std::string& plugin, Worker* w) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return false;
  w->pid = fork();
  if (w->pid < 0) return false;
  if (w->pid == 0) {
    // Both workers on one CPU: their events go to that CPU's buffers, and
    // they meet the same caches and the same interruptions.
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) - 1, &cpus);
    sched_setaffinity(0, sizeof(cpus), &cpus);
    dup2(down[0], 0);
    dup2(up[1], 1);
    close(down[0]); close(down[1]); close(up[0]); close(up[1]);
    if (with_plugin) {
      setenv("LTTNG_UST_CLOCK_PLUGIN", plugin.c_str(), 1);
    } else {
      unsetenv("LTTNG_UST_CLOCK_PLUGIN");
    }
    execl(self, self, "--worker", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(down[0]);
  close(up[1]);
  w->to = fdopen(down[1], "w");
  w->from = fdopen(up[0], "r");
  char line[128];
  if (w->from == nullptr || std::fgets(line, sizeof(line), w->from) == nullptr ||
      std::sscanf(line, "clock %" SCNu64, &w->clock_value) != 1) {
    return false;
  }
  return true;
}

// One round on `w`: ns per event, or -1.
double Round(Worker& w, int events) {
  std::fprintf(w.to, "%d\n", events);
  std::fflush(w.to);
  char line[64];
  if (std::fgets(line, sizeof(line), w.from) == nullptr) return -1;
  return std::atof(line);
}

int RunDriver(const char* self) {
  const std::string plugin = absl::GetFlag(FLAGS_plugin);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int events = absl::GetFlag(FLAGS_events);
  if (plugin.empty() || rounds < 1 || rounds > 10000 || events < 1000 || events > 100'000'000) {
    std::fprintf(stderr, "event_benchmark: --plugin=PATH is required; --rounds 1..10000, "
                         "--events 1000..100000000\n");
    return 2;
  }
  // The plugin's path to global time on this node: rdtsc or clock_gettime.
  const char* shm = std::getenv("CLOCKSYNC_SHM");
  const std::string shm_path = shm != nullptr && shm[0] ? shm : CLOCKSYNC_DEFAULT_SHM_PATH;
  absl::StatusOr<clocksync::Clock> clock = clocksync::Clock::Open(shm_path);
  if (!clock.ok() || !clock->Now().ok()) {
    std::fprintf(stderr, "event_benchmark: no synchronized clocksyncd at %s: the plugin "
                         "would fall back; start one (deploy/lttng_benchmark.sh does)\n",
                 shm_path.c_str());
    return 1;
  }
  Worker base, ours;
  if (!StartWorker(self, false, plugin, &base) || !StartWorker(self, true, plugin, &ours)) {
    std::fprintf(stderr, "event_benchmark: cannot start the workers\n");
    return 1;
  }
  // The plugin's worker reads global time (ns since 1970, less the bias),
  // the other CLOCK_MONOTONIC (ns since boot).
  const int64_t realtime_ns = NowNs(CLOCK_REALTIME);
  const bool ours_global = std::llabs(static_cast<long long>(ours.clock_value) - realtime_ns) <
                           60'000'000'000LL;
  const bool base_monotonic =
      std::llabs(static_cast<long long>(base.clock_value) - NowNs(CLOCK_MONOTONIC)) <
      60'000'000'000LL;
  std::printf("workers: default clock %llu (%s), plugin %llu (%s); global time read with %s\n",
              static_cast<unsigned long long>(base.clock_value),
              base_monotonic ? "CLOCK_MONOTONIC" : "not CLOCK_MONOTONIC?",
              static_cast<unsigned long long>(ours.clock_value),
              ours_global ? "global time" : "not global time?",
              clock->UsesTsc() ? "rdtsc (the daemon's TSC mapping)" : "clock_gettime");
  if (!ours_global || !base_monotonic) {
    std::fprintf(stderr, "event_benchmark: a worker has the wrong clock (see above)\n");
    return 1;
  }
  std::vector<double> base_ns, ours_ns, ratios;
  for (int r = -3; r < rounds; ++r) {
    double b, o;
    if (r % 2 == 0) {
      b = Round(base, events);
      o = Round(ours, events);
    } else {
      o = Round(ours, events);
      b = Round(base, events);
    }
    if (b <= 0 || o <= 0) {
      std::fprintf(stderr, "event_benchmark: a worker stopped answering\n");
      return 1;
    }
    if (r < 0) continue;  // warm-up
    base_ns.push_back(b);
    ours_ns.push_back(o);
    ratios.push_back(o / b);
  }
  for (Worker* w : {&base, &ours}) {
    std::fprintf(w->to, "q\n");
    std::fclose(w->to);
    int status;
    waitpid(w->pid, &status, 0);
    std::fclose(w->from);
  }
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  std::printf("%d rounds of %d events each, alternating, on CPU %ld; ratio quartiles "
              "%.3f %.3f %.3f\n",
              rounds, events, sysconf(_SC_NPROCESSORS_ONLN) - 1, sorted[sorted.size() / 4],
              sorted[sorted.size() / 2], sorted[sorted.size() * 3 / 4]);
  std::printf("FIGURE lttng_event_default_clock_ns %.2f ns\n", Median(base_ns));
  std::printf("FIGURE lttng_event_plugin_ns %.2f ns\n", Median(ours_ns));
  std::printf("FIGURE lttng_event_plugin_vs_default_ratio %.3f x\n", Median(ratios));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_worker)) return RunWorker();
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  return RunDriver(self);
}
