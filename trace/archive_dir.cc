// trace/archive_dir.cc: the archive directory, whole writes and errno
// statuses (archive_dir.h).

#include "trace/archive_dir.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace clocksync::trace {
namespace {

// Whether `path` is a directory without entries.
bool IsEmptyDirectory(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return false;
  bool empty = true;
  while (struct dirent* entry = readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") != 0 &&
        std::strcmp(entry->d_name, "..") != 0) {
      empty = false;
      break;
    }
  }
  closedir(dir);
  return empty;
}

}  // namespace

absl::Status ErrnoStatus(int error, absl::string_view what,
                         const std::string& path) {
  const std::string message =
      absl::StrCat(what, " ", path, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case EEXIST:
    case ENOTEMPTY:
      return absl::AlreadyExistsError(message);
    default:
      return absl::UnavailableError(message);
  }
}

absl::Status CreateArchiveDirectory(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) == 0) return absl::OkStatus();
  const int error = errno;
  if (error != EEXIST) {
    return ErrnoStatus(error, "cannot create trace directory", dir);
  }
  if (!IsEmptyDirectory(dir)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "trace directory ", dir, " exists and is not an empty directory"));
  }
  return absl::OkStatus();
}

absl::Status WriteFully(int fd, absl::string_view data,
                        const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "cannot write", path);
    if (n == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot write ", path, ": no progress"));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace clocksync::trace
