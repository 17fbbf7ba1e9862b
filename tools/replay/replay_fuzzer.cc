// tools/replay/replay_fuzzer.cc: hostile sample CSV for the replay tool
// (ParseSamplesCsv), and the estimator replayed over whatever parses.

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "tools/replay/replay.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<clocksync::hull::ReplaySample> samples;
  std::string error;
  if (clocksync::hull::ParseSamplesCsv(in, "samples.csv", &samples, &error) &&
      samples.size() < 2000) {
    (void)clocksync::hull::Replay(samples, clocksync::hull::AdaptiveConfig{}, 0, nullptr);
  }
  return 0;
}
