// trace/lod_index.cc: building the level-of-detail index (see
// lod_index.h): functions per row and slot in one pass per thread,
// messages and collectives grouped level by level.

#include "trace/lod_index.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace clocksync::trace {
namespace {

constexpr int64_t kNoSlot = std::numeric_limits<int64_t>::min();
// Events of a thread per finest slot: 16 keeps an index at a few bytes per
// event; a small run (under 256 Ki events) gets 1, so zoomed in the view
// comes close to the events themselves.
int64_t EventsPerSlot(int64_t events) { return events < (int64_t{1} << 18) ? 1 : 16; }

}  // namespace

void ChooseLodLevels(int64_t first_ns, int64_t last_ns, int64_t events,
                     int64_t rows, LodIndexData* data) {
  data->origin_ns = first_ns;
  data->end_ns = last_ns + 1;
  const uint64_t span =
      static_cast<uint64_t>(static_cast<__int128>(last_ns) - first_ns + 1);
  // A thread's mean gap between events, times EventsPerSlot.
  const __int128 want = static_cast<__int128>(span) * std::max<int64_t>(rows, 1) *
                        EventsPerSlot(events) / std::max<int64_t>(events, 1);
  uint32_t shift = 0;
  while (shift < 62 && (static_cast<__int128>(1) << (shift + 1)) <= want) ++shift;
  data->finest_shift = shift;
  uint32_t levels = 1;
  while (shift + kLodLevelStep * (levels - 1) < 63 &&
         (span - 1) >> (shift + kLodLevelStep * (levels - 1)) > 0) {
    ++levels;
  }
  data->levels = levels;
}

// One row's levels: the current slot of each, its region time in dense
// per-region arrays (and the regions touched, to reset), and the records.
class LodIndexBuilder::Row {
 public:
  Row(const LodIndexData& data) : origin_ns_(data.origin_ns) {
    levels_.resize(data.levels);
    for (uint32_t k = 0; k < data.levels; ++k) levels_[k].shift = data.shift(k);
  }

  // Starts a row whose records are appended to out[level].
  void Start(std::vector<LodTable<LodFunctionRecord>>& out) {
    for (size_t k = 0; k < levels_.size(); ++k) {
      levels_[k].out = &out[k].records;
      levels_[k].row_first = out[k].records.size();
      levels_[k].cur = kNoSlot;
    }
  }

  void Grow(uint32_t region) {
    if (region < size_) return;
    size_ = std::max<size_t>(region + 1, size_ * 2);
    for (Level& l : levels_) {
      l.ns.resize(size_, 0);
      l.first.resize(size_, 0);
      l.last.resize(size_, 0);
    }
  }

  void Event(int64_t at) {
    Level& l = levels_[0];
    const int64_t slot = (at - origin_ns_) >> l.shift;
    if (slot != l.cur) {
      Close(0);
      l.cur = slot;
    }
    ++l.events;
  }

  // `region` innermost during [begin, end) (begin < end).
  void Interval(size_t k, uint32_t region, int64_t begin, int64_t end) {
    Level& l = levels_[k];
    const int64_t sb = (begin - origin_ns_) >> l.shift;
    const int64_t se = (end - 1 - origin_ns_) >> l.shift;
    if (sb != l.cur) {
      Close(k);
      l.cur = sb;
    }
    if (sb == se) {
      Add(l, region, end - begin, begin, end);
      return;
    }
    const int64_t first_end = origin_ns_ + ((sb + 1) << l.shift);
    const int64_t last_begin = origin_ns_ + (se << l.shift);
    Add(l, region, first_end - begin, begin, first_end);
    Close(k);
    if (last_begin > first_end) {
      // Slots the region fills: one record, and one interval above.
      Emit(l, LodFunctionRecord{first_end, last_begin, last_begin - first_end,
                                region, 0});
      if (k + 1 < levels_.size()) Interval(k + 1, region, first_end, last_begin);
    }
    l.cur = se;
    Add(l, region, end - last_begin, last_begin, end);
  }

  // Closes every level's slot, finest first (each feeds the next).
  void Finish() {
    for (size_t k = 0; k < levels_.size(); ++k) Close(k);
  }

 private:
  struct Level {
    uint32_t shift = 0;
    int64_t cur = kNoSlot;
    std::vector<int64_t> ns, first, last;
    std::vector<uint32_t> touched;
    uint32_t events = 0;
    HugePageArray<LodFunctionRecord>* out = nullptr;
    size_t row_first = 0;  // the row's first record in *out
  };

  static void Add(Level& l, uint32_t region, int64_t ns, int64_t first,
                  int64_t last) {
    if (l.ns[region] == 0) {
      l.touched.push_back(region);
      l.first[region] = first;
    }
    l.ns[region] += ns;
    l.last[region] = last;
  }

