// collector/run_archive.cc: the raw archives of a run merged into one OTF2
// archive on the global timescale, and the corrections compared
// (run_archive.h).

#include "collector/run_archive.h"

#include <dirent.h>

#include <algorithm>
#include <map>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
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
  return WriteRunArchive(std::move(traces), output_dir, options);
}

absl::StatusOr<trace::ProcessTrace> JoinFallback(trace::ProcessTrace stored,
                                                 trace::ProcessTrace local) {
  if (stored.info.rank != local.info.rank || stored.info.pid != local.info.pid ||
      stored.info.origin_ns != local.info.origin_ns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", stored.info.rank, " (pid ", stored.info.pid,
        ") and the local archive of rank ", local.info.rank, " (pid ",
        local.info.pid, ") are not one tracing session"));
  }
  trace::ProcessTrace joined = std::move(local);
  std::map<uint32_t, trace::ThreadTrace> threads;
  for (trace::ThreadTrace& t : stored.threads) {
    const uint32_t index = t.thread_index;
    threads[index] = std::move(t);
  }
  for (trace::ThreadTrace& t : joined.threads) {
    trace::ThreadTrace& into = threads[t.thread_index];
    if (into.events.empty()) {
      into.thread_index = t.thread_index;
      into.name = t.name;
    }
    for (const trace::Event& e : t.events) {
      if (into.events.empty() || e.stamp > into.events.back().stamp) {
        into.events.push_back(e);
      }
    }
  }
  joined.threads.clear();
  for (auto& [index, t] : threads) joined.threads.push_back(std::move(t));
  return joined;
}

absl::StatusOr<std::vector<trace::ProcessTrace>> ReadRecoveredRun(
    const std::string& raw_dir,
    const std::vector<std::string>& local_archives) {
  std::map<int32_t, trace::ProcessTrace> local;
  for (const std::string& dir : local_archives) {
    absl::StatusOr<trace::ProcessTrace> trace = trace::ReadProcessTrace(dir);
    if (!trace.ok()) return trace.status();
    const int32_t rank = trace->info.rank;
    if (!local.emplace(rank, *std::move(trace)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": a second local archive of rank ", rank));
    }
  }
  std::vector<trace::ProcessTrace> traces;
  std::vector<std::string> ranks;
  DIR* d = opendir(raw_dir.c_str());
  if (d == nullptr) {
    return absl::NotFoundError(absl::StrCat(raw_dir, ": cannot list"));
  }
  while (struct dirent* entry = readdir(d)) {
    if (absl::StartsWith(entry->d_name, "rank.")) ranks.push_back(entry->d_name);
  }
  closedir(d);
  std::sort(ranks.begin(), ranks.end());
  for (const std::string& name : ranks) {
    const std::string dir = absl::StrCat(raw_dir, "/", name);
    absl::StatusOr<trace::ProcessTrace> stored = trace::ReadProcessTrace(dir);
    if (!stored.ok()) return stored.status();
    auto it = local.find(stored->info.rank);
    if (it == local.end()) {
      traces.push_back(*std::move(stored));
      continue;
    }
    absl::StatusOr<trace::ProcessTrace> joined =
        JoinFallback(*std::move(stored), std::move(it->second));
    if (!joined.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": ", joined.status().message()));
    }
    local.erase(it);
    traces.push_back(*std::move(joined));
  }
  for (auto& [rank, trace] : local) traces.push_back(std::move(trace));
  std::sort(traces.begin(), traces.end(),
            [](const trace::ProcessTrace& a, const trace::ProcessTrace& b) {
              return a.info.rank < b.info.rank;
            });
  return traces;
}

absl::StatusOr<RunArchiveResult> WriteRunArchive(
    std::vector<trace::ProcessTrace> traces, const std::string& output_dir,
    const RunArchiveOptions& options) {
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
