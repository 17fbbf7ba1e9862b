// tools/trace/view_png.h: `clocksync-trace view --png`: a PNG snapshot of
// the view's page taken by headless Chromium (Debian's `chromium`), which
// must be installed; nothing here draws pixels itself.
//
// Chromium runs headless, without GPU or sandbox, with its own profile in
// a temporary directory (removed after) and no D-Bus, on
// `file://<page>#c=<correction>`, with a window of the given size, and is
// killed after a timeout. The result must start with PNG's signature.
//
// Example:
//   PngOptions options;
//   options.chromium = FindChromium("");  // "" when not installed
//   options.html_path = "run.html";
//   options.correction = "online";
//   options.png_path = "run.png";
//   absl::Status s = TakePngSnapshot(options);
//
// Thread safety: runs a child process; call from one thread at a time.

#ifndef CLOCKSYNC_TOOLS_TRACE_VIEW_PNG_H_
#define CLOCKSYNC_TOOLS_TRACE_VIEW_PNG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace clocksync::trace {

struct PngOptions {
  std::string chromium;    // a path, or a name looked up in $PATH
  std::string html_path;   // the page (ViewHtml), absolute or relative
  std::string correction;  // the hash's c=, e.g. "online"
  std::string png_path;    // written (replaced) by Chromium
  int32_t width_px = 1600;
  int32_t height_px = 900;
  absl::Duration timeout = absl::Seconds(60);
};

// The executable `name` (a path, or a name looked up in $PATH; empty: the
// first of "chromium", "chromium-browser" in $PATH), or "" when not found.
std::string FindChromium(const std::string& name);

// Runs Chromium to write options.png_path. NotFound when options.chromium
// is not an executable file (the message says to install chromium);
// Unavailable when Chromium fails, times out or writes no PNG (with the
// end of what it printed).
absl::Status TakePngSnapshot(const PngOptions& options);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TOOLS_TRACE_VIEW_PNG_H_
