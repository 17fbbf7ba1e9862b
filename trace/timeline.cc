// trace/timeline.cc: corrections, global timelines, message matching,
// clock condition, truth errors and region profiles.

#include "trace/timeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hull/trace_stamp.h"

namespace clocksync::trace {
namespace {

bool Synchronized(const MappingRecord& r) {
  // CLOCKSYNC_STATE_SYNCED (2), RECOVERING (3), HOLDOVER (4) carry a valid
  // estimate; UNSPECIFIED (0) and UNSYNCED (1) carry none.
  return r.state >= 2;
}

int64_t Saturate(__int128 value) {
  if (value > std::numeric_limits<int64_t>::max()) {
    return std::numeric_limits<int64_t>::max();
  }
  if (value < std::numeric_limits<int64_t>::min()) {
    return std::numeric_limits<int64_t>::min();
  }
  return static_cast<int64_t>(value);
}

std::string Rank(const ProcessTrace& trace) {
  return absl::StrCat("rank ", trace.info.rank);
}

}  // namespace

// --- ModelInverse ------------------------------------------------------------

ModelInverse::ModelInverse(hull::ClockModelParams params, int64_t origin_raw_ns)
    : model_(params), origin_raw_ns_(origin_raw_ns) {}

absl::StatusOr<std::unique_ptr<ModelInverse>> ModelInverse::Create(
    const GroundTruth& truth) {
  hull::ClockModelParams params;
  const std::string error = hull::ParseClockModel(truth.clock_model_spec, &params);
  if (!error.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ground truth clock model '", truth.clock_model_spec, "': ", error));
  }
  return std::unique_ptr<ModelInverse>(
      new ModelInverse(params, truth.model_origin_raw_ns));
}

int64_t ModelInverse::LocalAtRaw(int64_t raw_ns) {
  const __int128 since = static_cast<__int128>(raw_ns) - origin_raw_ns_;
  if (since < 0) {
    // Before the model's origin: continue at rate 1 from local(origin).
    return Saturate(static_cast<__int128>(origin_raw_ns_) + model_.LocalAt(0) +
                    since);
  }
  return Saturate(static_cast<__int128>(origin_raw_ns_) +
                  model_.LocalAt(static_cast<int64_t>(since)));
}

int64_t ModelInverse::RawAtLocal(int64_t local_ns) {
  // Start from the previous answer (events come mostly in order), else
  // from the model's value at its origin, assuming rate 1.
  int64_t guess;
  if (has_hint_) {
    guess = Saturate(static_cast<__int128>(hint_raw_ns_) + local_ns -
                     hint_local_ns_);
  } else {
    guess = Saturate(static_cast<__int128>(origin_raw_ns_) + local_ns -
                     LocalAtRaw(origin_raw_ns_));
  }
  // Secant steps with slope 1: the local rate is within ppm of 1.
  for (int i = 0; i < 4; ++i) {
    const int64_t error = LocalAtRaw(guess) - local_ns;
    if (error == 0) break;
    guess = Saturate(static_cast<__int128>(guess) - error);
  }
  // Bracket: lo with local(lo) <= local_ns < local(hi).
  int64_t lo = guess, hi = guess;
  int64_t step = 1;
  while (LocalAtRaw(lo) > local_ns && lo > std::numeric_limits<int64_t>::min() / 2) {
    hi = lo;
    lo = Saturate(static_cast<__int128>(lo) - step);
    step *= 2;
  }
  step = 1;
  while (LocalAtRaw(hi) <= local_ns &&
         hi < std::numeric_limits<int64_t>::max() / 2) {
    lo = hi;
    hi = Saturate(static_cast<__int128>(hi) + step);
    step *= 2;
  }
  // Bisection: invariant local(lo) <= local_ns < local(hi).
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (LocalAtRaw(mid) <= local_ns) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  has_hint_ = true;
  hint_local_ns_ = local_ns;
  hint_raw_ns_ = lo;
  return lo;
}

absl::StatusOr<std::unique_ptr<TruthMapping>> TruthMapping::Create(
    const GroundTruth& truth) {
  std::unique_ptr<TruthMapping> mapping(new TruthMapping);
  mapping->master_offset_ns_ = truth.master_offset_ns;
  if (!truth.clock_model_spec.empty()) {
    absl::StatusOr<std::unique_ptr<ModelInverse>> inverse =
        ModelInverse::Create(truth);
    if (!inverse.ok()) return inverse.status();
    mapping->inverse_ = *std::move(inverse);
  }
  return mapping;
}

int64_t TruthMapping::GlobalNs(int64_t local_ns) {
  const int64_t raw =
      inverse_ != nullptr ? inverse_->RawAtLocal(local_ns) : local_ns;
  return Saturate(static_cast<__int128>(raw) + master_offset_ns_);
}

// --- corrections ---------------------------------------------------------------

std::vector<hull::SyncSession> ToHullSessions(
    absl::Span<const SyncSession> sessions) {
  std::vector<hull::SyncSession> out;
  out.reserve(sessions.size());
  for (size_t i = 0; i < sessions.size(); ++i) {
    out.push_back(
        hull::SyncSession{static_cast<int64_t>(i), sessions[i].exchanges});
  }
  return out;
}

absl::StatusOr<std::unique_ptr<hull::Correction>> MakeProcessCorrection(
    const ProcessTrace& trace, hull::CorrectionKind kind, std::string* report,
    const hull::PostmortemOptions& options) {
  std::string ignored;
  if (report == nullptr) report = &ignored;
  hull::CorrectionInput input;
  input.postmortem = options;
  std::vector<hull::SyncSession> sessions;
  std::vector<hull::MappingSegment> segments;
  std::shared_ptr<ModelInverse> inverse;
  if (kind == hull::CorrectionKind::kOnline) {
    for (const MappingRecord& r : trace.mappings) {
      if (Synchronized(r)) segments.push_back(r.Segment());
    }
    if (segments.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          Rank(trace), ": no mapping record with a synchronized state (",
          trace.mappings.size(),
          " records): the tracer saw no synchronized daemon"));
    }
    input.segments = segments;
    if (trace.truth.has_value() && !trace.truth->clock_model_spec.empty()) {
      absl::StatusOr<std::unique_ptr<ModelInverse>> made =
          ModelInverse::Create(*trace.truth);
      if (!made.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(Rank(trace), ": ", made.status().message()));
      }
      inverse = *std::move(made);
      // Evaluation extends the model's random walk lazily: like every
      // timeline correction, the result is used from one thread.
      input.raw_at_local = [inverse](int64_t local_ns) {
        return inverse->RawAtLocal(local_ns);
      };
    }
  } else if (hull::IsPostmortem(kind)) {
    sessions = ToHullSessions(trace.sessions);
    input.sessions = sessions;
  }
  absl::StatusOr<std::unique_ptr<hull::Correction>> made =
      hull::MakeCorrection(kind, input, report);
  if (!made.ok()) {
    // Only the post-mortem fits fail here (online was checked above).
    return absl::FailedPreconditionError(
        absl::StrCat(Rank(trace), ": ", hull::CorrectionKindName(kind), ": ",
                     made.status().message(), " (", trace.sessions.size(),
                     " sync sessions)"));
  }
  if (kind == hull::CorrectionKind::kOnline) {
    *report =
        absl::StrCat("online: ", segments.size(), " of ", trace.mappings.size(),
                     " mapping records synchronized",
                     inverse != nullptr ? ", local = clock model" : "");
  }
  return made;
}

