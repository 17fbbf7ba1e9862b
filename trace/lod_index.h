// trace/lod_index.h: the level-of-detail index of a run, as the Intel Trace
// Analyzer defines level of detail, built once and queried for any interval
// at any resolution at a cost that follows the answer, not the trace.
//
// Levels. Global time from the run's first event (origin_ns) is cut into
// slots of 2^shift ns; level 0 has 2^finest_shift ns slots (chosen so that a
// thread has about 16 events per slot, 1 in runs under 256 Ki events), each
// next level 4 times wider, the
// last one slot for the whole run. A query for [t0, t1) over px pixels reads
// the coarsest level whose slot is at most (t1 - t0) / px (level 0 when the
// resolution is finer than that).
//
// What a level holds:
//   functions    per thread (a row) and slot, one representative: the
//                region innermost for the most time in the slot (ties: the
//                lower region index), spanning its first to its last ns
//                there; consecutive representatives of one region that
//                touch are one record, so a function longer than the slot
//                is one long record, not cut (a run of slots the region
//                fills entirely is one record, whatever its length). Slots
//                with no region open have no record. Regions are unified by
//                name across processes; a collective operation is the region
//                "collective <kind>" (trace/lod_walk.h, as `clocksync-trace
//                lod` does).
//   messages     per (sender row, receiver row, sender slot, receiver slot)
//                one representative: count, mean send and receive times,
//                mean bytes, mean and maximum latency (receive - send, which
//                is negative for a message the correction shows backwards).
//   collectives  per (communicator, slot of the operation's begin) one
//                representative: earliest begin, latest end, the number of
//                participations, the kind (or kLodMixedCollective when
//                kinds differ).
// Profiles are not here: they are exact sums (trace/timeline.h).
//
// The file (WriteLodIndex, OpenLodIndex) is mapped read-only and checked
// before use: magic, version, sizes of every table, every range inside its
// table, a checksum over all of it. Anything wrong is an error (DataLoss,
// naming the file and what), never a crash; the caller rebuilds.
//
// Building is one sequential pass over each thread's event array (no map,
// nothing allocated per event): the finest level accumulates region time
// per slot in dense per-region arrays, each closed slot feeds the next
// level, so the coarser levels cost a fraction of the finest. Each level's
// records are one array of every row (as in the file), in huge pages.
//
// Example:
//   absl::StatusOr<LodIndexData> data =
//       BuildLodIndex(traces, timeline, messages);
//   WriteLodIndex(*data, path);
//   absl::StatusOr<std::unique_ptr<LodIndex>> index = OpenLodIndex(path);
//   LodAnswer answer = (*index)->Query(t0, t1, 1200);
//
// Thread safety: a LodIndex is immutable; Query may run concurrently.

#ifndef CLOCKSYNC_TRACE_LOD_INDEX_H_
#define CLOCKSYNC_TRACE_LOD_INDEX_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hull/correction.h"
#include "trace/huge_page_array.h"
#include "trace/lod_walk.h"
#include "trace/timeline.h"
#include "trace/trace.h"

