// shm/shm_publisher.h: ShmPublisher, the daemon's writer of the
// shared-memory segment that client/clock.h reads (layout and seqlock
// protocol: shm/shm_layout.h; field by field: docs/SHM_LAYOUT.md).
//
// Example:
//   absl::StatusOr<ShmPublisher> publisher = ShmPublisher::Open(shm_path);
//   if (!publisher.ok()) return publisher.status();  // names path and errno
//   Mapping mapping;
//   mapping.anchor_raw_ns = ...; mapping.anchor_global_ns = ...;
//   mapping.state = CLOCKSYNC_STATE_SYNCED;
//   RETURN_IF_ERROR(publisher->Publish(mapping));
//
// Open() creates the file atomically: a unique temporary name next to the
// path, ftruncate, mmap, header and an initial UNSYNCED mapping written,
// then rename() over the path. A reader therefore never sees a half-written
// file, and every daemon start leaves a new inode behind the path, which is
// how readers notice a restart and re-map. Close() (also the destructor)
// marks the mapping CLOCKSYNC_STATUS_CLOSED, removes the file if the path
// still names it (not a successor's file) and unmaps.
//
// Thread safety: one writer. Publish() and Close() must not be called
// concurrently with each other (the sync loop owns the publisher); readers in
// other threads or processes are safe at any time.
#ifndef CLOCKSYNC_SHM_SHM_PUBLISHER_H_
#define CLOCKSYNC_SHM_SHM_PUBLISHER_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shm/shm_layout.h"

namespace clocksync {

// One local->global mapping as the daemon publishes it. Raw times are host
// CLOCK_MONOTONIC_RAW readings in ns, the clock every reader reads.
struct Mapping {
  // Raw time of the anchor point, in ns.
  int64_t anchor_raw_ns = 0;
  // Global time at the anchor point, in ns.
  int64_t anchor_global_ns = 0;
  // (Global ns per raw ns) - 1, i.e. the drift; 1e-9 is 1 ppb. Positive
  // when the local clock is slow. |rate_adj| <= 0.01; published rounded to
  // 2^-64.
  double rate_adj = 0.0;
  // Half-width of [earliest, latest] at the anchor, in ns; 0..2^61.
  int64_t bound_at_anchor_ns = 0;
  // Growth of the half-width per ns away from the anchor, in ppb; 0..5e7;
  // published rounded up to a multiple of 2^-36 ns/ns (0.0146 ppb).
  double bound_growth_ppb = 0.0;
  // Synchronization state (UNSYNCED..HOLDOVER).
  clocksync_state state = CLOCKSYNC_STATE_UNSYNCED;
  // True when this mapping steps global time instead of slewing it.
  bool stepped = false;
  // Depth of this node in the sync tree (0 = master); <= 65535.
  uint32_t depth = 0;
};

class ShmPublisher {
 public:
  struct Options {
    // Stamps update_raw_ns of each Publish(). Readers compare it with their
    // own CLOCK_MONOTONIC_RAW, so production leaves it empty (= that clock);
    // tests inject one to fake old updates.
    std::function<int64_t()> raw_clock_ns;
    // The layout written: CLOCKSYNC_SHM_LAYOUT_VERSION (2, with the TSC
    // section), or 1 (128 bytes, no TSC section) for client libraries
    // older than the TSC section, which refuse version 2.
    uint32_t layout_version = CLOCKSYNC_SHM_LAYOUT_VERSION;
    // The header's tree_id from the start (a master knows its tree; a node
    // learns it later: SetTreeId). 0: unknown.
    uint64_t tree_id = 0;
  };

  // The tree id of the tree whose master is named `master_node_id`: a
  // 64-bit FNV-1a hash of "clocksync-tree:" and the name, never 0. The
  // same function on every node, so that all nodes of one tree publish one
  // value (the LTTng clock plugin derives its clock uuid from it).
  static uint64_t TreeIdOfMaster(std::string_view master_node_id);

  // Half-width published before the first Publish() ("unknown"), in ns;
  // also the largest bound_at_anchor_ns accepted.
  static constexpr int64_t kUnknownBoundNs = int64_t{1} << 61;
  // Largest |rate_adj| accepted: 1% (10^7 ppb), far beyond any oscillator.
  static constexpr double kMaxRateAdj = 0.01;
  // Largest bound_growth_ppb accepted (the layout holds up to 6.25e7 ppb).
  static constexpr double kMaxBoundGrowthPpb = 5e7;

  // Creates the segment at `path` (mode 0644), replacing any file there.
  // The directory must exist. Errors name the path and the errno text;
  // InvalidArgument for a layout version other than 1 and 2.
  static absl::StatusOr<ShmPublisher> Open(const std::string& path,
                                           Options options);
  static absl::StatusOr<ShmPublisher> Open(const std::string& path);

  ShmPublisher(ShmPublisher&& other) noexcept;
  ShmPublisher& operator=(ShmPublisher&& other) noexcept;
  ShmPublisher(const ShmPublisher&) = delete;
  ShmPublisher& operator=(const ShmPublisher&) = delete;
  ~ShmPublisher();

  // Validates `mapping` and writes it under the seqlock, with
  // update_raw_ns = now and the next generation. InvalidArgument (naming the
  // field) leaves the segment unchanged; FailedPrecondition after Close().
  absl::Status Publish(const Mapping& mapping);

  // Writes the TSC -> raw mapping (shm_layout.h; max_ticks 0 marks it
  // invalid) under its seqlock. FailedPrecondition after Close() and for a
  // version-1 segment (which has no TSC section).
  absl::Status PublishTsc(const TscValues& tsc);
  // Writes the header's tree_id (release store; 0: unknown). Safe while
  // readers read; a no-op after Close(). Only the writer's thread calls it.
  void SetTreeId(uint64_t tree_id);
  uint64_t tree_id() const { return options_.tree_id; }
  // Marks the mapping closed, removes the file if the path still names it,
  // unmaps. Idempotent.
  void Close();

  const std::string& path() const { return path_; }
  // Number of mappings published so far (the segment's generation).
  uint64_t generation() const { return generation_; }
  // Number of TSC mappings published so far.
  uint64_t tsc_generation() const { return tsc_generation_; }
  bool is_open() const { return shm_ != nullptr; }

 private:
  ShmPublisher(std::string path, Options options, clocksync_shm* shm,
               size_t length, dev_t dev, ino_t ino);
  int64_t RawNowNs() const;

  std::string path_;
  Options options_;
  // The writable mapping of the whole segment; nullptr once closed.
  clocksync_shm* shm_ = nullptr;
  size_t length_ = 0;
  // Identity of the file we created, so Close() never removes a successor's.
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  uint64_t generation_ = 0;
  uint64_t tsc_generation_ = 0;
  // The values last written (re-written with CLOSED by Close()).
  MappingValues last_;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_SHM_SHM_PUBLISHER_H_
