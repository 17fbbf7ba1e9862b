// trace/otf2_writer.h: writes one process's trace as an OTF2 archive plus a
// clocksync sidecar file (layout: docs/TRACE_FORMAT.md).
//
//   <archive_dir>/traces.otf2        OTF2 anchor file (written by Finish)
//   <archive_dir>/traces.def         OTF2 global definitions (by Finish)
//   <archive_dir>/traces/<loc>.evt   OTF2 events, one file per thread,
//                                    streamed as AppendEvents is called
//   <archive_dir>/traces/<loc>.def   OTF2 local definitions (empty)
//   <archive_dir>/clocksync.sidecar  text, one record per line: process
//                                    info (at Create), threads (as they
//                                    start), regions, communicators, mapping
//                                    records, sync sessions, ground truth
//                                    (StreamRecords, Finish), end (Finish)
//
// OTF2 mapping: timestamps are the 51+13-bit stamp words themselves, with
// ClockProperties timerResolution = 8192 * 1e9 / tick_period_ns (so a stamp
// divided by the resolution is seconds since origin), globalOffset 0,
// traceLength = the largest stamp + 1. One location group per process
// ("rank N"), one CPU-thread location per thread (id = thread_index).
// Enter/Leave -> Enter/Leave; Send/Recv -> MpiSend/MpiRecv; collective
// begin/end -> MpiCollectiveBegin/MpiCollectiveEnd (the end carries the
// operation, communicator, root, bytes sent by the matching begin and bytes
// received by the end).
//
// Example:
//   absl::StatusOr<std::unique_ptr<Otf2Writer>> writer =
//       Otf2Writer::Create("/tmp/run1/rank0", info);
//   if (!writer.ok()) return writer.status();
//   RETURN_IF_ERROR((*writer)->AppendEvents(0, "main", buffer));
//   ...
//   RETURN_IF_ERROR((*writer)->Finish(regions, comms, mappings, sessions,
//                                     truth));
//
// Thread safety: none. Calls must not overlap (the tracer serializes them,
// e.g. under its own mutex or from one flushing thread).

#ifndef CLOCKSYNC_TRACE_OTF2_WRITER_H_
#define CLOCKSYNC_TRACE_OTF2_WRITER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trace/sidecar.h"
#include "trace/trace.h"
#include "trace/trace_sink.h"

struct OTF2_Archive_struct;
struct OTF2_EvtWriter_struct;

namespace clocksync::trace {

// File names inside an archive directory.
inline constexpr char kOtf2ArchiveName[] = "traces";

class Otf2Writer : public TraceSink {
 public:
  // Creates the directory `archive_dir` (its parent must exist; an existing
  // empty directory is accepted) and starts an archive in it; writes the
  // sidecar's version and process lines right away, so that even a trace
  // whose process dies identifies itself. Errors name the path:
  //   NotFound / PermissionDenied / Unavailable   mkdir or open failed
  //   AlreadyExists                               the directory is not empty
  //   InvalidArgument                             tick_period_ns <= 0
  static absl::StatusOr<std::unique_ptr<Otf2Writer>> Create(
      const std::string& archive_dir, const ProcessInfo& info);

  // If Finish was not called: finishes the archive with generated region
  // and communicator definitions and without mapping records, sessions,
  // truth or the sidecar's end line (readers then mark the trace
  // truncated). Best effort; errors are dropped. Prefer calling Finish.
  ~Otf2Writer() override;

  Otf2Writer(const Otf2Writer&) = delete;
  Otf2Writer& operator=(const Otf2Writer&) = delete;

  // Appends events of one thread. Call repeatedly as buffers fill, with the
  // same `thread_name` for a thread (the first one given is kept).
  // Stamps must be strictly increasing per thread, across calls; an event
  // out of order is InvalidArgument (nothing of that call is written after
  // it). Collective begin/end must nest per thread. OTF2 writes full chunks
  // (1 MiB) to <archive_dir>/traces/<thread_index>.evt as they fill.
  // Disk full and other I/O errors return a status naming the path, never
  // crash; after any error every further call returns the same error.
  // After an OTF2 I/O error the OTF2 archive is abandoned, not closed (OTF2
  // would flush the failed buffer again and corrupt memory): its buffers,
  // at most 4 MiB per thread, leak, and the archive is not readable. The
  // sidecar still gets the records Finish is given.
  absl::Status AppendEvents(uint32_t thread_index,
                            const std::string& thread_name,
                            absl::Span<const Event> events) override;

