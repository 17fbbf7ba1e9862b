// trace/sidecar.h: the clocksync sidecar file of an archive
// (<archive_dir>/clocksync.sidecar), which holds what OTF2 has no record
// for: process info, mapping records, sync sessions, ground truth.
//
// Line based, so that a file cut anywhere loses at most its last record:
//
//   clocksync-sidecar 1
//   process rank=0 pid=4242 origin_ns=... tick_period_ns=1 name=app host=n01 node_id=n01 shm_path=/run/clocksyncd/clocksync.shm
//   mapping local_ns=... raw_ns=... anchor_raw_ns=... anchor_global_ns=... rate_adj=1.2e-05 bound_at_anchor_ns=... bound_growth_ppb=... state=2 flags=256
//   session kind=init exchanges=2 x=t1,t2,t3,t4;t1,t2,t3,t4
//   truth master_offset_ns=... model_origin_raw_ns=... clock_model=offset=5ms%2Cfrequency_ppm=3
//   thread index=0 name=main
//   region id=0 name=compute
//   comm id=1 name=pair ranks=2,0
//   end events=123456 anchor_fnv1a=0123456789abcdef defs_fnv1a=fedcba9876543210
//
// Fields are key=value separated by one space; values are percent-encoded
// (%XX for '%', ' ', '=', ',', ';' and bytes outside 0x21..0x7e), so any
// string survives. Integers are decimal, doubles "%.17g" (exact round trip).
// Unknown keys and unknown record types are ignored (forward compatible);
// a missing key, a bad number or an unknown version is an error. Only the
// "end" line, written last by Otf2Writer::Finish, says the file is complete.
// The writer streams records as they happen (Otf2Writer::AppendEvents,
// StreamRecords), so that the sidecar of a process killed before Finish
// still names its threads, regions and communicators and holds its mapping
// records and sessions: the reader rebuilds the archive's definitions from
// it (otf2_reader.h). A later region/comm/thread line with the same id
// replaces an earlier one.
// docs/TRACE_FORMAT.md has the full grammar.

#ifndef CLOCKSYNC_TRACE_SIDECAR_H_
#define CLOCKSYNC_TRACE_SIDECAR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trace/trace.h"

namespace clocksync::trace {

// The sidecar's file name inside an archive directory.
inline constexpr char kSidecarFileName[] = "clocksync.sidecar";

}  // namespace clocksync::trace

namespace clocksync::trace::sidecar {

inline constexpr char kMagic[] = "clocksync-sidecar";
inline constexpr int kVersion = 1;

// Percent-encoding of a value (see above) and its inverse. Decode fails on
// a malformed escape.
std::string Encode(absl::string_view value);
absl::StatusOr<std::string> Decode(absl::string_view value);

// One line each, newline included.
std::string VersionLine();
std::string ProcessLine(const ProcessInfo& info);
std::string MappingLine(const MappingRecord& record);
std::string SessionLine(const SyncSession& session);
std::string TruthLine(const GroundTruth& truth);
std::string ThreadLine(uint32_t thread_index, const std::string& name);
std::string RegionLine(const Region& region);
std::string CommunicatorLine(const Communicator& comm);
// `checksums`: the FNV-1a 64 of the finished OTF2 anchor and global
// definition files (see FileChecksum), or none.
struct DefinitionChecksums {
  uint64_t anchor = 0;       // traces.otf2
  uint64_t definitions = 0;  // traces.def
};
std::string EndLine(uint64_t events,
                    const std::optional<DefinitionChecksums>& checksums);

// What a streamed sidecar holds already (the lines of every region and
// communicator by id, how many mapping records and sessions, whether the
// truth), so that a writer appends only what is new.
class StreamedRecords {
 public:
  // The lines of the records not streamed yet: regions and communicators
  // new or changed since the last call (by id), the mapping records and
  // sessions past those streamed before (the vectors only grow between
  // calls), the truth once. They count as streamed from now on.
  std::string NewLines(const std::vector<Region>& regions,
                       const std::vector<Communicator>& communicators,
                       const std::vector<MappingRecord>& mappings,
                       const std::vector<SyncSession>& sessions,
                       const std::optional<GroundTruth>& truth);

 private:
  std::map<uint32_t, std::string> regions_;  // id -> line
  std::map<uint32_t, std::string> comms_;    // id -> line
  size_t mappings_ = 0;
  size_t sessions_ = 0;
  bool truth_ = false;
};

// FNV-1a 64 of a file's bytes; NotFound/Unavailable naming the file.
absl::StatusOr<uint64_t> FileChecksum(const std::string& path);

// A thread as the sidecar names it.
struct ThreadName {
  uint32_t index = 0;
  std::string name;
};

// Everything a sidecar holds.
struct Contents {
  ProcessInfo info;
  std::vector<MappingRecord> mappings;
  std::vector<SyncSession> sessions;
  std::optional<GroundTruth> truth;
  // Ordered by id / index; the last line of an id wins.
  std::vector<ThreadName> threads;
  std::vector<Region> regions;
  std::vector<Communicator> communicators;
  bool complete = false;  // the "end" line was there
  uint64_t end_events = 0;  // events the writer counted (end line)
  // The end line's checksums of the OTF2 definitions, when it has them.
  std::optional<DefinitionChecksums> checksums;
  // Why the file is incomplete: no end line, or a last line without its
  // newline (dropped). Empty when complete.
  std::string incomplete_note;
};

// Parses a whole sidecar. `path` only names the file in messages, which
// read "<path>:<line>: <what>". A last line without a newline is a cut
// record: dropped, noted in incomplete_note, not an error.
absl::StatusOr<Contents> Parse(absl::string_view text, const std::string& path);

}  // namespace clocksync::trace::sidecar

#endif  // CLOCKSYNC_TRACE_SIDECAR_H_
