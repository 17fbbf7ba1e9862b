// trace/synthetic_run.h: test-only: the synthetic run of any size that the
// level-of-detail benchmark (trace/lod_benchmark.cc) indexes and
// tools/trace/make_large_trace.cc writes as raw archives.
//
// Each rank has one thread, which loops: enter one of 8 functions (regions
// 1..8), half the time a nested one (region 9, entered and left), every
// 8th loop a send to the next rank and a receive from the previous one
// (tag 1, the world communicator, 64 + k % 4096 bytes for the k-th of
// each: rank r's k-th send is rank r+1's k-th receive), every 1000th loop
// a barrier on the world (begin, end), then leave the function. Times
// start within 1 us after the start and advance by 200..2000 ns (mean
// 1,100 ns) per event, drawn from a xorshift generator seeded by the rank:
// a rank's events are the same in every run.
//
// Example (one rank's events in memory):
//   std::vector<Event> events;
//   std::vector<int64_t> times;
//   absl::Status s = GenerateSyntheticRank(
//       0, 64, 1'000'000, start_ns, [&](const Event& e, int64_t time_ns) {
//         events.push_back(e);
//         times.push_back(time_ns);
//         return absl::OkStatus();
//       });

#ifndef CLOCKSYNC_TRACE_SYNTHETIC_RUN_H_
#define CLOCKSYNC_TRACE_SYNTHETIC_RUN_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "trace/trace.h"

namespace clocksync::trace {

// A 64-bit xorshift generator (13, 7, 17): the run's choices and gaps; the
// benchmark draws its query places from one too. `s` must not be 0.
struct XorShift64 {
  uint64_t s;
  uint64_t Next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};

// The run's regions: "function 1" .. "function 9" (ids 1..9).
std::vector<Region> SyntheticRunRegions();

// Generates the events of `rank` (0..ranks-1) of a run of `ranks`: whole
// loops (at most 8 events each) while no more than `events` are made,
// calling emit(event, time_ns) for each in time order; `event.stamp` is 0
// (the caller stamps it from time_ns as its clock wants), time_ns is
// strictly increasing from `start_ns`. Stops at emit's first error and
// returns it.
absl::Status GenerateSyntheticRank(
    int32_t rank, int32_t ranks, int64_t events, int64_t start_ns,
    absl::FunctionRef<absl::Status(const Event& event, int64_t time_ns)> emit);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_SYNTHETIC_RUN_H_
