// tracer/tracer_failsafe_test.cc: a traced child process that dies (SIGSEGV,
// SIGABRT, SIGPIPE, SIGTERM, SIGINT), that exits without calling Finalize, or whose
// disk fills up, leaves a readable trace (or a clear error), never a hang;
// one killed outright (SIGKILL) leaves a trace the reader recovers.
//
// The test binary is its own child: run with --child=<mode> --dir=<dir> it
// traces (three worker threads and the main thread, small buffers so that
// some events were flushed before the end) and then ends as <mode> says.
// The parent re-executes /proc/self/exe, waits, and reads the archive back.
// Hence its own main() (no gtest_main).

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tracer/tracer.h"
#include "gtest/gtest.h"
#include "trace/otf2_reader.h"
#include "trace/trace.h"

namespace clocksync {
namespace {

constexpr int kWorkers = 3;
constexpr int kWorkerEvents = 1001;  // several buffers of 256, and a tail
constexpr int kMainEvents = 301;
constexpr int kKillPairs = 600'000;

// --- the child ---------------------------------------------------------------

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "child: %s\n", message.c_str());
  std::_Exit(3);
}

// Traces kWorkers threads and the main thread; the workers stay alive (idle)
// once done. Returns when every event is recorded.
void TraceSome(const std::string& dir, int64_t buffer_events,
               std::atomic<bool>* stop, std::vector<std::thread>* workers) {
  TracerOptions options;
  options.trace_dir = dir;
  options.name = "crash";
  options.rank = 0;
  options.world_size = 1;
  options.shm_path = dir + "/no-daemon.shm";
  options.buffer_events = buffer_events;
  options.read_environment = false;
  if (absl::Status s = Tracer::Init(options); !s.ok()) Die(s.ToString());
  const uint32_t region = *Tracer::DefineRegion("work");
  std::atomic<int> done{0};
  for (int w = 0; w < kWorkers; ++w) {
    workers->emplace_back([&, w] {
      Tracer::SetThreadName(absl::StrCat("worker ", w));
      for (int i = 0; i < kWorkerEvents; ++i) {
        if (!Tracer::Send(0, static_cast<uint32_t>(i), 8)) Die("Send failed");
      }
      done.fetch_add(1);
      while (!stop->load()) usleep(1000);
    });
  }
  for (int i = 0; i < kMainEvents; ++i) {
    if (!(i % 2 == 0 ? Tracer::Enter(region) : Tracer::Leave(region))) {
      Die("Enter/Leave failed");
    }
  }
  while (done.load() < kWorkers) usleep(1000);
}

// Starts tracing into <dir>/<name>.r0 without a daemon; returns the id of
// region "work".
uint32_t InitAlone(const std::string& dir, const std::string& name,
                   int64_t buffer_events) {
  TracerOptions options;
  options.trace_dir = dir;
  options.name = name;
  options.shm_path = dir + "/no-daemon.shm";
  options.buffer_events = buffer_events;
  options.read_environment = false;
  if (absl::Status s = Tracer::Init(options); !s.ok()) Die(s.ToString());
  return *Tracer::DefineRegion("work");
}

int RunChild(const std::string& mode, const std::string& dir) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  if (mode == "disk_full") {
    // Writes beyond 64 KiB fail with EFBIG, like a full disk (and raise
    // SIGXFSZ, which a program that wants the error ignores).
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {64 * 1024, 64 * 1024};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) Die("setrlimit");
    const uint32_t region = InitAlone(dir, "full", 1024);
    for (int i = 0; i < 200'000; ++i) {
      (void)Tracer::Enter(region);
      (void)Tracer::Leave(region);
    }
    const absl::Status status = Tracer::Finalize();
    const TracerStats stats = Tracer::Stats();
    std::fprintf(stderr, "child: finalize: %s; dropped %llu\n",
                 status.ToString().c_str(),
                 static_cast<unsigned long long>(stats.events_dropped));
    // Expected: a clear error naming the archive, counted drops, no crash.
    // _Exit: the writer leaks the buffers of an archive OTF2 failed to
    // flush (it cannot close it safely), which LeakSanitizer would report.
    if (status.ok()) std::_Exit(4);
    if (status.ToString().find(dir) == std::string::npos) std::_Exit(5);
    if (stats.events_dropped == 0) std::_Exit(6);
    std::_Exit(0);
  }
  if (mode == "kill") {
    // SIGKILL cannot be caught: what OTF2 wrote to disk (whole chunks) and
    // what the service thread streamed to the sidecar (regions, ...) is
    // all there is. Enough events that OTF2 wrote some chunks.
    const uint32_t region = InitAlone(dir, "killed", 4096);
    for (int i = 0; i < kKillPairs; ++i) {
      (void)Tracer::Enter(region);
      (void)Tracer::Leave(region);
    }
    usleep(600'000);  // the writer and the service thread catch up
    kill(getpid(), SIGKILL);
    Die("alive after SIGKILL");
  }
  TraceSome(dir, 256, &stop, &workers);
  if (mode == "segv") {
    // A real fault (a store to a read-only page), not a null store that
    // the compiler may turn into a trap instruction.
    void* page = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    *static_cast<volatile int*>(page) = 1;
  } else if (mode == "abort") {
    abort();
  } else if (mode == "pipe") {
    // A write to a pipe whose reader is gone, as to a peer that died.
    int fds[2];
    if (pipe(fds) != 0) Die("pipe");
    close(fds[0]);
    const char byte = 0;
    [[maybe_unused]] const ssize_t n = write(fds[1], &byte, 1);
    Die("alive after writing to a closed pipe");
  } else if (mode == "term") {
    raise(SIGTERM);
  } else if (mode == "int") {
    kill(getpid(), SIGINT);
  } else if (mode == "exit") {
    // No Finalize: the tracer's atexit hook completes the archive. The
    // workers must be gone first (exit with running threads is undefined).
    stop = true;
    for (std::thread& t : workers) t.join();
    std::exit(0);
  } else {
    Die("unknown mode " + mode);
  }
  // SIGTERM/SIGINT: the tracer completes the archive on its own thread and
  // raises the signal again; this thread just waits to be ended.
  sleep(30);
  Die("still alive 30 s after the signal");
}