// --- timelines -----------------------------------------------------------------

bool Timeline::complete() const {
  for (const ProcessTimeline& p : processes) {
    if (!p.available) return false;
  }
  return true;
}

absl::StatusOr<Timeline> BuildTimeline(absl::Span<const ProcessTrace> traces,
                                       hull::CorrectionKind kind,
                                       const hull::PostmortemOptions& options) {
  Timeline timeline;
  timeline.kind = kind;
  timeline.processes.resize(traces.size());
  std::vector<std::unique_ptr<hull::Correction>> corrections(traces.size());
  // Pass 1: local times, corrections, and the earliest global time, which
  // becomes the origin of the global stamps.
  bool any = false;
  int64_t earliest_ns = std::numeric_limits<int64_t>::max();
  for (size_t p = 0; p < traces.size(); ++p) {
    const ProcessTrace& trace = traces[p];
    ProcessTimeline& out = timeline.processes[p];
    absl::StatusOr<std::unique_ptr<hull::Correction>> correction =
        MakeProcessCorrection(trace, kind, &out.report, options);
    if (!correction.ok()) {
      out.unavailable_reason = std::string(correction.status().message());
      continue;
    }
    corrections[p] = *std::move(correction);
    out.available = true;
    any = true;
    out.local_ns.resize(trace.threads.size());
    for (size_t t = 0; t < trace.threads.size(); ++t) {
      const std::vector<Event>& events = trace.threads[t].events;
      out.local_ns[t].reserve(events.size());
      for (const Event& e : events) {
        out.local_ns[t].push_back(StampToLocalNs(trace.info, e.stamp));
      }
      if (!events.empty()) {
        earliest_ns =
            std::min(earliest_ns, corrections[p]->ToGlobalNs(out.local_ns[t][0]));
      }
    }
  }
  if (!any) {
    std::string reasons;
    for (const ProcessTimeline& p : timeline.processes) {
      absl::StrAppend(&reasons, reasons.empty() ? "" : "; ",
                      p.unavailable_reason);
    }
    return absl::FailedPreconditionError(
        absl::StrCat("correction ", hull::CorrectionKindName(kind),
                     " is available for no process: ", reasons));
  }
  if (earliest_ns == std::numeric_limits<int64_t>::max()) earliest_ns = 0;
  // 1 ns global ticks; the origin a second early leaves room for raises.
  timeline.stamp_clock = hull::StampClock{
      Saturate(static_cast<__int128>(earliest_ns) - 1'000'000'000), 1.0};
  // Pass 2: global stamps, thread by thread.
  for (size_t p = 0; p < traces.size(); ++p) {
    ProcessTimeline& out = timeline.processes[p];
    if (!out.available) continue;
    const ProcessTrace& trace = traces[p];
    const hull::StampClock local{trace.info.origin_ns,
                                 trace.info.tick_period_ns};
    out.global_ns.resize(trace.threads.size());
    out.global_stamps.resize(trace.threads.size());
    for (size_t t = 0; t < trace.threads.size(); ++t) {
      const std::vector<Event>& events = trace.threads[t].events;
      std::vector<uint64_t> stamps(events.size());
      for (size_t i = 0; i < events.size(); ++i) stamps[i] = events[i].stamp;
      hull::GlobalStampConverter converter(*corrections[p], local,
                                           timeline.stamp_clock);
      out.global_stamps[t].resize(events.size());
      converter.ConvertAll(stamps, absl::MakeSpan(out.global_stamps[t]));
      out.raised += converter.raised();
      out.global_ns[t].reserve(events.size());
      for (uint64_t s : out.global_stamps[t]) {
        out.global_ns[t].push_back(
            timeline.stamp_clock.TickToNs(hull::StampTick(s)));
      }
    }
  }
  return timeline;
}

std::vector<TimedEvent> MergedEvents(const Timeline& timeline) {
  std::vector<TimedEvent> merged;
  for (size_t p = 0; p < timeline.processes.size(); ++p) {
    const ProcessTimeline& process = timeline.processes[p];
    if (!process.available) continue;
    for (size_t t = 0; t < process.global_stamps.size(); ++t) {
      for (size_t i = 0; i < process.global_stamps[t].size(); ++i) {
        merged.push_back(TimedEvent{static_cast<int32_t>(p),
                                    static_cast<uint32_t>(t),
                                    static_cast<uint32_t>(i),
                                    process.local_ns[t][i],
                                    process.global_ns[t][i],
                                    process.global_stamps[t][i]});
      }
    }
  }
  std::sort(merged.begin(), merged.end(),
            [](const TimedEvent& a, const TimedEvent& b) {
              return std::tie(a.global_stamp, a.process, a.thread, a.index) <
                     std::tie(b.global_stamp, b.process, b.thread, b.index);
            });
  return merged;
}

// --- messages ------------------------------------------------------------------

namespace {

// The program rank of communicator rank `peer` of communicator `comm` in
// `trace`'s definitions; -1 when unknown.
int32_t ProgramRank(const ProcessTrace& trace, uint32_t comm, int32_t peer) {
  if (peer < 0) return -1;
  for (const Communicator& c : trace.communicators) {
    if (c.id != comm) continue;
    if (static_cast<size_t>(peer) >= c.ranks.size()) return -1;
    return c.ranks[peer];
  }
  return comm == kWorldCommunicator ? peer : -1;
}

struct Endpoint {
  int64_t local_ns;
  uint64_t stamp;
  int32_t process;
  uint32_t thread;
  uint32_t index;
};

bool EarlierEndpoint(const Endpoint& a, const Endpoint& b) {
  return std::tie(a.local_ns, a.stamp, a.thread, a.index) <
         std::tie(b.local_ns, b.stamp, b.thread, b.index);
}

}  // namespace

absl::StatusOr<MessageMatch> MatchMessages(
    absl::Span<const ProcessTrace> traces) {
  std::map<int32_t, int32_t> process_of_rank;
  for (size_t p = 0; p < traces.size(); ++p) {
    auto [it, inserted] =
        process_of_rank.emplace(traces[p].info.rank, static_cast<int32_t>(p));
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(
          "two traces have rank ", traces[p].info.rank, " (", it->second + 1,
          ". and ", p + 1, ". archive given)"));
    }
  }
  // Communicators by name and ranks: each process numbers its own (the
  // groups of processes attached at different times have different ids in
  // different processes); the world (id 0) is one. A communicator a
  // process never defined is its id.
  std::map<std::pair<std::string, std::vector<int32_t>>, uint32_t> comm_ids;
  std::vector<std::map<uint32_t, uint32_t>> comm_of(traces.size());
  for (size_t p = 0; p < traces.size(); ++p) {
    for (const Communicator& c : traces[p].communicators) {
      if (c.id == kWorldCommunicator) {
        comm_of[p][c.id] = kWorldCommunicator;
        continue;
      }
      // Identities from 2^31 up, apart from the ids of undefined ones.
      auto [it, inserted] = comm_ids.emplace(
          std::make_pair(c.name, c.ranks),
          0x80000000u + static_cast<uint32_t>(comm_ids.size()));
      comm_of[p][c.id] = it->second;
    }
  }
  auto comm_identity = [&](size_t p, uint32_t id) {
    auto it = comm_of[p].find(id);
    return it != comm_of[p].end() ? it->second : id;
  };
  // (source rank, destination rank, tag, communicator) -> endpoints.
  using Key = std::tuple<int32_t, int32_t, uint32_t, uint32_t>;
  std::map<Key, std::vector<Endpoint>> sends, recvs;
  MessageMatch match;
  for (size_t p = 0; p < traces.size(); ++p) {
    const ProcessTrace& trace = traces[p];
    for (size_t t = 0; t < trace.threads.size(); ++t) {
      const std::vector<Event>& events = trace.threads[t].events;
      for (size_t i = 0; i < events.size(); ++i) {
        const Event& e = events[i];
        if (e.kind != EventKind::kSend && e.kind != EventKind::kRecv) continue;
        const int32_t peer = ProgramRank(trace, e.comm, e.peer);
        if (peer < 0 || process_of_rank.count(peer) == 0) {
          ++match.unknown_peers;
          continue;
        }
        const Endpoint end{StampToLocalNs(trace.info, e.stamp), e.stamp,
                           static_cast<int32_t>(p), static_cast<uint32_t>(t),
                           static_cast<uint32_t>(i)};
        const uint32_t comm = comm_identity(p, e.comm);
        if (e.kind == EventKind::kSend) {
          sends[Key{trace.info.rank, peer, e.tag, comm}].push_back(end);
        } else {
          recvs[Key{peer, trace.info.rank, e.tag, comm}].push_back(end);
        }
      }
    }
  }
  for (auto& [key, list] : sends) {
    std::sort(list.begin(), list.end(), EarlierEndpoint);
    auto other = recvs.find(key);
    const size_t receives = other == recvs.end() ? 0 : other->second.size();
    if (other != recvs.end()) {
      std::sort(other->second.begin(), other->second.end(), EarlierEndpoint);
    }
    const size_t n = std::min(list.size(), receives);
    for (size_t k = 0; k < n; ++k) {
      const Endpoint& s = list[k];
      const Endpoint& r = other->second[k];
      match.pairs.push_back(
          MessagePair{s.process, s.thread, s.index, r.process, r.thread, r.index});
    }
    match.unmatched_sends += static_cast<int64_t>(list.size() - n);
    match.unmatched_recvs += static_cast<int64_t>(receives - n);
  }
  for (const auto& [key, list] : recvs) {
    if (sends.count(key) == 0) {
      match.unmatched_recvs += static_cast<int64_t>(list.size());
    }
  }
  return match;
}

