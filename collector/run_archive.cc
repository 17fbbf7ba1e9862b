// collector/run_archive.cc: the raw archives of a run merged into one OTF2
// archive on the global timescale, and the corrections compared
// (run_archive.h).

#include "collector/run_archive.h"

#include <dirent.h>
#include <stdio.h>

#include <algorithm>
#include <map>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "hull/trace_stamp.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "collector/contact.h"
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

absl::StatusOr<trace::ProcessTrace> JoinPhases(
    std::vector<trace::ProcessTrace> phases) {
  if (phases.empty()) {
    return absl::InvalidArgumentError("no phase to join");
  }
  trace::ProcessTrace joined = std::move(phases.front());
  std::map<std::string, uint32_t> region_ids;
  for (const trace::Region& r : joined.regions) region_ids[r.name] = r.id;
  std::map<std::pair<std::string, std::vector<int32_t>>, uint32_t> comm_ids;
  for (const trace::Communicator& c : joined.communicators) {
    comm_ids[{c.name, c.ranks}] = c.id;
  }
  uint32_t next_region = 0;
  for (const trace::Region& r : joined.regions) {
    next_region = std::max(next_region, r.id + 1);
  }
  uint32_t next_comm = 1;
  for (const trace::Communicator& c : joined.communicators) {
    next_comm = std::max(next_comm, c.id + 1);
  }
  std::map<uint32_t, size_t> thread_at;  // index -> position in joined
  for (size_t i = 0; i < joined.threads.size(); ++i) {
    thread_at[joined.threads[i].thread_index] = i;
  }
  for (size_t k = 1; k < phases.size(); ++k) {
    trace::ProcessTrace& phase = phases[k];
    if (phase.info.rank != joined.info.rank ||
        phase.info.pid != joined.info.pid ||
        phase.info.tick_period_ns != joined.info.tick_period_ns ||
        phase.info.origin_ns < joined.info.origin_ns) {
      return absl::InvalidArgumentError(absl::StrCat(
          "phase ", k, " (rank ", phase.info.rank, ", pid ", phase.info.pid,
          ") does not continue rank ", joined.info.rank, " (pid ",
          joined.info.pid, ") in time"));
    }
    const double ticks =
        (phase.info.origin_ns - joined.info.origin_ns) /
        joined.info.tick_period_ns;
    const uint64_t shift = static_cast<uint64_t>(ticks + 0.5);
    std::map<uint32_t, uint32_t> region_map;
    for (const trace::Region& r : phase.regions) {
      auto [it, added] = region_ids.emplace(r.name, next_region);
      if (added) {
        joined.regions.push_back(trace::Region{next_region++, r.name});
      }
      region_map[r.id] = it->second;
    }
    std::map<uint32_t, uint32_t> comm_map;
    for (const trace::Communicator& c : phase.communicators) {
      if (c.id == trace::kWorldCommunicator) {
        comm_map[c.id] = c.id;
        continue;
      }
      auto [it, added] = comm_ids.emplace(std::make_pair(c.name, c.ranks),
                                          next_comm);
      if (added) {
        joined.communicators.push_back(
            trace::Communicator{next_comm++, c.name, c.ranks});
      }
      comm_map[c.id] = it->second;
    }
    for (trace::ThreadTrace& t : phase.threads) {
      auto [at, added] = thread_at.emplace(t.thread_index, joined.threads.size());
      if (added) {
        joined.threads.push_back(trace::ThreadTrace{t.thread_index, t.name, {}});
      }
      trace::ThreadTrace& into = joined.threads[at->second];
      const uint64_t last = into.events.empty() ? 0 : into.events.back().stamp;
      for (trace::Event e : t.events) {
        e.stamp = hull::PackStamp(hull::StampTick(e.stamp) + shift,
                                  hull::StampEvent(e.stamp));
        if (!into.events.empty() && e.stamp <= last) {
          return absl::InvalidArgumentError(absl::StrCat(
              "phase ", k, " of rank ", joined.info.rank, ": thread ",
              t.thread_index, " has events before the previous phase's end"));
        }
        if (e.kind == trace::EventKind::kEnter ||
            e.kind == trace::EventKind::kLeave) {
          e.region = region_map.count(e.region) ? region_map[e.region] : e.region;
        } else {
          e.comm = comm_map.count(e.comm) ? comm_map[e.comm] : e.comm;
        }
        into.events.push_back(e);
      }
    }
    joined.mappings.insert(joined.mappings.end(), phase.mappings.begin(),
                           phase.mappings.end());
    for (trace::SyncSession& session : phase.sessions) {
      joined.sessions.push_back(std::move(session));
    }
    if (!joined.truth.has_value()) joined.truth = phase.truth;
    if (phase.truncated) {
      joined.truncated = true;
      joined.truncation_note = absl::StrCat("phase ", k, ": ",
                                            phase.truncation_note);
    }
  }
  std::sort(joined.threads.begin(), joined.threads.end(),
            [](const trace::ThreadTrace& a, const trace::ThreadTrace& b) {
              return a.thread_index < b.thread_index;
            });
  return joined;
}

