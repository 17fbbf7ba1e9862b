// trace/lod_benchmark.cc: the level-of-detail index on a synthetic run of
// 100 M events (--events=N, --rows=R to change): build rate, file size and
// query times at every zoom from the whole run to a few slots.
//
// The run is trace/synthetic_run.h's with R ranks (one thread each): a
// function (one of 8), half the time a nested one, every 8th loop a send
// to the next thread and a receive from the previous, every 1000th loop a
// barrier on the world; gaps of 200..2000 ns. Threads are generated one at
// a time and handed to the
// builder (LodIndexBuilder::AddRow), so only the index is held; the time
// measured is the builder's (AddRow, AddMessages, Finish), not the
// generator's, in CPU seconds, and so is a query's (the wall times are
// printed too: on a shared machine they move with the load).
//
//   bazel run -c opt //trace:lod_benchmark
//   FIGURE lod_index_events_per_s <v> 1/s      (target >= 20 M/s)
//   FIGURE lod_query_ms_100m <v> ms            (worst query, CPU; target <= 100)
//   FIGURE lod_index_bytes_100m <v> bytes

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hull/trace_stamp.h"
#include "trace/lod_index.h"
#include "trace/lod_walk.h"
#include "trace/synthetic_run.h"

namespace clocksync::trace {
namespace {

using Clock = std::chrono::steady_clock;

// CPU time of this (single-threaded) process: on a shared machine the
// build rate is measured in CPU seconds, the wall time printed beside it.
double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Thread `row`'s events of `rows` (stamped by their index); the send and
// receive times go to sends / recvs.
void MakeThread(uint32_t row, int64_t rows, int64_t events, int64_t origin_ns,
                std::vector<Event>* out, std::vector<int64_t>* times,
                std::vector<int64_t>* sends, std::vector<int64_t>* recvs) {
  out->clear();
  times->clear();
  sends->clear();
  recvs->clear();
  uint64_t tick = 0;
  GenerateSyntheticRank(
      static_cast<int32_t>(row), static_cast<int32_t>(rows), events, origin_ns,
      [&](const Event& event, int64_t at) {
        // Kind and region only, as the index has always been measured (a
        // barrier's kind would change the file); messages are matched below.
        Event e;
        e.stamp = hull::PackStamp(tick++, 0);
        e.kind = event.kind;
        e.region = event.region;
        out->push_back(e);
        times->push_back(at);
        if (e.kind == EventKind::kSend) sends->push_back(at);
        if (e.kind == EventKind::kRecv) recvs->push_back(at);
        return absl::OkStatus();
      })
      .IgnoreError();  // the emit above never fails
}

int Run(int argc, char** argv) {
  int64_t total_events = 100'000'000;
  int64_t rows = 64;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--events=", 9) == 0) {
      total_events = std::atoll(argv[i] + 9);
    } else if (std::strncmp(argv[i], "--rows=", 7) == 0) {
      rows = std::atoll(argv[i] + 7);
    } else {
      std::fprintf(stderr, "lod_benchmark: unknown argument '%s' (--events=N --rows=R)\n",
                   argv[i]);
      return 1;
    }
  }
  if (total_events < 1000 || rows < 2) {
    std::fprintf(stderr, "lod_benchmark: --events must be >= 1000 and --rows >= 2\n");
    return 1;
  }
  const int64_t per_row = total_events / rows;
  constexpr int64_t kOrigin = 1'700'000'000'000'000'000;
  // The run's span, for the levels: the mean gap is 1,100 ns.
  ProcessTrace process;
  process.info.rank = 0;
  process.regions = SyntheticRunRegions();
  LodIndexData data;
  data.correction = hull::CorrectionKind::kOnline;
  ChooseLodLevels(kOrigin, kOrigin + per_row * 1100 + 2000, per_row * rows, rows,
                  &data);
  LodIndexBuilder builder(&data);
  RegionTable regions;
  RegionTable::Process& names = regions.ForProcess(0, process);