// --- summaries -----------------------------------------------------------------

absl::StatusOr<CorrectionSummary> Summarize(
    absl::Span<const ProcessTrace> traces, const Timeline& timeline,
    const MessageMatch& messages, int64_t min_latency_ns) {
  CorrectionSummary summary;
  summary.kind = timeline.kind;
  summary.available = timeline.complete();
  for (size_t p = 0; p < timeline.processes.size(); ++p) {
    if (!timeline.processes[p].available) {
      absl::StrAppend(&summary.unavailable_reason,
                      summary.unavailable_reason.empty() ? "" : "; ",
                      timeline.processes[p].unavailable_reason);
    }
  }
  std::vector<hull::MatchedMessage> matched;
  for (const MessagePair& m : messages.pairs) {
    const ProcessTimeline& s = timeline.processes[m.send_process];
    const ProcessTimeline& r = timeline.processes[m.recv_process];
    if (!s.available || !r.available) continue;
    matched.push_back(hull::MatchedMessage{
        traces[m.send_process].info.rank, traces[m.recv_process].info.rank,
        s.global_ns[m.send_thread][m.send_index],
        r.global_ns[m.recv_thread][m.recv_index]});
  }
  summary.clock_condition = hull::CheckClockCondition(matched, min_latency_ns);

  long double sum_squares = 0;
  for (size_t p = 0; p < traces.size(); ++p) {
    const ProcessTimeline& process = timeline.processes[p];
    if (!process.available || !traces[p].truth.has_value()) continue;
    absl::StatusOr<std::unique_ptr<TruthMapping>> truth =
        TruthMapping::Create(*traces[p].truth);
    if (!truth.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          Rank(traces[p]), ": ", truth.status().message()));
    }
    for (size_t t = 0; t < process.global_ns.size(); ++t) {
      for (size_t i = 0; i < process.global_ns[t].size(); ++i) {
        const int64_t true_ns = (*truth)->GlobalNs(process.local_ns[t][i]);
        const int64_t error = Saturate(
            static_cast<__int128>(process.global_ns[t][i]) - true_ns);
        const int64_t magnitude =
            error == std::numeric_limits<int64_t>::min()
                ? std::numeric_limits<int64_t>::max()
                : std::abs(error);
        summary.max_abs_error_ns = std::max(summary.max_abs_error_ns, magnitude);
        sum_squares += static_cast<long double>(error) * error;
        ++summary.truth_events;
      }
    }
  }
  if (summary.truth_events > 0) {
    summary.rms_error_ns =
        static_cast<double>(std::sqrt(sum_squares / summary.truth_events));
  }
  return summary;
}