absl::StatusOr<trace::ProcessTrace> ReadRankPhases(
    const std::vector<std::string>& phase_dirs) {
  std::vector<trace::ProcessTrace> phases;
  for (const std::string& dir : phase_dirs) {
    absl::StatusOr<trace::ProcessTrace> trace = trace::ReadProcessTrace(dir);
    if (!trace.ok()) return trace.status();
    phases.push_back(*std::move(trace));
  }
  absl::StatusOr<trace::ProcessTrace> joined = JoinPhases(std::move(phases));
  if (!joined.ok() && !phase_dirs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(phase_dirs.front(), ": ", joined.status().message()));
  }
  return joined;
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
  // A tracing phase is one (rank, pid, origin).
  using Key = std::tuple<int32_t, int64_t, int64_t>;
  auto key = [](const trace::ProcessTrace& t) {
    return Key{t.info.rank, t.info.pid, t.info.origin_ns};
  };
  std::map<Key, trace::ProcessTrace> local;
  for (const std::string& dir : local_archives) {
    absl::StatusOr<trace::ProcessTrace> trace = trace::ReadProcessTrace(dir);
    if (!trace.ok()) return trace.status();
    const Key k = key(*trace);
    if (!local.emplace(k, *std::move(trace)).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, ": a second local archive of rank ", std::get<0>(k),
          " from the same tracing phase"));
    }
  }
  std::vector<std::string> names;
  DIR* d = opendir(raw_dir.c_str());
  if (d == nullptr) {
    return absl::NotFoundError(absl::StrCat(raw_dir, ": cannot list"));
  }
  while (struct dirent* entry = readdir(d)) {
    if (absl::StartsWith(entry->d_name, "rank.")) names.push_back(entry->d_name);
  }
  closedir(d);
  std::vector<trace::ProcessTrace> phases;
  for (const std::string& name : names) {
    const std::string dir = absl::StrCat(raw_dir, "/", name);
    absl::StatusOr<trace::ProcessTrace> stored = trace::ReadProcessTrace(dir);
    if (!stored.ok()) return stored.status();
    auto it = local.find(key(*stored));
    if (it == local.end()) {
      phases.push_back(*std::move(stored));
      continue;
    }
    absl::StatusOr<trace::ProcessTrace> joined =
        JoinFallback(*std::move(stored), std::move(it->second));
    if (!joined.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": ", joined.status().message()));
    }
    local.erase(it);
    phases.push_back(*std::move(joined));
  }
  for (auto& [k, trace] : local) phases.push_back(std::move(trace));
  // The phases of each rank in time order, joined.
  std::map<int32_t, std::vector<trace::ProcessTrace>> by_rank;
  for (trace::ProcessTrace& t : phases) {
    by_rank[t.info.rank].push_back(std::move(t));
  }
  std::vector<trace::ProcessTrace> traces;
  for (auto& [rank, list] : by_rank) {
    std::sort(list.begin(), list.end(),
              [](const trace::ProcessTrace& a, const trace::ProcessTrace& b) {
                return a.info.origin_ns < b.info.origin_ns;
              });
    absl::StatusOr<trace::ProcessTrace> joined = JoinPhases(std::move(list));
    if (!joined.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          raw_dir, ": rank ", rank, ": ", joined.status().message()));
    }
    traces.push_back(*std::move(joined));
  }
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

