// tools/replay/replay.cc: Replay: see replay.h.

#include "tools/replay/replay.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace clocksync::hull {
namespace {

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> SplitCommas(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream stream(line);
  while (std::getline(stream, field, ',')) fields.push_back(Trim(field));
  if (!line.empty() && line.back() == ',') fields.push_back("");
  return fields;
}

bool ParseInt64(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

bool ParseSamplesCsv(std::istream& in, const std::string& name,
                     std::vector<ReplaySample>* out, std::string* error) {
  static const char* const kColumns[] = {"t1", "t2", "t3", "t4", "truth_ns"};
  std::string line;
  int line_number = 0;
  size_t width = 0;         // Fields in each line; 0 before the header.
  size_t truth_column = 0;  // Where truth_ns is (after t4), 0 if none.
  auto fail = [&](const std::string& what) {
    *error = name + ":" + std::to_string(line_number) + ": " + what;
    return false;
  };
  while (std::getline(in, line)) {
    ++line_number;
    const std::string trimmed = Trim(line);
    if (trimmed.empty() || trimmed[0] == '#') continue;
    const std::vector<std::string> fields = SplitCommas(trimmed);
    if (width == 0) {
      if (fields.size() < 4) {
        return fail("expected the header t1,t2,t3,t4 (optionally ,truth_ns)");
      }
      for (size_t i = 0; i < 4; ++i) {
        if (fields[i] != kColumns[i]) {
          return fail("header column " + std::to_string(i + 1) + " is '" +
                      fields[i] + "', expected '" + kColumns[i] + "'");
        }
      }
      // Of the columns after t1..t4 (a daemon's sample_log has more),
      // truth_ns is read wherever it is; the others are ignored.
      for (size_t i = 4; i < fields.size() && truth_column == 0; ++i) {
        if (fields[i] == "truth_ns") truth_column = i;
      }
      width = fields.size();
      continue;
    }
    if (fields.size() != width) {
      return fail("expected " + std::to_string(width) + " fields, got " +
                  std::to_string(fields.size()));
    }
    int64_t v[5] = {};
    const size_t values = truth_column != 0 ? 5 : 4;
    for (size_t i = 0; i < values; ++i) {
      const size_t column = i < 4 ? i : truth_column;
      if (!ParseInt64(fields[column], &v[i])) {
        return fail(std::string(kColumns[i]) + " is not an integer: '" +
                    fields[column] + "'");
      }
    }
    ReplaySample s{{v[0], v[1], v[2], v[3]}, std::nullopt};
    if (truth_column != 0) s.truth_ns = v[4];
    out->push_back(s);
  }
  if (in.bad()) return fail("read error");
  if (width == 0) {
    line_number = 1;
    return fail("empty file: expected the header t1,t2,t3,t4");
  }
  return true;
}

ReplaySummary Replay(const std::vector<ReplaySample>& samples,
                     const AdaptiveConfig& config, int64_t warmup_ns,
                     std::ostream* out) {
  ReplaySummary summary;
  AdaptiveWindowEstimator est(config);
  if (out != nullptr) *out << "t4,estimate_ns,earliest_ns,latest_ns\n";
  double sum_sq = 0, sum_half_width = 0;
  for (const ReplaySample& r : samples) {
    ++summary.samples;
    est.Add(r.sample);
    const int64_t t4 = r.sample.t4_ns;
    const TimeEstimate e = est.Estimate(t4);
    if (e.state == SyncState::kUnsynced) {
      if (out != nullptr) *out << t4 << ",,,\n";
      continue;
    }
    ++summary.synced_rows;
    if (out != nullptr) {
      *out << t4 << ',' << e.global_ns << ',' << e.earliest_ns << ','
           << e.latest_ns << '\n';
    }
    if (r.truth_ns && t4 - samples.front().sample.t4_ns >= warmup_ns) {
      const int64_t error = e.global_ns - *r.truth_ns;
      ++summary.checks;
      sum_sq += static_cast<double>(error) * error;
      summary.max_abs_error_ns =
          std::max<int64_t>(summary.max_abs_error_ns, std::llabs(error));
      if (*r.truth_ns < e.earliest_ns || *r.truth_ns > e.latest_ns) {
        ++summary.bound_violations;
      }
      sum_half_width += (e.latest_ns - e.earliest_ns) / 2.0;
    }
  }
  summary.rejected = est.stats().rejected();
  summary.inconsistencies = est.stats().inconsistencies;
  if (summary.checks > 0) {
    summary.rms_error_ns = std::sqrt(sum_sq / summary.checks);
    summary.mean_bound_half_width_ns = sum_half_width / summary.checks;
  }
  return summary;
}

}  // namespace clocksync::hull
