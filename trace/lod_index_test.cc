// The level-of-detail index against a brute-force computation on small
// random traces (functions per slot and row, messages per slot pair,
// collectives per communicator and slot, queries), against the dominant
// regions of `clocksync-trace lod`'s bins, and on damaged files.

#include "trace/lod_index.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hull/trace_stamp.h"
#include "trace/lod.h"
#include "trace/lod_walk.h"

namespace clocksync::trace {
namespace {

struct Random {
  // One process, `rows` threads of random nested regions (ids 1..4),
  // collectives and sends; local = global (correction none).
  ProcessTrace trace;
  std::vector<std::vector<int64_t>> global_ns;
  std::vector<LodMessageInput> messages;
};

Random MakeRandom(uint32_t seed, int rows, int events_per_row) {
  std::mt19937_64 rng(seed);
  Random r;
  r.trace.info.rank = 0;
  r.trace.regions = {{1, "a"}, {2, "b"}, {3, "c"}, {4, "d"}};
  for (int row = 0; row < rows; ++row) {
    ThreadTrace thread;
    thread.thread_index = row;
    thread.name = "t" + std::to_string(row);
    std::vector<int64_t> times;
    std::vector<uint32_t> open;
    int64_t at = 1000 + static_cast<int64_t>(rng() % 50);
    bool in_collective = false;
    for (int i = 0; i < events_per_row; ++i) {
      // Mostly short gaps, sometimes a long one (functions over many slots).
      at += rng() % 10 == 0 ? static_cast<int64_t>(rng() % 3000)
                            : static_cast<int64_t>(rng() % 40);
      Event e;
      e.stamp = hull::PackStamp(static_cast<uint64_t>(at), i);
      const int choice = static_cast<int>(rng() % 10);
      if (choice < 4 && open.size() < 4) {
        e.kind = EventKind::kEnter;
        e.region = 1 + static_cast<uint32_t>(rng() % 4);
        open.push_back(e.region);
      } else if (choice < 8 && !open.empty()) {
        e.kind = EventKind::kLeave;
        e.region = open.back();
        open.pop_back();
      } else if (choice == 8) {
        e.kind = in_collective ? EventKind::kCollectiveEnd
                               : EventKind::kCollectiveBegin;
        e.collective = static_cast<CollectiveKind>(rng() % 3);
        e.comm = static_cast<uint32_t>(rng() % 2);
        in_collective = !in_collective;
      } else {
        e.kind = EventKind::kSend;
        e.bytes = rng() % 1000;
        LodMessageInput m;
        m.send_ns = at;
        m.recv_ns = at + static_cast<int64_t>(rng() % 400) - 100;  // some backwards
        m.send_row = static_cast<uint32_t>(row);
        m.recv_row = static_cast<uint32_t>(rng() % rows);
        m.bytes = e.bytes;
        r.messages.push_back(m);
      }
      thread.events.push_back(e);
      times.push_back(at);
    }
    r.trace.threads.push_back(thread);
    r.global_ns.push_back(times);
  }
  std::sort(r.messages.begin(), r.messages.end(),
            [](const LodMessageInput& a, const LodMessageInput& b) {
              return std::tie(a.send_row, a.send_ns) < std::tie(b.send_row, b.send_ns);
            });
  return r;
}

LodIndexData Build(const Random& r, uint32_t finest_shift) {
  int64_t first = INT64_MAX, last = INT64_MIN, events = 0;
  for (const auto& t : r.global_ns) {
    first = std::min(first, t.front());
    last = std::max(last, t.back());
    events += static_cast<int64_t>(t.size());
  }
  LodIndexData data;
  ChooseLodLevels(first, last, events, static_cast<int64_t>(r.global_ns.size()),
                  &data);
  data.finest_shift = finest_shift;
  data.levels = 1;
  while (((last - first) >> data.shift(data.levels - 1)) > 0) ++data.levels;
  LodIndexBuilder builder(&data);
  RegionTable regions;
  RegionTable::Process& names = regions.ForProcess(0, r.trace);
  for (size_t t = 0; t < r.trace.threads.size(); ++t) {
    builder.AddRow(LodIndexRow{0, static_cast<uint32_t>(t), r.trace.threads[t].name},
                   r.trace.threads[t].events, r.global_ns[t], names);
  }
  builder.AddMessages(r.messages);
  builder.Finish(regions);
  return data;
}

// The obvious computation: per slot, the region time of every interval
// clipped to it.
std::vector<LodFunctionRecord> BruteFunctions(const Random& r, size_t row,
                                              const LodIndexData& data,
                                              uint32_t level) {
  RegionTable regions;
  RegionTable::Process& names = regions.ForProcess(0, r.trace);
  struct Interval {
    uint32_t region;
    int64_t begin, end;
  };
  std::vector<Interval> intervals;
  std::vector<int64_t> events;
  std::vector<OpenRegion> stack;
  int64_t unmatched = 0;
  // Every row in order, so that region indices come out as the builder's.
  for (size_t t = 0; t < r.trace.threads.size(); ++t) {
    WalkThread(
        r.trace.threads[t].events, r.global_ns[t], names, &stack, &unmatched,
        [&](const Event&, int64_t at) {
          if (t == row) events.push_back(at);
        },
        [&](uint32_t region, int64_t b, int64_t e) {
          if (t == row) intervals.push_back({region, b, e});
        });
  }
  const int64_t width = int64_t{1} << data.shift(level);
  std::vector<LodFunctionRecord> out;
  for (int64_t start = data.origin_ns; start < data.end_ns; start += width) {
    const int64_t end = start + width;
    std::map<uint32_t, std::tuple<int64_t, int64_t, int64_t>> h;  // ns, first, last
    for (const Interval& i : intervals) {
      const int64_t b = std::max(i.begin, start), e = std::min(i.end, end);
      if (b >= e) continue;
      auto [it, fresh] = h.try_emplace(i.region, 0, b, e);
      std::get<0>(it->second) += e - b;
      std::get<2>(it->second) = e;
    }
    if (h.empty()) continue;
    uint32_t n = 0;
    for (int64_t at : events) n += at >= start && at < end;
    uint32_t best = h.begin()->first;
    for (const auto& [region, v] : h) {
      if (std::get<0>(v) > std::get<0>(h[best])) best = region;
    }
    const auto [ns, first, last] = h[best];
    if (!out.empty() && out.back().region == best && out.back().end_ns == first) {
      out.back().end_ns = last;
      out.back().region_ns += ns;
      out.back().events += n;
    } else {
      out.push_back(LodFunctionRecord{first, last, ns, best, n});
    }
  }
  return out;
}

std::vector<LodMessageRecord> BruteMessages(const Random& r,
                                            const LodIndexData& data,
                                            uint32_t level) {
  const uint32_t shift = data.shift(level);
  struct Sum {
    uint64_t n = 0;
    int64_t send = 0, recv = 0, bytes = 0, latency = 0, max_latency = INT64_MIN;
  };
  std::map<std::tuple<uint32_t, uint32_t, int64_t, int64_t>, Sum> groups;
  for (const LodMessageInput& m : r.messages) {
    Sum& s = groups[{m.send_row, m.recv_row, (m.send_ns - data.origin_ns) >> shift,
                     (m.recv_ns - data.origin_ns) >> shift}];
    ++s.n;
    s.send += m.send_ns - data.origin_ns;
    s.recv += m.recv_ns - data.origin_ns;
    s.bytes += static_cast<int64_t>(m.bytes);
    s.latency += m.recv_ns - m.send_ns;
    s.max_latency = std::max(s.max_latency, m.recv_ns - m.send_ns);
  }
  std::vector<LodMessageRecord> out;
  for (const auto& [key, s] : groups) {
    LodMessageRecord m;
    const double n = static_cast<double>(s.n);
    m.send_row = std::get<0>(key);
    m.recv_row = std::get<1>(key);
    m.send_ns = data.origin_ns + static_cast<int64_t>(s.send / n + 0.5);
    m.recv_ns = data.origin_ns + static_cast<int64_t>(s.recv / n + 0.5);
    m.count = static_cast<uint32_t>(s.n);
    m.mean_bytes = s.bytes / n;
    m.mean_latency_ns = s.latency / n;
    m.max_latency_ns = s.max_latency;
    out.push_back(m);
  }
  return out;
}

auto MessageKey(const LodMessageRecord& m) {
  return std::make_tuple(m.send_row, m.recv_row, m.send_ns, m.recv_ns, m.count);
}

void ExpectSameMessages(std::vector<LodMessageRecord> got,
                        std::vector<LodMessageRecord> want) {
  auto by_key = [](const LodMessageRecord& a, const LodMessageRecord& b) {
    return MessageKey(a) < MessageKey(b);
  };
  std::sort(got.begin(), got.end(), by_key);
  std::sort(want.begin(), want.end(), by_key);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(MessageKey(got[i]), MessageKey(want[i])) << i;
    EXPECT_NEAR(got[i].mean_bytes, want[i].mean_bytes, 1e-6);
    EXPECT_NEAR(got[i].mean_latency_ns, want[i].mean_latency_ns, 1e-6);
    EXPECT_EQ(got[i].max_latency_ns, want[i].max_latency_ns);
  }
}

std::vector<LodCollectiveRecord> BruteCollectives(const Random& r,
                                                  const LodIndexData& data,
                                                  uint32_t level) {
  std::map<std::pair<uint32_t, int64_t>, LodCollectiveRecord> groups;
  for (size_t t = 0; t < r.trace.threads.size(); ++t) {
    const std::vector<Event>& events = r.trace.threads[t].events;
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].kind != EventKind::kCollectiveBegin) continue;
      int64_t end = r.global_ns[t][i];
      for (size_t j = i + 1; j < events.size(); ++j) {
        if (events[j].kind == EventKind::kCollectiveEnd) {
          end = r.global_ns[t][j];
          break;
        }
      }
      const int64_t begin = r.global_ns[t][i];
      const uint32_t kind = static_cast<uint32_t>(events[i].collective);
      auto [it, fresh] = groups.try_emplace(
          {events[i].comm, (begin - data.origin_ns) >> data.shift(level)},
          LodCollectiveRecord{begin, end, events[i].comm, kind, 0, 0});
      LodCollectiveRecord& c = it->second;
      c.begin_ns = std::min(c.begin_ns, begin);
      c.end_ns = std::max(c.end_ns, end);
      if (c.kind != kind) c.kind = kLodMixedCollective;
      ++c.count;
    }
  }
  std::vector<LodCollectiveRecord> out;
  for (const auto& [key, c] : groups) out.push_back(c);
  return out;
}

