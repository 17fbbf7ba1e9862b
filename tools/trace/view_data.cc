// tools/trace/view_data.cc: the view's indexes, cache and JSON (see
// view_data.h).

#include "tools/trace/view_data.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "trace/export.h"

namespace clocksync::trace {
namespace {

// FNV-1a, 64 bits.
class Hash {
 public:
  void Add(absl::string_view s) {
    for (unsigned char c : s) {
      h_ ^= c;
      h_ *= 0x100000001b3ull;
    }
    Add64(s.size());
  }
  void Add64(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h_ ^= (v >> (8 * i)) & 0xff;
      h_ *= 0x100000001b3ull;
    }
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

constexpr absl::string_view kCollectiveKinds[] = {
    "barrier", "bcast",    "gather",    "scatter", "reduce",
    "allreduce", "alltoall", "allgather", "other",   "mixed"};

// A double for JSON: integers as integers, others with 6 significant
// digits.
std::string Number(double v) {
  if (!std::isfinite(v)) return "0";
  if (v == std::floor(v) && std::fabs(v) < 9e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrFormat("%.6g", v);
}

void AppendAnswer(const LodIndex& index, const LodAnswer& answer,
                  std::string* out) {
  const int64_t origin = index.origin_ns();
  absl::StrAppend(out, "{\"level\":", answer.level, ",\"levels\":", index.levels(),
                  ",\"slot_ns\":", answer.slot_ns, ",\"f\":[");
  for (size_t i = 0; i < answer.functions.size(); ++i) {
    const LodFunctionHit& f = answer.functions[i];
    absl::StrAppend(out, i == 0 ? "[" : ",[", f.row, ",",
                    f.record.begin_ns - origin, ",", f.record.end_ns - origin, ",",
                    f.record.region, ",", f.record.region_ns, ",",
                    f.record.events, "]");
  }
  out->append("],\"m\":[");
  for (size_t i = 0; i < answer.messages.size(); ++i) {
    const LodMessageRecord& m = answer.messages[i];
    absl::StrAppend(out, i == 0 ? "[" : ",[", m.send_row, ",", m.recv_row, ",",
                    m.send_ns - origin, ",", m.recv_ns - origin, ",", m.count,
                    ",", Number(m.mean_bytes), ",", Number(m.mean_latency_ns),
                    ",", m.max_latency_ns, "]");
  }
  out->append("],\"c\":[");
  for (size_t i = 0; i < answer.collectives.size(); ++i) {
    const LodCollectiveRecord& c = answer.collectives[i];
    absl::StrAppend(out, i == 0 ? "[" : ",[", c.comm, ",", c.begin_ns - origin,
                    ",", c.end_ns - origin, ",", c.kind, ",", c.count, "]");
  }
  out->append("]}");
}

// "2026-11-27 03:04:05.123456789 UTC" for a Unix-epoch ns, or "" when the
// value cannot be one (a raw monotonic clock under `none`).
std::string EpochLabel(int64_t ns) {
  if (ns < 946684800LL * 1'000'000'000) return "";
  const time_t s = static_cast<time_t>(ns / 1'000'000'000);
  struct tm tm;
  gmtime_r(&s, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S", &tm);
  return absl::StrFormat("%s.%09d UTC", buffer, ns % 1'000'000'000);
}

}  // namespace

const ViewCorrection* ViewModel::Find(hull::CorrectionKind kind) const {
  for (const ViewCorrection& c : corrections) {
    if (c.kind == kind) return &c;
  }
  return nullptr;
}

std::string DefaultIndexDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return absl::StrCat(xdg, "/clocksync-trace");
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr && home[0] != '\0' ? home : "/tmp",
                      "/.cache/clocksync-trace");
}

std::string IndexPath(const std::string& index_dir,
                      const std::vector<std::string>& archives,
                      hull::CorrectionKind kind,
                      const hull::PostmortemOptions& postmortem) {
  namespace fs = std::filesystem;
  Hash hash;
  hash.Add("clocksync lod index 1");
  hash.Add(hull::CorrectionKindName(kind));
  hash.Add(absl::StrCat(postmortem.slow_fraction));
  for (const std::string& archive : archives) {
    std::error_code error;
    const fs::path root = fs::absolute(archive, error);
    hash.Add(root.string());
    std::vector<std::string> entries;
    for (fs::recursive_directory_iterator it(root, error), end;
         !error && it != end; it.increment(error)) {
      struct stat st;
      if (stat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      entries.push_back(absl::StrCat(it->path().lexically_relative(root).string(),
                                     " ", st.st_size, " ", st.st_mtim.tv_sec, ".",
                                     st.st_mtim.tv_nsec));
    }
    std::sort(entries.begin(), entries.end());
    for (const std::string& e : entries) hash.Add(e);
  }
  return absl::StrFormat("%s/%016x-%s.lodidx", index_dir, hash.value(),
                         hull::CorrectionKindName(kind));
}

absl::StatusOr<std::unique_ptr<LodIndex>> OpenOrBuildIndex(
    const std::string& path, absl::Span<const ProcessTrace> traces,
    const Timeline& timeline, const MessageMatch& messages, std::string* note) {
  absl::StatusOr<std::unique_ptr<LodIndex>> index = OpenLodIndex(path);
  if (index.ok()) {
    *note = absl::StrCat("index ", path, " (cached)");
    return index;
  }
  const std::string why =
      index.status().code() == absl::StatusCode::kNotFound
          ? "built"
          : absl::StrCat("rebuilt: ", index.status().message());
  const absl::Time start = absl::Now();
  absl::StatusOr<LodIndexData> data = BuildLodIndex(traces, timeline, messages);
  if (!data.ok()) return data.status();
  const absl::Time built = absl::Now();
  if (absl::Status s = WriteLodIndex(*data, path); !s.ok()) return s;
  *note = absl::StrFormat("index %s (%s in %.1f s, written in %.1f s)", path, why,
                          absl::ToDoubleSeconds(built - start),
                          absl::ToDoubleSeconds(absl::Now() - built));
  return OpenLodIndex(path);
}

absl::StatusOr<ViewModel> MakeViewModel(const std::vector<std::string>& archives,
                                        absl::Span<const ProcessTrace> traces,
                                        const ViewOptions& options) {
  const std::string dir =
      options.index_dir.empty() ? DefaultIndexDir() : options.index_dir;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot create the index directory ", dir, ": ", error.message()));
  }
  absl::StatusOr<MessageMatch> messages = MatchMessages(traces);
  if (!messages.ok()) return messages.status();
  ViewModel model;
  model.initial = options.initial;
  model.title = archives.size() == 1
                    ? archives[0]
                    : absl::StrCat(archives[0], " and ", archives.size() - 1, " more");
  for (hull::CorrectionKind kind : hull::AllCorrectionKinds()) {
    ViewCorrection c;
    c.kind = kind;
    absl::StatusOr<Timeline> timeline =
        BuildTimeline(traces, kind, options.postmortem);
    if (timeline.ok()) {
      for (size_t p = 0; p < traces.size() && c.unavailable_reason.empty(); ++p) {
        if (!timeline->processes[p].available) {
          c.unavailable_reason = absl::StrCat(
              archives[p], ": ", timeline->processes[p].unavailable_reason);
        }
      }
    } else {
      c.unavailable_reason = std::string(timeline.status().message());
    }
    if (c.unavailable_reason.empty()) {
      c.index_path = IndexPath(dir, archives, kind, options.postmortem);
      std::string note;
      absl::StatusOr<std::unique_ptr<LodIndex>> index =
          OpenOrBuildIndex(c.index_path, traces, *timeline, *messages, &note);
      if (!index.ok()) return index.status();
      c.index = *std::move(index);
      c.available = true;
      if (absl::Status s = RecordIndexUse(c.index_path, archives, kind, options.postmortem);
          !s.ok()) {
        model.notes.push_back(absl::StrCat("index cache: ", s.message()));
      }
      model.notes.push_back(absl::StrCat(hull::CorrectionKindName(kind), ": ", note));
      if (kind == options.initial) {
        const Profile profile = ProfileRegions(traces, *timeline);
        std::string json = "[";
        for (size_t i = 0; i < profile.regions.size(); ++i) {
          const RegionProfile& r = profile.regions[i];
          absl::StrAppend(&json, i == 0 ? "" : ",", "{\"rank\":",
                          traces[r.process].info.rank, ",\"region\":",
                          JsonString(r.name), ",\"calls\":", r.calls,
                          ",\"total_ns\":", r.total_ns, ",\"min_ns\":", r.min_ns,
                          ",\"max_ns\":", r.max_ns, ",\"mean_ns\":",
                          Number(r.mean_ns()), "}");
        }
        model.profile_json = json + "]";
      }
    } else if (kind == options.initial) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no ", hull::CorrectionKindName(kind), " correction: ",
          c.unavailable_reason));
    }
    model.corrections.push_back(std::move(c));
  }
  std::vector<std::string> in_use;
  for (const ViewCorrection& c : model.corrections) {
    if (c.available) in_use.push_back(c.index_path);
  }
  absl::StatusOr<IndexCachePruned> pruned =
      PruneIndexCache(dir, in_use, options.cache_limits, absl::Now());
  if (!pruned.ok()) {
    model.notes.push_back(absl::StrCat("index cache: ", pruned.status().message()));
  } else if (const int removed = pruned->stale + pruned->old + pruned->over + pruned->temp;
             removed > 0) {
    model.notes.push_back(absl::StrFormat(
        "index cache %s: removed %d files (%.1f MB: %d of archives gone or changed, "
        "%d unused for over %.0f days, %d over the %.0f MB limit, %d unfinished), "
        "kept %d indexes (%.1f MB)",
        dir, removed, pruned->bytes / 1e6, pruned->stale, pruned->old,
        absl::ToDoubleHours(options.cache_limits.max_age) / 24, pruned->over,
        options.cache_limits.max_bytes / 1e6, pruned->temp, pruned->kept,
        pruned->kept_bytes / 1e6));
  }
  return model;
}

std::string AnswerJson(const LodIndex& index, const LodAnswer& answer) {
  std::string out;
  AppendAnswer(index, answer, &out);
  return out;
}

std::string ModelJson(const ViewModel& model, int32_t px, int64_t max_records,
                      bool serve) {
  std::string out = absl::StrCat(
      "{\"title\":", JsonString(model.title), ",\"serve\":", serve ? "true" : "false",
      ",\"initial\":\"", hull::CorrectionKindName(model.initial), "\",\"kinds\":[");
  for (size_t k = 0; k < std::size(kCollectiveKinds); ++k) {
    absl::StrAppend(&out, k == 0 ? "\"" : ",\"", kCollectiveKinds[k], "\"");
  }
  absl::StrAppend(&out, "],\"profile\":",
                  model.profile_json.empty() ? "[]" : model.profile_json,
                  ",\"corrections\":{");
  bool first = true;
  for (const ViewCorrection& c : model.corrections) {
    absl::StrAppend(&out, first ? "" : ",", "\"", hull::CorrectionKindName(c.kind),
                    "\":{\"available\":", c.available ? "true" : "false");
    first = false;
    if (!c.available) {
      absl::StrAppend(&out, ",\"reason\":", JsonString(c.unavailable_reason), "}");
      continue;
    }
    const LodIndex& index = *c.index;
    absl::StrAppend(&out, ",\"origin_ns\":\"", index.origin_ns(),
                    "\",\"origin_label\":", JsonString(EpochLabel(index.origin_ns())),
                    ",\"span_ns\":", index.end_ns() - index.origin_ns(),
                    ",\"rows\":[");
    for (size_t r = 0; r < index.rows().size(); ++r) {
      const LodIndexRow& row = index.rows()[r];
      absl::StrAppend(&out, r == 0 ? "" : ",", "{\"rank\":", row.rank,
                      ",\"thread\":", row.thread, ",\"name\":", JsonString(row.name),
                      "}");
    }
    out += "],\"regions\":[";
    for (size_t i = 0; i < index.regions().size(); ++i) {
      absl::StrAppend(&out, i == 0 ? "" : ",", JsonString(index.regions()[i]));
    }
    out += "],\"colors\":[";
    for (size_t i = 0; i < index.regions().size(); ++i) {
      absl::StrAppend(&out, i == 0 ? "\"" : ",\"", RegionColor(index.regions()[i]),
                      "\"");
    }
    out += "],\"levels\":[";
    // The whole run's level, then finer ones while the budget lasts.
    const uint32_t top = index.LevelFor(index.origin_ns(), index.end_ns(), px);
    int64_t records = 0;
    bool first_level = true;
    for (int64_t level = top; level >= 0; --level) {
      const LodAnswer answer = index.QueryLevel(
          index.origin_ns(), index.end_ns(), static_cast<uint32_t>(level));
      const int64_t n = static_cast<int64_t>(
          answer.functions.size() + answer.messages.size() + answer.collectives.size());
      if (!first_level && records + n > max_records) break;
      records += n;
      if (!first_level) out += ",";
      first_level = false;
      AppendAnswer(index, answer, &out);
    }
    out += "]}";
  }
  out += "}}";
  return out;
}

std::string AnswerLodQuery(const ViewModel& model, const std::string& query) {
  int64_t t0 = 0, t1 = 0;
  int32_t px = 0;
  bool has_t0 = false, has_t1 = false;
  std::string correction = std::string(hull::CorrectionKindName(model.initial));
  for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(pair, absl::MaxSplits('=', 1));
    double value = 0;
    if (kv.first == "correction") {
      correction = std::string(kv.second);
    } else if (kv.first == "t0" || kv.first == "t1" || kv.first == "px") {
      if (!absl::SimpleAtod(kv.second, &value) || !std::isfinite(value) ||
          std::fabs(value) > 9e18) {
        return absl::StrCat("{\"error\":", JsonString(absl::StrCat(
                                               "bad ", kv.first, ": '", kv.second, "'")),
                            "}");
      }
      if (kv.first == "t0") {
        t0 = static_cast<int64_t>(value);
        has_t0 = true;
      } else if (kv.first == "t1") {
        t1 = static_cast<int64_t>(value);
        has_t1 = true;
      } else {
        px = static_cast<int32_t>(std::clamp(value, 1.0, 100000.0));
      }
    }
  }
  absl::StatusOr<hull::CorrectionKind> kind = hull::ParseCorrectionKind(correction);
  if (!kind.ok()) {
    return absl::StrCat("{\"error\":", JsonString(kind.status().message()), "}");
  }
  const ViewCorrection* c = model.Find(*kind);
  if (c == nullptr || !c->available) {
    return absl::StrCat("{\"error\":\"correction ", correction,
                        " is not available\"}");
  }
  if (!has_t0 || !has_t1 || px < 1 || t1 <= t0) {
    return "{\"error\":\"want t0 < t1 (ns since the origin) and px >= 1\"}";
  }
  const LodIndex& index = *c->index;
  const int64_t origin = index.origin_ns();
  const int64_t span = index.end_ns() - origin;
  // Clamped to a few spans around the run, so the sums below stay in range.
  t0 = std::clamp<int64_t>(t0, -span, 2 * span);
  t1 = std::clamp<int64_t>(t1, -span, 2 * span);
  if (t1 <= t0) t1 = t0 + 1;
  return AnswerJson(index, index.Query(origin + t0, origin + t1, px));
}

std::string RegionColor(const std::string& name) {
  Hash hash;
  hash.Add(name);
  const uint64_t h = hash.value();
  // HSL with a hue from the hash, saturation 55-80%, lightness 45-65%.
  const double hue = static_cast<double>(h % 360);
  const double s = 0.55 + 0.25 * static_cast<double>((h >> 16) % 100) / 100.0;
  const double l = 0.45 + 0.20 * static_cast<double>((h >> 32) % 100) / 100.0;
  const double c = (1 - std::fabs(2 * l - 1)) * s;
  const double x = c * (1 - std::fabs(std::fmod(hue / 60.0, 2) - 1));
  const double m = l - c / 2;
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(hue / 60)) {
    case 0: r = c; g = x; break;
    case 1: r = x; g = c; break;
    case 2: g = c; b = x; break;
    case 3: g = x; b = c; break;
    case 4: r = x; b = c; break;
    default: r = c; b = x; break;
  }
  return absl::StrFormat("#%02x%02x%02x", static_cast<int>((r + m) * 255 + 0.5),
                         static_cast<int>((g + m) * 255 + 0.5),
                         static_cast<int>((b + m) * 255 + 0.5));
}

}  // namespace clocksync::trace
