// client/seqlock_stress_test.cc: concurrent readers against one writer that
// updates the mapping at 1 kHz (the daemon's pace) and in a tight loop (more
// pressure than any daemon). Every field of update k derives from k, so a
// read that mixes two updates (a torn read) is detected. Also meant to run
// under --config=tsan and --config=asan.
//
// Two set-ups, each for the mapping section and for the TSC section:
//  - InMemory: writer and readers share one section at one address, so
//    ThreadSanitizer sees every access of the seqlock protocol;
//  - EndToEnd: ShmPublisher writes through its mapping of the file, readers
//    use Clock::At() and Clock::ReadMapping() through theirs; for the TSC,
//    Clock::Now() reads both sections (each consistent on its own, possibly
//    of different updates) while the writer rewrites both.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "client/clock.h"
#include "shm/shm_layout.h"
#include "shm/shm_publisher.h"
#include "gtest/gtest.h"

namespace clocksync {
namespace {

enum class Pace { k1kHz, kTightLoop };

std::string PaceName(const ::testing::TestParamInfo<Pace>& info) {
  return info.param == Pace::k1kHz ? "Writer1kHz" : "WriterTightLoop";
}

std::chrono::milliseconds Duration(Pace pace) {
  return pace == Pace::k1kHz ? std::chrono::milliseconds(1500)
                             : std::chrono::milliseconds(1000);
}

constexpr int kReaders = 3;

// Runs `write(k)` for k = 1, 2, ... at `pace` until `stop`; returns the
// number of writes.
template <typename WriteFn>
uint64_t RunWriter(Pace pace, const std::atomic<bool>& stop, WriteFn write) {
  uint64_t k = 0;
  auto next = std::chrono::steady_clock::now();
  while (!stop.load(std::memory_order_relaxed)) {
    write(++k);
    if (pace == Pace::k1kHz) {
      next += std::chrono::milliseconds(1);
      std::this_thread::sleep_until(next);
    }
  }
  return k;
}

// What every reader thread counts.
struct ReaderStats {
  uint64_t consistent = 0;  // reads that matched one update
  uint64_t torn = 0;        // reads that mixed updates: must stay 0
  uint64_t backwards = 0;   // a later read saw an older update: must stay 0
  uint64_t busy = 0;        // retry limit hit (allowed, counted)
  uint64_t fallback = 0;    // Now() fell back to clock_gettime (counted)
  uint64_t distinct = 0;    // number of different updates seen
};

// A reader has raced with the writer once it saw more than this many
// different updates.
uint64_t RacedDistinct(Pace pace) { return pace == Pace::k1kHz ? 50 : 1; }

// How far the readers have come while they run: each publishes its count of
// different updates seen.
class RaceProgress {
 public:
  void Saw(int reader, uint64_t distinct) {
    distinct_[reader].store(distinct, std::memory_order_relaxed);
  }
  uint64_t MaxDistinct() const {
    uint64_t most = 0;
    for (const auto& d : distinct_) {
      most = std::max(most, d.load(std::memory_order_relaxed));
    }
    return most;
  }

