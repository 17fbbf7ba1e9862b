// trace/synthetic_trace.cc: a two-process trace with known answers.

#include "trace/synthetic_trace.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hull/trace_stamp.h"
#include "trace/otf2_writer.h"
#include "trace/timeline.h"
#include "trace/trace.h"

namespace clocksync::trace {
namespace {

constexpr int64_t kStartRawNs = 1'000'000'000'000;  // 1000 s after boot
constexpr int64_t kDurationNs = 10'000'000'000;     // 10 s
constexpr int64_t kPeriodNs = 10'000'000;           // a message pair per 10 ms
constexpr int64_t kLatencyNs = 20'000;              // each message, raw time
constexpr int64_t kSyncDelayNs = 10'000;            // each way, sync exchanges
constexpr char kModel1[] = "offset=3ms,frequency_ppm=50";

// An event at a raw time on one thread.
struct Pending {
  int64_t raw_ns;
  Event event;
};

class Process {
 public:
  Process(int32_t rank, std::optional<GroundTruth> truth)
      : rank_(rank), truth_(std::move(truth)) {
    if (truth_.has_value() && !truth_->clock_model_spec.empty()) {
      inverse_ = *ModelInverse::Create(*truth_);
    }
  }
  int64_t Local(int64_t raw_ns) {
    return inverse_ != nullptr ? inverse_->LocalAtRaw(raw_ns) : raw_ns;
  }
  void Add(uint32_t thread, int64_t raw_ns, Event e) {
    if (threads_.size() <= thread) threads_.resize(thread + 1);
    threads_[thread].push_back(Pending{raw_ns, e});
  }
  // Stamps every thread's events (in raw order) against `origin_ns`.
  std::vector<std::vector<Event>> Stamped(int64_t origin_ns) {
    std::vector<std::vector<Event>> out;
    for (std::vector<Pending>& thread : threads_) {
      std::stable_sort(thread.begin(), thread.end(),
                       [](const Pending& a, const Pending& b) {
                         return a.raw_ns < b.raw_ns;
                       });
      hull::TraceStamper stamper;
      std::vector<Event> events;
      for (Pending& p : thread) {
        p.event.stamp = stamper.Stamp(
            static_cast<uint64_t>(Local(p.raw_ns) - origin_ns));
        events.push_back(p.event);
      }
      out.push_back(std::move(events));
    }
    return out;
  }
  SyncSession Session(SyncSessionKind kind, int64_t raw_ns) {
    SyncSession session{kind, {}};
    for (int i = 0; i < 10; ++i) {
      const int64_t a = raw_ns + i * 100'000;
      const int64_t master = a + kSyncDelayNs + kSyntheticMasterOffsetNs;
      session.exchanges.push_back(
          {Local(a), master, master, Local(a + 2 * kSyncDelayNs)});
    }
    return session;
  }

