// collector/run_archive.cc: the raw archives of a run merged into one OTF2
// archive on the global timescale, and the corrections compared
// (run_archive.h).

#include "collector/run_archive.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trace/export.h"
#include "trace/otf2_reader.h"
#include "trace/timeline.h"

namespace clocksync::collector {

absl::StatusOr<RunArchiveResult> WriteRunArchive(
    const std::vector<std::string>& raw_dirs, const std::string& output_dir,
    const RunArchiveOptions& options) {
  std::vector<trace::ProcessTrace> traces;
  for (const std::string& dir : raw_dirs) {
    absl::StatusOr<trace::ProcessTrace> trace = trace::ReadProcessTrace(dir);
    if (!trace.ok()) return trace.status();
    traces.push_back(*std::move(trace));
  }
  RunArchiveResult result;
  result.correction_used = options.correction;
  {
    absl::StatusOr<trace::Timeline> timeline =
        trace::BuildTimeline(traces, options.correction, options.postmortem);
    if (!timeline.ok() || !timeline->complete()) {
      std::vector<std::string> reasons;
      if (!timeline.ok()) {
        reasons.push_back(std::string(timeline.status().message()));
      } else {
        for (size_t p = 0; p < traces.size(); ++p) {
          if (!timeline->processes[p].available) {
            reasons.push_back(absl::StrCat(
                "rank ", traces[p].info.rank, ": ",
                timeline->processes[p].unavailable_reason));
          }
        }
      }
      result.correction_note = absl::StrCat(
          "the ", hull::CorrectionKindName(options.correction),
          " correction is not available for every rank (",
          absl::StrJoin(reasons, "; "),
          "): the archive's timestamps are the local clocks (none)");
      result.correction_used = hull::CorrectionKind::kNone;
      timeline = trace::BuildTimeline(traces, hull::CorrectionKind::kNone);
      if (!timeline.ok()) return timeline.status();
    }
    if (absl::Status s = trace::WriteMergedOtf2(traces, *timeline, output_dir);
        !s.ok()) {
      return s;
    }
    for (size_t p = 0; p < traces.size(); ++p) {
      RankSpan span;
      span.rank = traces[p].info.rank;
      span.truncated = traces[p].truncated;
      span.truncation_note = traces[p].truncation_note;
      int64_t first = std::numeric_limits<int64_t>::max();
      int64_t last = std::numeric_limits<int64_t>::min();
      for (const std::vector<int64_t>& thread :
           timeline->processes[p].global_ns) {
        span.events += thread.size();
        if (thread.empty()) continue;
        first = std::min(first, thread.front());
        last = std::max(last, thread.back());
      }
      span.has_events = span.events > 0;
      if (span.has_events) {
        span.first_event_global_ns = first;
        span.last_event_global_ns = last;
      }
      result.events += span.events;
      result.ranks.push_back(span);
    }
  }  // the archive's timeline freed before the comparison builds its own
  absl::StatusOr<trace::CompareReport> compare = trace::CompareCorrections(
      traces, options.min_latency_ns, options.postmortem);
  if (!compare.ok()) return compare.status();
  result.compare = *std::move(compare);
  return result;
}

}  // namespace clocksync::collector
