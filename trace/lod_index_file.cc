// trace/lod_index_file.cc: the level-of-detail index file: writing it,
// mapping and checking it, and answering queries from the mapping (see
// lod_index.h).
//
// Layout (every table 8-byte aligned, host byte order, which the header's
// byte-order word checks):
//   FileHeader
//   LevelEntry[levels]
//   RowEntry[rows]
//   StringRef[regions]
//   Range function_ranges[levels * rows], Range message_ranges[levels * rows]
//   LodFunctionRecord[functions], LodMessageRecord[messages],
//   LodCollectiveRecord[collectives]
//   strings (row and region names), zero-padded to 8 bytes
// The checksum covers everything after the header.

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "trace/lod_index.h"

namespace clocksync::trace {
namespace {

constexpr char kMagic[8] = {'C', 'S', 'L', 'O', 'D', 'I', 'X', '\n'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kByteOrder = 0x01020304;

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint32_t byte_order;
  uint32_t correction;
  uint64_t file_bytes;
  uint64_t checksum;
  int64_t origin_ns;
  int64_t end_ns;
  uint32_t finest_shift;
  uint32_t levels;
  uint32_t rows;
  uint32_t regions;
  uint64_t functions;
  uint64_t messages;
  uint64_t collectives;
  uint64_t strings_bytes;
  uint64_t reserved[3];
};
static_assert(sizeof(FileHeader) == 128);

struct LevelEntry {
  int64_t max_latency_ns;
  int64_t min_latency_ns;
  int64_t max_collective_ns;
  uint64_t collectives_first;
  uint64_t collectives_count;
};

struct RowEntry {
  int32_t rank;
  uint32_t thread;
  uint64_t name_offset;
  uint64_t name_bytes;
};

struct StringRef {
  uint64_t offset;
  uint64_t bytes;
};

struct Range {
  uint64_t first;
  uint64_t count;
};

// Sum and xor of the 64-bit words, mixed: every flipped bit changes it.
class Checksum {
 public:
  void Add(const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) {
      word_ |= static_cast<uint64_t>(p[i]) << (8 * fill_);
      if (++fill_ == 8) Flush();
    }
  }
  void AddWords(const uint64_t* words, size_t n) {
    uint64_t sum = sum_, x = xor_;
    for (size_t i = 0; i < n; ++i) {
      sum += words[i];
      x ^= words[i] * 0x9e3779b97f4a7c15ull;
    }
    sum_ = sum;
    xor_ = x;
  }
  uint64_t Value() {
    if (fill_ > 0) Flush();
    return sum_ ^ (xor_ << 1 | xor_ >> 63);
  }

 private:
  void Flush() {
    AddWords(&word_, 1);
    word_ = 0;
    fill_ = 0;
  }
  uint64_t sum_ = 0, xor_ = 0, word_ = 0;
  int fill_ = 0;
};

// Table sizes in bytes from the header's counts; false on overflow.
struct Sizes {
  uint64_t levels, rows, regions, ranges, functions, messages, collectives,
      strings, total;
};

bool ComputeSizes(const FileHeader& h, Sizes* s) {
  if (h.levels > 64 || h.rows > (1u << 30) || h.regions > (1u << 30)) return false;
  constexpr uint64_t kMax = uint64_t{1} << 48;
  if (h.functions > kMax / 32 || h.messages > kMax / 56 ||
      h.collectives > kMax / 32 || h.strings_bytes > kMax) {
    return false;
  }
  s->levels = uint64_t{h.levels} * sizeof(LevelEntry);
  s->rows = uint64_t{h.rows} * sizeof(RowEntry);
  s->regions = uint64_t{h.regions} * sizeof(StringRef);
  s->ranges = 2 * uint64_t{h.levels} * h.rows * sizeof(Range);
  s->functions = h.functions * sizeof(LodFunctionRecord);
  s->messages = h.messages * sizeof(LodMessageRecord);
  s->collectives = h.collectives * sizeof(LodCollectiveRecord);
  s->strings = (h.strings_bytes + 7) / 8 * 8;
  s->total = sizeof(FileHeader) + s->levels + s->rows + s->regions + s->ranges +
             s->functions + s->messages + s->collectives + s->strings;
  return true;
}

// Writes tables to a FILE while summing them.
class Writer {
 public:
  explicit Writer(FILE* f) : f_(f) {}
  template <typename T>
  void Put(const T* items, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes == 0) return;
    static_assert(sizeof(T) % 8 == 0);
    checksum_.AddWords(reinterpret_cast<const uint64_t*>(items), bytes / 8);
    ok_ = ok_ && std::fwrite(items, 1, bytes, f_) == bytes;
  }
  void PutBytes(const void* data, size_t bytes) {
    checksum_.Add(data, bytes);
    ok_ = ok_ && std::fwrite(data, 1, bytes, f_) == bytes;
  }
  bool ok() const { return ok_; }
  uint64_t checksum() { return checksum_.Value(); }