 private:
  std::array<std::atomic<uint64_t>, kReaders> distinct_{};
};

// Lets the writer and readers run for Duration(pace), and on until some
// reader has raced with the writer (at most 30 s): on a loaded machine, or
// under TSan, the threads may get few turns at first (against a tight loop
// the readers of one run saw only the update before the writer started).
void RunUntilRaced(Pace pace, const RaceProgress& progress) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::this_thread::sleep_for(Duration(pace));
  while (progress.MaxDistinct() <= RacedDistinct(pace) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void ExpectHealthy(const std::vector<ReaderStats>& stats, uint64_t writes,
                   Pace pace) {
  uint64_t max_distinct = 0;
  for (size_t i = 0; i < stats.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "reader " << i);
    EXPECT_EQ(stats[i].torn, 0u);
    EXPECT_EQ(stats[i].backwards, 0u);
    EXPECT_GT(stats[i].consistent, 100u) << "the reader must have run";
    max_distinct = std::max(max_distinct, stats[i].distinct);
    std::printf(
        "reader %zu: consistent=%llu torn=%llu busy=%llu fallback=%llu "
        "distinct=%llu\n",
        i, static_cast<unsigned long long>(stats[i].consistent),
        static_cast<unsigned long long>(stats[i].torn),
        static_cast<unsigned long long>(stats[i].busy),
        static_cast<unsigned long long>(stats[i].fallback),
        static_cast<unsigned long long>(stats[i].distinct));
  }
  std::printf("writes=%llu\n", static_cast<unsigned long long>(writes));
  // The readers must really have raced with the writer: at 1 kHz a reader
  // sees most updates; against a tight loop (slowed down a lot under TSan)
  // it is enough that some reader saw the section change under it.
  EXPECT_GT(writes, pace == Pace::k1kHz ? 500u : 10'000u);
  EXPECT_GT(max_distinct, RacedDistinct(pace));
}

// ---------------------------------------------------------------------------
// InMemory: the seqlock helpers of shm_layout.h on one shared section.

MappingValues InMemoryValues(uint64_t k) {
  MappingValues v;
  v.anchor_raw_ns = static_cast<int64_t>(3 * k + 1);
  v.anchor_global_ns = static_cast<int64_t>(5 * k + 2);
  v.rate_adj_q64 = static_cast<int64_t>(k * 1'000'003);
  v.bound_at_anchor_ns = static_cast<int64_t>(11 * k);
  v.bound_growth_q36 = static_cast<uint32_t>(k % 4096);
  v.status = static_cast<uint16_t>(CLOCKSYNC_STATE_SYNCED |
                                   ((k & 1) ? CLOCKSYNC_STATUS_STEPPED : 0u));
  v.depth = static_cast<uint16_t>(k & 0xFFFF);
  v.update_raw_ns = static_cast<int64_t>(13 * k);
  v.generation = k;
  return v;
}

bool SameValues(const MappingValues& a, const MappingValues& b) {
  return a.anchor_raw_ns == b.anchor_raw_ns &&
         a.anchor_global_ns == b.anchor_global_ns &&
         a.rate_adj_q64 == b.rate_adj_q64 &&
         a.bound_at_anchor_ns == b.bound_at_anchor_ns &&
         a.bound_growth_q36 == b.bound_growth_q36 && a.status == b.status &&
         a.depth == b.depth && a.update_raw_ns == b.update_raw_ns &&
         a.generation == b.generation;
}

// The fields TryReadSectionForEvaluation reads (not depth, generation).
bool SameEvaluationValues(const MappingValues& a, const MappingValues& b) {
  return a.anchor_raw_ns == b.anchor_raw_ns &&
         a.anchor_global_ns == b.anchor_global_ns &&
         a.rate_adj_q64 == b.rate_adj_q64 &&
         a.bound_at_anchor_ns == b.bound_at_anchor_ns &&
         a.bound_growth_q36 == b.bound_growth_q36 && a.status == b.status &&
         a.update_raw_ns == b.update_raw_ns;
}

class InMemorySeqlockTest : public ::testing::TestWithParam<Pace> {};

TEST_P(InMemorySeqlockTest, ReadersNeverSeeATornWrite) {
  const Pace pace = GetParam();
  auto section = std::make_unique<clocksync_shm_mapping>();
  shm::WriteSection(section.get(), InMemoryValues(0));
  std::atomic<bool> stop{false};
  std::vector<ReaderStats> stats(kReaders);
  RaceProgress progress;
  std::vector<std::thread> readers;
  // Readers 0 and 1 read the whole section; reader 2 only what the hot path
  // reads (TryReadSectionForEvaluation), identifying k by update_raw_ns.
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      ReaderStats& s = stats[r];
      uint64_t last_k = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        MappingValues v;
        bool read = false;
        for (int attempt = 0; attempt < 1000 && !read; ++attempt) {
          read = r < 2 ? shm::TryReadSection(section.get(), &v)
                       : shm::TryReadSectionForEvaluation(section.get(), &v);
        }
        if (!read) {
          ++s.busy;
          continue;
        }
        const uint64_t k =
            r < 2 ? v.generation : static_cast<uint64_t>(v.update_raw_ns) / 13;
        const bool same = r < 2 ? SameValues(v, InMemoryValues(k))
                                : SameEvaluationValues(v, InMemoryValues(k));
        if (!same) {
          ++s.torn;
          continue;
        }
        ++s.consistent;
        if (k < last_k) ++s.backwards;
        if (k != last_k) progress.Saw(r, ++s.distinct);
        last_k = k;
      }
    });
  }
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] {
    writes = RunWriter(pace, stop, [&](uint64_t k) {
      shm::WriteSection(section.get(), InMemoryValues(k));
    });
  });
  RunUntilRaced(pace, progress);
  stop = true;
  writer.join();
  for (std::thread& reader : readers) reader.join();
  ExpectHealthy(stats, writes.load(), pace);
}

INSTANTIATE_TEST_SUITE_P(Paces, InMemorySeqlockTest,
                         ::testing::Values(Pace::k1kHz, Pace::kTightLoop),
                         PaceName);