  static void Emit(Level& l, const LodFunctionRecord& r) {
    if (l.out->size() > l.row_first) {
      LodFunctionRecord& back = l.out->back();
      if (back.region == r.region && back.end_ns == r.begin_ns) {
        back.end_ns = r.end_ns;
        back.region_ns += r.region_ns;
        back.events += r.events;
        return;
      }
    }
    l.out->push_back(r);
  }

  // Emits level k's current slot and hands its time to level k + 1.
  void Close(size_t k) {
    Level& l = levels_[k];
    if (l.cur == kNoSlot) return;
    if (!l.touched.empty()) {
      uint32_t best = l.touched[0];
      for (uint32_t r : l.touched) {
        if (l.ns[r] > l.ns[best] || (l.ns[r] == l.ns[best] && r < best)) best = r;
      }
      Emit(l, LodFunctionRecord{l.first[best], l.last[best], l.ns[best], best,
                                l.events});
    }
    if (k + 1 < levels_.size() && (!l.touched.empty() || l.events > 0)) {
      Level& up = levels_[k + 1];
      const int64_t slot = l.cur >> kLodLevelStep;
      if (slot != up.cur) {
        Close(k + 1);
        up.cur = slot;
      }
      for (uint32_t r : l.touched) Add(up, r, l.ns[r], l.first[r], l.last[r]);
      up.events += l.events;
    }
    for (uint32_t r : l.touched) l.ns[r] = 0;
    l.touched.clear();
    l.events = 0;
    l.cur = kNoSlot;
  }

  int64_t origin_ns_;
  size_t size_ = 0;
  std::vector<Level> levels_;
};

LodIndexBuilder::LodIndexBuilder(LodIndexData* data)
    : data_(data), row_(std::make_unique<Row>(*data)) {
  data_->functions.assign(data_->levels, {});
  data_->messages.assign(data_->levels, {});
  data_->collectives.assign(data_->levels, {});
}

LodIndexBuilder::~LodIndexBuilder() = default;

void LodIndexBuilder::AddRow(LodIndexRow row, absl::Span<const Event> events,
                             absl::Span<const int64_t> global_ns,
                             RegionTable::Process& regions) {
  data_->rows.push_back(std::move(row));
  // About one record per slot of 16 events at the finest level, 4 times
  // fewer at each next: room made ahead (a big array grows by moving its
  // pages, never by copying records).
  size_t expect = events.size() / 8 + 16;
  for (uint32_t k = 0; k < data_->levels; ++k, expect = expect / 4 + 16) {
    HugePageArray<LodFunctionRecord>& records = data_->functions[k].records;
    records.reserve(records.size() + expect);
  }
  Row& builder = *row_;
  builder.Start(data_->functions);
  open_collectives_.clear();
  WalkThread(
      events, global_ns, regions, &stack_, &unmatched_leaves_,
      [&](const Event& e, int64_t at) {
        builder.Event(at);
        if (e.kind == EventKind::kCollectiveBegin) {
          open_collectives_.push_back(collectives_.size());
          collectives_.push_back(Collective{
              e.comm, static_cast<uint32_t>(e.collective), at, at});
        } else if (e.kind == EventKind::kCollectiveEnd &&
                   !open_collectives_.empty()) {
          collectives_[open_collectives_.back()].end_ns = at;
          open_collectives_.pop_back();
        }
      },
      [&](uint32_t region, int64_t begin, int64_t end) {
        builder.Grow(region);
        builder.Interval(0, region, begin, end);
      });
  builder.Finish();
  for (LodTable<LodFunctionRecord>& level : data_->functions) level.EndRow();
}

