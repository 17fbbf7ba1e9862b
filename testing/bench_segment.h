// testing/bench_segment.h: a benchmark's stand-in for the daemon: a
// private temporary directory holding a published shared-memory segment
// that a thread republishes with a fresh mapping every 100 ms (as a slow
// sync loop would), so that readers stay on their hot path and writers'
// mapping changes happen at a realistic rate.
//
// Example:
//   std::unique_ptr<clocksync::bench::BenchSegment> segment =
//       clocksync::bench::BenchSegment::Create("clocksync_now_benchmark");
//   absl::StatusOr<clocksync::Clock> clock =
//       clocksync::Clock::Open(segment->shm_path());
//   ...
//   segment.reset();  // stops, closes, removes the directory
//
// Thread safety: Create(), Stop() and the destructor from one thread.
#ifndef CLOCKSYNC_TESTING_BENCH_SEGMENT_H_
#define CLOCKSYNC_TESTING_BENCH_SEGMENT_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "shm/shm_publisher.h"

namespace clocksync::bench {

// A synced mapping anchored now (CLOCK_MONOTONIC_RAW): global = raw + 1 s,
// rate_adj 12.345 ppm, bound 800 ns growing 0.5 ppb.
Mapping FreshMapping();

class BenchSegment {
 public:
  // Creates $TEST_TMPDIR/<name>.XXXXXX (/tmp without TEST_TMPDIR), opens a
  // ShmPublisher at shm_path(), publishes FreshMapping() and starts the
  // republishing thread. A benchmark cannot run without it: on failure
  // prints what failed to stderr and exits with status 1.
  static std::unique_ptr<BenchSegment> Create(const std::string& name);
  // Stop(), then removes the directory and everything in it.
  ~BenchSegment();
  BenchSegment(const BenchSegment&) = delete;
  BenchSegment& operator=(const BenchSegment&) = delete;

  // Stops the republishing thread and closes the publisher (which removes
  // the segment). Idempotent.
  void Stop();

  // The temporary directory (for other files of the benchmark, e.g. a trace).
  const std::string& dir() const { return dir_; }
  // dir() + "/clocksync.shm".
  const std::string& shm_path() const { return shm_path_; }

 private:
  BenchSegment(std::string dir, ShmPublisher publisher);

  const std::string dir_;
  const std::string shm_path_;
  std::optional<ShmPublisher> publisher_;
  std::atomic<bool> stop_{false};
  std::thread republisher_;
};

}  // namespace clocksync::bench

#endif  // CLOCKSYNC_TESTING_BENCH_SEGMENT_H_