auto CollectiveKey(const LodCollectiveRecord& c) {
  return std::make_tuple(c.comm, c.begin_ns, c.end_ns, c.kind, c.count);
}

void ExpectSameCollectives(std::vector<LodCollectiveRecord> got,
                           std::vector<LodCollectiveRecord> want) {
  std::vector<decltype(CollectiveKey(got[0]))> a, b;
  for (const auto& c : got) a.push_back(CollectiveKey(c));
  for (const auto& c : want) b.push_back(CollectiveKey(c));
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
}

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

class LodIndexRandom : public ::testing::TestWithParam<uint32_t> {};

TEST_P(LodIndexRandom, MatchesBruteForceAtEveryLevelAndQuery) {
  const uint32_t seed = GetParam();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  const Random r = MakeRandom(seed, 3, 300);
  const LodIndexData data = Build(r, /*finest_shift=*/seed % 5);
  ASSERT_GE(data.levels, 3u);
  for (uint32_t k = 0; k < data.levels; ++k) {
    SCOPED_TRACE(testing::Message() << "level " << k);
    std::vector<LodMessageRecord> messages;
    for (size_t row = 0; row < r.trace.threads.size(); ++row) {
      const auto& f = data.functions[k].row(row);
      EXPECT_EQ(std::vector<LodFunctionRecord>(f.begin(), f.end()),
                BruteFunctions(r, row, data, k))
          << row;
      const auto& m = data.messages[k].row(row);
      EXPECT_TRUE(std::is_sorted(m.begin(), m.end(),
                                 [](const auto& a, const auto& b) {
                                   return a.send_ns < b.send_ns;
                                 }));
      messages.insert(messages.end(), m.begin(), m.end());
    }
    ExpectSameMessages(messages, BruteMessages(r, data, k));
    ExpectSameCollectives(data.collectives[k], BruteCollectives(r, data, k));
  }

  // Queries read one level's records overlapping the interval.
  const std::string path = TempPath("random_" + std::to_string(seed) + ".lodidx");
  ASSERT_TRUE(WriteLodIndex(data, path).ok());
  absl::StatusOr<std::unique_ptr<LodIndex>> index = OpenLodIndex(path);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ((*index)->rows().size(), 3u);
  EXPECT_EQ((*index)->regions(), data.regions);
  std::mt19937_64 rng(seed);
  for (int q = 0; q < 30; ++q) {
    const int64_t span = data.end_ns - data.origin_ns;
    int64_t t0 = data.origin_ns - 100 + static_cast<int64_t>(rng() % (span + 200));
    int64_t t1 = data.origin_ns - 100 + static_cast<int64_t>(rng() % (span + 200));
    if (t0 > t1) std::swap(t0, t1);
    if (t0 == t1) ++t1;
    const int32_t px = 1 + static_cast<int32_t>(rng() % 300);
    const LodAnswer answer = (*index)->Query(t0, t1, px);
    const uint32_t k = answer.level;
    ASSERT_EQ(k, (*index)->LevelFor(t0, t1, px));
    EXPECT_TRUE(k + 1 == data.levels || (*index)->slot_ns(k) >= (t1 - t0) / px);
    EXPECT_TRUE(k == 0 || (*index)->slot_ns(k - 1) < (t1 - t0) / px);
    std::vector<LodFunctionHit> want;
    for (uint32_t row = 0; row < 3; ++row) {
      for (const LodFunctionRecord& f : data.functions[k].row(row)) {
        if (f.end_ns > t0 && f.begin_ns < t1) want.push_back({row, f});
      }
    }
    ASSERT_EQ(answer.functions.size(), want.size()) << t0 << " " << t1;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(answer.functions[i].row, want[i].row);
      EXPECT_EQ(answer.functions[i].record, want[i].record);
    }
    std::vector<LodMessageRecord> messages;
    {
      for (const LodMessageRecord& m : data.messages[k].records) {
        if (std::max(m.send_ns, m.recv_ns) >= t0 &&
            std::min(m.send_ns, m.recv_ns) < t1) {
          messages.push_back(m);
        }
      }
    }
    ExpectSameMessages(answer.messages, messages);
    std::vector<LodCollectiveRecord> collectives;
    for (const LodCollectiveRecord& c : data.collectives[k]) {
      if (c.end_ns >= t0 && c.begin_ns < t1) collectives.push_back(c);
    }
    ExpectSameCollectives(answer.collectives, collectives);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, LodIndexRandom, ::testing::Range(1u, 11u));

