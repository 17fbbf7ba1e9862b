// clocksyncd/wander_state.cc: see wander_state.h.

#include "clocksyncd/wander_state.h"

#include <cerrno>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "clocksyncd/atomic_file.h"

namespace clocksync {
namespace {

constexpr absl::string_view kWanderKey = "wander_ppb_per_sqrt_s";
constexpr absl::string_view kSavedKey = "saved_unix_s";

}  // namespace

std::string FormatWanderState(const WanderState& state) {
  return absl::StrFormat(
      "# clocksyncd: the frequency wander this node's clock has shown (an "
      "upper bound),\n# the next start's prior (wander_state_file, "
      "docs/CONFIG.md).\n%s %.6g\n%s %d\n",
      kWanderKey, state.wander_ppb_per_sqrt_s, kSavedKey, state.saved_unix_s);
}

absl::StatusOr<WanderState> ParseWanderState(absl::string_view text) {
  WanderState state;
  bool have_wander = false;
  bool have_saved = false;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    const std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, ": ", why));
    };
    if (words.size() != 2) {
      return bad(absl::StrCat("expected 'key value', got '", line, "'"));
    }
    if (words[0] == kWanderKey) {
      double value = 0;
      if (!absl::SimpleAtod(words[1], &value) || !std::isfinite(value) ||
          value <= 0) {
        return bad(absl::StrCat(kWanderKey, ": '", words[1],
                                "' is not a finite number > 0"));
      }
      state.wander_ppb_per_sqrt_s = value;
      have_wander = true;
    } else if (words[0] == kSavedKey) {
      int64_t value = 0;
      if (!absl::SimpleAtoi(words[1], &value)) {
        return bad(absl::StrCat(kSavedKey, ": '", words[1],
                                "' is not an integer"));
      }
      state.saved_unix_s = value;
      have_saved = true;
    } else {
      return bad(absl::StrCat("unknown key '", words[0], "'"));
    }
  }
  if (!have_wander || !have_saved) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing ", !have_wander ? kWanderKey : kSavedKey));
  }
  return state;
}

absl::StatusOr<WanderState> ReadWanderState(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    return absl::ErrnoToStatus(error, absl::StrCat("cannot read ", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<WanderState> state = ParseWanderState(text.str());
  if (!state.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", state.status().message()));
  }
  return state;
}

absl::Status WriteWanderState(const std::string& path,
                              const WanderState& state) {
  return WriteFileAtomically(path, FormatWanderState(state));
}

}  // namespace clocksync
