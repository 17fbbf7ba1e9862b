// tools/postmortem/postmortem_csv.h: the CSV formats of the //tools/postmortem:postmortem tool, and
// the tool's work on file contents (text in, text out; the tool's main()
// only reads and writes the files).
//
//   sessions.csv  header "session,s,m,r"; one exchange per row, integer ns:
//                 session number (bursts numbered in time order), local
//                 send, master stamp, local receive.
//   query.csv     header "local_ns"; one local time per row.
//   output        header "local_ns,global_ns"; one row per query row, in
//                 the query's order.
//
// Blank lines are ignored, fields may be padded with spaces, and CRLF line
// ends are accepted. Every error names the file and the line
// ("sessions.csv:7: ...").

#ifndef CLOCKSYNC_TOOLS_POSTMORTEM_POSTMORTEM_CSV_H_
#define CLOCKSYNC_TOOLS_POSTMORTEM_POSTMORTEM_CSV_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "hull/postmortem.h"

namespace clocksync::hull {

// Parses sessions.csv text. Rows are grouped by session number (they need
// not be contiguous); sessions come out in ascending session number.
// `file_name` only labels error messages.
absl::StatusOr<std::vector<SyncSession>> ParseSessionsCsv(
    absl::string_view text, absl::string_view file_name);

// Parses query.csv text (a header and no rows is an empty query).
absl::StatusOr<std::vector<int64_t>> ParseQueryCsv(absl::string_view text,
                                                   absl::string_view file_name);

// "local_ns,global_ns" and one row per pair. Sizes must match.
std::string FormatGlobalCsv(absl::Span<const int64_t> local_ns,
                            absl::Span<const int64_t> global_ns);

struct PostmortemToolResult {
  std::string output_csv;   // the output file's contents
  CorrectionReport report;  // what went into the correction
};

// The whole tool on file contents: parses both files, builds the correction
// named `method_name` ("linear", "spline" or "piecewise") and converts the
// query.
absl::StatusOr<PostmortemToolResult> RunPostmortemTool(
    absl::string_view sessions_text, absl::string_view sessions_file,
    absl::string_view query_text, absl::string_view query_file,
    absl::string_view method_name, const PostmortemOptions& options = {});

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_TOOLS_POSTMORTEM_POSTMORTEM_CSV_H_
