// trace/trace_sink.h: TraceSink, where one process's trace goes while it is
// recorded: events appended thread by thread as buffers fill, records
// (definitions, mapping records, sync sessions, ground truth) streamed as
// they accumulate, and a Finish. Implementations:
//   Otf2Writer        (trace/otf2_writer.h)  an OTF2 archive plus sidecar
//   RawArchiveWriter  (trace/raw_archive.h)  raw 40-byte events plus sidecar,
//                                            what the collector stores
//   collector::StreamingSink (collector/streaming_sink.h)  a stream to a
//                     collector, falling back to a local Otf2Writer
// The tracer's archive writer (tracer/writer_thread.h) holds one.
//
// Contract shared by all of them:
//   - AppendEvents: stamps strictly increasing per thread across calls
//     (InvalidArgument otherwise), the same thread_name for a thread (the
//     first one given is kept);
//   - StreamRecords: the vectors only grow between calls; a sink writes
//     what it has not written yet (definitions changed by id);
//   - Finish: once; the records whole; a second call is FailedPrecondition;
//   - after an error every call returns that error (sticky);
//   - calls must not overlap (the caller serializes them).
#ifndef CLOCKSYNC_TRACE_TRACE_SINK_H_
#define CLOCKSYNC_TRACE_TRACE_SINK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "trace/trace.h"

namespace clocksync::trace {

class TraceSink {
 public:
  virtual ~TraceSink() = default;

  virtual absl::Status AppendEvents(uint32_t thread_index,
                                    const std::string& thread_name,
                                    absl::Span<const Event> events) = 0;
  virtual absl::Status StreamRecords(
      const std::vector<Region>& regions,
      const std::vector<Communicator>& communicators,
      const std::vector<MappingRecord>& mappings,
      const std::vector<SyncSession>& sessions,
      const std::optional<GroundTruth>& truth) = 0;
  virtual absl::Status Finish(const std::vector<Region>& regions,
                              const std::vector<Communicator>& communicators,
                              const std::vector<MappingRecord>& mappings,
                              const std::vector<SyncSession>& sessions,
                              const std::optional<GroundTruth>& truth) = 0;
  // Where the trace goes, for people: a directory, or a collector's
  // address.
  virtual const std::string& archive_dir() const = 0;
};

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_TRACE_SINK_H_
