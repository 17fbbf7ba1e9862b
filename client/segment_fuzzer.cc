// client/segment_fuzzer.cc: a hostile shared-memory segment as the client
// reads it. The input is the segment's bytes (a daemon's real segments are
// the seeds), written to a file that Clock::Open maps; then Now(), At()
// over raw times near and far from the mapping's anchor, FastRawNowNs()
// and UsesTsc(). Nothing may crash, and every reading with time in it
// (OK, stale, not synchronized) must have earliest <= global <= latest.

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "client/clock.h"

namespace {

void Check(const clocksync::TimeReading& r, const char* what) {
  if (r.error != CLOCKSYNC_OK && r.error != CLOCKSYNC_ESTALE &&
      r.error != CLOCKSYNC_ENOTSYNCED) {
    return;
  }
  if (!(r.earliest_ns <= r.global_ns && r.global_ns <= r.latest_ns)) {
    std::fprintf(stderr, "%s: earliest %lld global %lld latest %lld (error %d)\n", what,
                 static_cast<long long>(r.earliest_ns), static_cast<long long>(r.global_ns),
                 static_cast<long long>(r.latest_ns), r.error);
    std::abort();
  }
}

std::string SegmentPath() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/fuzz-segment-" +
         std::to_string(getpid()) + ".shm";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = SegmentPath();
  const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return 0;
  const bool written = write(fd, data, size) == static_cast<ssize_t>(size);
  close(fd);
  if (!written) return 0;
  absl::StatusOr<clocksync::Clock> clock = clocksync::Clock::Open(path);
  if (!clock.ok()) return 0;
  Check(clock->Now(), "Now()");
  const int64_t now = clocksync::Clock::RawNowNs();
  for (const int64_t raw : {now, int64_t{0}, int64_t{-1}, now + 1'000'000'000'000,
                            std::numeric_limits<int64_t>::max(),
                            std::numeric_limits<int64_t>::min()}) {
    Check(clock->At(raw), "At()");
  }
  int64_t error_ns = 0;
  (void)clock->FastRawNowNs(&error_ns);
  (void)clock->UsesTsc();
  return 0;
}
