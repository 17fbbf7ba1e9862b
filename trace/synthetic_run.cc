// trace/synthetic_run.cc: the synthetic run's generator (synthetic_run.h).

#include "trace/synthetic_run.h"

#include <string>

namespace clocksync::trace {

std::vector<Region> SyntheticRunRegions() {
  std::vector<Region> regions;
  for (uint32_t f = 1; f <= 9; ++f) {
    regions.push_back(Region{f, "function " + std::to_string(f)});
  }
  return regions;
}

absl::Status GenerateSyntheticRank(
    int32_t rank, int32_t ranks, int64_t events, int64_t start_ns,
    absl::FunctionRef<absl::Status(const Event& event, int64_t time_ns)> emit) {
  XorShift64 rng{0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1)};
  int64_t at = start_ns + static_cast<int64_t>(rng.Next() % 1000);
  int64_t made = 0;
  auto push = [&](const Event& e) {
    at += 200 + static_cast<int64_t>(rng.Next() % 1800);
    ++made;
    return emit(e, at);
  };
  auto enter = [](EventKind kind, uint32_t region) {
    Event e;
    e.kind = kind;
    e.region = region;
    return e;
  };
  auto message = [](EventKind kind, int32_t peer, uint64_t k) {
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
  for (uint64_t loop = 0; made + 8 <= events; ++loop) {
    const uint32_t function = 1 + static_cast<uint32_t>(rng.Next() % 8);
    absl::Status s = push(enter(EventKind::kEnter, function));
    if (s.ok() && rng.Next() % 2 == 0) {
      s = push(enter(EventKind::kEnter, 9));
      if (s.ok()) s = push(enter(EventKind::kLeave, 9));
    }
    if (s.ok() && loop % 8 == 0) {
      s = push(message(EventKind::kSend, (rank + 1) % ranks, sends));
      if (s.ok()) {
        s = push(message(EventKind::kRecv, (rank + ranks - 1) % ranks, sends));
      }
      ++sends;
    }
    if (s.ok() && loop % 1000 == 0) {
      s = push(barrier(EventKind::kCollectiveBegin));
      if (s.ok()) s = push(barrier(EventKind::kCollectiveEnd));
    }
    if (s.ok()) s = push(enter(EventKind::kLeave, function));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace clocksync::trace
