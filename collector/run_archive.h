// collector/run_archive.h: the end of a collection: the ranks' raw
// archives (what the processes streamed) read back, put on the global
// timescale under one correction (online by default) and written as ONE
// OTF2 archive with the existing merge (trace/export.h, WriteMergedOtf2),
// every correction compared on them (trace/compare_report.h), and each
// rank's first and last event in global time (a lost rank is marked with
// the time of its last event).
//
// Memory: every event of the run is held at once (40 bytes each, plus 24
// per event for the timeline being built), as clocksync-trace does.
#ifndef CLOCKSYNC_COLLECTOR_RUN_ARCHIVE_H_
#define CLOCKSYNC_COLLECTOR_RUN_ARCHIVE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collector/collection.h"
#include "hull/correction.h"
#include "hull/postmortem.h"
#include "trace/compare_report.h"
#include "trace/trace.h"

namespace clocksync::collector {

struct RunArchiveOptions {
  // The correction the archive's timestamps are in. When a rank lacks it
  // (no daemon mapping for online, no sync session for the post-mortem
  // ones), the archive is written with `none` instead and the result says
  // why: no rank is left out.
  hull::CorrectionKind correction = hull::CorrectionKind::kOnline;
  // The clock condition's minimum latency (compare).
  int64_t min_latency_ns = 0;
  hull::PostmortemOptions postmortem;
};

// One rank's trace as the archive holds it.
struct RankSpan {
  int32_t rank = 0;
  uint64_t events = 0;
  bool has_events = false;
  int64_t first_event_global_ns = 0;  // in the correction used
  int64_t last_event_global_ns = 0;
  bool truncated = false;  // its raw archive had no end line (lost)
  std::string truncation_note;
};

struct RunArchiveResult {
  hull::CorrectionKind correction_used = hull::CorrectionKind::kOnline;
  std::string correction_note;  // why not the requested one ("" if it was)
  uint64_t events = 0;
  std::vector<RankSpan> ranks;  // in the order of the raw archives given
  trace::CompareReport compare;
};

// Reads `raw_dirs` (trace::ReadProcessTrace), writes the merged archive to
// `output_dir` (created: it must not exist; its parent must) and compares
// the corrections. Errors name the archive or the output.
absl::StatusOr<RunArchiveResult> WriteRunArchive(
    const std::vector<std::string>& raw_dirs, const std::string& output_dir,
    const RunArchiveOptions& options);
// The same for traces already read.
absl::StatusOr<RunArchiveResult> WriteRunArchive(
    std::vector<trace::ProcessTrace> traces, const std::string& output_dir,
    const RunArchiveOptions& options);

// The tracing phases of one rank (phase 0 first; Tracer::FinalizePhase)
// as one trace: stamps rebased on phase 0's origin, regions unified by
// name and communicators by name and ranks (the events renumbered),
// threads joined by index (a later phase's events follow), mapping records
// and sync sessions appended, the first ground truth. Truncated when a
// phase is. InvalidArgument when the phases are not one process (rank,
// pid, tick period) or not in time order.
absl::StatusOr<trace::ProcessTrace> JoinPhases(
    std::vector<trace::ProcessTrace> phases);
// Reads the raw archives of one rank's phases (RankStatus::phase_dirs) and
// joins them.
absl::StatusOr<trace::ProcessTrace> ReadRankPhases(
    const std::vector<std::string>& phase_dirs);

// One rank's trace put together again after its collector was lost: what
// the collector stored (`stored`, its raw archive) followed, thread by
// thread, by the local archive the process fell back to (`local`), whose
// events at or below the last stored stamp of their thread are dropped
// (the process repeats batches whose ack it did not see). The records are
// the local archive's (the tracer writes them whole). InvalidArgument when
// the two are not the same process (rank, pid, origin).
absl::StatusOr<trace::ProcessTrace> JoinFallback(trace::ProcessTrace stored,
                                                 trace::ProcessTrace local);

// The traces of a run whose collector was lost: every raw archive in
// `raw_dir` (rank.N, rank.N.phase.K), each joined with the local archive
// of the same tracing phase (rank, pid, origin) among `local_archives`
// when there is one, and local archives the collector never saw; the
// phases of a rank then joined (JoinPhases). Errors name the archive.
absl::StatusOr<std::vector<trace::ProcessTrace>> ReadRecoveredRun(
    const std::string& raw_dir, const std::vector<std::string>& local_archives);

// The end of a served run (clocksync-collector, or a collector in a
// process): every rank's phases read and joined, the run's archive written
// to `output`, and the summary people read: one line per rank ("rank 2
// lost: 50113 events, host n03 pid 4250, last event at ... (online); ..."),
// the ranks that never joined, the archive line; also written to
// <output>/clocksync.collection.
struct CollectedRun {
  std::string summary;
  std::string compare_table;    // trace::FormatCompareTable
  std::string correction_note;  // RunArchiveResult's ("" none)
  bool every_rank_finished = false;
};
// FailedPrecondition when no rank joined; the errors of reading the raw
// archives and writing the archive name them.
absl::StatusOr<CollectedRun> WriteCollectedRun(
    const std::vector<RankStatus>& ranks, int32_t processes,
    const std::string& output, const std::string& raw_dir,
    const RunArchiveOptions& options);

}  // namespace clocksync::collector

#endif  // CLOCKSYNC_COLLECTOR_RUN_ARCHIVE_H_