// --- the parent --------------------------------------------------------------

std::string g_self;

std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string dir =
      std::string(base != nullptr ? base : "/tmp") + "/failsafe.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return "";
  return dir;
}

// Runs the child in `mode`; returns its wait status.
int RunChildProcess(const std::string& mode, const std::string& dir) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string mode_arg = "--child=" + mode;
    const std::string dir_arg = "--dir=" + dir;
    execl(g_self.c_str(), g_self.c_str(), mode_arg.c_str(), dir_arg.c_str(),
          static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

bool Sanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}

class FailSafeTest : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(FailSafeTest, DyingChildLeavesAReadableTrace) {
  const auto [mode, signo] = GetParam();
  const std::string dir = MakeTempDir();
  ASSERT_FALSE(dir.empty());
  const int status = RunChildProcess(mode, dir);
  if (signo == 0) {
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  } else if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), signo);
  } else {
    // A sanitizer's own handler (chained after the tracer's) reports the
    // crash and exits instead.
    ASSERT_TRUE(Sanitized()) << "child exited with " << WEXITSTATUS(status);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
                WEXITSTATUS(status) != 3)
        << status;
  }

  absl::StatusOr<trace::ProcessTrace> read =
      trace::ReadProcessTrace(dir + "/crash.r0");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->truncated) << read->truncation_note;
  ASSERT_EQ(read->threads.size(), size_t{kWorkers + 1});
  for (const trace::ThreadTrace& thread : read->threads) {
    const size_t expected =
        thread.name == "main" ? kMainEvents : kWorkerEvents;
    EXPECT_EQ(thread.events.size(), expected) << thread.name;
    for (size_t i = 1; i < thread.events.size(); ++i) {
      ASSERT_GT(thread.events[i].stamp, thread.events[i - 1].stamp);
    }
  }
  ASSERT_EQ(read->regions.size(), 1u);
  EXPECT_EQ(read->regions[0].name, "work");
}

INSTANTIATE_TEST_SUITE_P(
    Modes, FailSafeTest,
    ::testing::Values(std::make_pair("segv", SIGSEGV),
                      std::make_pair("abort", SIGABRT),
                      std::make_pair("pipe", SIGPIPE),
                      std::make_pair("term", SIGTERM),
                      std::make_pair("int", SIGINT),
                      std::make_pair("exit", 0)),
    [](const auto& info) { return std::string(info.param.first); });

TEST(FailSafeDiskTest, DiskFullIsAClearErrorNotACrash) {
  const std::string dir = MakeTempDir();
  ASSERT_FALSE(dir.empty());
  const int status = RunChildProcess("disk_full", dir);
  ASSERT_TRUE(WIFEXITED(status)) << "child died of signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A process killed outright (SIGKILL, as by the OOM killer) cannot finish
// its archive; the reader rebuilds its definitions from the sidecar and
// reads the events that reached the disk.
TEST(FailSafeKillTest, KilledChildLeavesARecoverableTrace) {
  const std::string dir = MakeTempDir();
  ASSERT_FALSE(dir.empty());
  const int status = RunChildProcess("kill", dir);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  absl::StatusOr<trace::ProcessTrace> read =
      trace::ReadProcessTrace(dir + "/killed.r0");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->truncated);
  EXPECT_NE(read->truncation_note.find("rebuilt from the sidecar"),
            std::string::npos)
      << read->truncation_note;
  ASSERT_EQ(read->regions.size(), 1u);
  EXPECT_EQ(read->regions[0].name, "work");
  ASSERT_EQ(read->threads.size(), 1u);
  const trace::ThreadTrace& main_thread = read->threads[0];
  EXPECT_EQ(main_thread.name, "main");
  ASSERT_GT(main_thread.events.size(), 0u);
  EXPECT_LE(main_thread.events.size(), size_t{2 * kKillPairs});
  for (size_t i = 0; i < main_thread.events.size(); ++i) {
    ASSERT_EQ(main_thread.events[i].kind, i % 2 == 0 ? trace::EventKind::kEnter
                                                     : trace::EventKind::kLeave)
        << i;
    if (i > 0) {
      ASSERT_GT(main_thread.events[i].stamp, main_thread.events[i - 1].stamp);
    }
  }
}

}  // namespace
}  // namespace clocksync

int main(int argc, char** argv) {
  std::string mode, dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--child=", 0) == 0) mode = arg.substr(8);
    if (arg.rfind("--dir=", 0) == 0) dir = arg.substr(6);
  }
  if (!mode.empty()) return clocksync::RunChild(mode, dir);
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    std::perror("readlink /proc/self/exe");
    return 1;
  }
  clocksync::g_self.assign(self, static_cast<size_t>(n));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
