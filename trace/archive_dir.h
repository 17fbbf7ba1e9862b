// trace/archive_dir.h: what the two archive writers (Otf2Writer,
// RawArchiveWriter) share about the file system: the archive directory's
// creation, whole writes, and the errno → status mapping their errors use.

#ifndef CLOCKSYNC_TRACE_ARCHIVE_DIR_H_
#define CLOCKSYNC_TRACE_ARCHIVE_DIR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace clocksync::trace {

// "<what> <path>: <strerror>" with a code from `error`:
//   ENOENT, ENOTDIR          NotFound
//   EACCES, EPERM, EROFS     PermissionDenied
//   EEXIST, ENOTEMPTY        AlreadyExists
//   anything else            Unavailable
absl::Status ErrnoStatus(int error, absl::string_view what,
                         const std::string& path);

// Creates the directory `dir` (mode 0755; its parent must exist) or accepts
// an existing empty one. An existing directory with entries, or a file of
// that name, is AlreadyExists; a failed mkdir as ErrnoStatus says.
absl::Status CreateArchiveDirectory(const std::string& dir);

// Writes all of `data` to `fd` (retrying after EINTR and short writes);
// errors name `path`: ErrnoStatus "cannot write", or Unavailable when
// write() makes no progress.
absl::Status WriteFully(int fd, absl::string_view data,
                        const std::string& path);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_ARCHIVE_DIR_H_
