// trace/timeline.h: process traces on one global timescale, under a chosen
// correction, and what the trace tool measures on them.
//
// Corrections (hull::CorrectionKind, hull/correction.h), each a
// hull::Correction from a process's local clock to global time, built by
// hull::MakeCorrection from what the process's trace recorded:
//   none       local time as is (global = local);
//   online     the daemon's published mapping as the tracer recorded it
//              (MappingRecord): raw = local (or, with a clock model in the
//              ground truth, raw = the model's inverse at local), then the
//              latest record seen at or before that raw time, evaluated at
//              it; before the first record, the first record;
//   linear, spline, piecewise
//              the post-mortem corrections of hull/postmortem.h from the
//              process's sync sessions.
// The truth (TruthMapping) is the ground truth's master clock at the raw
// instant of a local reading.
//
// BuildTimeline rewrites every thread's stamps with hull::GlobalStampConverter
// (1 ns global ticks), so events of one thread never swap or merge whatever
// the correction does, and merges all events in global stamp order.
//
// Example:
//   absl::StatusOr<Timeline> online =
//       BuildTimeline(traces, hull::CorrectionKind::kOnline);
//   for (const TimedEvent& e : MergedEvents(*online)) ...
//   absl::StatusOr<MessageMatch> messages = MatchMessages(traces);
//   CorrectionSummary row = Summarize(traces, *online, *messages, 0);
//
// Not thread-safe: a model inverse extends its random walk lazily.

#ifndef CLOCKSYNC_TRACE_TIMELINE_H_
#define CLOCKSYNC_TRACE_TIMELINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "hull/clock_condition.h"
#include "hull/correction.h"
#include "hull/postmortem.h"
#include "hull/sim/clock_model.h"
#include "hull/trace_stamp.h"
#include "trace/trace.h"

namespace clocksync::trace {

// The raw (host CLOCK_MONOTONIC_RAW) time of a local reading under a
// GroundTruth clock model, i.e. the inverse of
//   local(raw) = origin + ModeledClock(spec).LocalAt(raw - origin)
// (before the origin the model is continued at rate 1 from its value there).
// Found by a secant step from the previous answer and bisection on raw, to
// the largest raw ns whose local time is <= the reading. Exact for a model
// that never steps backwards; across a backward step (`step=...:-...`) the
// local clock is not monotone, readings in the repeated range have two raw
// times, and the answer is one of them (which one is not specified): that
// is the known limit.
class ModelInverse {
 public:
  // Fails on a spec ParseClockModel rejects (the message names the key).
  static absl::StatusOr<std::unique_ptr<ModelInverse>> Create(
      const GroundTruth& truth);

  int64_t LocalAtRaw(int64_t raw_ns);
  int64_t RawAtLocal(int64_t local_ns);

 private:
  ModelInverse(hull::ClockModelParams params, int64_t origin_raw_ns);

  hull::ModeledClock model_;
  int64_t origin_raw_ns_;
  bool has_hint_ = false;
  int64_t hint_local_ns_ = 0;
  int64_t hint_raw_ns_ = 0;
};

// The true global time of a process's local readings (ground truth only):
// raw = ModelInverse at local (raw = local without a model), truth = raw +
// master_offset_ns.
class TruthMapping {
 public:
  static absl::StatusOr<std::unique_ptr<TruthMapping>> Create(
      const GroundTruth& truth);
  int64_t GlobalNs(int64_t local_ns);

