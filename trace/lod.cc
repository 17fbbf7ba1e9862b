// trace/lod.cc: level-of-detail timelines (see lod.h).

#include "trace/lod.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "trace/export.h"
#include "trace/lod_walk.h"

namespace clocksync::trace {
namespace {

constexpr int32_t kMaxBins = 1'000'000;
constexpr int32_t kMaxLevels = 30;

// Adds `ns` to `region` in `bin` (region_ns stays sorted by region).
void AddRegionTime(LodBin* bin, uint32_t region, int64_t ns) {
  auto it = std::lower_bound(
      bin->region_ns.begin(), bin->region_ns.end(), region,
      [](const std::pair<uint32_t, int64_t>& a, uint32_t r) {
        return a.first < r;
      });
  if (it != bin->region_ns.end() && it->first == region) {
    it->second += ns;
  } else {
    bin->region_ns.insert(it, {region, ns});
  }
}

// Bins of one level over [from_ns, from_ns + bins * bin_ns).
class Binner {
 public:
  Binner(int64_t from_ns, int64_t to_ns, int64_t bin_ns, std::vector<LodBin>* row)
      : from_ns_(from_ns), to_ns_(to_ns), bin_ns_(bin_ns), row_(row) {}

  // The bin of global time `at`, or -1 outside [from_ns, to_ns).
  int64_t BinOf(int64_t at) const {
    if (at < from_ns_ || at >= to_ns_) return -1;
    return static_cast<int64_t>(
        (static_cast<__int128>(at) - from_ns_) / bin_ns_);
  }

  // `region` was innermost during [begin_ns, end_ns): its time, clipped to
  // the range, goes to the bins it overlaps.
  void AddInterval(uint32_t region, int64_t begin_ns, int64_t end_ns) {
    begin_ns = std::max(begin_ns, from_ns_);
    end_ns = std::min(end_ns, to_ns_);
    if (begin_ns >= end_ns) return;
    for (int64_t bin = BinOf(begin_ns); begin_ns < end_ns; ++bin) {
      const __int128 bin_end =
          static_cast<__int128>(from_ns_) + static_cast<__int128>(bin + 1) * bin_ns_;
      const int64_t piece_end =
          bin_end < end_ns ? static_cast<int64_t>(bin_end) : end_ns;
      AddRegionTime(&(*row_)[bin], region, piece_end - begin_ns);
      begin_ns = piece_end;
    }
  }

