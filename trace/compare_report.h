// trace/compare_report.h: the comparison of every correction on one set of
// traces (clock-condition violations, worst latency, errors against the
// ground truth), as `clocksync-trace compare` and `clocksync-collector`
// print it: a table for people, or JSON.
#ifndef CLOCKSYNC_TRACE_COMPARE_REPORT_H_
#define CLOCKSYNC_TRACE_COMPARE_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hull/postmortem.h"
#include "trace/timeline.h"
#include "trace/trace.h"

namespace clocksync::trace {

struct CompareReport {
  size_t processes = 0;
  MessageMatch messages;
  int64_t min_latency_ns = 0;
  // One row per correction (hull::AllCorrectionKinds()); a correction no
  // process has is a row with available = false and its reason.
  std::vector<CorrectionSummary> rows;
};

// Matches the messages and summarizes every correction. Fails when two
// traces share a rank or a ground truth does not parse.
absl::StatusOr<CompareReport> CompareCorrections(
    absl::Span<const ProcessTrace> traces, int64_t min_latency_ns,
    const hull::PostmortemOptions& options = {});

// The table `clocksync-trace compare` prints:
//   2 processes, 1996 messages matched (0 sends, 0 receives unmatched), min latency 0 ns
//   correction  messages violations  below_min     worst_ns truth_events   rms_error_ns   max_error_ns
//   online          1996          0          0            -         7988          180.3            200
std::string FormatCompareTable(const CompareReport& report);

// {"processes","messages","unmatched_sends","unmatched_recvs",
//  "min_latency_ns","corrections":[{"correction","available",
//  "unavailable_reason","messages","violations","below_min_latency",
//  "worst_latency_ns","truth_events","rms_error_ns","max_abs_error_ns"}]}
// and a newline.
std::string FormatCompareJson(const CompareReport& report);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_COMPARE_REPORT_H_
