// trace/packed_events.h: the packed event encoding, what processes stream
// to the collector and what raw archives (trace/raw_archive.h) store: about
// 6 bytes for an Enter or Leave where the fixed layout takes 40, so every
// copy on the way (the tracer's batch, gRPC, both sockets, the collector's
// page cache) moves a seventh of the bytes.
//
// A chunk is self-contained (the first stamp is absolute):
//   u32 payload_bytes   u32 event_count   (little-endian)
//   event_count records, payload_bytes in all:
//     u8 head   bits 0-3 kind (EventKind), bit 4 `bytes` follows, bit 5
//               `region` follows, bit 6 peer/tag/comm follow, bit 7
//               `collective` follows (fields absent are the defaults:
//               bytes 0, region 0, peer -1, tag 0, comm 0, kOther)
//     varint    stamp − previous stamp of the chunk (the first: the stamp);
//               at least 1 after the first (stamps rise strictly)
//     varint    bytes                       (bit 4)
//     varint    region                      (bit 5)
//     varint    zigzag(peer), tag, comm     (bit 6)
//     u8        collective                  (bit 7)
// Varints are LEB128 (7 bits a byte, low first), at most 10 bytes for 64
// bits and 5 for 32, with no bits beyond the field's width.
//
// Thread safety: pure functions.
#ifndef CLOCKSYNC_TRACE_PACKED_EVENTS_H_
#define CLOCKSYNC_TRACE_PACKED_EVENTS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trace/trace.h"

namespace clocksync::trace {

inline constexpr size_t kPackedChunkHeaderBytes = 8;
// The longest record: head, two 10-byte varints, four 5-byte ones, a byte.
inline constexpr size_t kPackedMaxRecordBytes = 1 + 10 + 10 + 5 + 5 + 5 + 5 + 1;

// The most bytes a chunk of `events` events takes.
constexpr size_t PackedBound(size_t events) {
  return kPackedChunkHeaderBytes + events * kPackedMaxRecordBytes;
}

// Writes one chunk holding `events` (stamps strictly rising) to `out`,
// which has room for PackedBound(events.size()) bytes; returns its size.
size_t PackEventsTo(absl::Span<const Event> events, char* out);
// Appends one chunk holding `events` to *out.
void PackEvents(absl::Span<const Event> events, std::string* out);

// What a checked chunk holds.
struct PackedChunkInfo {
  size_t chunk_bytes = 0;  // header + payload
  uint32_t events = 0;
  uint64_t first_stamp = 0;
  uint64_t last_stamp = 0;  // 0 when the chunk is empty
};

// Checks the chunk at the start of `data` (kinds, varints, rising stamps,
// the counts of the header) and, when `out` is not null, appends its events.
// `data` may hold more after the chunk (a file of chunks). InvalidArgument
// says what and where: "event 17: kind 9 is not an event kind"; a chunk cut
// short is OutOfRange ("chunk of 9600 bytes, 5120 present") so that a
// reader can tell a cut file end from damage.
absl::Status UnpackChunk(absl::string_view data, PackedChunkInfo* info,
                         std::vector<Event>* out);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_PACKED_EVENTS_H_
