// shm/path_lock_test.cc: one holder per segment path, across processes;
// the lock ends with its holder, cleanly or not.
#include "shm/path_lock.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace clocksync {
namespace {

using ::testing::HasSubstr;

std::string FreshPath(const std::string& name) {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR")
                                             : "/tmp") +
      "/path_lock_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir + "/clocksync.shm";
}

// Forks a process that takes the lock, reports on `ready_fd` and holds it
// until killed.
pid_t ForkHolder(const std::string& path, int ready_fd) {
  const pid_t pid = fork();
  if (pid == 0) {
    absl::StatusOr<ShmPathLock> lock = ShmPathLock::Acquire(path);
    const char c = lock.ok() ? 'y' : 'n';
    (void)!write(ready_fd, &c, 1);
    pause();
    _exit(0);
  }
  return pid;
}

TEST(ShmPathLockTest, SecondHolderIsRefusedNamingThePathAndPid) {
  const std::string path = FreshPath("second");
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t holder = ForkHolder(path, pipe_fds[1]);
  char c = 0;
  ASSERT_EQ(read(pipe_fds[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');

  absl::StatusOr<ShmPathLock> second = ShmPathLock::Acquire(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(path + " is in use"));
  EXPECT_THAT(second.status().message(),
              HasSubstr("pid " + std::to_string(holder)));

  // The kernel drops a killed holder's lock: the successor gets it.
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  absl::StatusOr<ShmPathLock> successor = ShmPathLock::Acquire(path);
  ASSERT_TRUE(successor.ok()) << successor.status();
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

TEST(ShmPathLockTest, ReleaseRemovesTheFileAndFreesThePath) {
  const std::string path = FreshPath("release");
  absl::StatusOr<ShmPathLock> lock = ShmPathLock::Acquire(path);
  ASSERT_TRUE(lock.ok()) << lock.status();
  struct stat st;
  EXPECT_EQ(stat((path + ".lock").c_str(), &st), 0);
  ShmPathLock moved = *std::move(lock);
  moved.Release();
  EXPECT_NE(stat((path + ".lock").c_str(), &st), 0);
  moved.Release();  // Idempotent.
  EXPECT_TRUE(ShmPathLock::Acquire(path).ok());
}

TEST(ShmPathLockTest, MissingDirectoryNamesTheLockFile) {
  absl::StatusOr<ShmPathLock> lock =
      ShmPathLock::Acquire("/nonexistent/clocksync/x.shm");
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(lock.status().message(),
              HasSubstr("/nonexistent/clocksync/x.shm.lock"));
}

}  // namespace
}  // namespace clocksync
