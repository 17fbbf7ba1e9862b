// tools/trace/make_synthetic_trace.cc
//
// Test-only: writes the synthetic two-process trace of
// trace/synthetic_trace.h under the directory given, and prints its known
// answers as key=value lines (for tools/trace/clocksync_trace_test.sh).

#include <cstdio>
#include <string>

#include "trace/synthetic_trace.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_synthetic_trace DIR\n");
    return 1;
  }
  absl::StatusOr<clocksync::trace::SyntheticAnswers> answers =
      clocksync::trace::WriteSyntheticTraces(argv[1]);
  if (!answers.ok()) {
    std::fprintf(stderr, "make_synthetic_trace: %s\n",
                 answers.status().ToString().c_str());
    return 2;
  }
  std::printf("rank0=%s\nrank1=%s\nmessages=%lld\nreversed_none=%lld\n"
              "events=%lld\nonline_rms_error_ns=%.3f\n",
              answers->rank0_dir.c_str(), answers->rank1_dir.c_str(),
              static_cast<long long>(answers->messages),
              static_cast<long long>(answers->reversed_without_correction),
              static_cast<long long>(answers->events_rank0 + answers->events_rank1),
              answers->online_rms_error_ns);
  return 0;
}