namespace {

std::string GlobalTime(int64_t ns) {
  return absl::StrFormat("%d.%09d", ns / 1'000'000'000,
                         (ns % 1'000'000'000 + 1'000'000'000) % 1'000'000'000);
}

}  // namespace

absl::StatusOr<CollectedRun> WriteCollectedRun(
    const std::vector<RankStatus>& ranks, int32_t processes,
    const std::string& output, const std::string& raw_dir,
    const RunArchiveOptions& options) {
  CollectedRun run;
  run.every_rank_finished = static_cast<int32_t>(ranks.size()) == processes;
  // Each rank's trace: its tracing phases joined (a rank that never
  // streamed has none).
  std::vector<trace::ProcessTrace> traces;
  std::vector<int> trace_of(ranks.size(), -1);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankStatus& r = ranks[i];
    run.every_rank_finished &= r.state == RankState::kFinished;
    if (r.phase_dirs.empty()) continue;
    absl::StatusOr<trace::ProcessTrace> trace = ReadRankPhases(r.phase_dirs);
    if (!trace.ok()) {
      return absl::Status(trace.status().code(),
                          absl::StrCat("rank ", r.rank, ": ",
                                       trace.status().message()));
    }
    trace_of[i] = static_cast<int>(traces.size());
    traces.push_back(*std::move(trace));
  }
  if (traces.empty()) {
    return absl::FailedPreconditionError("no process joined: no archive");
  }
  absl::StatusOr<RunArchiveResult> result =
      WriteRunArchive(std::move(traces), output, options);
  if (!result.ok()) {
    return absl::Status(
        result.status().code(),
        absl::StrCat("cannot write the archive: ", result.status().message(),
                     " (the raw archives are in ", raw_dir, ")"));
  }
  run.correction_note = result->correction_note;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankStatus& r = ranks[i];
    RankSpan span;
    if (trace_of[i] >= 0) span = result->ranks[trace_of[i]];
    std::string line = absl::StrFormat(
        "rank %d %s: %d events, host %s pid %d", r.rank,
        RankStateName(r.state), span.events, r.info.hostname, r.info.pid);
    if (r.phase > 0) absl::StrAppend(&line, ", ", r.phase + 1, " phases");
    if (r.parent_rank >= 0) {
      absl::StrAppend(&line, ", attached by rank ", r.parent_rank,
                      " (group ", AttachGroupName(r.parent_rank, r.attach_group),
                      ")");
    }
    if (span.has_events) {
      absl::StrAppend(&line, ", last event at ",
                      GlobalTime(span.last_event_global_ns), " (",
                      hull::CorrectionKindName(result->correction_used), ")");
    }
    if (r.state == RankState::kLost) absl::StrAppend(&line, "; ", r.note);
    if (r.state == RankState::kBetweenPhases) {
      absl::StrAppend(&line, "; its next phase never came");
    }
    absl::StrAppend(&run.summary, line, "\n");
  }
  for (int32_t rank = 0; rank < processes; ++rank) {
    bool joined = false;
    for (const RankStatus& r : ranks) joined |= r.rank == rank;
    if (!joined) absl::StrAppend(&run.summary, "rank ", rank, " never joined\n");
  }
  absl::StrAppend(&run.summary, "archive ", output, ": ", ranks.size(), " of ",
                  processes, " ranks, ", result->events, " events, ",
                  hull::CorrectionKindName(result->correction_used),
                  " correction; raw archives in ", raw_dir, "\n");
  run.compare_table = trace::FormatCompareTable(result->compare);
  const std::string path = output + "/clocksync.collection";
  const std::string temp = path + ".tmp";
  FILE* f = fopen(temp.c_str(), "w");
  const bool written =
      f != nullptr &&
      fwrite(run.summary.data(), 1, run.summary.size(), f) ==
          run.summary.size();
  if (f != nullptr && fclose(f) == 0 && written) {
    rename(temp.c_str(), path.c_str());
  }
  return run;
}

}  // namespace clocksync::collector