// ---------------------------------------------------------------------------
// EndToEnd: ShmPublisher -> file -> Clock.

// Update k as the publisher gets it. No bound growth, so that a reading's
// latest - global (11k + 1) tells which k it came from; the reading must
// then match update k exactly.
Mapping EndToEndMapping(uint64_t k) {
  Mapping m;
  m.anchor_raw_ns = static_cast<int64_t>(3 * k + 1);
  m.anchor_global_ns = static_cast<int64_t>(5 * k + 2);
  m.rate_adj = static_cast<double>(k % 1000 + 1) * 1e-6;
  m.bound_at_anchor_ns = static_cast<int64_t>(11 * k);
  m.bound_growth_ppb = 0.0;
  m.state = CLOCKSYNC_STATE_SYNCED;
  m.stepped = (k & 1) != 0;
  m.depth = static_cast<uint32_t>(k & 0xFFFF);
  return m;
}

// What the segment holds after update k (the publisher's k-th Publish).
MappingValues EndToEndValues(uint64_t k) {
  const Mapping m = EndToEndMapping(k);
  MappingValues v;
  v.anchor_raw_ns = m.anchor_raw_ns;
  v.anchor_global_ns = m.anchor_global_ns;
  v.rate_adj_q64 = shm::RateAdjToQ64(m.rate_adj);
  v.bound_at_anchor_ns = m.bound_at_anchor_ns;
  v.bound_growth_q36 = 0;
  v.status = static_cast<uint16_t>(m.state |
                                   (m.stepped ? CLOCKSYNC_STATUS_STEPPED : 0u));
  v.depth = static_cast<uint16_t>(m.depth);
  v.update_raw_ns = static_cast<int64_t>(13 * k);  // the injected clock
  v.generation = k;
  return v;
}

// Readings are taken at this raw time: before every update, so never stale.
constexpr int64_t kReadingRawNs = 0;

class EndToEndSeqlockTest : public ::testing::TestWithParam<Pace> {};

TEST_P(EndToEndSeqlockTest, ClockReadersNeverSeeATornWrite) {
  const Pace pace = GetParam();
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir != nullptr ? dir : "/tmp") + "/stress_" +
      PaceName(::testing::TestParamInfo<Pace>(pace, 0)) + ".shm";
  // Stamps update k with 13k; only the writer thread calls it.
  uint64_t current_k = 0;
  ShmPublisher::Options options;
  options.raw_clock_ns = [&current_k] {
    return static_cast<int64_t>(13 * current_k);
  };
  absl::StatusOr<ShmPublisher> publisher =
      ShmPublisher::Open(path, std::move(options));
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  current_k = 1;
  ASSERT_TRUE(publisher->Publish(EndToEndMapping(1)).ok());
  absl::StatusOr<Clock> clock = Clock::Open(path);
  ASSERT_TRUE(clock.ok()) << clock.status();

  std::atomic<bool> stop{false};
  std::vector<ReaderStats> stats(kReaders);
  RaceProgress progress;
  std::vector<std::thread> readers;
  // Readers 0 and 1 use the hot path At(); reader 2 ReadMapping(), which
  // returns every field.
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      ReaderStats& s = stats[r];
      uint64_t last_k = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        uint64_t k = 0;
        if (r < 2) {
          const TimeReading t = clock->At(kReadingRawNs);
          if (t.error == CLOCKSYNC_EBUSY) {
            ++s.busy;
            continue;
          }
          const int64_t above_ns = t.latest_ns - t.global_ns;
          k = static_cast<uint64_t>((above_ns - 1) / 11);
          const TimeReading expected =
              internal::Evaluate(EndToEndValues(k), kReadingRawNs, 0);
          if (t.error != CLOCKSYNC_OK || (above_ns - 1) % 11 != 0 ||
              t.global_ns != expected.global_ns ||
              t.earliest_ns != expected.earliest_ns ||
              t.latest_ns != expected.latest_ns ||
              t.status != expected.status) {
            ++s.torn;
            continue;
          }
        } else {
          MappingSnapshot snapshot;
          if (clock->ReadMapping(&snapshot) == CLOCKSYNC_EBUSY) {
            ++s.busy;
            continue;
          }
          k = snapshot.values.generation;
          if (!SameValues(snapshot.values, EndToEndValues(k))) {
            ++s.torn;
            continue;
          }
        }
        ++s.consistent;
        if (k < last_k) ++s.backwards;
        if (k != last_k) progress.Saw(r, ++s.distinct);
        last_k = k;
      }
    });
  }
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] {
    writes = 1 + RunWriter(pace, stop, [&](uint64_t k) {
               current_k = k + 1;
               // Publish() only fails on invalid input, which k never makes.
               if (!publisher->Publish(EndToEndMapping(k + 1)).ok()) {
                 std::abort();
               }
             });
  });
  RunUntilRaced(pace, progress);
  stop = true;
  writer.join();
  for (std::thread& reader : readers) reader.join();
  ExpectHealthy(stats, writes.load(), pace);
  EXPECT_EQ(clock->path_check_count(), 0u) << "the hot path made no syscall";
}

