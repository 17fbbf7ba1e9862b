// trace/trace.cc: small helpers of the trace data model.

#include "trace/trace.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "hull/trace_stamp.h"

namespace clocksync::trace {

absl::string_view EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kEnter:
      return "enter";
    case EventKind::kLeave:
      return "leave";
    case EventKind::kSend:
      return "send";
    case EventKind::kRecv:
      return "recv";
    case EventKind::kCollectiveBegin:
      return "collective_begin";
    case EventKind::kCollectiveEnd:
      return "collective_end";
  }
  return "unknown";
}

absl::string_view CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kBarrier:
      return "barrier";
    case CollectiveKind::kBcast:
      return "bcast";
    case CollectiveKind::kGather:
      return "gather";
    case CollectiveKind::kScatter:
      return "scatter";
    case CollectiveKind::kReduce:
      return "reduce";
    case CollectiveKind::kAllreduce:
      return "allreduce";
    case CollectiveKind::kAlltoall:
      return "alltoall";
    case CollectiveKind::kAllgather:
      return "allgather";
    case CollectiveKind::kOther:
      return "other";
  }
  return "unknown";
}

absl::string_view SyncSessionKindName(SyncSessionKind kind) {
  switch (kind) {
    case SyncSessionKind::kInit:
      return "init";
    case SyncSessionKind::kTimesync:
      return "timesync";
    case SyncSessionKind::kPeriodic:
      return "periodic";
    case SyncSessionKind::kFinalize:
      return "finalize";
  }
  return "unknown";
}

namespace {

int64_t SaturateToInt64(long double value) {
  if (!(value == value)) return 0;  // NaN
  if (value >= 9.2233720368547758e18L) return std::numeric_limits<int64_t>::max();
  if (value <= -9.2233720368547758e18L) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

}  // namespace

int64_t MappingRecord::BoundAtRaw(int64_t raw) const {
  const __int128 dt = static_cast<__int128>(raw) - anchor_raw_ns;
  const long double abs_dt = static_cast<long double>(dt < 0 ? -dt : dt);
  return SaturateToInt64(static_cast<long double>(bound_at_anchor_ns) +
                         std::ceil(abs_dt * bound_growth_ppb * 1e-9L));
}

int64_t StampToLocalNs(const ProcessInfo& info, uint64_t stamp) {
  const hull::StampClock clock{info.origin_ns, info.tick_period_ns};
  return clock.TickToNs(hull::StampTick(stamp));
}

}  // namespace clocksync::trace
