// tools/trace/make_large_trace.cc
//
// Test-only: writes a synthetic run of any size as raw archives
// (trace/raw_archive.h), one process per rank with one thread, for
// measuring `clocksync-trace view` end to end (tools/trace/view_large_run.sh).
// The events follow trace/lod_benchmark.cc's generator: each thread loops
// entering one of 8 functions, half the time a nested one, every 8th loop
// a send to the next rank and a receive from the previous one (tag 1, so
// rank r's k-th send is rank r+1's k-th receive), every 1000th loop a
// barrier on the world; gaps of 200..2000 ns. Local clocks are the host's
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

namespace clocksync::trace {
namespace {

constexpr int64_t kStartRawNs = 1'000'000'000;
constexpr int64_t kGlobalOffsetNs = 1'700'000'000'000'000'000;

struct Rng {
  uint64_t s;
  uint64_t Next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};

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
  Rng rng{0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1)};
  int64_t at = kStartRawNs + static_cast<int64_t>(rng.Next() % 1000);
  std::vector<Event> chunk;
  int64_t written = 0;
  auto push = [&](Event e) -> absl::Status {
    at += 200 + static_cast<int64_t>(rng.Next() % 1800);
    e.stamp = hull::PackStamp(static_cast<uint64_t>(at - info.origin_ns), 0);
    chunk.push_back(e);
    ++written;
    if (chunk.size() >= (1u << 20)) {
      absl::Status s = (*writer)->AppendEvents(0, "main", chunk);
      chunk.clear();
      return s;
    }
    return absl::OkStatus();
  };
  auto enter = [](EventKind kind, uint32_t region) {
    Event e;
    e.kind = kind;
    e.region = region;
    return e;
  };
  auto message = [&](EventKind kind, int32_t peer, uint64_t k) {
    Event e;
    e.kind = kind;
    e.peer = peer;
    e.tag = 1;
    e.comm = kWorldCommunicator;
    e.bytes = 64 + k % 4096;
    return e;
  };
  auto barrier = [](EventKind kind) {
    Event e;
    e.kind = kind;
    e.collective = CollectiveKind::kBarrier;
    e.comm = kWorldCommunicator;
    return e;
  };
  uint64_t sends = 0;
  for (uint64_t loop = 0; written + 8 <= events; ++loop) {
    const uint32_t function = 1 + static_cast<uint32_t>(rng.Next() % 8);
    absl::Status s = push(enter(EventKind::kEnter, function));
    if (s.ok() && rng.Next() % 2 == 0) {
      s = push(enter(EventKind::kEnter, 9));
      if (s.ok()) s = push(enter(EventKind::kLeave, 9));
    }
    if (s.ok() && loop % 8 == 0) {
      s = push(message(EventKind::kSend, (rank + 1) % ranks, sends));
      if (s.ok()) s = push(message(EventKind::kRecv, (rank + ranks - 1) % ranks, sends));
      ++sends;
    }
    if (s.ok() && loop % 1000 == 0) {
      s = push(barrier(EventKind::kCollectiveBegin));
      if (s.ok()) s = push(barrier(EventKind::kCollectiveEnd));
    }
    if (s.ok()) s = push(enter(EventKind::kLeave, function));
    if (!s.ok()) return s;
  }
  if (absl::Status s = (*writer)->AppendEvents(0, "main", chunk); !s.ok()) return s;
  std::vector<Region> regions;
  for (uint32_t f = 1; f <= 9; ++f) {
    regions.push_back(Region{f, "function " + std::to_string(f)});
  }
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