namespace {

// Messages of one (sender row, receiver row, sender slot, receiver slot)
// at one level, as sums.
struct MessageGroup {
  uint32_t send_row;
  uint32_t recv_row;
  int64_t send_slot;
  int64_t recv_slot;
  uint64_t count;
  double send_sum;  // ns since origin
  double recv_sum;
  double bytes_sum;
  double latency_sum;
  int64_t max_latency;
};

// Sorts one sender slot's groups by receiver key, merges equal keys into
// *out, and moves them to the next level's keys in *up (when not null).
void FlushSenderSlot(std::vector<MessageGroup>* scratch, uint32_t step,
                     std::vector<MessageGroup>* out) {
  std::sort(scratch->begin(), scratch->end(),
            [](const MessageGroup& a, const MessageGroup& b) {
              return std::tie(a.recv_row, a.recv_slot) <
                     std::tie(b.recv_row, b.recv_slot);
            });
  const size_t first = out->size();
  for (const MessageGroup& g : *scratch) {
    if (out->size() > first && out->back().recv_row == g.recv_row &&
        out->back().recv_slot == g.recv_slot) {
      MessageGroup& m = out->back();
      m.count += g.count;
      m.send_sum += g.send_sum;
      m.recv_sum += g.recv_sum;
      m.bytes_sum += g.bytes_sum;
      m.latency_sum += g.latency_sum;
      m.max_latency = std::max(m.max_latency, g.max_latency);
    } else {
      out->push_back(g);
    }
  }
  (void)step;
  scratch->clear();
}

// Groups one sender row's groups `in` (by sender slot at the level below,
// or raw messages by time) at the next level into *out: slots are the keys
// shifted right by `step`. The buffers are the caller's, reused.
void GroupLevel(const std::vector<MessageGroup>& in, uint32_t step,
                std::vector<MessageGroup>* out,
                std::vector<MessageGroup>* scratch) {
  out->clear();
  scratch->clear();
  int64_t slot = kNoSlot;
  for (const MessageGroup& g : in) {
    const int64_t send_slot = g.send_slot >> step;
    if (send_slot != slot) {
      FlushSenderSlot(scratch, step, out);
      slot = send_slot;
    }
    MessageGroup up = g;
    up.send_slot = send_slot;
    up.recv_slot = g.recv_slot >> step;
    scratch->push_back(up);
  }
  FlushSenderSlot(scratch, step, out);
}

LodMessageRecord ToRecord(const MessageGroup& g, int64_t origin_ns) {
  LodMessageRecord r;
  const double n = static_cast<double>(g.count);
  r.send_ns = origin_ns + static_cast<int64_t>(g.send_sum / n + 0.5);
  r.recv_ns = origin_ns + static_cast<int64_t>(g.recv_sum / n + 0.5);
  r.send_row = g.send_row;
  r.recv_row = g.recv_row;
  r.count = static_cast<uint32_t>(std::min<uint64_t>(g.count, UINT32_MAX));
  r.mean_bytes = g.bytes_sum / n;
  r.mean_latency_ns = g.latency_sum / n;
  r.max_latency_ns = g.max_latency;
  return r;
}

// One level's groups of a sender row as records, by mean send time.
void EmitMessages(const std::vector<MessageGroup>& groups, int64_t origin_ns,
                  HugePageArray<LodMessageRecord>* row) {
  row->reserve(row->size() + groups.size());
  size_t i = 0;
  while (i < groups.size()) {
    const size_t first = row->size();
    size_t j = i;
    for (; j < groups.size() && groups[j].send_slot == groups[i].send_slot; ++j) {
      row->push_back(ToRecord(groups[j], origin_ns));
    }
    // Within one sender slot, by mean send time (slots are in order).
    std::sort(row->begin() + static_cast<std::ptrdiff_t>(first), row->end(),
              [](const LodMessageRecord& a, const LodMessageRecord& b) {
                return a.send_ns < b.send_ns;
              });
    i = j;
  }
}

}  // namespace

void LodIndexBuilder::AddMessages(absl::Span<const LodMessageInput> messages) {
  const size_t rows = data_->rows.size();
  for (uint32_t k = 0; k < data_->levels; ++k) data_->messages[k] = {};
  const uint32_t shift = data_->shift(0);
  std::vector<MessageGroup> a, b, scratch;  // reused from row to row
  // Rows end in order, those without messages empty.
  size_t next_row = 0;
  auto end_rows_before = [&](size_t row) {
    for (; next_row < row; ++next_row) {
      for (LodTable<LodMessageRecord>& level : data_->messages) level.EndRow();
    }
  };
  size_t i = 0;
  while (i < messages.size()) {
    const uint32_t row = messages[i].send_row;
    size_t j = i;
    while (j < messages.size() && messages[j].send_row == row) ++j;
    // Not sorted by sender (a row already ended) or not a row: skipped.
    if (row >= rows || row < next_row) {
      i = j;
      continue;
    }
    end_rows_before(row);
    a.clear();
    for (size_t m = i; m < j; ++m) {
      const LodMessageInput& in = messages[m];
      if (in.recv_row >= rows) continue;
      const int64_t send = in.send_ns - data_->origin_ns;
      const int64_t recv = in.recv_ns - data_->origin_ns;
      const int64_t latency = in.recv_ns - in.send_ns;
      a.push_back(MessageGroup{row, in.recv_row, send >> shift, recv >> shift, 1,
                               static_cast<double>(send), static_cast<double>(recv),
                               static_cast<double>(in.bytes),
                               static_cast<double>(latency), latency});
    }
    // Level 0 from the messages, each next level from the one below.
    GroupLevel(a, 0, &b, &scratch);
    EmitMessages(b, data_->origin_ns, &data_->messages[0].records);
    for (uint32_t k = 1; k < data_->levels; ++k) {
      GroupLevel(b, kLodLevelStep, &a, &scratch);
      EmitMessages(a, data_->origin_ns, &data_->messages[k].records);
      std::swap(a, b);
    }
    i = j;
  }
  end_rows_before(rows);
}

