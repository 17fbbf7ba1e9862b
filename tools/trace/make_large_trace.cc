// tools/trace/make_large_trace.cc
//
// Test-only: writes a synthetic run of any size as raw archives
// (trace/raw_archive.h), one process per rank with one thread, for
// measuring `clocksync-trace view` end to end (tools/trace/view_large_run.sh).
// The events are trace/synthetic_run.h's (those trace/lod_benchmark.cc
// indexes): each thread loops entering one of 8 functions, half the time a
// nested one, every 8th loop a send to the next rank and a receive from
// the previous one (tag 1, so rank r's k-th send is rank r+1's k-th
// receive), every 1000th loop a barrier on the world; gaps of 200..2000
// ns. Local clocks are the host's
// raw clock; one mapping record per process puts global time at raw +
// 1.7e18 ns (online), rank r's record r * 1 us off. No sync sessions: the
// post-mortem corrections are unavailable.
//
//   make_large_trace DIR [--events=N] [--ranks=R]   (default 100 M, 64)
//
// Prints the archives' paths, one per line.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hull/trace_stamp.h"
#include "trace/raw_archive.h"
#include "trace/synthetic_run.h"

namespace clocksync::trace {
namespace {

constexpr int64_t kStartRawNs = 1'000'000'000;
constexpr int64_t kGlobalOffsetNs = 1'700'000'000'000'000'000;

absl::Status WriteRank(const std::string& dir, int32_t rank, int32_t ranks,
                       int64_t events) {
  ProcessInfo info;
  info.rank = rank;
  info.process_name = "large";
  info.pid = 10000 + rank;
  info.hostname = "localhost";
  info.origin_ns = kStartRawNs - 1000;
  absl::StatusOr<std::unique_ptr<RawArchiveWriter>> writer =
      RawArchiveWriter::Create(dir, info);
  if (!writer.ok()) return writer.status();
  std::vector<Event> chunk;
  absl::Status generated = GenerateSyntheticRank(
      rank, ranks, events, kStartRawNs,
      [&](const Event& event, int64_t at) -> absl::Status {
        Event e = event;
        e.stamp = hull::PackStamp(static_cast<uint64_t>(at - info.origin_ns), 0);
        chunk.push_back(e);
        if (chunk.size() >= (1u << 20)) {
          absl::Status s = (*writer)->AppendEvents(0, "main", chunk);
          chunk.clear();
          return s;
        }
        return absl::OkStatus();
      });
  if (!generated.ok()) return generated;
  if (absl::Status s = (*writer)->AppendEvents(0, "main", chunk); !s.ok()) return s;
  const std::vector<Region> regions = SyntheticRunRegions();
  Communicator world{kWorldCommunicator, "world", {}};
  for (int32_t r = 0; r < ranks; ++r) world.ranks.push_back(r);
  MappingRecord record;
  record.raw_ns = kStartRawNs - 1'000'000;
  record.local_ns = record.raw_ns;
  record.anchor_raw_ns = kStartRawNs;
  record.anchor_global_ns = kStartRawNs + kGlobalOffsetNs + rank * 1000;
  record.bound_at_anchor_ns = 500;
  record.bound_growth_ppb = 100;
  record.state = 2;  // CLOCKSYNC_STATE_SYNCED
  return (*writer)->Finish(regions, {world}, {record}, {}, std::nullopt);
}

int Run(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: make_large_trace DIR [--events=N] [--ranks=R]\n");
    return 1;
  }
  const std::string dir = argv[1];
  int64_t events = 100'000'000;
  int64_t ranks = 64;
  for (int i = 2; i < argc; ++i) {
    if (std::strncmp(argv[i], "--events=", 9) == 0) {
      events = std::atoll(argv[i] + 9);
    } else if (std::strncmp(argv[i], "--ranks=", 8) == 0) {
      ranks = std::atoll(argv[i] + 8);
    } else {
      std::fprintf(stderr, "make_large_trace: unknown argument '%s'\n", argv[i]);
      return 1;
    }
  }
  if (events < 1000 || ranks < 2 || ranks > 100000) {
    std::fprintf(stderr, "make_large_trace: --events must be >= 1000, --ranks in 2..100000\n");
    return 1;
  }
  for (int32_t r = 0; r < ranks; ++r) {
    const std::string archive = dir + "/rank" + std::to_string(r);
    if (absl::Status s = WriteRank(archive, r, static_cast<int32_t>(ranks), events / ranks);
        !s.ok()) {
      std::fprintf(stderr, "make_large_trace: %s\n", std::string(s.message()).c_str());
      return 2;
    }
    std::printf("%s\n", archive.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace clocksync::trace

int main(int argc, char** argv) { return clocksync::trace::Run(argc, argv); }