 private:
  FILE* f_;
  Checksum checksum_;
  bool ok_ = true;
};

}  // namespace

absl::Status WriteLodIndex(const LodIndexData& data, const std::string& path) {
  const uint32_t levels = data.levels;
  const uint32_t rows = static_cast<uint32_t>(data.rows.size());
  if (data.functions.size() != levels || data.messages.size() != levels ||
      data.collectives.size() != levels) {
    return absl::InvalidArgumentError("index data: tables do not match levels");
  }
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.header_bytes = sizeof(FileHeader);
  h.byte_order = kByteOrder;
  h.correction = static_cast<uint32_t>(data.correction);
  h.origin_ns = data.origin_ns;
  h.end_ns = data.end_ns;
  h.finest_shift = data.finest_shift;
  h.levels = levels;
  h.rows = rows;
  h.regions = static_cast<uint32_t>(data.regions.size());

  std::string strings;
  std::vector<RowEntry> row_entries;
  for (const LodIndexRow& row : data.rows) {
    row_entries.push_back(RowEntry{row.rank, row.thread, strings.size(),
                                   row.name.size()});
    strings += row.name;
  }
  std::vector<StringRef> region_refs;
  for (const std::string& name : data.regions) {
    region_refs.push_back(StringRef{strings.size(), name.size()});
    strings += name;
  }
  h.strings_bytes = strings.size();
  strings.resize((strings.size() + 7) / 8 * 8, '\0');

  std::vector<LevelEntry> level_entries(levels);
  std::vector<Range> function_ranges, message_ranges;
  for (uint32_t k = 0; k < levels; ++k) {
    const LodTable<LodFunctionRecord>& functions = data.functions[k];
    const LodTable<LodMessageRecord>& messages = data.messages[k];
    // Every row ended, the last at the table's end; a message table may
    // also have no row (no AddMessages) and then no record.
    auto whole = [rows](const auto& t) {
      return t.rows() == rows &&
             (rows == 0 ? t.records.empty() : t.row_end.back() == t.records.size());
    };
    if (!whole(functions) ||
        (!whole(messages) && (messages.rows() > 0 || !messages.records.empty()))) {
      return absl::InvalidArgumentError("index data: rows do not match");
    }
    for (uint32_t r = 0; r < rows; ++r) {
      const size_t n = functions.row(r).size();
      function_ranges.push_back(Range{h.functions, n});
      h.functions += n;
      const size_t m = messages.rows() == rows ? messages.row(r).size() : 0;
      message_ranges.push_back(Range{h.messages, m});
      h.messages += m;
    }
    LevelEntry& level = level_entries[k];
    level.max_latency_ns = 0;
    level.min_latency_ns = 0;
    for (const LodMessageRecord& m : messages.records) {
      level.max_latency_ns = std::max(level.max_latency_ns, m.recv_ns - m.send_ns);
      level.min_latency_ns = std::min(level.min_latency_ns, m.recv_ns - m.send_ns);
    }
    level.max_collective_ns = 0;
    for (const LodCollectiveRecord& c : data.collectives[k]) {
      level.max_collective_ns = std::max(level.max_collective_ns, c.end_ns - c.begin_ns);
    }
    level.collectives_first = h.collectives;
    level.collectives_count = data.collectives[k].size();
    h.collectives += data.collectives[k].size();
  }
  Sizes sizes;
  if (!ComputeSizes(h, &sizes)) {
    return absl::InvalidArgumentError("index data: too large");
  }
  h.file_bytes = sizes.total;

  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  FILE* f = std::fopen(temp.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", temp, ": ", std::strerror(errno)));
  }
  Writer w(f);
  bool ok = std::fwrite(&h, 1, sizeof(h), f) == sizeof(h);
  w.Put(level_entries.data(), level_entries.size());
  w.Put(row_entries.data(), row_entries.size());
  w.Put(region_refs.data(), region_refs.size());
  w.Put(function_ranges.data(), function_ranges.size());
  w.Put(message_ranges.data(), message_ranges.size());
  for (uint32_t k = 0; k < levels; ++k) {
    w.Put(data.functions[k].records.data(), data.functions[k].records.size());
  }
  for (uint32_t k = 0; k < levels; ++k) {
    w.Put(data.messages[k].records.data(), data.messages[k].records.size());
  }
  for (uint32_t k = 0; k < levels; ++k) {
    w.Put(data.collectives[k].data(), data.collectives[k].size());
  }
  w.PutBytes(strings.data(), strings.size());
  h.checksum = w.checksum();
  ok = ok && w.ok() && std::fseek(f, 0, SEEK_SET) == 0 &&
       std::fwrite(&h, 1, sizeof(h), f) == sizeof(h);
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temp.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LodIndex>> OpenLodIndex(const std::string& path) {
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(path, ": not a level-of-detail index (",
                                            what, ")"));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no index"));
    return absl::UnavailableError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(FileHeader))) {
    ::close(fd);
    return bad("shorter than its header");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    return absl::UnavailableError(
        absl::StrCat("cannot map ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<LodIndex> index(new LodIndex());
  index->map_ = map;
  index->size_ = size;
  const auto* base = static_cast<const unsigned char*>(map);
  FileHeader h;
  std::memcpy(&h, base, sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return bad("magic");
  if (h.version != kVersion) {
    return bad(absl::StrCat("version ", h.version, ", this build reads ", kVersion));
  }
  if (h.header_bytes != sizeof(FileHeader) || h.byte_order != kByteOrder) {
    return bad("header size or byte order");
  }
  Sizes s;
  if (!ComputeSizes(h, &s)) return bad("table sizes");
  if (h.file_bytes != size || s.total != size) {
    return bad(absl::StrCat("file is ", size, " bytes, its tables ", s.total));
  }
  if (h.levels < 1 || h.finest_shift + kLodLevelStep * (h.levels - 1) > 62 ||
      h.correction > static_cast<uint32_t>(hull::CorrectionKind::kPiecewise) ||
      h.end_ns <= h.origin_ns) {
    return bad("levels, correction or range");
  }
  Checksum checksum;
  checksum.AddWords(reinterpret_cast<const uint64_t*>(base + sizeof(FileHeader)),
                    (size - sizeof(FileHeader)) / 8);
  if (checksum.Value() != h.checksum) return bad("checksum");

  const unsigned char* at = base + sizeof(FileHeader);
  const auto* levels = reinterpret_cast<const LevelEntry*>(at);
  at += s.levels;
  const auto* rows = reinterpret_cast<const RowEntry*>(at);
  at += s.rows;
  const auto* regions = reinterpret_cast<const StringRef*>(at);
  at += s.regions;
  index->function_ranges_ = reinterpret_cast<const LodIndex::Range*>(at);
  at += s.ranges / 2;
  index->message_ranges_ = reinterpret_cast<const LodIndex::Range*>(at);
  at += s.ranges / 2;
  index->functions_ = reinterpret_cast<const LodFunctionRecord*>(at);
  at += s.functions;
  index->messages_ = reinterpret_cast<const LodMessageRecord*>(at);
  at += s.messages;
  index->collectives_ = reinterpret_cast<const LodCollectiveRecord*>(at);
  at += s.collectives;
  const char* strings = reinterpret_cast<const char*>(at);

  auto string_at = [&](uint64_t offset, uint64_t bytes, std::string* out) {
    if (offset > h.strings_bytes || bytes > h.strings_bytes - offset) return false;
    out->assign(strings + offset, bytes);
    return true;
  };
  for (uint32_t r = 0; r < h.rows; ++r) {
    LodIndexRow row{rows[r].rank, rows[r].thread, ""};
    if (!string_at(rows[r].name_offset, rows[r].name_bytes, &row.name)) {
      return bad("row name outside the strings");
    }
    index->rows_.push_back(std::move(row));
  }
  for (uint32_t r = 0; r < h.regions; ++r) {
    std::string name;
    if (!string_at(regions[r].offset, regions[r].bytes, &name)) {
      return bad("region name outside the strings");
    }
    index->regions_.push_back(std::move(name));
  }
  auto in = [](const LodIndex::Range& range, uint64_t total) {
    return range.first <= total && range.count <= total - range.first;
  };
  for (uint64_t i = 0; i < uint64_t{h.levels} * h.rows; ++i) {
    if (!in(index->function_ranges_[i], h.functions) ||
        !in(index->message_ranges_[i], h.messages)) {
      return bad("a record range outside its table");
    }
  }
  for (uint32_t k = 0; k < h.levels; ++k) {
    const LevelEntry& l = levels[k];
    if (!in({l.collectives_first, l.collectives_count}, h.collectives) ||
        l.max_latency_ns < 0 || l.min_latency_ns > 0 || l.max_collective_ns < 0) {
      return bad("a level's table");
    }
    index->level_info_.push_back(LodIndex::Level{
        l.max_latency_ns, l.min_latency_ns, l.max_collective_ns,
        l.collectives_first, l.collectives_count});
  }
  index->correction_ = static_cast<hull::CorrectionKind>(h.correction);
  index->origin_ns_ = h.origin_ns;
  index->end_ns_ = h.end_ns;
  index->finest_shift_ = h.finest_shift;
  index->levels_ = h.levels;
  return index;
}

LodIndex::~LodIndex() {
  if (map_ != nullptr) munmap(map_, size_);
}

int64_t LodIndex::slot_ns(uint32_t level) const {
  return int64_t{1} << (finest_shift_ + kLodLevelStep * level);
}

uint32_t LodIndex::LevelFor(int64_t t0, int64_t t1, int32_t px) const {
  const __int128 span = static_cast<__int128>(t1) - t0;
  const __int128 resolution = px > 0 && span > 0 ? span / px : 0;
  // The finest level whose slot is at least the resolution: at most one
  // slot per pixel.
  uint32_t level = 0;
  while (level + 1 < levels_ && slot_ns(level) < resolution) ++level;
  return level;
}

LodAnswer LodIndex::Query(int64_t t0, int64_t t1, int32_t px) const {
  return QueryLevel(t0, t1, LevelFor(t0, t1, px));
}

LodAnswer LodIndex::QueryLevel(int64_t t0, int64_t t1, uint32_t level) const {
  LodAnswer answer;
  // Nothing lies outside [origin, end]: clamping keeps the arithmetic
  // below in range whatever the query.
  t0 = std::max(t0, origin_ns_);
  t1 = std::min(t1, end_ns_ + 1);
  if (level >= levels_ || t1 <= t0) return answer;
  answer.level = level;
  answer.slot_ns = slot_ns(level);
  const size_t rows = rows_.size();
  for (size_t r = 0; r < rows; ++r) {
    const Range range = function_ranges_[level * rows + r];
    const LodFunctionRecord* first = functions_ + range.first;
    const LodFunctionRecord* last = first + range.count;
    // Records of a row do not overlap and are by time: the first ending
    // after t0.
    const LodFunctionRecord* it = std::partition_point(
        first, last, [&](const LodFunctionRecord& f) { return f.end_ns <= t0; });
    for (; it != last && it->begin_ns < t1; ++it) {
      answer.functions.push_back(LodFunctionHit{static_cast<uint32_t>(r), *it});
    }
  }
  const Level& info = level_info_[level];
  // Sends from t0 - (the longest forward line) to t1 + (the longest
  // backward one) may draw a line through [t0, t1).
  const int64_t from = t0 - info.max_latency_ns;
  const int64_t to = t1 - info.min_latency_ns;
  for (size_t r = 0; r < rows; ++r) {
    const Range range = message_ranges_[level * rows + r];
    const LodMessageRecord* first = messages_ + range.first;
    const LodMessageRecord* last = first + range.count;
    const LodMessageRecord* it = std::partition_point(
        first, last, [&](const LodMessageRecord& m) { return m.send_ns < from; });
    for (; it != last && it->send_ns < to; ++it) {
      const int64_t lo = std::min(it->send_ns, it->recv_ns);
      const int64_t hi = std::max(it->send_ns, it->recv_ns);
      if (hi >= t0 && lo < t1 && it->send_row < rows && it->recv_row < rows) {
        answer.messages.push_back(*it);
      }
    }
  }
  const LodCollectiveRecord* first = collectives_ + info.collectives_first;
  const LodCollectiveRecord* last = first + info.collectives_count;
  const LodCollectiveRecord* it =
      std::partition_point(first, last, [&](const LodCollectiveRecord& c) {
        return c.begin_ns < t0 - info.max_collective_ns;
      });
  for (; it != last && it->begin_ns < t1; ++it) {
    if (it->end_ns >= t0) answer.collectives.push_back(*it);
  }
  return answer;
}

}  // namespace clocksync::trace