void LodIndexBuilder::Finish(const RegionTable& regions) {
  data_->regions = regions.names();
  // Collectives by (communicator, begin); one record per (communicator,
  // slot of the begin) at each level.
  std::sort(collectives_.begin(), collectives_.end(),
            [](const Collective& a, const Collective& b) {
              return std::tie(a.comm, a.begin_ns) < std::tie(b.comm, b.begin_ns);
            });
  for (uint32_t k = 0; k < data_->levels; ++k) {
    const uint32_t shift = data_->shift(k);
    std::vector<LodCollectiveRecord>& out = data_->collectives[k];
    int64_t slot = kNoSlot;
    for (const Collective& c : collectives_) {
      const int64_t s = (c.begin_ns - data_->origin_ns) >> shift;
      if (!out.empty() && out.back().comm == c.comm && s == slot) {
        LodCollectiveRecord& r = out.back();
        r.end_ns = std::max(r.end_ns, c.end_ns);
        if (r.kind != c.kind) r.kind = kLodMixedCollective;
        ++r.count;
      } else {
        out.push_back(LodCollectiveRecord{c.begin_ns, c.end_ns, c.comm, c.kind,
                                          1, 0});
        slot = s;
      }
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const LodCollectiveRecord& a,
                        const LodCollectiveRecord& b) {
                       return a.begin_ns < b.begin_ns;
                     });
  }
}

absl::StatusOr<LodIndexData> BuildLodIndex(absl::Span<const ProcessTrace> traces,
                                           const Timeline& timeline,
                                           const MessageMatch& messages) {
  if (timeline.processes.size() != traces.size()) {
    return absl::InvalidArgumentError("the timeline is not of these traces");
  }
  int64_t first_ns = std::numeric_limits<int64_t>::max();
  int64_t last_ns = std::numeric_limits<int64_t>::min();
  int64_t events = 0, rows = 0;
  // Row of (process, thread); -1 for unavailable processes.
  std::vector<std::vector<int64_t>> row_of(traces.size());
  for (size_t p = 0; p < traces.size(); ++p) {
    row_of[p].assign(traces[p].threads.size(), -1);
    const ProcessTimeline& process = timeline.processes[p];
    if (!process.available) continue;
    for (size_t t = 0; t < process.global_ns.size(); ++t) {
      row_of[p][t] = rows++;
      const std::vector<int64_t>& thread = process.global_ns[t];
      events += static_cast<int64_t>(thread.size());
      if (thread.empty()) continue;
      first_ns = std::min(first_ns, thread.front());
      last_ns = std::max(last_ns, thread.back());
    }
  }
  if (first_ns > last_ns) {
    return absl::FailedPreconditionError("no event on the timeline");
  }
  LodIndexData data;
  data.correction = timeline.kind;
  ChooseLodLevels(first_ns, last_ns, events, rows, &data);
  LodIndexBuilder builder(&data);
  RegionTable regions;
  for (size_t p = 0; p < traces.size(); ++p) {
    const ProcessTimeline& process = timeline.processes[p];
    if (!process.available) continue;
    RegionTable::Process& names = regions.ForProcess(p, traces[p]);
    for (size_t t = 0; t < traces[p].threads.size(); ++t) {
      const ThreadTrace& thread = traces[p].threads[t];
      builder.AddRow(LodIndexRow{traces[p].info.rank, thread.thread_index,
                                 thread.name},
                     thread.events, process.global_ns[t], names);
    }
  }
  std::vector<LodMessageInput> inputs;
  inputs.reserve(messages.pairs.size());
  for (const MessagePair& m : messages.pairs) {
    const int64_t send_row = row_of[m.send_process][m.send_thread];
    const int64_t recv_row = row_of[m.recv_process][m.recv_thread];
    if (send_row < 0 || recv_row < 0) continue;
    const ProcessTimeline& s = timeline.processes[m.send_process];
    const ProcessTimeline& r = timeline.processes[m.recv_process];
    inputs.push_back(LodMessageInput{
        s.global_ns[m.send_thread][m.send_index],
        r.global_ns[m.recv_thread][m.recv_index],
        static_cast<uint32_t>(send_row), static_cast<uint32_t>(recv_row),
        traces[m.send_process].threads[m.send_thread].events[m.send_index].bytes});
  }
  std::sort(inputs.begin(), inputs.end(),
            [](const LodMessageInput& a, const LodMessageInput& b) {
              return std::tie(a.send_row, a.send_ns) <
                     std::tie(b.send_row, b.send_ns);
            });
  builder.AddMessages(inputs);
  builder.Finish(regions);
  return data;
}

}  // namespace clocksync::trace