INSTANTIATE_TEST_SUITE_P(Paces, EndToEndSeqlockTest,
                         ::testing::Values(Pace::k1kHz, Pace::kTightLoop),
                         PaceName);

// ---------------------------------------------------------------------------
// The TSC section (layout version 2), in memory: every field of update k
// derives from k.

TscValues InMemoryTscValues(uint64_t k) {
  TscValues v;
  v.anchor_tsc = 7 * k + 3;
  v.anchor_raw_ns = static_cast<int64_t>(3 * k + 1);
  v.raw_ns_per_tick_q32 = k * 1'000'003 + 1;
  v.max_ticks = 17 * k;
  v.error_ns = static_cast<int64_t>(11 * k);
  v.generation = k;
  return v;
}

bool SameTscValues(const TscValues& a, const TscValues& b) {
  return a.anchor_tsc == b.anchor_tsc && a.anchor_raw_ns == b.anchor_raw_ns &&
         a.raw_ns_per_tick_q32 == b.raw_ns_per_tick_q32 &&
         a.max_ticks == b.max_ticks && a.error_ns == b.error_ns &&
         a.generation == b.generation;
}

class InMemoryTscSeqlockTest : public ::testing::TestWithParam<Pace> {};

TEST_P(InMemoryTscSeqlockTest, ReadersNeverSeeATornWrite) {
  const Pace pace = GetParam();
  auto section = std::make_unique<clocksync_shm_tsc>();
  shm::WriteTscSection(section.get(), InMemoryTscValues(0));
  std::atomic<bool> stop{false};
  std::vector<ReaderStats> stats(kReaders);
  RaceProgress progress;
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      ReaderStats& s = stats[r];
      uint64_t last_k = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        TscValues v;
        bool read = false;
        for (int attempt = 0; attempt < 1000 && !read; ++attempt) {
          read = shm::TryReadTscSection(section.get(), &v);
        }
        if (!read) {
          ++s.busy;
          continue;
        }
        const uint64_t k = v.generation;
        if (!SameTscValues(v, InMemoryTscValues(k))) {
          ++s.torn;
          continue;
        }
        ++s.consistent;
        if (k < last_k) ++s.backwards;
        if (k != last_k) progress.Saw(r, ++s.distinct);
        last_k = k;
      }
    });
  }
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] {
    writes = RunWriter(pace, stop, [&](uint64_t k) {
      shm::WriteTscSection(section.get(), InMemoryTscValues(k));
    });
  });
  RunUntilRaced(pace, progress);
  stop = true;
  writer.join();
  for (std::thread& reader : readers) reader.join();
  ExpectHealthy(stats, writes.load(), pace);
}

INSTANTIATE_TEST_SUITE_P(Paces, InMemoryTscSeqlockTest,
                         ::testing::Values(Pace::k1kHz, Pace::kTightLoop),
                         PaceName);

// ---------------------------------------------------------------------------
// The TSC section end to end: the writer publishes TSC mapping k and then
// mapping k; readers call Clock::Now(), which reads the TSC section and
// then the mapping section under their own seqlocks, so a reading combines
// TSC mapping k with mapping j >= k (or a later k). TSC mapping k maps
// every TSC value to raw 5k (rate 0, all ticks valid) with error k, and
// mapping j has bound j * 2^32, rate 0 and no growth, so a reading's
// latest - global - 1 = j * 2^32 + k names both, and its global time must
// then be exactly anchor_global(j) + 5k - anchor_raw(j). A TSC section read
// that overlaps a write makes Now() fall back to clock_gettime (counted).

constexpr int kTscShift = 32;

TscValues EndToEndTscValues(uint64_t k) {
  TscValues v;
  v.anchor_tsc = 0;
  v.anchor_raw_ns = static_cast<int64_t>(5 * k);
  v.raw_ns_per_tick_q32 = 0;
  v.max_ticks = ~uint64_t{0};
  v.error_ns = static_cast<int64_t>(k);
  return v;
}

