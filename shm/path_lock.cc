// shm/path_lock.cc: the exclusive lock file beside a segment path.
#include "shm/path_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace clocksync {
namespace {

// The pid a holder wrote into the lock file, or "" if unreadable.
std::string HolderPid(int fd) {
  char buffer[32] = {};
  const ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
  if (n <= 0) return "";
  int pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(buffer), &pid)) return "";
  return absl::StrCat(pid);
}

}  // namespace

absl::StatusOr<ShmPathLock> ShmPathLock::Acquire(
    const std::string& segment_path) {
  const std::string lock_path = segment_path + ".lock";
  // A holder may remove the file between our open() and flock(): then we
  // hold a lock on a file nobody else sees, so check that the path still
  // names our file, and try again if not.
  for (int attempt = 0; attempt < 16; ++attempt) {
    const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot open lock file ", lock_path, ": ", std::strerror(errno)));
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      const std::string holder = HolderPid(fd);
      close(fd);
      if (error == EWOULDBLOCK) {
        return absl::FailedPreconditionError(absl::StrCat(
            segment_path, " is in use by another clocksyncd",
            holder.empty() ? "" : absl::StrCat(" (pid ", holder, ")"),
            ": every daemon on a host needs its own --shm_path (lock ",
            lock_path, ")"));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot lock ", lock_path, ": ", std::strerror(error)));
    }
    struct stat held;
    struct stat named;
    if (fstat(fd, &held) == 0 && stat(lock_path.c_str(), &named) == 0 &&
        held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
      const std::string pid = absl::StrCat(getpid(), "\n");
      if (ftruncate(fd, 0) != 0 ||
          pwrite(fd, pid.data(), pid.size(), 0) !=
              static_cast<ssize_t>(pid.size())) {
        // The pid is only for the message of a second daemon; go on.
      }
      return ShmPathLock(lock_path, fd);
    }
    close(fd);  // Removed or replaced under us: take the new one.
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot lock ", lock_path, ": it keeps being replaced"));
}

ShmPathLock::ShmPathLock(ShmPathLock&& other) noexcept
    : lock_path_(std::move(other.lock_path_)),
      fd_(std::exchange(other.fd_, -1)) {}

ShmPathLock& ShmPathLock::operator=(ShmPathLock&& other) noexcept {
  if (this != &other) {
    Release();
    lock_path_ = std::move(other.lock_path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

ShmPathLock::~ShmPathLock() { Release(); }

void ShmPathLock::Release() {
  if (fd_ < 0) return;
  // Remove while still holding the lock: whoever opened the old file
  // meanwhile sees it is gone (Acquire's inode check) and retries.
  unlink(lock_path_.c_str());
  close(fd_);
  fd_ = -1;
}

}  // namespace clocksync
