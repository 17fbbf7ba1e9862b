// trace/packed_chunk_fuzzer.cc: hostile packed chunks (trace/packed_events.h)
// as the collector receives them and raw archives store them. UnpackChunk
// must refuse or accept without reading past the input; what it accepts
// must pack again into a chunk that unpacks to the same events.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "trace/packed_events.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  clocksync::trace::PackedChunkInfo info;
  std::vector<clocksync::trace::Event> events;
  if (!clocksync::trace::UnpackChunk(input, &info, &events).ok()) return 0;
  if (info.chunk_bytes > size || events.size() != info.events) {
    std::fprintf(stderr, "chunk of %zu bytes, %zu events, from %zu bytes\n",
                 info.chunk_bytes, events.size(), size);
    std::abort();
  }
  std::string again;
  clocksync::trace::PackEvents(events, &again);
  std::vector<clocksync::trace::Event> back;
  if (!clocksync::trace::UnpackChunk(again, nullptr, &back).ok() ||
      back != events) {
    std::fprintf(stderr, "accepted events do not survive a round trip\n");
    std::abort();
  }
  return 0;
}
