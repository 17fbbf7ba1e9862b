// clocksyncd/atomic_file.h: a small file replaced whole: written aside
// (path + ".tmp") and renamed over it, so that a reader, or the next start
// after a crash, never sees half of one. The status file and the
// wander_state_file are written this way.

#ifndef CLOCKSYNC_CLOCKSYNCD_ATOMIC_FILE_H_
#define CLOCKSYNC_CLOCKSYNCD_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace clocksync {

// Writes `text` to `path` + ".tmp" and renames it over `path`; on failure
// the .tmp file is removed and the status names the step and the file.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& text);

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_ATOMIC_FILE_H_
