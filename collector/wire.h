// collector/wire.h: the collector protocol's constants and limits, and the
// conversions between its messages (proto/collector.proto) and the trace
// model (trace/trace.h), with the checks the collector applies to what
// processes send: a value out of range is InvalidArgument naming the field
// ("records.sessions[2].kind: 7 is not a session kind"). Events travel in
// the 40-byte layout of trace/raw_archive.h.
#ifndef CLOCKSYNC_COLLECTOR_WIRE_H_
#define CLOCKSYNC_COLLECTOR_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/collector.pb.h"
#include "trace/trace.h"

namespace clocksync::collector {

inline constexpr uint32_t kProtocolVersion = 1;
// The most event bytes in one EventBatch the collector accepts.
inline constexpr size_t kMaxBatchBytes = 4 << 20;
// The event bytes per batch a process sends (a tracer buffer is split into
// batches of 2400 events). Kept below glibc's mmap threshold (128 KiB) on
// purpose: each batch's buffers on both ends then come from the heap and
// are reused, where multi-MiB batches were mapped and unmapped each time
// and their page faults cost more than the copies (measured:
// docs/COLLECTOR.md, Figures). The per-message cost of gRPC stays small
// at this size.
inline constexpr size_t kSendBatchBytes = 2400 * 40;
// The largest message a collector accepts (a batch with its header, or
// records).
inline constexpr int kMaxMessageBytes = 8 << 20;
// Names (process, host, node, thread, region, communicator, path, clock
// model spec).
inline constexpr size_t kMaxNameBytes = 4096;
// Dynamic spawning: the most children one Attach waits for, and the most
// ranks a run may reach with its attached children.
inline constexpr int32_t kMaxAttachChildren = 4096;
inline constexpr int32_t kMaxRanksInRun = 100000;
// The default window of unacknowledged event bytes per process (Welcome).
inline constexpr uint64_t kDefaultMaxUnackedBytes = 32 << 20;

// trace::ProcessInfo (rank left 0) <-> its message.
void ToProto(const trace::ProcessInfo& info, ProcessInfo* out);
absl::StatusOr<trace::ProcessInfo> FromProto(const ProcessInfo& in,
                                             int32_t rank);

// The records a trace has, or the new ones, as one message.
void AppendRecords(const std::vector<trace::Region>& regions,
                   const std::vector<trace::Communicator>& communicators,
                   const std::vector<trace::MappingRecord>& mappings,
                   const std::vector<trace::SyncSession>& sessions,
                   const std::optional<trace::GroundTruth>& truth,
                   Records* out);

// A Records message checked and converted. `world_size` (0: unknown)
// bounds communicator ranks.
struct DecodedRecords {
  std::vector<trace::Region> regions;
  std::vector<trace::Communicator> communicators;
  std::vector<trace::MappingRecord> mappings;
  std::vector<trace::SyncSession> sessions;
  std::optional<trace::GroundTruth> truth;
};
absl::StatusOr<DecodedRecords> FromProto(const Records& in,
                                         int32_t world_size);

}  // namespace clocksync::collector

#endif  // CLOCKSYNC_COLLECTOR_WIRE_H_