Mapping EndToEndTscMapping(uint64_t j) {
  Mapping m;
  m.anchor_raw_ns = static_cast<int64_t>(3 * j + 1);
  m.anchor_global_ns = static_cast<int64_t>(1'000'000 * j + 2);
  m.bound_at_anchor_ns = static_cast<int64_t>(j << kTscShift);
  m.state = CLOCKSYNC_STATE_SYNCED;
  return m;
}

class EndToEndTscSeqlockTest : public ::testing::TestWithParam<Pace> {};

TEST_P(EndToEndTscSeqlockTest, NowNeverSeesATornWrite) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "Clock::Now() reads the TSC on x86-64 only";
#endif
  const Pace pace = GetParam();
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir != nullptr ? dir : "/tmp") + "/stress_tsc_" +
      PaceName(::testing::TestParamInfo<Pace>(pace, 0)) + ".shm";
  // Update j is stamped 13j, far below every reading's raw time + 5 s.
  uint64_t current_j = 0;
  ShmPublisher::Options options;
  options.raw_clock_ns = [&current_j] {
    return static_cast<int64_t>(13 * current_j);
  };
  absl::StatusOr<ShmPublisher> publisher =
      ShmPublisher::Open(path, std::move(options));
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  current_j = 1;
  ASSERT_TRUE(publisher->PublishTsc(EndToEndTscValues(1)).ok());
  ASSERT_TRUE(publisher->Publish(EndToEndTscMapping(1)).ok());
  absl::StatusOr<Clock> clock = Clock::Open(path);
  ASSERT_TRUE(clock.ok()) << clock.status();
  ASSERT_TRUE(clock->UsesTsc()) << "CLOCKSYNC_TSC=off in the environment?";

  std::atomic<bool> stop{false};
  std::vector<ReaderStats> stats(kReaders);
  RaceProgress progress;
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      ReaderStats& s = stats[r];
      uint64_t last_k = 0;
      uint64_t last_j = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const TimeReading t = clock->Now();
        if (t.error == CLOCKSYNC_EBUSY) {
          ++s.busy;
          continue;
        }
        // A TSC section read that overlapped a write makes Now() read
        // clock_gettime instead, a raw time far after every update stamp
        // here: stale. (A TSC reading is raw 5k < 13j + 5 s: never stale.)
        if (t.error == CLOCKSYNC_ESTALE) {
          ++s.fallback;
          continue;
        }
        const uint64_t both = static_cast<uint64_t>(t.latest_ns - t.global_ns - 1);
        const uint64_t j = both >> kTscShift;
        const uint64_t k = both & ((uint64_t{1} << kTscShift) - 1);
        const Mapping m = EndToEndTscMapping(j);
        const int64_t expected_global_ns = m.anchor_global_ns +
                                           static_cast<int64_t>(5 * k) -
                                           m.anchor_raw_ns;
        const int64_t expected_half_ns =
            m.bound_at_anchor_ns + static_cast<int64_t>(k);
        if (t.error != CLOCKSYNC_OK || k == 0 || j == 0 ||
            t.global_ns != expected_global_ns ||
            t.global_ns - t.earliest_ns != expected_half_ns) {
          ++s.torn;
          continue;
        }
        ++s.consistent;
        if (k < last_k || j < last_j) ++s.backwards;
        if (k != last_k) progress.Saw(r, ++s.distinct);
        last_k = k;
        last_j = j;
      }
    });
  }
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] {
    writes = 1 + RunWriter(pace, stop, [&](uint64_t k) {
               // Both only fail on a closed publisher or invalid input,
               // which k never makes.
               if (!publisher->PublishTsc(EndToEndTscValues(k + 1)).ok()) {
                 std::abort();
               }
               current_j = k + 1;
               if (!publisher->Publish(EndToEndTscMapping(k + 1)).ok()) {
                 std::abort();
               }
             });
  });
  RunUntilRaced(pace, progress);
  stop = true;
  writer.join();
  for (std::thread& reader : readers) reader.join();
  ExpectHealthy(stats, writes.load(), pace);
  EXPECT_LT(writes.load(), uint64_t{1} << kTscShift) << "k must fit its bits";
  // Only the (stale) fallback readings took the slow path that looks at
  // the file; TSC readings never did.
  uint64_t fallbacks = 0;
  for (const ReaderStats& s : stats) fallbacks += s.fallback;
  EXPECT_LE(clock->path_check_count(), fallbacks);
}

INSTANTIATE_TEST_SUITE_P(Paces, EndToEndTscSeqlockTest,
                         ::testing::Values(Pace::k1kHz, Pace::kTightLoop),
                         PaceName);

}  // namespace
}  // namespace clocksync
