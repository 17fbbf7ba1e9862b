// trace/perfetto_export.h: a global timeline (trace/timeline.h) written as
// Perfetto's protobuf trace format (trace/perfetto_trace.proto, a subset of
// Perfetto's published schema), which ui.perfetto.dev and trace_processor
// open natively and which is several times smaller than the Chrome JSON.
//
// Layout of the file: a `Trace` whose packets are written one at a time
// (field 1, length-delimited), so memory does not grow with the trace.
//   - one process track per rank: uuid (rank + 1) << 32, pid rank + 1 (pid 0
//     is the idle task in Perfetto's model), name "rank R NAME@HOST";
//   - one thread track per thread: uuid (rank + 1) << 32 | (thread + 1),
//     parent the process track, tid unique within the file
//     (kPerfettoTidBase + a running count), the thread's name;
//   - each thread's events form one packet sequence
//     (trusted_packet_sequence_id = 1 + the thread's running count), in the
//     thread's order, its names interned on that sequence; the sequence's
//     first packet (the thread's track descriptor) clears the incremental
//     state and makes the thread's track the default of its events
//     (TracePacketDefaults), which therefore carry no track_uuid;
//   - regions: TYPE_SLICE_BEGIN (name the region) / TYPE_SLICE_END;
//   - collectives: slices named after the kind ("barrier", ...) with debug
//     annotations comm, root, bytes_sent (begin) and bytes_received (end);
//   - sends and receives: TYPE_INSTANT "send" / "recv" with peer, tag,
//     comm and bytes; a matched message is a flow from the send (flow_ids)
//     to its receive (terminating_flow_ids), id 1 + the message's index.
// Timestamps are the corrected global ns (the UI shows them from the
// trace's start).
//
// Thread safety: a pure function of its arguments.

#ifndef CLOCKSYNC_TRACE_PERFETTO_EXPORT_H_
#define CLOCKSYNC_TRACE_PERFETTO_EXPORT_H_

#include <cstdint>
#include <ostream>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "trace/timeline.h"
#include "trace/trace.h"

namespace clocksync::trace {

inline constexpr int32_t kPerfettoTidBase = 1 << 20;

// Track uuids as described above.
uint64_t PerfettoProcessUuid(int32_t rank);
uint64_t PerfettoThreadUuid(int32_t rank, uint32_t thread_index);

// Writes the timeline's available processes to `out` (binary). Fails with
// InvalidArgument when a global time is negative (Perfetto's timestamps are
// unsigned; the message names the rank), with DataLoss when `out` fails.
absl::Status WritePerfettoTrace(absl::Span<const ProcessTrace> traces,
                                const Timeline& timeline,
                                const MessageMatch& messages,
                                std::ostream& out);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_PERFETTO_EXPORT_H_