 private:
  int64_t from_ns_;
  int64_t to_ns_;
  int64_t bin_ns_;
  std::vector<LodBin>* row_;
};

// A coarser level: bins of `finer` summed in pairs.
LodLevel Coarser(const LodLevel& finer) {
  LodLevel level;
  level.bin_ns = finer.bin_ns * 2;
  level.bins = (finer.bins + 1) / 2;
  level.rows.resize(finer.rows.size());
  for (size_t r = 0; r < finer.rows.size(); ++r) {
    level.rows[r].resize(level.bins);
    for (int32_t b = 0; b < finer.bins; ++b) {
      const LodBin& from = finer.rows[r][b];
      LodBin& to = level.rows[r][b / 2];
      for (const auto& [region, ns] : from.region_ns) {
        AddRegionTime(&to, region, ns);
      }
      to.events += from.events;
      to.sends += from.sends;
      to.recvs += from.recvs;
    }
  }
  return level;
}

// Characters for regions in the text view, the busiest first.
constexpr char kRegionChars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

}  // namespace

int64_t LodBin::busy_ns() const {
  int64_t total = 0;
  for (const auto& [region, ns] : region_ns) total += ns;
  return total;
}

int32_t LodBin::dominant() const {
  int32_t best = -1;
  int64_t best_ns = 0;
  for (const auto& [region, ns] : region_ns) {
    if (ns > best_ns) {
      best = static_cast<int32_t>(region);
      best_ns = ns;
    }
  }
  return best;
}

absl::StatusOr<Lod> BuildLod(absl::Span<const ProcessTrace> traces,
                             const Timeline& timeline,
                             const LodOptions& options) {
  if (options.bins < 1 || options.bins > kMaxBins) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bins: ", options.bins, " is not in 1..", kMaxBins));
  }
  if (options.levels < 1 || options.levels > kMaxLevels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "levels: ", options.levels, " is not in 1..", kMaxLevels));
  }
  if (timeline.processes.size() != traces.size()) {
    return absl::InvalidArgumentError("the timeline is not of these traces");
  }
  // The range: the options', or the run's first event to the ns after its
  // last.
  int64_t first_ns = std::numeric_limits<int64_t>::max();
  int64_t last_ns = std::numeric_limits<int64_t>::min();
  for (size_t p = 0; p < traces.size(); ++p) {
    const ProcessTimeline& process = timeline.processes[p];
    if (!process.available) continue;
    for (const std::vector<int64_t>& thread : process.global_ns) {
      if (thread.empty()) continue;
      first_ns = std::min(first_ns, thread.front());
      last_ns = std::max(last_ns, thread.back());
    }
  }
  Lod lod;
  lod.from_ns = options.from_ns;
  lod.to_ns = options.to_ns;
  if (lod.from_ns == std::numeric_limits<int64_t>::min() ||
      lod.to_ns == std::numeric_limits<int64_t>::max()) {
    if (first_ns > last_ns) {
      return absl::FailedPreconditionError(
          "no event on the timeline: give --from_ns and --to_ns");
    }
    if (lod.from_ns == std::numeric_limits<int64_t>::min()) lod.from_ns = first_ns;
    if (lod.to_ns == std::numeric_limits<int64_t>::max()) lod.to_ns = last_ns + 1;
  }
  if (lod.from_ns >= lod.to_ns) {
    return absl::FailedPreconditionError(absl::StrCat(
        "empty range: from ", lod.from_ns, " ns is not before to ", lod.to_ns,
        " ns"));
  }
  const __int128 span_ns = static_cast<__int128>(lod.to_ns) - lod.from_ns;
  LodLevel finest;
  finest.bins = options.bins;
  finest.bin_ns = static_cast<int64_t>((span_ns + options.bins - 1) / options.bins);
  // The bins cover [from, from + bins * bin_ns) ⊇ [from, to).

  RegionTable regions;
  std::vector<OpenRegion> stack;
  for (size_t p = 0; p < traces.size(); ++p) {
    const ProcessTimeline& process = timeline.processes[p];
    if (!process.available) continue;
    const ProcessTrace& trace = traces[p];
    RegionTable::Process& names = regions.ForProcess(p, trace);
    for (size_t t = 0; t < trace.threads.size(); ++t) {
      const ThreadTrace& thread = trace.threads[t];
      lod.rows.push_back(LodRow{static_cast<int32_t>(p), trace.info.rank,
                                thread.thread_index, thread.name});
      finest.rows.emplace_back(finest.bins);
      std::vector<LodBin>& row = finest.rows.back();
      Binner binner(lod.from_ns, lod.to_ns, finest.bin_ns, &row);
      WalkThread(
          thread.events, process.global_ns[t], names, &stack,
          &lod.unmatched_leaves,
          [&](const Event& e, int64_t at) {
            if (const int64_t bin = binner.BinOf(at); bin >= 0) {
              LodBin& b = row[bin];
              ++b.events;
              if (e.kind == EventKind::kSend) ++b.sends;
              if (e.kind == EventKind::kRecv) ++b.recvs;
            }
          },
          // Until the next event, the innermost open region has the thread.
          [&](uint32_t region, int64_t begin_ns, int64_t end_ns) {
            binner.AddInterval(region, begin_ns, end_ns);
          });
    }
  }
  lod.regions = regions.names();
  lod.levels.push_back(std::move(finest));
  while (static_cast<int32_t>(lod.levels.size()) < options.levels) {
    lod.levels.push_back(Coarser(lod.levels.back()));
  }
  return lod;
}

