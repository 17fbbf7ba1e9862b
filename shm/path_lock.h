// shm/path_lock.h: one daemon per segment path. A second clocksyncd given
// the same --shm_path would otherwise rename its segment over the first
// one's and remove it on exit, leaving the first running with no segment
// on disk. The daemon holds a ShmPathLock (an exclusive flock on
// "<path>.lock", which also records its pid) for as long as it publishes.
//
// Example:
//   absl::StatusOr<ShmPathLock> lock = ShmPathLock::Acquire(shm_path);
//   if (!lock.ok()) return lock.status();  // names the path and the holder
//
// The lock ends with the process (the kernel drops it), so a crashed
// daemon never blocks its successor. Release() (also the destructor)
// removes the lock file.
#ifndef CLOCKSYNC_SHM_PATH_LOCK_H_
#define CLOCKSYNC_SHM_PATH_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace clocksync {

class ShmPathLock {
 public:
  // Takes the lock of `segment_path` ("<segment_path>.lock"), or fails with
  // FAILED_PRECONDITION naming the path and the holder's pid when another
  // process holds it; other errors name the lock file and errno.
  static absl::StatusOr<ShmPathLock> Acquire(const std::string& segment_path);

  ShmPathLock(ShmPathLock&& other) noexcept;
  ShmPathLock& operator=(ShmPathLock&& other) noexcept;
  ShmPathLock(const ShmPathLock&) = delete;
  ShmPathLock& operator=(const ShmPathLock&) = delete;
  ~ShmPathLock();

  // Removes the lock file and unlocks. Idempotent.
  void Release();

  const std::string& lock_path() const { return lock_path_; }

 private:
  ShmPathLock(std::string lock_path, int fd)
      : lock_path_(std::move(lock_path)), fd_(fd) {}

  std::string lock_path_;
  int fd_ = -1;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_SHM_PATH_LOCK_H_