 private:
  std::unique_ptr<ModelInverse> inverse_;  // null: local == raw
  int64_t master_offset_ns_ = 0;
};

// Builds the correction of `kind` for one process: the trace's inputs
// (synchronized mapping records as segments, with the clock model's inverse
// as raw_at_local; sync sessions) handed to hull::MakeCorrection. Fails
// (naming the rank
// and why) when the trace lacks what the correction needs: no mapping
// records with a synchronized state for online, no usable sync session for
// the post-mortem ones. *report (if not null) gets a one-line description
// of the correction's input and degenerate cases.
// `options` tune the post-mortem corrections (hull/postmortem.h).
absl::StatusOr<std::unique_ptr<hull::Correction>> MakeProcessCorrection(
    const ProcessTrace& trace, hull::CorrectionKind kind, std::string* report,
    const hull::PostmortemOptions& options = {});

// The sessions of a trace in hull's form: the same exchanges, numbered
// 0, 1, ... in trace order.
std::vector<hull::SyncSession> ToHullSessions(
    absl::Span<const SyncSession> sessions);

// One event on the global timescale.
struct TimedEvent {
  int32_t process = 0;  // index into the traces given
  uint32_t thread = 0;  // index into ProcessTrace::threads
  uint32_t index = 0;   // index into ThreadTrace::events
  int64_t local_ns = 0;
  int64_t global_ns = 0;
  uint64_t global_stamp = 0;  // 51+13 stamp on Timeline::stamp_clock
};

struct ProcessTimeline {
  bool available = false;
  std::string unavailable_reason;  // when !available
  std::string report;              // the correction's report
  // [thread][event], parallel to ProcessTrace::threads[t].events.
  std::vector<std::vector<int64_t>> local_ns;
  std::vector<std::vector<int64_t>> global_ns;
  std::vector<std::vector<uint64_t>> global_stamps;
  uint64_t raised = 0;  // stamps the converter moved to keep thread order
};

struct Timeline {
  hull::CorrectionKind kind = hull::CorrectionKind::kNone;
  hull::StampClock stamp_clock;  // origin and 1 ns period of global stamps
  std::vector<ProcessTimeline> processes;  // parallel to the traces
  // True when every process has the correction.
  bool complete() const;
};

// Converts every process. A process whose correction cannot be built is
// marked unavailable (reason given) rather than failing the whole timeline.
// Fails (FailedPrecondition, with every reason) only when the correction is
// available for no process.
absl::StatusOr<Timeline> BuildTimeline(
    absl::Span<const ProcessTrace> traces, hull::CorrectionKind kind,
    const hull::PostmortemOptions& options = {});

// Every event of the available processes, in global stamp order (ties
// broken by process, thread, index). Each thread's events keep their order.
std::vector<TimedEvent> MergedEvents(const Timeline& timeline);

// A send matched with its receive.
struct MessagePair {
  int32_t send_process = 0;
  uint32_t send_thread = 0;
  uint32_t send_index = 0;
  int32_t recv_process = 0;
  uint32_t recv_thread = 0;
  uint32_t recv_index = 0;
};

struct MessageMatch {
  std::vector<MessagePair> pairs;
  int64_t unmatched_sends = 0;
  int64_t unmatched_recvs = 0;
  // Sends or receives naming a peer outside the traces given, or a
  // communicator rank outside its communicator.
  int64_t unknown_peers = 0;
};

// Matches point-to-point messages: the k-th send from rank i to rank j with
// tag t on communicator c (in the sender's local stamp order) with the k-th
// receive on j from i with t on c (in the receiver's order), FIFO as MPI
// guarantees per (source, destination, tag, communicator). Peers are
// communicator ranks, translated with the process's Communicator
// definitions (a missing definition of communicator 0 means the world:
// peer = program rank). Fails when two traces have the same rank.
absl::StatusOr<MessageMatch> MatchMessages(
    absl::Span<const ProcessTrace> traces);

// What `compare` prints for one correction.
struct CorrectionSummary {
  hull::CorrectionKind kind = hull::CorrectionKind::kNone;
  bool available = false;
  std::string unavailable_reason;
  // Over messages between available processes.
  hull::ClockConditionReport clock_condition;
  // Versus the ground truth, over every event of processes that have both
  // the correction and a ground truth.
  int64_t truth_events = 0;
  double rms_error_ns = 0;
  int64_t max_abs_error_ns = 0;
};

// Clock condition (with `min_latency_ns`) and truth errors of a timeline.
// Fails on a ground truth whose clock model does not parse.
absl::StatusOr<CorrectionSummary> Summarize(
    absl::Span<const ProcessTrace> traces, const Timeline& timeline,
    const MessageMatch& messages, int64_t min_latency_ns);

// Inclusive time per region and process, from enter/leave pairs.
struct RegionProfile {
  int32_t process = 0;  // index into the traces
  uint32_t region = 0;
  std::string name;
  int64_t calls = 0;
  int64_t total_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  double mean_ns() const {
    return calls == 0 ? 0.0 : static_cast<double>(total_ns) / calls;
  }
};

struct Profile {
  std::vector<RegionProfile> regions;  // by process, then region id
  int64_t unmatched_leaves = 0;  // a leave without its enter
  int64_t open_enters = 0;       // an enter never left (trace ended)
};

// Profiles the regions on a timeline's global times (its available
// processes).
Profile ProfileRegions(absl::Span<const ProcessTrace> traces,
                       const Timeline& timeline);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_TIMELINE_H_