  std::vector<Event> events;
  std::vector<int64_t> times;
  std::vector<std::vector<int64_t>> sends(rows), recvs(rows);
  Clock::duration build{};
  double build_cpu_s = 0;
  int64_t indexed = 0;
  for (int64_t r = 0; r < rows; ++r) {
    MakeThread(static_cast<uint32_t>(r), rows, per_row, kOrigin, &events, &times,
               &sends[r], &recvs[r]);
    indexed += static_cast<int64_t>(events.size());
    const Clock::time_point start = Clock::now();
    const double cpu_start = CpuSeconds();
    builder.AddRow(LodIndexRow{static_cast<int32_t>(r), 0,
                               "rank " + std::to_string(r)},
                   events, times, names);
    build_cpu_s += CpuSeconds() - cpu_start;
    build += Clock::now() - start;
  }
  // Thread r's k-th send is thread r+1's k-th receive.
  std::vector<LodMessageInput> messages;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int64_t>& to = recvs[(r + 1) % rows];
    for (size_t k = 0; k < sends[r].size() && k < to.size(); ++k) {
      messages.push_back(LodMessageInput{sends[r][k], to[k], static_cast<uint32_t>(r),
                                         static_cast<uint32_t>((r + 1) % rows),
                                         64 + k % 4096});
    }
  }
  sends.clear();
  recvs.clear();
  events = {};
  times = {};
  const Clock::duration rows_time = build;
  const double rows_cpu_s = build_cpu_s;
  const Clock::time_point start = Clock::now();
  const double cpu_start = CpuSeconds();
  builder.AddMessages(messages);
  builder.Finish(regions);
  build_cpu_s += CpuSeconds() - cpu_start;
  build += Clock::now() - start;
  const size_t message_count = messages.size();
  size_t function_records = 0, message_records = 0;
  for (uint32_t k = 0; k < data.levels; ++k) {
    function_records += data.functions[k].records.size();
    message_records += data.messages[k].records.size();
  }
  messages = {};

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") +
                           "/lod_benchmark." + std::to_string(getpid()) + ".lodidx";
  const Clock::time_point write_start = Clock::now();
  if (absl::Status s = WriteLodIndex(data, path); !s.ok()) {
    std::fprintf(stderr, "lod_benchmark: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  const double write_s = Seconds(Clock::now() - write_start);
  data = LodIndexData{};
  const Clock::time_point open_start = Clock::now();
  absl::StatusOr<std::unique_ptr<LodIndex>> index = OpenLodIndex(path);
  const double open_s = Seconds(Clock::now() - open_start);
  if (!index.ok()) {
    std::fprintf(stderr, "lod_benchmark: %s\n", std::string(index.status().message()).c_str());
    return 2;
  }
  const LodIndex& lod = **index;
  std::printf("events %lld, rows %lld, messages %zu, levels %u, finest slot %lld ns\n",
              static_cast<long long>(indexed), static_cast<long long>(rows),
              message_count, lod.levels(), static_cast<long long>(lod.slot_ns(0)));
  std::printf("records: %zu functions, %zu messages\n", function_records,
              message_records);
  std::printf("rows %.3f s (%.3f s CPU), messages and collectives %.3f s (%.3f s CPU)\n",
              Seconds(rows_time), rows_cpu_s, Seconds(build - rows_time),
              build_cpu_s - rows_cpu_s);
  std::printf("build %.3f s (%.3f s CPU), write %.3f s, open and check %.3f s, file %zu bytes\n",
              Seconds(build), build_cpu_s, write_s, open_s, lod.file_bytes());

  // Queries: the whole run, then zooms by 10x down to a few slots, at
  // random places; 1920 px.
  XorShift64 rng{12345};
  double worst_ms = 0, worst_wall_ms = 0, sum_ms = 0;
  int queries = 0;
  const int64_t span = lod.end_ns() - lod.origin_ns();
  for (int64_t width = span; width >= lod.slot_ns(0) * 4; width /= 10) {
    for (int q = 0; q < 5; ++q) {
      const int64_t t0 =
          lod.origin_ns() + static_cast<int64_t>(rng.Next() % static_cast<uint64_t>(span - width + 1));
      const Clock::time_point qs = Clock::now();
      const double cpu_start = CpuSeconds();
      const LodAnswer answer = lod.Query(t0, t0 + width, 1920);
      const double cpu_ms = (CpuSeconds() - cpu_start) * 1e3;
      const double ms = Seconds(Clock::now() - qs) * 1e3;
      worst_ms = std::max(worst_ms, cpu_ms);
      worst_wall_ms = std::max(worst_wall_ms, ms);
      sum_ms += cpu_ms;
      ++queries;
      if (q == 0) {
        std::printf("  width %14lld ns: level %u, %zu functions, %zu messages, "
                    "%zu collectives, %.3f ms (%.3f ms CPU)\n",
                    static_cast<long long>(width), answer.level,
                    answer.functions.size(), answer.messages.size(),
                    answer.collectives.size(), ms, cpu_ms);
      }
    }
  }
  std::remove(path.c_str());
  std::printf("%d queries, mean %.3f ms CPU, worst %.3f ms wall\n", queries,
              sum_ms / queries, worst_wall_ms);
  std::printf("build rate %.0f events/s (wall)\n", indexed / Seconds(build));
  std::printf("FIGURE lod_index_events_per_s %.0f 1/s\n", indexed / build_cpu_s);
  std::printf("FIGURE lod_query_ms_100m %.3f ms\n", worst_ms);
  std::printf("FIGURE lod_index_bytes_100m %zu bytes\n", lod.file_bytes());
  return 0;
}

}  // namespace
}  // namespace clocksync::trace

int main(int argc, char** argv) { return clocksync::trace::Run(argc, argv); }