namespace clocksync::trace {

// CollectiveKind values are 0..8; merged kinds are this.
inline constexpr uint32_t kLodMixedCollective = 9;
// Each level's slots are 2^kLodLevelStep times wider than the one before.
inline constexpr uint32_t kLodLevelStep = 2;

// Records as stored (little-endian, the host's layout).
struct LodFunctionRecord {
  int64_t begin_ns = 0;   // the representative's first ns in its slots
  int64_t end_ns = 0;     // and the ns after its last
  int64_t region_ns = 0;  // its time there
  uint32_t region = 0;    // index into regions()
  uint32_t events = 0;    // events of the thread in the record's slots
  friend bool operator==(const LodFunctionRecord&,
                         const LodFunctionRecord&) = default;
};
static_assert(sizeof(LodFunctionRecord) == 32);

struct LodMessageRecord {
  int64_t send_ns = 0;  // mean send time
  int64_t recv_ns = 0;  // mean receive time
  uint32_t send_row = 0;
  uint32_t recv_row = 0;
  uint32_t count = 0;
  uint32_t reserved = 0;
  double mean_bytes = 0;
  double mean_latency_ns = 0;
  int64_t max_latency_ns = 0;
};
static_assert(sizeof(LodMessageRecord) == 56);

struct LodCollectiveRecord {
  int64_t begin_ns = 0;  // earliest begin
  int64_t end_ns = 0;    // latest end
  uint32_t comm = 0;
  uint32_t kind = 0;   // CollectiveKind, or kLodMixedCollective
  uint32_t count = 0;  // participations (a rank's begin..end each)
  uint32_t reserved = 0;
};
static_assert(sizeof(LodCollectiveRecord) == 32);

struct LodIndexRow {
  int32_t rank = 0;
  uint32_t thread = 0;  // ThreadTrace::thread_index
  std::string name;     // the thread's name
};

// One level's records of every row, row after row, as the file holds them
// (in huge pages once big: trace/huge_page_array.h).
template <typename T>
struct LodTable {
  HugePageArray<T> records;
  // Row r is records [row_end[r - 1] (0 for r = 0), row_end[r]).
  std::vector<uint64_t> row_end;

  size_t rows() const { return row_end.size(); }
  absl::Span<const T> row(size_t r) const {
    const uint64_t first = r == 0 ? 0 : row_end[r - 1];
    return absl::Span<const T>(records.data() + first, row_end[r] - first);
  }
  // Ends the current row: the records appended since the last end.
  void EndRow() { row_end.push_back(records.size()); }
};

// What a builder produces and the file holds.
struct LodIndexData {
  hull::CorrectionKind correction = hull::CorrectionKind::kNone;
  int64_t origin_ns = 0;  // slot 0 of every level starts here
  int64_t end_ns = 0;     // the ns after the last event
  uint32_t finest_shift = 0;
  uint32_t levels = 1;
  std::vector<std::string> regions;
  std::vector<LodIndexRow> rows;
  // [level], each row by time.
  std::vector<LodTable<LodFunctionRecord>> functions;
  // [level], each sender row by send time.
  std::vector<LodTable<LodMessageRecord>> messages;
  // [level], by begin.
  std::vector<std::vector<LodCollectiveRecord>> collectives;

  uint32_t shift(uint32_t level) const {
    return finest_shift + kLodLevelStep * level;
  }
};

// A message to index: both ends on the timeline.
struct LodMessageInput {
  int64_t send_ns = 0;
  int64_t recv_ns = 0;
  uint32_t send_row = 0;
  uint32_t recv_row = 0;
  uint64_t bytes = 0;
};

// The levels of a run from first_ns to last_ns (inclusive) with `events`
// events on `rows` threads: the finest slot is the power of two nearest
// below 16 events' worth of a thread's mean gap (1 event's under 256 Ki
// events; at least 1 ns); levels up to one slot for the run.
void ChooseLodLevels(int64_t first_ns, int64_t last_ns, int64_t events,
                     int64_t rows, LodIndexData* data);

// Builds an index row by row (the streaming form BuildLodIndex uses, and
// benchmarks that never hold a whole trace).
class LodIndexBuilder {
 public:
  // `data` has its levels chosen (ChooseLodLevels); its rows, regions and
  // records are filled by AddRow, AddMessages and Finish.
  explicit LodIndexBuilder(LodIndexData* data);
  ~LodIndexBuilder();

  // The next row: one thread's events in order and their global times.
  void AddRow(LodIndexRow row, absl::Span<const Event> events,
              absl::Span<const int64_t> global_ns,
              RegionTable::Process& regions);
  // Messages, sorted by (send_row, send_ns); rows already added.
  void AddMessages(absl::Span<const LodMessageInput> messages);
  // Collectives gathered by AddRow, the region names.
  void Finish(const RegionTable& regions);