Profile ProfileRegions(absl::Span<const ProcessTrace> traces,
                       const Timeline& timeline) {
  Profile profile;
  for (size_t p = 0; p < traces.size(); ++p) {
    const ProcessTimeline& process = timeline.processes[p];
    if (!process.available) continue;
    const ProcessTrace& trace = traces[p];
    std::map<uint32_t, RegionProfile> regions;
    for (size_t t = 0; t < trace.threads.size(); ++t) {
      const std::vector<Event>& events = trace.threads[t].events;
      std::vector<std::pair<uint32_t, int64_t>> stack;  // region, enter ns
      for (size_t i = 0; i < events.size(); ++i) {
        const Event& e = events[i];
        const int64_t at = process.global_ns[t][i];
        if (e.kind == EventKind::kEnter) {
          stack.emplace_back(e.region, at);
        } else if (e.kind == EventKind::kLeave) {
          // Pop to the matching enter; a leave without one is counted.
          size_t depth = stack.size();
          while (depth > 0 && stack[depth - 1].first != e.region) --depth;
          if (depth == 0) {
            ++profile.unmatched_leaves;
            continue;
          }
          profile.open_enters += static_cast<int64_t>(stack.size() - depth);
          const int64_t duration = at - stack[depth - 1].second;
          stack.resize(depth - 1);
          RegionProfile& r = regions[e.region];
          if (r.calls == 0) {
            r.min_ns = duration;
            r.max_ns = duration;
          }
          ++r.calls;
          r.total_ns += duration;
          r.min_ns = std::min(r.min_ns, duration);
          r.max_ns = std::max(r.max_ns, duration);
        }
      }
      profile.open_enters += static_cast<int64_t>(stack.size());
    }
    for (auto& [id, r] : regions) {
      r.process = static_cast<int32_t>(p);
      r.region = id;
      r.name = absl::StrCat("region ", id);
      for (const Region& def : trace.regions) {
        if (def.id == id) r.name = def.name;
      }
      profile.regions.push_back(r);
    }
  }
  return profile;
}

}  // namespace clocksync::trace
