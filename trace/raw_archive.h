// trace/raw_archive.h: the raw archive, the second on-disk form of one
// process's trace: the collector (collector/) stores what processes stream
// to it this way, because appending received bytes to a file is cheap and
// durable the moment write() returns (the page cache outlives a killed
// collector), where OTF2 keeps chunks in memory. The trace tools read it
// like an OTF2 archive (ReadProcessTrace dispatches here), so every
// correction stays available afterwards.
//
//   <dir>/clocksync.raw               marker: "clocksync-raw 2"
//   <dir>/clocksync.sidecar           the sidecar (trace/sidecar.h), as in an
//                                     OTF2 archive; its end line (Finish)
//                                     says the archive is complete
//   <dir>/events.<thread_index>.raw   the thread's events: packed chunks
//                                     (trace/packed_events.h), appended as
//                                     they arrived
//
// Version 1 archives (marker "clocksync-raw 1") hold 40-byte records in
// the fixed layout below instead; they are still read. The fixed layout
// (kEventWireBytes = 40, little-endian) is also what processes of
// version 1 stream (proto/collector.proto, EventBatch.events):
//   0  stamp u64   8  bytes u64   16 region u32   20 peer i32
//   24 tag u32     28 comm u32    32 kind u8      33 collective u8
//   34..39 zero (ignored on reading)
//
// Thread safety: a RawArchiveWriter's calls must not overlap;
// ReadRawArchive may run on several threads for different archives.
#ifndef CLOCKSYNC_TRACE_RAW_ARCHIVE_H_
#define CLOCKSYNC_TRACE_RAW_ARCHIVE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trace/sidecar.h"
#include "trace/trace.h"
#include "trace/trace_sink.h"

namespace clocksync::trace {

inline constexpr size_t kEventWireBytes = 40;
inline constexpr char kRawMarkerFileName[] = "clocksync.raw";

// Appends `events` to *out in the layout above.
void EncodeEvents(absl::Span<const Event> events, std::string* out);
// Writes `events` in the layout above to `out`, which has room for
// events.size() * kEventWireBytes bytes.
void EncodeEventsTo(absl::Span<const Event> events, char* out);

// Checks `encoded` (a whole number of records, known kinds and collective
// kinds) and, when `out` is not null, appends the events to it.
// InvalidArgument names the record: "event 17: kind 9 is not an event
// kind".
absl::Status DecodeEvents(absl::string_view encoded, std::vector<Event>* out);

// Whether `dir` holds a raw archive (its marker file).
bool IsRawArchive(const std::string& dir);

class RawArchiveWriter : public TraceSink {
 public:
  // Creates `dir` (its parent must exist; an existing empty directory is
  // accepted), the marker and the sidecar with its version and process
  // lines. Errors name the path, as Otf2Writer::Create's.
  static absl::StatusOr<std::unique_ptr<RawArchiveWriter>> Create(
      const std::string& dir, const ProcessInfo& info);
  ~RawArchiveWriter() override;
  RawArchiveWriter(const RawArchiveWriter&) = delete;
  RawArchiveWriter& operator=(const RawArchiveWriter&) = delete;

  absl::Status AppendEvents(uint32_t thread_index,
                            const std::string& thread_name,
                            absl::Span<const Event> events) override;
  // The same for one packed chunk (as it comes over the wire): checked as
  // UnpackChunk does and for stamps above the thread's last, then written
  // as it is, without a copy. Nothing is written when the chunk is refused
  // (InvalidArgument naming the event; not sticky, the archive is
  // unharmed).
  absl::Status AppendPacked(uint32_t thread_index,
                            const std::string& thread_name,
                            absl::string_view chunk);
  // The same for events in the fixed 40-byte layout (a version 1 process),
  // checked as DecodeEvents does, then packed.
  absl::Status AppendEncoded(uint32_t thread_index,
                             const std::string& thread_name,
                             absl::string_view encoded);
  absl::Status StreamRecords(const std::vector<Region>& regions,
                             const std::vector<Communicator>& communicators,
                             const std::vector<MappingRecord>& mappings,
                             const std::vector<SyncSession>& sessions,
                             const std::optional<GroundTruth>& truth) override;
  // The records, then the sidecar's end line; closes the files.
  absl::Status Finish(const std::vector<Region>& regions,
                      const std::vector<Communicator>& communicators,
                      const std::vector<MappingRecord>& mappings,
                      const std::vector<SyncSession>& sessions,
                      const std::optional<GroundTruth>& truth) override;
  const std::string& archive_dir() const override { return dir_; }

  uint64_t events_written() const { return events_written_; }
  // The largest stamp written, over all threads (0: none).
  uint64_t max_stamp() const { return max_stamp_; }

 private:
  struct ThreadFile {
    int fd = -1;
    bool has_last = false;
    uint64_t last_stamp = 0;
  };
  RawArchiveWriter(std::string dir, ProcessInfo info);
  absl::StatusOr<ThreadFile*> Thread(uint32_t thread_index,
                                     const std::string& thread_name);
  absl::Status WriteAll(int fd, const char* data, size_t size,
                        const std::string& path);
  absl::Status AppendSidecar(const std::string& text);
  absl::Status Fail(absl::Status status);

  const std::string dir_;
  const ProcessInfo info_;
  int sidecar_fd_ = -1;
  std::map<uint32_t, ThreadFile> threads_;
  sidecar::StreamedRecords streamed_;
  uint64_t events_written_ = 0;
  uint64_t max_stamp_ = 0;
  std::string packed_;  // AppendEvents' chunk (reused)
  absl::Status error_;  // the first I/O error; sticky
  bool finished_ = false;
};

// Reads a raw archive (either version). An event file that ends in a cut
// chunk (version 1: a size not a multiple of 40), a sidecar without its end line, or fewer events
// than the end line counts make the trace `truncated` (with a note), not
// an error. Errors name the file: NotFound (the directory or the sidecar),
// InvalidArgument (a malformed sidecar line, an unknown event kind, stamps
// not rising within a thread).
absl::StatusOr<ProcessTrace> ReadRawArchive(const std::string& dir);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_RAW_ARCHIVE_H_
