// clocksyncd/atomic_file.cc: see atomic_file.h.

#include "clocksyncd/atomic_file.h"

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace clocksync {

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& text) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", tmp));
  }
  const bool complete = std::fputs(text.c_str(), f) >= 0;
  if (std::fclose(f) != 0 || !complete) {
    const int error = errno;
    std::remove(tmp.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return absl::ErrnoToStatus(
        error, absl::StrCat("cannot rename ", tmp, " over ", path));
  }
  return absl::OkStatus();
}

}  // namespace clocksync
