// trace/compare_report.cc: every correction compared on one set of traces,
// as a table or JSON (compare_report.h).

#include "trace/compare_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace clocksync::trace {
namespace {

std::string WorstCell(const hull::ClockConditionReport& r) {
  return r.has_worst ? absl::StrCat(r.worst_latency_ns) : std::string("-");
}

std::string JsonEscaped(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(ch) >= 0x20) out.push_back(ch);
  }
  return out;
}

}  // namespace

absl::StatusOr<CompareReport> CompareCorrections(
    absl::Span<const ProcessTrace> traces, int64_t min_latency_ns,
    const hull::PostmortemOptions& options) {
  CompareReport report;
  report.processes = traces.size();
  report.min_latency_ns = min_latency_ns;
  absl::StatusOr<MessageMatch> messages = MatchMessages(traces);
  if (!messages.ok()) return messages.status();
  report.messages = *std::move(messages);
  for (hull::CorrectionKind kind : hull::AllCorrectionKinds()) {
    absl::StatusOr<Timeline> timeline = BuildTimeline(traces, kind, options);
    if (!timeline.ok()) {
      CorrectionSummary row;
      row.kind = kind;
      row.unavailable_reason = std::string(timeline.status().message());
      report.rows.push_back(row);
      continue;
    }
    absl::StatusOr<CorrectionSummary> row =
        Summarize(traces, *timeline, report.messages, min_latency_ns);
    if (!row.ok()) return row.status();
    report.rows.push_back(*row);
  }
  return report;
}

std::string FormatCompareTable(const CompareReport& report) {
  std::string out = absl::StrFormat(
      "%d processes, %d messages matched (%d sends, %d receives unmatched), "
      "min latency %d ns\n",
      report.processes, report.messages.pairs.size(),
      report.messages.unmatched_sends, report.messages.unmatched_recvs,
      report.min_latency_ns);
  absl::StrAppend(&out, absl::StrFormat(
                            "%-10s %9s %10s %10s %12s %12s %14s %14s\n",
                            "correction", "messages", "violations",
                            "below_min", "worst_ns", "truth_events",
                            "rms_error_ns", "max_error_ns"));
  for (const CorrectionSummary& r : report.rows) {
    const hull::ClockConditionReport& c = r.clock_condition;
    if (!r.available && c.messages == 0 && r.truth_events == 0) {
      absl::StrAppend(&out, absl::StrFormat("%-10s unavailable: %s\n",
                                            hull::CorrectionKindName(r.kind),
                                            r.unavailable_reason));
      continue;
    }
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "%-10s %9d %10d %10d %12s %12d %14s %14s\n",
            hull::CorrectionKindName(r.kind), c.messages, c.reversed,
            c.below_min_latency, WorstCell(c), r.truth_events,
            r.truth_events > 0 ? absl::StrFormat("%.1f", r.rms_error_ns) : "-",
            r.truth_events > 0 ? absl::StrCat(r.max_abs_error_ns) : "-"));
    if (!r.available) {
      absl::StrAppend(&out, absl::StrFormat("%-10s   (partial: %s)\n", "",
                                            r.unavailable_reason));
    }
  }
  return out;
}

std::string FormatCompareJson(const CompareReport& report) {
  std::string json = absl::StrCat(
      "{\"processes\":", report.processes, ",\"messages\":",
      report.messages.pairs.size(), ",\"unmatched_sends\":",
      report.messages.unmatched_sends, ",\"unmatched_recvs\":",
      report.messages.unmatched_recvs, ",\"min_latency_ns\":",
      report.min_latency_ns, ",\"corrections\":[");
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CorrectionSummary& r = report.rows[i];
    const hull::ClockConditionReport& c = r.clock_condition;
    absl::StrAppend(
        &json, i == 0 ? "" : ",", "{\"correction\":\"",
        hull::CorrectionKindName(r.kind),
        "\",\"available\":", r.available ? "true" : "false",
        ",\"unavailable_reason\":\"", JsonEscaped(r.unavailable_reason),
        "\",\"messages\":", c.messages, ",\"violations\":", c.reversed,
        ",\"below_min_latency\":", c.below_min_latency,
        ",\"worst_latency_ns\":",
        c.has_worst ? absl::StrCat(c.worst_latency_ns) : "null",
        ",\"truth_events\":", r.truth_events, ",\"rms_error_ns\":",
        r.truth_events > 0 ? absl::StrFormat("%.3f", r.rms_error_ns) : "null",
        ",\"max_abs_error_ns\":",
        r.truth_events > 0 ? absl::StrCat(r.max_abs_error_ns) : "null", "}");
  }
  json += "]}\n";
  return json;
}

}  // namespace clocksync::trace
