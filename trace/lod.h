// trace/lod.h: level-of-detail timelines. What every thread of a run was
// doing, in fixed bins of global time, at several zoom levels: a viewer (or
// a terminal) draws a run of any size from them without its events.
//
// A row is one thread of one process. In each bin, the row's time is split
// between the regions that were innermost (on top of the thread's region
// stack) and time with no region open; the events, the sends and the
// receives that fall in the bin are counted. Times add up, so a bin of
// level k+1 (twice as wide) is exactly the sum of two bins of level k.
// Regions are unified by name across processes; a collective operation
// (begin to end) counts as the region "collective <kind>".
//
// Example:
//   absl::StatusOr<Timeline> timeline = BuildTimeline(traces, kind);
//   LodOptions options;
//   options.bins = 120;
//   absl::StatusOr<Lod> lod = BuildLod(traces, *timeline, options);
//   std::cout << FormatLodText(*lod, 0);
//
// Thread safety: pure functions.

#ifndef CLOCKSYNC_TRACE_LOD_H_
#define CLOCKSYNC_TRACE_LOD_H_

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trace/timeline.h"
#include "trace/trace.h"

namespace clocksync::trace {

struct LodOptions {
  // The global time range [from_ns, to_ns); the defaults take the run's
  // first event and the ns after its last.
  int64_t from_ns = std::numeric_limits<int64_t>::min();
  int64_t to_ns = std::numeric_limits<int64_t>::max();
  // Bins of the finest level (1..1'000'000); each coarser level has half as
  // many (rounded up), twice as wide.
  int32_t bins = 1024;
  // Levels, the finest first (1..30).
  int32_t levels = 1;
};

struct LodRow {
  int32_t process = 0;  // index into the traces
  int32_t rank = 0;
  uint32_t thread = 0;  // ThreadTrace::thread_index
  std::string name;     // the thread's name
};

struct LodBin {
  // ns spent with each region innermost, by index into Lod::regions, in
  // ascending index order; regions with no time are left out.
  std::vector<std::pair<uint32_t, int64_t>> region_ns;
  int64_t events = 0;
  int64_t sends = 0;
  int64_t recvs = 0;

  int64_t busy_ns() const;
  // The region with the most time in the bin (the lowest index on a tie),
  // or -1 when no region was open in it.
  int32_t dominant() const;
};

struct LodLevel {
  int64_t bin_ns = 0;
  int32_t bins = 0;
  std::vector<std::vector<LodBin>> rows;  // [row][bin]
};

struct Lod {
  int64_t from_ns = 0;
  int64_t to_ns = 0;
  std::vector<std::string> regions;  // names, by index
  std::vector<LodRow> rows;          // by process, then thread
  std::vector<LodLevel> levels;      // the finest first
  // Leaves (and collective ends) without a matching enter (begin): ignored.
  int64_t unmatched_leaves = 0;
};

// Bins the available processes of `timeline`. InvalidArgument names a bad
// option; FailedPrecondition when there is no event in the range's
// defaults (an empty run) or from_ns >= to_ns.
absl::StatusOr<Lod> BuildLod(absl::Span<const ProcessTrace> traces,
                             const Timeline& timeline,
                             const LodOptions& options);

// One level as text for a terminal: a legend (one character per region,
// the busiest first: A-Z a-z 0-9, then '*' for the rest; '.' no region
// open), then a line per row with the dominant region of each bin.
std::string FormatLodText(const Lod& lod, int level);

// Every level as JSON, on one line:
// {"from_ns","to_ns","regions":[name...],"rows":[{"rank","thread","name"}],
//  "unmatched_leaves","levels":[{"bin_ns","bins","rows":[[{"dominant",
//  "busy_ns","region_ns":[[region,ns]...],"events","sends","recvs"}...]...]}]}
void WriteLodJson(const Lod& lod, std::ostream& out);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_LOD_H_
