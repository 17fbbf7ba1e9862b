// trace/sidecar_fuzzer.cc: hostile sidecar files (a trace's text companion:
// process, mappings, sync sessions, names) through sidecar::Parse, which
// the trace reader and its repair path use. Errors must be statuses naming
// the line, never crashes.

#include <cstdint>
#include <string>

#include "trace/sidecar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)clocksync::trace::sidecar::Parse(text, "fuzz.sidecar");
  (void)clocksync::trace::sidecar::Decode(text);
  return 0;
}
