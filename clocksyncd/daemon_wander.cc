// clocksyncd/daemon_wander.cc: the daemon's wander_state_file
// (clocksyncd/wander_state.h): read at start as the estimator's wander
// prior, rewritten every kWanderSaveIntervalNs and when the loop ends.

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clocksyncd/daemon.h"
#include "clocksyncd/wander_state.h"
#include "probe/raw_clock.h"
#include "spdlog/spdlog.h"

namespace clocksync {
namespace {

constexpr int64_t kWanderSaveIntervalNs = 600'000'000'000;  // 10 minutes

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// "3 h 20 min", "45 s": how long ago.
std::string Age(int64_t seconds) {
  if (seconds < 0) return "in the future: the real-time clock was set back";
  if (seconds < 120) return absl::StrCat(seconds, " s ago");
  if (seconds < 7200) return absl::StrCat(seconds / 60, " min ago");
  if (seconds < 2 * 86400) return absl::StrCat(seconds / 3600, " h ago");
  return absl::StrCat(seconds / 86400, " days ago");
}

}  // namespace

absl::Status Daemon::LoadWanderState() {
  const std::string& path = config_.wander_state_file;
  // Written from now on: a directory it cannot be written in is a start-up
  // error, not a silent loss.
  const std::string directory = DirectoryOf(path);
  if (access(directory.c_str(), W_OK | X_OK) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("its directory ", directory, " is not writable"));
  }
  next_wander_save_raw_ns_ = start_raw_ns_ + kWanderSaveIntervalNs;
  const double allowance = config_.estimator.base.wander_ppb_per_sqrt_s;
  const absl::StatusOr<WanderState> state = ReadWanderState(path);
  if (!state.ok()) {
    if (absl::IsNotFound(state.status())) {
      spdlog::info(
          "{}: no wander state in {} yet: the window starts from the "
          "allowance, {} ppb/√s",
          config_.node_id, path, allowance);
    } else {
      // Not the configuration's fault: the next save replaces it.
      spdlog::warn("{}: --wander_state_file: {}; left out, the window starts "
                   "from the allowance, {} ppb/√s",
                   config_.node_id, std::string(state.status().message()), allowance);
    }
    return absl::OkStatus();
  }
  const int64_t now_s = probe::RealtimeNowNs() / 1'000'000'000;
  config_.estimator.wander_prior_ppb_per_sqrt_s = state->wander_ppb_per_sqrt_s;
  estimator_ = hull::MakeEstimator(config_.estimator);
  spdlog::info("{}: wander prior {:.3g} ppb/√s from {} (saved {}){}",
               config_.node_id, state->wander_ppb_per_sqrt_s, path,
               Age(now_s - state->saved_unix_s),
               state->wander_ppb_per_sqrt_s < allowance
                   ? ""
                   : absl::StrFormat(": not below the allowance, %g ppb/√s, "
                                     "which stands",
                                     allowance));
  return absl::OkStatus();
}

void Daemon::MaybeSaveWanderState(int64_t raw_ns) {
  if (config_.wander_state_file.empty() || raw_ns < next_wander_save_raw_ns_) {
    return;
  }
  next_wander_save_raw_ns_ = raw_ns + kWanderSaveIntervalNs;
  SaveWanderState(/*at_stop=*/false);
}

void Daemon::SaveWanderState(bool at_stop) {
  if (config_.wander_state_file.empty() || !estimator_) return;
  // Only what this run has shown (nothing yet: the file stays as it is).
  const double learnt = estimator_->LearntWanderPpb();
  if (!(learnt > 0) || !std::isfinite(learnt)) return;
  const WanderState state{learnt, probe::RealtimeNowNs() / 1'000'000'000};
  const absl::Status written =
      WriteWanderState(config_.wander_state_file, state);
  if (!written.ok()) {
    if (wander_save_failures_++ == 0) {
      spdlog::warn("{}: --wander_state_file={}: {} (said once)",
                   config_.node_id, config_.wander_state_file,
                   std::string(written.message()));
    }
    return;
  }
  // Every 10 minutes quietly; the last one, at a stop, is said.
  spdlog::log(at_stop ? spdlog::level::info : spdlog::level::debug,
              "{}: wander state {:.3g} ppb/√s saved in {}", config_.node_id,
              learnt, config_.wander_state_file);
}

}  // namespace clocksync
