// tools/trace/view_png.cc: the view's PNG snapshot through headless
// Chromium (see view_png.h): finding it, running it with a timeout,
// checking what it wrote.

#include "tools/trace/view_png.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace clocksync::trace {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

// `name` if it holds a slash, else its first match in $PATH; "" if none.
std::string Resolve(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    return IsExecutableFile(name) ? name : "";
  }
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return "";
}

// The last `lines` lines of a file, on one line.
std::string Tail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) all.push_back(line);
  }
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    absl::StrAppend(&out, out.empty() ? "" : " | ", all[i]);
  }
  return out.empty() ? "(nothing printed)" : out;
}

}  // namespace

std::string FindChromium(const std::string& name) {
  if (!name.empty()) return Resolve(name);
  for (const char* candidate : {"chromium", "chromium-browser"}) {
    std::string path = Resolve(candidate);
    if (!path.empty()) return path;
  }
  return "";
}

absl::Status TakePngSnapshot(const PngOptions& options) {
  const std::string chromium = options.chromium.empty() ? "" : Resolve(options.chromium);
  if (chromium.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "chromium '", options.chromium.empty() ? "chromium" : options.chromium,
        "' is not installed or not executable (a PNG needs headless Chromium: "
        "apt-get install chromium, or --chromium=PATH)"));
  }
  std::error_code error;
  const std::string page = std::filesystem::absolute(options.html_path, error).string();
  if (error) return absl::InvalidArgumentError(absl::StrCat(options.html_path, ": ", error.message()));
  const std::string png = std::filesystem::absolute(options.png_path, error).string();
  if (error) return absl::InvalidArgumentError(absl::StrCat(options.png_path, ": ", error.message()));
  // Its own profile and home in a temporary directory, removed after.
  std::string scratch =
      (std::filesystem::temp_directory_path(error) / "clocksync-png-XXXXXX").string();
  if (mkdtemp(scratch.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", scratch, ": ", std::strerror(errno)));
  }
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code e;
      std::filesystem::remove_all(dir, e);
    }
  } cleanup{scratch};
  std::filesystem::remove(png, error);

  std::vector<std::string> args = {
      chromium,
      "--headless",
      "--disable-gpu",
      "--no-sandbox",
      "--no-first-run",
      "--disable-extensions",
      "--hide-scrollbars",
      absl::StrCat("--user-data-dir=", scratch, "/profile"),
      absl::StrCat("--window-size=", options.width_px, ",", options.height_px),
      absl::StrCat("--screenshot=", png),
      absl::StrCat("file://", page, "#c=", options.correction)};
  std::vector<std::string> env = {absl::StrCat("HOME=", scratch),
                                  "DBUS_SESSION_BUS_ADDRESS=disabled:"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "HOME=", 5) != 0 &&
        std::strncmp(*e, "DBUS_SESSION_BUS_ADDRESS=", 25) != 0) {
      env.push_back(*e);
    }
  }
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log = scratch + "/chromium.log";

  const pid_t pid = fork();
  if (pid < 0) {
    return absl::UnavailableError(absl::StrCat("cannot start chromium: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Its own process group, so that a timeout ends its helpers too;
    // output to the log, run in the scratch directory.
    setpgid(0, 0);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    if (chdir(scratch.c_str()) != 0) _exit(126);
    execve(chromium.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid, pid);
  const absl::Time deadline = absl::Now() + options.timeout;
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("chromium: ", std::strerror(errno)));
    }
    if (absl::Now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return absl::UnavailableError(
          absl::StrCat("chromium took longer than ", absl::FormatDuration(options.timeout),
                       " and was stopped: ", Tail(log, 3)));
    }
    usleep(20000);
  }
  kill(-pid, SIGKILL);  // helpers it may have left behind
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "chromium failed (", WIFEXITED(status) ? "exit " : "signal ",
        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), "): ", Tail(log, 3)));
  }
  std::ifstream in(png, std::ios::binary);
  char magic[8] = {};
  in.read(magic, sizeof(magic));
  if (!in || std::memcmp(magic, "\x89PNG\r\n\x1a\n", 8) != 0) {
    return absl::UnavailableError(
        absl::StrCat("chromium wrote no PNG to ", png, ": ", Tail(log, 3)));
  }
  return absl::OkStatus();
}

}  // namespace clocksync::trace