TEST(LodIndex, AgreesWithTheLodBinsDominantRegions) {
  const Random r = MakeRandom(42, 2, 400);
  const LodIndexData data = Build(r, 6);
  std::vector<ProcessTrace> traces = {r.trace};
  Timeline timeline;
  timeline.kind = hull::CorrectionKind::kNone;
  timeline.processes.resize(1);
  timeline.processes[0].available = true;
  timeline.processes[0].global_ns = r.global_ns;
  for (uint32_t k = 0; k < 3; ++k) {
    const int64_t width = int64_t{1} << data.shift(k);
    LodOptions options;
    options.from_ns = data.origin_ns;
    options.bins = static_cast<int32_t>((data.end_ns - data.origin_ns + width - 1) / width);
    options.to_ns = data.origin_ns + options.bins * width;
    absl::StatusOr<Lod> lod = BuildLod(traces, timeline, options);
    ASSERT_TRUE(lod.ok()) << lod.status();
    ASSERT_EQ(lod->levels[0].bin_ns, width);
    ASSERT_EQ(lod->regions, data.regions);
    for (size_t row = 0; row < 2; ++row) {
      const auto& records = data.functions[k].row(row);
      for (int32_t b = 0; b < options.bins; ++b) {
        const int64_t start = data.origin_ns + b * width;
        const int32_t dominant = lod->levels[0].rows[row][b].dominant();
        // The record that holds the slot's representative.
        int32_t indexed = -1;
        for (const LodFunctionRecord& f : records) {
          if (f.begin_ns < start + width && f.end_ns > start) {
            indexed = static_cast<int32_t>(f.region);
            if (f.begin_ns >= start) break;
          }
        }
        if (dominant >= 0) {
          EXPECT_EQ(indexed, dominant) << "level " << k << " row " << row
                                       << " slot " << b;
        }
      }
    }
  }
}

TEST(LodIndex, DamagedFilesAreErrorsNamingTheFile) {
  const Random r = MakeRandom(7, 2, 200);
  const LodIndexData data = Build(r, 3);
  const std::string path = TempPath("damaged.lodidx");
  ASSERT_TRUE(WriteLodIndex(data, path).ok());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 400u);
  auto open_with = [&](const std::string& content) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    return OpenLodIndex(path).status();
  };
  EXPECT_TRUE(open_with(bytes).ok());
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string flipped = bytes;
    const size_t at = rng() % flipped.size();
    flipped[at] = static_cast<char>(flipped[at] ^ (1 << (rng() % 8)));
    const absl::Status status = open_with(flipped);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << "byte " << at;
    EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr(path));
  }
  for (size_t cut : {size_t{0}, size_t{10}, size_t{128}, bytes.size() - 8}) {
    EXPECT_EQ(open_with(bytes.substr(0, cut)).code(), absl::StatusCode::kDataLoss)
        << cut;
  }
  std::remove(path.c_str());
  EXPECT_EQ(OpenLodIndex(path).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace clocksync::trace
