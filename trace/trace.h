// trace/trace.h: the data model of a clocksync trace, one process at a time.
//
// A process's trace is what the in-process tracer (tracer/) records
// and what the archive (trace/otf2_writer.h, trace/otf2_reader.h,
// docs/TRACE_FORMAT.md) holds:
//
//   ProcessInfo      who the process was and how its stamps map to its clock
//   Region, Communicator   definitions the events refer to by id
//   ThreadTrace      per thread: events in stamp order
//   MappingRecord    the daemon's published raw->global mapping, each time
//                    the tracer saw it change (for the "online" timeline)
//   SyncSession      ping-pong bursts with the master, hull::ProbeSamples
//                    (for the post-mortem corrections in hull/postmortem.h)
//   GroundTruth      test runs only: the process's modeled clock and the
//                    master's raw->global offset, so errors can be measured
//
// Clocks. Three clocks appear, all in ns:
//   local   the clock the tracer stamps events with (ProcessInfo::origin_ns
//           + tick * tick_period_ns). In production it is the host's
//           CLOCK_MONOTONIC_RAW, so local == raw.
//   raw     the host's CLOCK_MONOTONIC_RAW, the clock the daemon's published
//           mapping takes as input. In tests a process can run on a modeled
//           clock on top of raw (GroundTruth): then local = model(raw).
//   global  the master's clock (Unix-epoch ns): what every correction
//           produces and what the truth is measured in.
//
// Plain structs, no behaviour beyond small helpers; safe to copy.

#ifndef CLOCKSYNC_TRACE_TRACE_H_
#define CLOCKSYNC_TRACE_TRACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"
#include "hull/correction.h"
#include "hull/probe_sample.h"

namespace clocksync::trace {

// Identity of one traced process, and the meaning of its stamps.
struct ProcessInfo {
  int32_t rank = 0;          // the process's index in the program (0..n-1)
  std::string process_name;  // e.g. the program name
  int64_t pid = 0;           // operating-system process id
  std::string hostname;      // host the process ran on
  std::string node_id;       // clocksyncd node id serving the host ("" none)
  std::string shm_path;      // segment the tracer read the mapping from
  // Local-clock time (ns) that tick 0 of the stamps stands for: an event
  // with tick t happened at local time origin_ns + t * tick_period_ns.
  int64_t origin_ns = 0;
  // Local ns per stamp tick. The tracer uses 1.0 (1 ns ticks).
  double tick_period_ns = 1.0;
};

// A code region (function, phase, MPI call...). Events refer to it by id.
struct Region {
  uint32_t id = 0;
  std::string name;
};

// A communicator: a set of processes messages and collectives run within.
// `ranks[i]` is the program rank (ProcessInfo::rank) of the communicator's
// rank i. Id 0 is the world: every rank, in order (kWorldCommunicator).
struct Communicator {
  uint32_t id = 0;
  std::string name;
  std::vector<int32_t> ranks;
};

inline constexpr uint32_t kWorldCommunicator = 0;

enum class EventKind : uint8_t {
  kEnter = 0,            // region entered
  kLeave = 1,            // region left
  kSend = 2,             // point-to-point message sent
  kRecv = 3,             // point-to-point message received (completed)
  kCollectiveBegin = 4,  // collective operation started
  kCollectiveEnd = 5,    // collective operation completed
};

enum class CollectiveKind : uint8_t {
  kBarrier = 0,
  kBcast = 1,
  kGather = 2,
  kScatter = 3,
  kReduce = 4,
  kAllreduce = 5,
  kAlltoall = 6,
  kAllgather = 7,
  kOther = 8,
};

// "enter", "leave", "send", "recv", "collective_begin", "collective_end".
absl::string_view EventKindName(EventKind kind);
// "barrier", "bcast", ..., "other".
absl::string_view CollectiveKindName(CollectiveKind kind);

// One event, fixed size (40 bytes) and trivially copyable so the tracer can
// keep it in preallocated per-thread buffers. Which fields mean something
// depends on `kind`; the others are 0 (peer: -1):
//
//   kind               region  peer             tag  comm  collective bytes
//   kEnter / kLeave    yes     -                -    -     -          -
//   kSend              -       receiver         yes  yes   -          sent
//   kRecv              -       sender           yes  yes   -          received
//   kCollectiveBegin   -       root or -1       -    yes   yes        sent
//   kCollectiveEnd     -       root or -1       -    yes   yes        received
//
// `peer` and `root` are ranks *within the communicator* `comm` (as in MPI
// and OTF2); for the world communicator that is the program rank.
struct Event {
  // Intel-style stamp of the local clock: hull::PackStamp(tick, counter),
  // tick = (local_ns - ProcessInfo::origin_ns) / tick_period_ns, counter
  // orders events on one tick (hull::TraceStamper makes them). Strictly
  // increasing within a thread.
  uint64_t stamp = 0;
  // Bytes sent (kSend, kCollectiveBegin) or received (kRecv,
  // kCollectiveEnd).
  uint64_t bytes = 0;
  uint32_t region = 0;  // Region::id (kEnter, kLeave)
  int32_t peer = -1;    // communicator rank of the other end or root; -1 none
  uint32_t tag = 0;     // message tag (kSend, kRecv)
  uint32_t comm = 0;    // Communicator::id (messages and collectives)
  EventKind kind = EventKind::kEnter;
  CollectiveKind collective = CollectiveKind::kOther;  // collectives only