  // Appends to the sidecar the records it does not hold yet: regions and
  // communicators new or changed since the last call (by id), the mapping
  // records and sessions past those written before (the vectors only grow
  // between calls), and the ground truth once. Lets a reader recover a
  // trace whose process was killed before Finish (SIGKILL). A sidecar
  // write error is returned and kept, as AppendEvents' errors are.
  absl::Status StreamRecords(const std::vector<Region>& regions,
                             const std::vector<Communicator>& communicators,
                             const std::vector<MappingRecord>& mappings,
                             const std::vector<SyncSession>& sessions,
                             const std::optional<GroundTruth>& truth) override;

  // Writes the definitions (regions, communicators, threads, clock
  // properties) and the rest of the sidecar (StreamRecords, then an end
  // line), and closes the archive. After it
  // returns OK the archive is complete and otf2-print reads it. Events may
  // refer only to the regions and communicators given (else
  // InvalidArgument, the archive is still closed). Calling it twice returns
  // FailedPrecondition.
  //
  // Fatal-signal use: Finish throws no exception and takes no lock of its
  // own, so a tracer may call it from a SIGSEGV/SIGABRT handler as a best
  // effort. It is not async-signal-safe: OTF2 and the sidecar allocate
  // memory and use stdio, so a crash inside malloc (or inside another call
  // on this writer) can deadlock the handler. That is the known limit.
  absl::Status Finish(const std::vector<Region>& regions,
                      const std::vector<Communicator>& communicators,
                      const std::vector<MappingRecord>& mappings,
                      const std::vector<SyncSession>& sessions,
                      const std::optional<GroundTruth>& truth) override;

  // The archive directory given to Create.
  const std::string& archive_dir() const override { return archive_dir_; }
  // Events written so far, over all threads.
  uint64_t events_written() const { return events_written_; }

 private:
  struct ThreadState {
    std::string name;
    OTF2_EvtWriter_struct* writer = nullptr;
    bool has_last = false;
    uint64_t last_stamp = 0;
    uint64_t events = 0;
    // Open collective begins: their bytes sent, reported on the end.
    std::vector<uint64_t> open_collective_bytes;
  };

  Otf2Writer(std::string archive_dir, ProcessInfo info);

  absl::Status Fail(absl::Status status);
  absl::Status CheckOtf2(int code, const char* what, const std::string& path);
  absl::Status AppendSidecar(const std::string& text);
  absl::Status WriteDefinitions(const std::vector<Region>& regions,
                                const std::vector<Communicator>& comms);
  void CloseArchive();

  std::string archive_dir_;
  ProcessInfo info_;
  OTF2_Archive_struct* archive_ = nullptr;
  int sidecar_fd_ = -1;
  std::map<uint32_t, ThreadState> threads_;  // by thread_index
  // Ids events referred to (Finish defines any the caller did not): on the
  // per-event path, so the common case (the same id again, or a small one)
  // is a compare or a bit set, not a hash insert.
  class UsedIds {
   public:
    void Mark(uint32_t id) {
      if (id == last_) return;
      last_ = id;
      if (id < kDenseIds) {
        if (id >= dense_.size()) dense_.resize(id + 1, false);
        dense_[id] = true;
      } else {
        sparse_.insert(id);
      }
    }
    std::vector<uint32_t> All() const {
      std::vector<uint32_t> ids;
      for (uint32_t id = 0; id < dense_.size(); ++id) {
        if (dense_[id]) ids.push_back(id);
      }
      ids.insert(ids.end(), sparse_.begin(), sparse_.end());
      return ids;
    }

   private:
    static constexpr uint32_t kDenseIds = 1u << 16;
    uint32_t last_ = UINT32_MAX;
    std::vector<bool> dense_;
    absl::flat_hash_set<uint32_t> sparse_;
  };
  UsedIds used_regions_;
  UsedIds used_comms_;
  // What the sidecar holds already (StreamRecords).
  sidecar::StreamedRecords streamed_;
  uint64_t max_stamp_ = 0;
  uint64_t events_written_ = 0;
  absl::Status error_;  // the first error; sticky
  bool abandoned_ = false;  // OTF2 failed: never call it again
  bool finished_ = false;
  bool unfinished_ = false;  // finished by the destructor: no end line
};

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_OTF2_WRITER_H_