  int64_t unmatched_leaves() const { return unmatched_leaves_; }

 private:
  class Row;
  LodIndexData* data_;
  std::unique_ptr<Row> row_;
  struct Collective {
    uint32_t comm;
    uint32_t kind;
    int64_t begin_ns;
    int64_t end_ns;
  };
  std::vector<Collective> collectives_;
  std::vector<size_t> open_collectives_;
  std::vector<OpenRegion> stack_;
  int64_t unmatched_leaves_ = 0;
};

// The whole index of a timeline's available processes (a row per thread,
// by process then thread) with its matched messages. FailedPrecondition
// when the timeline has no event.
absl::StatusOr<LodIndexData> BuildLodIndex(absl::Span<const ProcessTrace> traces,
                                           const Timeline& timeline,
                                           const MessageMatch& messages);

// Writes `data` to `path` (through a temporary file renamed over it).
absl::Status WriteLodIndex(const LodIndexData& data, const std::string& path);

// A function representative with its row.
struct LodFunctionHit {
  uint32_t row = 0;
  LodFunctionRecord record;
};

struct LodAnswer {
  uint32_t level = 0;
  int64_t slot_ns = 0;
  std::vector<LodFunctionHit> functions;        // by row, then time
  std::vector<LodMessageRecord> messages;       // by sender row, then time
  std::vector<LodCollectiveRecord> collectives;  // by begin
};

// A mapped, checked index file.
class LodIndex {
 public:
  ~LodIndex();
  LodIndex(const LodIndex&) = delete;
  LodIndex& operator=(const LodIndex&) = delete;

  hull::CorrectionKind correction() const { return correction_; }
  int64_t origin_ns() const { return origin_ns_; }
  int64_t end_ns() const { return end_ns_; }
  uint32_t levels() const { return levels_; }
  int64_t slot_ns(uint32_t level) const;
  const std::vector<std::string>& regions() const { return regions_; }
  const std::vector<LodIndexRow>& rows() const { return rows_; }
  size_t file_bytes() const { return size_; }

  // The level a query for [t0, t1) over `px` pixels reads.
  uint32_t LevelFor(int64_t t0, int64_t t1, int32_t px) const;
  // Every representative of that level overlapping [t0, t1): functions
  // whose [begin, end) overlaps, messages whose line (send to receive)
  // does, collectives whose [begin, end] does.
  LodAnswer Query(int64_t t0, int64_t t1, int32_t px) const;
  LodAnswer QueryLevel(int64_t t0, int64_t t1, uint32_t level) const;

 private:
  friend absl::StatusOr<std::unique_ptr<LodIndex>> OpenLodIndex(
      const std::string& path);
  LodIndex() = default;

  struct Range {
    uint64_t first;
    uint64_t count;
  };
  struct Level {
    int64_t max_latency_ns;
    int64_t min_latency_ns;
    int64_t max_collective_ns;
    uint64_t collectives_first;
    uint64_t collectives_count;
  };

  void* map_ = nullptr;
  size_t size_ = 0;
  hull::CorrectionKind correction_ = hull::CorrectionKind::kNone;
  int64_t origin_ns_ = 0;
  int64_t end_ns_ = 0;
  uint32_t finest_shift_ = 0;
  uint32_t levels_ = 0;
  std::vector<std::string> regions_;
  std::vector<LodIndexRow> rows_;
  std::vector<Level> level_info_;
  const Range* function_ranges_ = nullptr;  // [level * rows + row]
  const Range* message_ranges_ = nullptr;
  const LodFunctionRecord* functions_ = nullptr;
  const LodMessageRecord* messages_ = nullptr;
  const LodCollectiveRecord* collectives_ = nullptr;
};

// Maps and checks `path`. NotFound when it does not exist; DataLoss (naming
// the file and the check that failed) when it is not a whole index of this
// version.
absl::StatusOr<std::unique_ptr<LodIndex>> OpenLodIndex(const std::string& path);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_LOD_INDEX_H_