  friend bool operator==(const Event&, const Event&) = default;
};

static_assert(sizeof(Event) <= 40, "Event must stay small: tracer buffers");
static_assert(std::is_trivially_copyable_v<Event>);

// The events of one thread, in stamp order.
struct ThreadTrace {
  uint32_t thread_index = 0;  // 0..n-1 within the process, unique
  std::string name;           // e.g. "main", "worker 3"
  std::vector<Event> events;
};

// The daemon's raw->global mapping (client/shm_layout.h) as the tracer saw
// it when it changed, and when. Evaluated at a raw time raw_ns:
//   dt = raw_ns - anchor_raw_ns
//   global = anchor_global_ns + dt + dt * rate_adj
//   bound  = bound_at_anchor_ns + |dt| * bound_growth_ppb * 1e-9
struct MappingRecord {
  int64_t local_ns = 0;  // the process's local clock when it saw the change
  int64_t raw_ns = 0;    // host CLOCK_MONOTONIC_RAW at the same moment
  int64_t anchor_raw_ns = 0;
  int64_t anchor_global_ns = 0;
  double rate_adj = 0.0;  // (global ns per raw ns) - 1; + = local slow
  int64_t bound_at_anchor_ns = 0;
  double bound_growth_ppb = 0.0;
  uint32_t state = 0;  // clocksync_state (low byte of the status word)
  uint32_t flags = 0;  // CLOCKSYNC_STATUS_* flags (status word without state)

  // The mapping as a segment in force from raw_ns on (hull/correction.h).
  hull::MappingSegment Segment() const {
    return hull::MappingSegment{raw_ns, anchor_raw_ns, anchor_global_ns,
                                rate_adj};
  }
  // Global ns at raw time raw_ns, rounded to nearest (saturating).
  int64_t GlobalAtRaw(int64_t raw) const { return Segment().GlobalAtRaw(raw); }
  // Error bound at raw time raw_ns, in ns (rounded up).
  int64_t BoundAtRaw(int64_t raw) const;

  friend bool operator==(const MappingRecord&, const MappingRecord&) = default;
};

enum class SyncSessionKind : uint8_t {
  kInit = 0,      // at tracer start
  kTimesync = 1,  // asked for by the application
  kPeriodic = 2,  // taken by the tracer on a timer
  kFinalize = 3,  // at tracer end
};

// "init", "timesync", "periodic", "finalize".
absl::string_view SyncSessionKindName(SyncSessionKind kind);

// One burst of exchanges taken close together. Each exchange is a
// hull::ProbeSample: t1 and t4 on the process's local clock, t2 and t3 the
// master's global time when it received the request and sent the answer
// (parent_bound_ns 0: the master).
struct SyncSession {
  SyncSessionKind kind = SyncSessionKind::kInit;
  std::vector<hull::ProbeSample> exchanges;

  friend bool operator==(const SyncSession&, const SyncSession&) = default;
};

// Test runs only: what the process's clocks really were.
//   local(raw) = model_origin_raw_ns
//                + ModeledClock(clock_model_spec).LocalAt(raw
//                                                   - model_origin_raw_ns)
// (hull/clock_model.h; empty spec: local == raw), and the master runs on
// the host's raw clock: true global = raw + master_offset_ns. The true
// global time of a local reading L is raw + master_offset_ns where raw is
// the model's inverse at L (trace/timeline.h, ModelInverse).
struct GroundTruth {
  std::string clock_model_spec;  // hull::ParseClockModel syntax; "" = none
  int64_t model_origin_raw_ns = 0;
  int64_t master_offset_ns = 0;  // global = raw + master_offset_ns

  friend bool operator==(const GroundTruth&, const GroundTruth&) = default;
};

// Everything recorded about one process.
struct ProcessTrace {
  ProcessInfo info;
  std::vector<Region> regions;
  std::vector<Communicator> communicators;
  std::vector<ThreadTrace> threads;  // ordered by thread_index
  std::vector<MappingRecord> mappings;  // in the order seen (raw_ns rising)
  std::vector<SyncSession> sessions;    // in time order
  std::optional<GroundTruth> truth;
  // The reader found an incomplete tail (cut event file, cut sidecar, or a
  // trace whose writer never finished); what is here is the complete part.
  bool truncated = false;
  // Why `truncated` is set, for people (empty otherwise).
  std::string truncation_note;
};

// Local ns of a stamp: origin_ns + tick * tick_period_ns, rounded.
int64_t StampToLocalNs(const ProcessInfo& info, uint64_t stamp);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_TRACE_H_
