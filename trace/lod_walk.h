// trace/lod_walk.h: what both level-of-detail forms (trace/lod.h, the
// bins of `clocksync-trace lod`, and trace/lod_index.h, the index the view
// queries) read from a thread: its events, and between two consecutive
// events the region innermost on its stack, with regions unified by name
// across processes and a collective operation (begin to end) counted as the
// region "collective <kind>".
//
// One pass over a thread's event array, no allocation per event: region ids
// are looked up in a dense per-process table (a hash map only for ids of
// 2^20 and above), the stack is a vector kept across threads.
//
// Example:
//   RegionTable regions;
//   RegionTable::Process& names = regions.ForProcess(p, trace);
//   WalkThread(thread.events, global_ns, names, &stack, &unmatched,
//              [&](const Event& e, int64_t at) { ... },
//              [&](uint32_t region, int64_t begin, int64_t end) { ... });
//
// Thread safety: none (a RegionTable is filled as it is asked).

#ifndef CLOCKSYNC_TRACE_LOD_WALK_H_
#define CLOCKSYNC_TRACE_LOD_WALK_H_

#include <array>
#include <deque>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "trace/trace.h"

namespace clocksync::trace {

// Region names, unified across processes, by first use.
class RegionTable {
 public:
  // One process's view: its region ids and collective kinds to indices
  // into names().
  class Process {
   public:
    uint32_t OfRegion(uint32_t id) {
      if (id < dense_.size() && dense_[id] != kUnknown) return dense_[id];
      return LookUp(id);
    }
    uint32_t OfCollective(CollectiveKind kind);

   private:
    uint32_t LookUp(uint32_t id);
    friend class RegionTable;
    static constexpr uint32_t kDenseIds = 1u << 20;
    static constexpr uint32_t kUnknown = ~0u;
    RegionTable* table_ = nullptr;
    const ProcessTrace* trace_ = nullptr;
    std::vector<uint32_t> dense_;  // id -> index, kUnknown until asked
    absl::flat_hash_map<uint32_t, uint32_t> sparse_;
    std::array<uint32_t, 9> collectives_;
  };

  // The view of process `p` (its definitions from `trace`, which must
  // outlive the table); the same object on every call for `p`.
  Process& ForProcess(size_t p, const ProcessTrace& trace);
  uint32_t OfName(const std::string& name);
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
  absl::flat_hash_map<std::string, uint32_t> index_;
  std::deque<Process> processes_;  // references stay valid as it grows
};

// What is open on a thread's stack, innermost last.
struct OpenRegion {
  uint32_t index;   // into RegionTable::names()
  uint32_t region;  // the trace's region id (enter/leave)
  bool collective;
};

// Calls on_event(event, at) for every event of the thread, then (from that
// event to the next, when a region is open and the time is not empty)
// on_interval(innermost region index, begin_ns, end_ns). A leave (or
// collective end) closes the innermost matching open region, and those
// above it; one matching nothing is counted in *unmatched_leaves.
template <typename OnEvent, typename OnInterval>
void WalkThread(absl::Span<const Event> events,
                absl::Span<const int64_t> global_ns,
                RegionTable::Process& regions, std::vector<OpenRegion>* stack,
                int64_t* unmatched_leaves, OnEvent&& on_event,
                OnInterval&& on_interval) {
  stack->clear();
  const size_t n = events.size();
  for (size_t i = 0; i < n; ++i) {
    const Event& e = events[i];
    const int64_t at = global_ns[i];
    on_event(e, at);
    switch (e.kind) {
      case EventKind::kEnter:
        stack->push_back(OpenRegion{regions.OfRegion(e.region), e.region, false});
        break;
      case EventKind::kCollectiveBegin:
        stack->push_back(
            OpenRegion{regions.OfCollective(e.collective), 0, true});
        break;
      case EventKind::kLeave:
      case EventKind::kCollectiveEnd: {
        const bool collective = e.kind == EventKind::kCollectiveEnd;
        size_t depth = stack->size();
        while (depth > 0 &&
               ((*stack)[depth - 1].collective != collective ||
                (!collective && (*stack)[depth - 1].region != e.region))) {
          --depth;
        }
        if (depth == 0) {
          ++*unmatched_leaves;
        } else {
          stack->resize(depth - 1);
        }
        break;
      }
      case EventKind::kSend:
      case EventKind::kRecv:
        break;
    }
    if (!stack->empty() && i + 1 < n && global_ns[i + 1] > at) {
      on_interval(stack->back().index, at, global_ns[i + 1]);
    }
  }
}

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_LOD_WALK_H_
