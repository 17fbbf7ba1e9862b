// trace/sidecar.cc: writing and parsing the clocksync sidecar file.

#include "trace/sidecar.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace clocksync::trace::sidecar {
namespace {

bool NeedsEscape(unsigned char c) {
  return c <= 0x20 || c >= 0x7f || c == '%' || c == '=' || c == ',' ||
         c == ';';
}

std::string FormatDouble(double value) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

// key=value fields of one line (after the record type).
using Fields = std::map<std::string, std::string, std::less<>>;

class LineParser {
 public:
  LineParser(const std::string& path, int line_number, const Fields& fields)
      : path_(path), line_(line_number), fields_(fields) {}

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ":", line_, ": ", what));
  }

  absl::StatusOr<absl::string_view> Raw(absl::string_view key) const {
    auto it = fields_.find(key);
    if (it == fields_.end()) {
      return Error(absl::StrCat("missing field '", key, "'"));
    }
    return absl::string_view(it->second);
  }

  absl::Status Int(absl::string_view key, int64_t* out) const {
    absl::StatusOr<absl::string_view> raw = Raw(key);
    if (!raw.ok()) return raw.status();
    if (!absl::SimpleAtoi(*raw, out)) {
      return Error(absl::StrCat("field '", key, "': '", *raw,
                                "' is not a 64-bit integer"));
    }
    return absl::OkStatus();
  }

  absl::Status Uint(absl::string_view key, uint64_t* out) const {
    absl::StatusOr<absl::string_view> raw = Raw(key);
    if (!raw.ok()) return raw.status();
    if (!absl::SimpleAtoi(*raw, out)) {
      return Error(absl::StrCat("field '", key, "': '", *raw,
                                "' is not an unsigned integer"));
    }
    return absl::OkStatus();
  }

  absl::Status Double(absl::string_view key, double* out) const {
    absl::StatusOr<absl::string_view> raw = Raw(key);
    if (!raw.ok()) return raw.status();
    if (!absl::SimpleAtod(*raw, out)) {
      return Error(
          absl::StrCat("field '", key, "': '", *raw, "' is not a number"));
    }
    return absl::OkStatus();
  }

  absl::Status String(absl::string_view key, std::string* out) const {
    absl::StatusOr<absl::string_view> raw = Raw(key);
    if (!raw.ok()) return raw.status();
    absl::StatusOr<std::string> decoded = Decode(*raw);
    if (!decoded.ok()) {
      return Error(absl::StrCat("field '", key, "': ",
                                decoded.status().message()));
    }
    *out = *std::move(decoded);
    return absl::OkStatus();
  }

 private:
  const std::string& path_;
  int line_;
  const Fields& fields_;
};

#define SIDECAR_RETURN_IF_ERROR(expr)          \
  do {                                         \
    absl::Status status_ = (expr);             \
    if (!status_.ok()) return status_;         \
  } while (false)

absl::StatusOr<SyncSessionKind> ParseSessionKind(absl::string_view name) {
  for (SyncSessionKind kind :
       {SyncSessionKind::kInit, SyncSessionKind::kTimesync,
        SyncSessionKind::kPeriodic, SyncSessionKind::kFinalize}) {
    if (SyncSessionKindName(kind) == name) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown session kind '", name, "'"));
}

}  // namespace

std::string Encode(absl::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (char ch : value) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (NeedsEscape(c)) {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

absl::StatusOr<std::string> Decode(absl::string_view value) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] != '%') {
      out.push_back(value[i]);
      continue;
    }
    if (i + 2 >= value.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("truncated escape in '", value, "'"));
    }
    const int high = hex(value[i + 1]);
    const int low = hex(value[i + 2]);
    if (high < 0 || low < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad escape in '", value, "'"));
    }
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return out;
}

std::string VersionLine() { return absl::StrCat(kMagic, " ", kVersion, "\n"); }

std::string ProcessLine(const ProcessInfo& info) {
  return absl::StrCat(
      "process rank=", info.rank, " pid=", info.pid,
      " origin_ns=", info.origin_ns,
      " tick_period_ns=", FormatDouble(info.tick_period_ns),
      " name=", Encode(info.process_name), " host=", Encode(info.hostname),
      " node_id=", Encode(info.node_id), " shm_path=", Encode(info.shm_path),
      "\n");
}

