// trace/event_file_fuzzer.cc: hostile OTF2 event files through the
// reader's repair (repair::CheckEventFile: is the file whole, and if not,
// everything up to its last whole record). The first byte picks the chunk
// size (the writer's 1 MiB, or small ones so that inputs span chunks).
// A repaired file must be no longer than the input plus an end marker,
// and must itself check intact.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trace/otf2_repair.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr uint64_t kChunkBytes[] = {1024 * 1024, 64, 256, 4096};
  const uint64_t chunk = kChunkBytes[data[0] % 4];
  const std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  const clocksync::trace::repair::EventFileCheck check =
      clocksync::trace::repair::CheckEventFile(file, chunk);
  if (!check.intact && !check.repaired.empty()) {
    if (check.repaired.size() > file.size() + 1) {
      std::fprintf(stderr, "repaired file of %zu bytes from %zu\n", check.repaired.size(),
                   file.size());
      std::abort();
    }
    const clocksync::trace::repair::EventFileCheck again =
        clocksync::trace::repair::CheckEventFile(check.repaired, chunk);
    if (!again.intact) {
      std::fprintf(stderr, "a repaired file does not check intact: %s\n", again.what.c_str());
      std::abort();
    }
  }
  return 0;
}