  int32_t rank_;
  std::optional<GroundTruth> truth_;
  std::unique_ptr<ModelInverse> inverse_;
  std::vector<std::vector<Pending>> threads_;
};

Event Enter(uint32_t region) {
  Event e;
  e.kind = EventKind::kEnter;
  e.region = region;
  return e;
}
Event Leave(uint32_t region) {
  Event e = Enter(region);
  e.kind = EventKind::kLeave;
  return e;
}
Event Message(EventKind kind, int32_t peer, uint32_t tag) {
  Event e;
  e.kind = kind;
  e.peer = peer;
  e.tag = tag;
  e.comm = kWorldCommunicator;
  e.bytes = 4096;
  return e;
}
Event Collective(EventKind kind, uint64_t bytes) {
  Event e;
  e.kind = kind;
  e.collective = CollectiveKind::kBarrier;
  e.peer = -1;
  e.comm = kWorldCommunicator;
  e.bytes = bytes;
  return e;
}

absl::Status WriteArchive(const std::string& dir, Process& process,
                          const std::string& name, int64_t online_error_ns) {
  ProcessInfo info;
  info.rank = process.rank_;
  info.process_name = name;
  info.pid = 1000 + process.rank_;
  info.hostname = "localhost";
  info.node_id = "n0";
  info.shm_path = "/run/clocksyncd/clocksync.shm";
  info.origin_ns = process.Local(kStartRawNs) - 1000;
  absl::StatusOr<std::unique_ptr<Otf2Writer>> writer =
      Otf2Writer::Create(dir, info);
  if (!writer.ok()) return writer.status();
  std::vector<std::vector<Event>> threads = process.Stamped(info.origin_ns);
  for (size_t t = 0; t < threads.size(); ++t) {
    absl::Status status = (*writer)->AppendEvents(
        static_cast<uint32_t>(t), t == 0 ? "main" : "worker", threads[t]);
    if (!status.ok()) return status;
  }
  MappingRecord record;
  record.raw_ns = kStartRawNs - 1'000'000;
  record.local_ns = process.Local(record.raw_ns);
  record.anchor_raw_ns = kStartRawNs;
  record.anchor_global_ns =
      kStartRawNs + kSyntheticMasterOffsetNs + online_error_ns;
  record.rate_adj = 0;
  record.bound_at_anchor_ns = 500;
  record.bound_growth_ppb = 100;
  record.state = 2;  // CLOCKSYNC_STATE_SYNCED
  std::vector<SyncSession> sessions;
  sessions.push_back(process.Session(SyncSessionKind::kInit, kStartRawNs - 5'000'000));
  for (int64_t s = 1; s < kDurationNs / 1'000'000'000; ++s) {
    sessions.push_back(process.Session(SyncSessionKind::kPeriodic,
                                       kStartRawNs + s * 1'000'000'000 + 7'000'000));
  }
  sessions.push_back(process.Session(SyncSessionKind::kFinalize,
                                     kStartRawNs + kDurationNs + 5'000'000));
  return (*writer)->Finish(
      {{0, "main"}, {1, "work"}}, {{0, "world", {0, 1}}}, {record}, sessions,
      process.truth_);
}

}  // namespace

absl::StatusOr<SyntheticAnswers> WriteSyntheticTraces(const std::string& dir) {
  Process p0(0, GroundTruth{"", 0, kSyntheticMasterOffsetNs});
  // The model starts a second before anything happens, so that the clock
  // is linear over every event and sync session.
  Process p1(1, GroundTruth{kModel1, kStartRawNs - 1'000'000'000,
                            kSyntheticMasterOffsetNs});
  SyntheticAnswers answers;
  const int64_t end = kStartRawNs + kDurationNs;
  p0.Add(0, kStartRawNs, Enter(0));
  p1.Add(0, kStartRawNs, Enter(0));
  for (int64_t t = kStartRawNs + kPeriodNs; t < end - kPeriodNs; t += kPeriodNs) {
    p0.Add(0, t, Message(EventKind::kSend, 1, 1));
    p1.Add(0, t + kLatencyNs, Message(EventKind::kRecv, 0, 1));
    const int64_t back = t + kPeriodNs / 2;
    p1.Add(0, back, Message(EventKind::kSend, 0, 2));
    p0.Add(0, back + kLatencyNs, Message(EventKind::kRecv, 1, 2));
    answers.messages += 2;
    answers.reversed_without_correction += 1;
    // Rank 1's worker: some work and a barrier per period.
    p1.Add(1, t + 1'000, Enter(1));
    p1.Add(1, t + 2'000'000, Leave(1));
    p1.Add(1, t + 2'000'100, Collective(EventKind::kCollectiveBegin, 8));
    p1.Add(1, t + 2'010'000, Collective(EventKind::kCollectiveEnd, 16));
  }
  p0.Add(0, end, Leave(0));
  p1.Add(0, end, Leave(0));
  for (const auto& thread : p0.threads_) answers.events_rank0 += thread.size();
  for (const auto& thread : p1.threads_) answers.events_rank1 += thread.size();
  const double e0 = kSyntheticOnlineError0Ns, e1 = kSyntheticOnlineError1Ns;
  answers.online_rms_error_ns = std::sqrt(
      (answers.events_rank0 * e0 * e0 + answers.events_rank1 * e1 * e1) /
      static_cast<double>(answers.events_rank0 + answers.events_rank1));
  answers.rank0_dir = absl::StrCat(dir, "/rank0");
  answers.rank1_dir = absl::StrCat(dir, "/rank1");
  absl::Status status =
      WriteArchive(answers.rank0_dir, p0, "ping", kSyntheticOnlineError0Ns);
  if (status.ok()) {
    status = WriteArchive(answers.rank1_dir, p1, "pong", kSyntheticOnlineError1Ns);
  }
  if (!status.ok()) return status;
  return answers;
}

}  // namespace clocksync::trace
