// tools/replay/replay_main.cc
//
// //tools/replay:replay — feeds recorded probe samples to the two-hull estimator and
// writes the estimate after each sample. See tools/replay/replay.h for the formats.

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "hull/estimator.h"
#include "tools/replay/replay.h"

ABSL_FLAG(std::string, input, "",
          "CSV of samples with header t1,t2,t3,t4[,truth_ns] (integer ns).");
ABSL_FLAG(std::string, output, "",
          "Where to write t4,estimate_ns,earliest_ns,latest_ns rows "
          "(default: standard output).");
ABSL_FLAG(double, window_s, 600,
          "Sliding window, seconds (the longest). The default is the "
          "library's (AdaptiveConfig{}); the daemon's is 300.");
ABSL_FLAG(int, levels, 0,
          "Adaptive window: run windows window_s / 2^k, k < levels, and "
          "answer from the best predictor; 1 = fixed window; 0 = down to "
          "37.5 s (5 levels at 600 s, 4 at 300 s).");
ABSL_FLAG(double, wander_ppb_per_sqrt_s, 1.0,
          "Frequency random walk the bound tolerates (0: exact bound for a "
          "linear clock).");
ABSL_FLAG(double, max_round_trip_s, 1.0,
          "Samples with a longer round trip are rejected.");
ABSL_FLAG(double, warmup_s, 60,
          "Accuracy summary (with truth_ns) skips this first stretch.");
ABSL_FLAG(bool, quiet, false, "No summary on standard error.");

// With --levels=0, the shortest window the levels reach down to: the
// library default's (600 s / 2^4).
constexpr int64_t kShortestWindowNs = 37'500'000'000;

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Replays probe samples through the two-hull estimator.\n"
      "  replay --input=samples.csv [--window_s=600] [--levels=0] "
      "[--output=out.csv]\n"
      "A fixed window: --levels=1 --window_s=W.\n"
      "Input header: t1,t2,t3,t4 (integer ns; t1,t4 local, t2,t3 parent's "
      "global),\noptionally truth_ns (true global time at t4) for an "
      "accuracy summary.");
  absl::ParseCommandLine(argc, argv);
  const std::string input = absl::GetFlag(FLAGS_input);
  if (input.empty()) {
    std::cerr << "replay: --input is required (see --help)\n";
    return 2;
  }
  clocksync::hull::AdaptiveConfig config;
  config.base.window_ns =
      static_cast<int64_t>(absl::GetFlag(FLAGS_window_s) * 1e9);
  config.base.wander_ppb_per_sqrt_s = absl::GetFlag(FLAGS_wander_ppb_per_sqrt_s);
  config.base.max_round_trip_ns =
      static_cast<int64_t>(absl::GetFlag(FLAGS_max_round_trip_s) * 1e9);
  config.levels = absl::GetFlag(FLAGS_levels);
  if (config.levels < 0 || config.levels > 8) {
    std::cerr << "replay: bad option: --levels=" << config.levels
              << ": 0 (down to 37.5 s) or 1 to 8\n";
    return 2;
  }
  if (config.levels == 0) {
    config.levels = clocksync::hull::LevelsDownTo(config.base.window_ns,
                                                  kShortestWindowNs);
  }
  if (!(absl::GetFlag(FLAGS_window_s) > 0)) {
    std::cerr << "replay: bad option: --window_s=" << absl::GetFlag(FLAGS_window_s)
              << ": must be positive (seconds)\n";
    return 2;
  }
  const std::string invalid = clocksync::hull::ValidateAdaptiveConfig(config);
  if (!invalid.empty()) {
    std::cerr << "replay: bad option: " << invalid << "\n";
    return 2;
  }
  std::ifstream in(input);
  if (!in) {
    std::cerr << "replay: cannot open " << input << "\n";
    return 1;
  }
  std::vector<clocksync::hull::ReplaySample> samples;
  std::string error;
  if (!clocksync::hull::ParseSamplesCsv(in, input, &samples, &error)) {
    std::cerr << "replay: " << error << "\n";
    return 1;
  }
  std::ofstream file;
  std::ostream* out = &std::cout;
  const std::string output = absl::GetFlag(FLAGS_output);
  if (!output.empty()) {
    file.open(output);
    if (!file) {
      std::cerr << "replay: cannot write " << output << "\n";
      return 1;
    }
    out = &file;
  }
  const clocksync::hull::ReplaySummary s = clocksync::hull::Replay(
      samples, config,
      static_cast<int64_t>(absl::GetFlag(FLAGS_warmup_s) * 1e9), out);
  out->flush();
  if (!*out) {
    std::cerr << "replay: write failed\n";
    return 1;
  }
  if (!absl::GetFlag(FLAGS_quiet)) {
    const double window_s = static_cast<double>(config.base.window_ns) * 1e-9;
    std::cerr << "replay: " << s.samples << " samples, " << s.rejected
              << " rejected, " << s.inconsistencies << " inconsistencies, "
              << s.synced_rows << " rows synchronized; ";
    if (config.levels == 1) {
      std::cerr << "a fixed window of " << window_s << " s\n";
    } else {
      std::cerr << config.levels << " windows, " << window_s << " s down to "
                << window_s / static_cast<double>(1 << (config.levels - 1))
                << " s\n";
    }
    if (s.checks > 0) {
      std::cerr << "accuracy after " << absl::GetFlag(FLAGS_warmup_s)
                << " s: rms_error_ns=" << s.rms_error_ns
                << " max_abs_error_ns=" << s.max_abs_error_ns
                << " mean_bound_half_width_ns=" << s.mean_bound_half_width_ns
                << " bound_violations=" << s.bound_violations << " of "
                << s.checks << "\n";
    }
  }
  return 0;
}
