// tracer/trace_records.h: what a tracing session records besides events:
// the definitions (regions, communicators), the mapping records (each
// raw->global mapping the node's clocksyncd published: the online
// correction) and the sync sessions, all under one lock, with a flag for
// what the archive's sidecar does not hold yet.
#ifndef CLOCKSYNC_TRACER_TRACE_RECORDS_H_
#define CLOCKSYNC_TRACER_TRACE_RECORDS_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "shm/shm_layout.h"
#include "trace/trace.h"
#include "tracer/locks.h"
#include "tracer/tracer.h"

namespace clocksync {
namespace tracer {

class TraceRecords {
 public:
  explicit TraceRecords(int32_t world_size)
      : world_size_(world_size), rank_limit_(world_size) {}

  // Defines the world communicator (id 0) and resets the hot path's
  // communicator sizes and region count.
  void DefineWorld();
  // The id of the region `name` (defined now unless it is already).
  uint32_t DefineRegion(absl::string_view name);
  // Defines a communicator; InvalidArgument (naming it) for bad ranks,
  // ResourceExhausted beyond the limit.
  absl::StatusOr<uint32_t> DefineCommunicator(absl::string_view name,
                                              absl::Span<const int32_t> ranks);
  // Dynamic spawning: ranks below `ranks_in_run` (attached children,
  // numbered after the world) may be in communicators from now on.
  void AllowRanksBelow(int32_t ranks_in_run);

  // Records the mapping `values`, read at raw_ns (local_ns on the local
  // clock), unless it equals the last one recorded.
  void RecordMapping(const MappingValues& values, int64_t raw_ns,
                     int64_t local_ns);
  // Stores a session (also an empty one).
  void AddSession(trace::SyncSession session);

  // mapping_records, sync_sessions, sync_exchanges.
  void AddStats(TracerStats* stats);

  // For the archive writer: the lock, and what it guards.
  OwnedMutex& mutex() { return mutex_; }
  const std::vector<trace::Region>& regions() const { return regions_; }
  const std::vector<trace::Communicator>& communicators() const {
    return communicators_;
  }
  const std::vector<trace::MappingRecord>& mappings() const {
    return mappings_;
  }
  const std::vector<trace::SyncSession>& sessions() const { return sessions_; }
  // Whether something was recorded since the last call (mutex() held).
  bool TakeDirty() {
    const bool dirty = dirty_;
    dirty_ = false;
    return dirty;
  }

 private:
  const int32_t world_size_;
  // The communicators' rank limit: world_size_, or more once children
  // were attached (0: unknown, no limit).
  std::atomic<int32_t> rank_limit_;
  OwnedMutex mutex_;  // the members below
  std::vector<trace::Region> regions_;
  std::vector<trace::Communicator> communicators_;
  std::vector<trace::MappingRecord> mappings_;
  MappingValues last_mapping_;
  bool have_last_mapping_ = false;
  std::vector<trace::SyncSession> sessions_;
  uint64_t exchanges_ = 0;
  bool dirty_ = false;  // records the sidecar does not hold yet
};

}  // namespace tracer
}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_TRACE_RECORDS_H_