std::string MappingLine(const MappingRecord& r) {
  return absl::StrCat(
      "mapping local_ns=", r.local_ns, " raw_ns=", r.raw_ns,
      " anchor_raw_ns=", r.anchor_raw_ns,
      " anchor_global_ns=", r.anchor_global_ns,
      " rate_adj=", FormatDouble(r.rate_adj),
      " bound_at_anchor_ns=", r.bound_at_anchor_ns,
      " bound_growth_ppb=", FormatDouble(r.bound_growth_ppb),
      " state=", r.state, " flags=", r.flags, "\n");
}

std::string SessionLine(const SyncSession& session) {
  std::string line =
      absl::StrCat("session kind=", SyncSessionKindName(session.kind),
                   " exchanges=", session.exchanges.size(), " x=");
  for (size_t i = 0; i < session.exchanges.size(); ++i) {
    // t1..t4 only: parent_bound_ns is 0 (the master) and not stored.
    const hull::ProbeSample& e = session.exchanges[i];
    absl::StrAppend(&line, i == 0 ? "" : ";", e.t1_ns, ",", e.t2_ns, ",",
                    e.t3_ns, ",", e.t4_ns);
  }
  line.push_back('\n');
  return line;
}

std::string TruthLine(const GroundTruth& truth) {
  return absl::StrCat("truth master_offset_ns=", truth.master_offset_ns,
                      " model_origin_raw_ns=", truth.model_origin_raw_ns,
                      " clock_model=", Encode(truth.clock_model_spec), "\n");
}

std::string ThreadLine(uint32_t thread_index, const std::string& name) {
  return absl::StrCat("thread index=", thread_index, " name=", Encode(name),
                      "\n");
}

std::string RegionLine(const Region& region) {
  return absl::StrCat("region id=", region.id, " name=", Encode(region.name),
                      "\n");
}

std::string CommunicatorLine(const Communicator& comm) {
  return absl::StrCat("comm id=", comm.id, " name=", Encode(comm.name),
                      " ranks=", absl::StrJoin(comm.ranks, ","), "\n");
}

std::string EndLine(uint64_t events,
                    const std::optional<DefinitionChecksums>& checksums) {
  if (!checksums.has_value()) return absl::StrCat("end events=", events, "\n");
  return absl::StrCat("end events=", events, " anchor_fnv1a=",
                      absl::Hex(checksums->anchor, absl::kZeroPad16),
                      " defs_fnv1a=",
                      absl::Hex(checksums->definitions, absl::kZeroPad16),
                      "\n");
}

std::string StreamedRecords::NewLines(
    const std::vector<Region>& regions,
    const std::vector<Communicator>& communicators,
    const std::vector<MappingRecord>& mappings,
    const std::vector<SyncSession>& sessions,
    const std::optional<GroundTruth>& truth) {
  std::string text;
  // A definition's line, unless the sidecar has that very line for its id.
  auto add_if_changed = [&text](std::string line, std::string* streamed) {
    if (line == *streamed) return;
    text += line;
    *streamed = std::move(line);
  };
  for (const Region& region : regions) {
    add_if_changed(RegionLine(region), &regions_[region.id]);
  }
  for (const Communicator& comm : communicators) {
    add_if_changed(CommunicatorLine(comm), &comms_[comm.id]);
  }
  for (size_t i = std::min(mappings_, mappings.size()); i < mappings.size();
       ++i) {
    text += MappingLine(mappings[i]);
  }
  mappings_ = std::max(mappings_, mappings.size());
  for (size_t i = std::min(sessions_, sessions.size()); i < sessions.size();
       ++i) {
    text += SessionLine(sessions[i]);
  }
  sessions_ = std::max(sessions_, sessions.size());
  if (truth.has_value() && !truth_) {
    text += TruthLine(*truth);
    truth_ = true;
  }
  return text;
}

absl::StatusOr<uint64_t> FileChecksum(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int error = errno;
    return error == ENOENT
               ? absl::NotFoundError(absl::StrCat(path, ": missing"))
               : absl::UnavailableError(
                     absl::StrCat(path, ": ", std::strerror(error)));
  }
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  unsigned char buffer[1 << 16];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    for (size_t i = 0; i < got; ++i) {
      hash = (hash ^ buffer[i]) * 0x100000001b3ULL;  // FNV-1a 64 prime
    }
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return absl::UnavailableError(absl::StrCat(path, ": read error"));
  return hash;
}