std::string FormatLodText(const Lod& lod, int level_index) {
  if (level_index < 0 || level_index >= static_cast<int>(lod.levels.size())) {
    return absl::StrCat("(no level ", level_index, ")\n");
  }
  const LodLevel& level = lod.levels[level_index];
  // Regions by total time, the busiest first, get the characters.
  std::vector<int64_t> total(lod.regions.size(), 0);
  for (const std::vector<LodBin>& row : level.rows) {
    for (const LodBin& bin : row) {
      for (const auto& [region, ns] : bin.region_ns) total[region] += ns;
    }
  }
  std::vector<uint32_t> order(lod.regions.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return total[a] > total[b];
  });
  constexpr size_t kChars = sizeof(kRegionChars) - 1;
  std::vector<char> glyph(lod.regions.size(), '*');
  for (size_t k = 0; k < order.size() && k < kChars; ++k) {
    glyph[order[k]] = kRegionChars[k];
  }

  std::string out = absl::StrFormat(
      "%d bins of %d ns from %d to %d ns (global); a column is a bin, its "
      "character the region innermost for most of it, '.' none\n",
      level.bins, level.bin_ns, lod.from_ns, lod.to_ns);
  int64_t all_ns = 0;
  for (int64_t ns : total) all_ns += ns;
  for (uint32_t region : order) {
    if (total[region] == 0) continue;
    absl::StrAppendFormat(&out, "  %c %-30s %6.2f%% of region time\n",
                          glyph[region], lod.regions[region],
                          all_ns > 0 ? 100.0 * total[region] / all_ns : 0.0);
  }
  std::vector<std::string> labels;
  size_t width = 0;
  for (const LodRow& row : lod.rows) {
    labels.push_back(absl::StrCat("rank ", row.rank, " ", row.name));
    width = std::max(width, labels.back().size());
  }
  for (size_t r = 0; r < lod.rows.size(); ++r) {
    absl::StrAppend(&out, labels[r], std::string(width - labels[r].size(), ' '),
                    " |");
    for (const LodBin& bin : level.rows[r]) {
      const int32_t dominant = bin.dominant();
      out.push_back(dominant < 0 ? '.' : glyph[dominant]);
    }
    out += "|\n";
  }
  if (lod.unmatched_leaves > 0) {
    absl::StrAppend(&out, "(", lod.unmatched_leaves,
                    " leaves without their enter, ignored)\n");
  }
  return out;
}

void WriteLodJson(const Lod& lod, std::ostream& out) {
  out << "{\"from_ns\":" << lod.from_ns << ",\"to_ns\":" << lod.to_ns
      << ",\"regions\":[";
  for (size_t i = 0; i < lod.regions.size(); ++i) {
    out << (i == 0 ? "" : ",") << JsonString(lod.regions[i]);
  }
  out << "],\"rows\":[";
  for (size_t i = 0; i < lod.rows.size(); ++i) {
    const LodRow& row = lod.rows[i];
    out << (i == 0 ? "" : ",") << "{\"rank\":" << row.rank
        << ",\"thread\":" << row.thread << ",\"name\":" << JsonString(row.name)
        << "}";
  }
  out << "],\"unmatched_leaves\":" << lod.unmatched_leaves << ",\"levels\":[";
  for (size_t l = 0; l < lod.levels.size(); ++l) {
    const LodLevel& level = lod.levels[l];
    out << (l == 0 ? "" : ",") << "{\"bin_ns\":" << level.bin_ns
        << ",\"bins\":" << level.bins << ",\"rows\":[";
    for (size_t r = 0; r < level.rows.size(); ++r) {
      out << (r == 0 ? "[" : ",[");
      for (size_t b = 0; b < level.rows[r].size(); ++b) {
        const LodBin& bin = level.rows[r][b];
        out << (b == 0 ? "" : ",") << "{\"dominant\":" << bin.dominant()
            << ",\"busy_ns\":" << bin.busy_ns() << ",\"region_ns\":[";
        for (size_t k = 0; k < bin.region_ns.size(); ++k) {
          out << (k == 0 ? "[" : ",[") << bin.region_ns[k].first << ","
              << bin.region_ns[k].second << "]";
        }
        out << "],\"events\":" << bin.events << ",\"sends\":" << bin.sends
            << ",\"recvs\":" << bin.recvs << "}";
      }
      out << "]";
    }
    out << "]}";
  }
  out << "]}\n";
}

}  // namespace clocksync::trace
