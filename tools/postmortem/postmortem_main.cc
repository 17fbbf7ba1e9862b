// tools/postmortem/postmortem_main.cc: the //tools/postmortem:postmortem tool. Reads a process's
// sync sessions and a list of local times, and writes their global times
// under the linear, spline or piecewise-linear post-mortem correction.
//
//   bazel run //tools/postmortem:postmortem -- --sessions=sessions.csv
//       --query=query.csv --method=spline [--output=out.csv]
//
// Relative paths are taken from the directory `bazel run` was called in.
// The correction's report (sessions, exchanges dropped, degenerate cases)
// goes to standard error. Exit status: 0 done, 1 bad input, 2 bad usage.

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tools/postmortem/postmortem_csv.h"

ABSL_FLAG(std::string, sessions, "",
          "CSV of sync exchanges, header 'session,s,m,r' (integer ns: session "
          "number in time order, local send, master stamp, local receive)");
ABSL_FLAG(std::string, query, "",
          "CSV of local times to convert, header 'local_ns'");
ABSL_FLAG(std::string, method, "",
          "correction: linear (least squares over all exchanges), spline "
          "(monotone C1 cubic through one point per session: the middle of "
          "what its exchanges allow, smoothed across sessions within it) or "
          "piecewise (straight lines between the sessions' mean exchanges)");
ABSL_FLAG(
    std::string, output, "",
    "where to write 'local_ns,global_ns' rows (default: standard output)");
ABSL_FLAG(double, slow_fraction, 0.1,
          "fraction of exchanges with the largest round trip dropped before "
          "fitting, in [0, 1)");

namespace clocksync::hull {
namespace {

// `path` as the user meant it: relative to where `bazel run` was called.
std::string Resolve(const std::string& path) {
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || dir == nullptr) return path;
  return absl::StrCat(dir, "/", path);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(Resolve(path), std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot read: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat(path, ": read error"));
  }
  return text.str();
}

absl::Status WriteOutput(const std::string& path, const std::string& text) {
  if (path.empty()) {
    std::cout << text << std::flush;
    return std::cout ? absl::OkStatus()
                     : absl::DataLossError("standard output: write error");
  }
  std::ofstream out(Resolve(path), std::ios::binary | std::ios::trunc);
  if (out) out << text;
  out.close();
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

int Run() {
  const std::string sessions_path = absl::GetFlag(FLAGS_sessions);
  const std::string query_path = absl::GetFlag(FLAGS_query);
  const std::string method = absl::GetFlag(FLAGS_method);
  if (sessions_path.empty() || query_path.empty() || method.empty()) {
    std::cerr << "postmortem: --sessions, --query and --method are required "
                 "(see --help)\n";
    return 2;
  }
  absl::StatusOr<std::string> sessions = ReadFile(sessions_path);
  if (!sessions.ok()) {
    std::cerr << "postmortem: " << sessions.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::string> query = ReadFile(query_path);
  if (!query.ok()) {
    std::cerr << "postmortem: " << query.status().message() << "\n";
    return 1;
  }
  PostmortemOptions options;
  options.slow_fraction = absl::GetFlag(FLAGS_slow_fraction);
  absl::StatusOr<PostmortemToolResult> result = RunPostmortemTool(
      *sessions, sessions_path, *query, query_path, method, options);
  if (!result.ok()) {
    std::cerr << "postmortem: " << result.status().message() << "\n";
    return 1;
  }
  std::cerr << "postmortem: " << result->report.ToString() << "\n";
  if (absl::Status s =
          WriteOutput(absl::GetFlag(FLAGS_output), result->output_csv);
      !s.ok()) {
    std::cerr << "postmortem: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace clocksync::hull

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "converts local times to global time with a post-mortem clock "
      "correction.\n\n"
      "  postmortem --sessions=sessions.csv --query=query.csv "
      "--method=linear|spline|piecewise [--output=out.csv]\n\n"
      "sessions.csv: header 'session,s,m,r', one ping-pong exchange with the "
      "master per row (integer ns).\n"
      "query.csv: header 'local_ns', one local time per row.\n"
      "output: header 'local_ns,global_ns', one row per query row.\n"
      "The correction's report goes to standard error. Errors name the file "
      "and line.");
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::cerr << "postmortem: unexpected argument '" << positional[1]
              << "' (see --help)\n";
    return 2;
  }
  return clocksync::hull::Run();
}
