// tools/postmortem/postmortem_csv_fuzzer.cc: hostile sessions.csv and
// query.csv text for the post-mortem tool (the first byte picks which).

#include <cstdint>
#include <string>

#include "tools/postmortem/postmortem_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    (void)clocksync::hull::ParseSessionsCsv(text, "sessions.csv");
  } else {
    (void)clocksync::hull::ParseQueryCsv(text, "query.csv");
  }
  return 0;
}
