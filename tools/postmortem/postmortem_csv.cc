// tools/postmortem/postmortem_csv.cc: parsing and writing the //tools/postmortem:postmortem CSV
// files (see postmortem_csv.h).

#include "tools/postmortem/postmortem_csv.h"

#include <map>
#include <memory>
#include <utility>

#include "absl/base/internal/raw_logging.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace clocksync::hull {
namespace {

// One non-blank line of a CSV file, split into trimmed fields.
struct Row {
  int line = 0;  // 1-based line number in the file
  std::vector<absl::string_view> fields;
};

// Splits `text` into rows, skipping blank lines.
std::vector<Row> SplitRows(absl::string_view text) {
  std::vector<Row> rows;
  int line = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line;
    absl::string_view trimmed = absl::StripAsciiWhitespace(raw);  // also \r
    if (trimmed.empty()) continue;
    Row row{line, {}};
    for (absl::string_view field : absl::StrSplit(trimmed, ',')) {
      row.fields.push_back(absl::StripAsciiWhitespace(field));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

absl::Status LineError(absl::string_view file, int line,
                       absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, ":", line, ": ", message));
}

// Checks that the first row is exactly `header`.
absl::Status CheckHeader(const std::vector<Row>& rows,
                         const std::vector<absl::string_view>& header,
                         absl::string_view file) {
  const std::string expected = absl::StrJoin(header, ",");
  if (rows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ":1: empty file, expected the header '", expected, "'"));
  }
  if (rows[0].fields != header) {
    return LineError(file, rows[0].line,
                     absl::StrCat("expected the header '", expected, "', got '",
                                  absl::StrJoin(rows[0].fields, ","), "'"));
  }
  return absl::OkStatus();
}

// Parses the fields of `row` as integers, one per header column.
absl::Status ParseFields(const Row& row,
                         const std::vector<absl::string_view>& header,
                         absl::string_view file, int64_t* values) {
  if (row.fields.size() != header.size()) {
    return LineError(
        file, row.line,
        absl::StrCat("expected ", header.size(),
                     header.size() == 1 ? " field (" : " fields (",
                     absl::StrJoin(header, ","), "), got ", row.fields.size()));
  }
  for (size_t i = 0; i < header.size(); ++i) {
    if (!absl::SimpleAtoi(row.fields[i], &values[i])) {
      return LineError(file, row.line,
                       absl::StrCat("field '", header[i], "': '", row.fields[i],
                                    "' is not a 64-bit integer"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<SyncSession>> ParseSessionsCsv(
    absl::string_view text, absl::string_view file_name) {
  const std::vector<absl::string_view> header = {"session", "s", "m", "r"};
  const std::vector<Row> rows = SplitRows(text);
  if (absl::Status s = CheckHeader(rows, header, file_name); !s.ok()) return s;
  if (rows.size() == 1) {
    return LineError(file_name, rows[0].line, "no exchanges after the header");
  }
  std::map<int64_t, SyncSession> by_number;
  for (size_t i = 1; i < rows.size(); ++i) {
    int64_t v[4];
    if (absl::Status s = ParseFields(rows[i], header, file_name, v); !s.ok()) {
      return s;
    }
    SyncSession& session = by_number[v[0]];
    session.id = v[0];
    session.exchanges.push_back(ProbeSample::OneMasterStamp(v[1], v[2], v[3]));
  }
  std::vector<SyncSession> sessions;
  sessions.reserve(by_number.size());
  for (auto& [number, session] : by_number)
    sessions.push_back(std::move(session));
  return sessions;
}

absl::StatusOr<std::vector<int64_t>> ParseQueryCsv(
    absl::string_view text, absl::string_view file_name) {
  const std::vector<absl::string_view> header = {"local_ns"};
  const std::vector<Row> rows = SplitRows(text);
  if (absl::Status s = CheckHeader(rows, header, file_name); !s.ok()) return s;
  std::vector<int64_t> local_ns;
  local_ns.reserve(rows.size() - 1);
  for (size_t i = 1; i < rows.size(); ++i) {
    int64_t value;
    if (absl::Status s = ParseFields(rows[i], header, file_name, &value);
        !s.ok()) {
      return s;
    }
    local_ns.push_back(value);
  }
  return local_ns;
}

std::string FormatGlobalCsv(absl::Span<const int64_t> local_ns,
                            absl::Span<const int64_t> global_ns) {
  ABSL_RAW_CHECK(local_ns.size() == global_ns.size(),
                 "FormatGlobalCsv: sizes differ");
  std::string out = "local_ns,global_ns\n";
  out.reserve(out.size() + local_ns.size() * 40);
  for (size_t i = 0; i < local_ns.size(); ++i) {
    absl::StrAppend(&out, local_ns[i], ",", global_ns[i], "\n");
  }
  return out;
}

absl::StatusOr<PostmortemToolResult> RunPostmortemTool(
    absl::string_view sessions_text, absl::string_view sessions_file,
    absl::string_view query_text, absl::string_view query_file,
    absl::string_view method_name, const PostmortemOptions& options) {
  // The post-mortem kinds only.
  absl::StatusOr<CorrectionKind> method = ParseCorrectionKind(method_name);
  if (!method.ok() || !IsPostmortem(*method)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown correction method '", method_name,
                     "' (expected linear, spline or piecewise)"));
  }
  absl::StatusOr<std::vector<SyncSession>> sessions =
      ParseSessionsCsv(sessions_text, sessions_file);
  if (!sessions.ok()) return sessions.status();
  absl::StatusOr<std::vector<int64_t>> query =
      ParseQueryCsv(query_text, query_file);
  if (!query.ok()) return query.status();
  absl::StatusOr<std::unique_ptr<PostmortemCorrection>> correction =
      FitPostmortemCorrection(*method, *sessions, options);
  if (!correction.ok()) {
    return absl::Status(
        correction.status().code(),
        absl::StrCat(sessions_file, ": ", correction.status().message()));
  }
  // Any order is accepted; sorted queries are converted fastest.
  std::vector<int64_t> global_ns(query->size());
  (*correction)->ToGlobalSorted(*query, absl::MakeSpan(global_ns));
  return PostmortemToolResult{FormatGlobalCsv(*query, global_ns),
                              (*correction)->report()};
}

}  // namespace clocksync::hull