absl::StatusOr<Contents> Parse(absl::string_view text,
                               const std::string& path) {
  Contents contents;
  std::map<uint32_t, std::string> threads;
  std::map<uint32_t, Region> regions;
  std::map<uint32_t, Communicator> communicators;
  bool saw_process = false;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  // StrSplit gives a final empty piece when the text ends with '\n'; a
  // non-empty final piece is a line that was cut before its newline.
  if (!lines.empty()) {
    if (!lines.back().empty()) {
      contents.incomplete_note = absl::StrCat(
          path, ":", lines.size(), ": last line cut (no newline), dropped");
    }
    lines.pop_back();
  }
  if (lines.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": empty (no '", kMagic, "' version line)"));
  }
  {
    std::vector<absl::string_view> words = absl::StrSplit(lines[0], ' ');
    int version = 0;
    if (words.size() != 2 || words[0] != kMagic ||
        !absl::SimpleAtoi(words[1], &version)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":1: not a clocksync sidecar (expected '",
                       kMagic, " ", kVersion, "')"));
    }
    if (version != kVersion) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":1: sidecar version ", version,
                       " is not supported (this reader knows ", kVersion,
                       ")"));
    }
  }
  for (size_t index = 1; index < lines.size(); ++index) {
    const int line_number = static_cast<int>(index) + 1;
    absl::string_view line = lines[index];
    if (line.empty()) continue;
    std::vector<absl::string_view> words =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    // Only spaces: a blank line (found by trace/sidecar_fuzzer: words[0]
    // of nothing).
    if (words.empty()) continue;
    const absl::string_view type = words[0];
    Fields fields;
    for (size_t w = 1; w < words.size(); ++w) {
      const size_t eq = words[w].find('=');
      if (eq == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_number, ": '", words[w],
                         "' is not key=value"));
      }
      fields[std::string(words[w].substr(0, eq))] =
          std::string(words[w].substr(eq + 1));
    }
    const LineParser p(path, line_number, fields);
    if (contents.complete) {
      return p.Error(absl::StrCat("'", type, "' record after the end line"));
    }
    if (type == "process") {
      ProcessInfo& info = contents.info;
      int64_t rank = 0;
      SIDECAR_RETURN_IF_ERROR(p.Int("rank", &rank));
      if (rank < 0 || rank > INT32_MAX) {
        return p.Error(absl::StrCat("rank ", rank, " out of range"));
      }
      info.rank = static_cast<int32_t>(rank);
      SIDECAR_RETURN_IF_ERROR(p.Int("pid", &info.pid));
      SIDECAR_RETURN_IF_ERROR(p.Int("origin_ns", &info.origin_ns));
      SIDECAR_RETURN_IF_ERROR(p.Double("tick_period_ns", &info.tick_period_ns));
      if (!(info.tick_period_ns > 0)) {
        return p.Error("tick_period_ns must be positive");
      }
      SIDECAR_RETURN_IF_ERROR(p.String("name", &info.process_name));
      SIDECAR_RETURN_IF_ERROR(p.String("host", &info.hostname));
      SIDECAR_RETURN_IF_ERROR(p.String("node_id", &info.node_id));
      SIDECAR_RETURN_IF_ERROR(p.String("shm_path", &info.shm_path));
      saw_process = true;
    } else if (type == "mapping") {
      MappingRecord r;
      uint64_t state = 0, flags = 0;
      SIDECAR_RETURN_IF_ERROR(p.Int("local_ns", &r.local_ns));
      SIDECAR_RETURN_IF_ERROR(p.Int("raw_ns", &r.raw_ns));
      SIDECAR_RETURN_IF_ERROR(p.Int("anchor_raw_ns", &r.anchor_raw_ns));
      SIDECAR_RETURN_IF_ERROR(p.Int("anchor_global_ns", &r.anchor_global_ns));
      SIDECAR_RETURN_IF_ERROR(p.Double("rate_adj", &r.rate_adj));
      SIDECAR_RETURN_IF_ERROR(
          p.Int("bound_at_anchor_ns", &r.bound_at_anchor_ns));
      SIDECAR_RETURN_IF_ERROR(p.Double("bound_growth_ppb", &r.bound_growth_ppb));
      SIDECAR_RETURN_IF_ERROR(p.Uint("state", &state));
      SIDECAR_RETURN_IF_ERROR(p.Uint("flags", &flags));
      r.state = static_cast<uint32_t>(state);
      r.flags = static_cast<uint32_t>(flags);
      contents.mappings.push_back(r);
    } else if (type == "session") {
      SyncSession session;
      std::string kind;
      SIDECAR_RETURN_IF_ERROR(p.String("kind", &kind));
      absl::StatusOr<SyncSessionKind> parsed_kind = ParseSessionKind(kind);
      if (!parsed_kind.ok()) return p.Error(parsed_kind.status().message());
      session.kind = *parsed_kind;
      uint64_t count = 0;
      SIDECAR_RETURN_IF_ERROR(p.Uint("exchanges", &count));
      absl::StatusOr<absl::string_view> list = p.Raw("x");
      if (!list.ok()) return list.status();
      if (!list->empty()) {
        for (absl::string_view item : absl::StrSplit(*list, ';')) {
          std::vector<absl::string_view> t = absl::StrSplit(item, ',');
          hull::ProbeSample e;
          if (t.size() != 4 || !absl::SimpleAtoi(t[0], &e.t1_ns) ||
              !absl::SimpleAtoi(t[1], &e.t2_ns) ||
              !absl::SimpleAtoi(t[2], &e.t3_ns) ||
              !absl::SimpleAtoi(t[3], &e.t4_ns)) {
            return p.Error(absl::StrCat(
                "exchange ", session.exchanges.size(), ": '", item,
                "' is not four integers t1,t2,t3,t4"));
          }
          session.exchanges.push_back(e);
        }
      }
      if (session.exchanges.size() != count) {
        return p.Error(absl::StrCat("exchanges=", count, " but ",
                                    session.exchanges.size(), " listed"));
      }
      contents.sessions.push_back(std::move(session));
    } else if (type == "truth") {
      GroundTruth truth;
      SIDECAR_RETURN_IF_ERROR(p.Int("master_offset_ns", &truth.master_offset_ns));
      SIDECAR_RETURN_IF_ERROR(
          p.Int("model_origin_raw_ns", &truth.model_origin_raw_ns));
      SIDECAR_RETURN_IF_ERROR(p.String("clock_model", &truth.clock_model_spec));
      contents.truth = std::move(truth);
    } else if (type == "thread" || type == "region" || type == "comm") {
      const char* const id_key = type == "thread" ? "index" : "id";
      uint64_t id = 0;
      SIDECAR_RETURN_IF_ERROR(p.Uint(id_key, &id));
      if (id > UINT32_MAX) {
        return p.Error(absl::StrCat(id_key, " ", id, " out of range"));
      }
      std::string name;
      SIDECAR_RETURN_IF_ERROR(p.String("name", &name));
      const auto key = static_cast<uint32_t>(id);
      if (type == "thread") {
        threads[key] = std::move(name);
      } else if (type == "region") {
        regions[key] = Region{key, std::move(name)};
      } else {
        Communicator comm{key, std::move(name), {}};
        absl::StatusOr<absl::string_view> list = p.Raw("ranks");
        if (!list.ok()) return list.status();
        if (!list->empty()) {
          for (absl::string_view item : absl::StrSplit(*list, ',')) {
            int32_t rank = 0;
            if (!absl::SimpleAtoi(item, &rank) || rank < 0) {
              return p.Error(absl::StrCat("ranks: '", item,
                                          "' is not a rank"));
            }
            comm.ranks.push_back(rank);
          }
        }
        communicators[key] = std::move(comm);
      }
    } else if (type == "end") {
      SIDECAR_RETURN_IF_ERROR(p.Uint("events", &contents.end_events));
      absl::StatusOr<absl::string_view> anchor = p.Raw("anchor_fnv1a");
      absl::StatusOr<absl::string_view> defs = p.Raw("defs_fnv1a");
      if (anchor.ok() && defs.ok()) {  // optional (older writers)
        DefinitionChecksums sums;
        if (!absl::SimpleHexAtoi(*anchor, &sums.anchor) ||
            !absl::SimpleHexAtoi(*defs, &sums.definitions)) {
          return p.Error("anchor_fnv1a/defs_fnv1a: not hexadecimal");
        }
        contents.checksums = sums;
      }
      contents.complete = true;
    }
    // Other record types: written by a newer writer; ignored.
  }
  if (!saw_process) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no 'process' line"));
  }
  if (!contents.complete && contents.incomplete_note.empty()) {
    contents.incomplete_note =
        absl::StrCat(path, ": no 'end' line (the writer did not finish)");
  }
  if (contents.complete) contents.incomplete_note.clear();
  for (auto& [index, name] : threads) {
    contents.threads.push_back(ThreadName{index, std::move(name)});
  }
  for (auto& [id, region] : regions) {
    contents.regions.push_back(std::move(region));
  }
  for (auto& [id, comm] : communicators) {
    contents.communicators.push_back(std::move(comm));
  }
  return contents;
}

}  // namespace clocksync::trace::sidecar
