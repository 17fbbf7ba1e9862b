// tracer/trace_records.cc: definitions, mapping records and sync sessions
// of a tracing session (trace_records.h).

#include "tracer/trace_records.h"

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tracer/recording.h"

namespace clocksync {
namespace tracer {

void TraceRecords::DefineWorld() {
  std::lock_guard<OwnedMutex> lock(mutex_);
  trace::Communicator world;
  world.id = trace::kWorldCommunicator;
  world.name = "world";
  for (int32_t r = 0; r < world_size_; ++r) world.ranks.push_back(r);
  communicators_.push_back(world);
  dirty_ = true;
  for (auto& size : g_comm_size) size.store(0, std::memory_order_relaxed);
  g_comm_size[0].store(world_size_ > 0 ? world_size_ : INT32_MAX,
                       std::memory_order_release);
  g_hot.region_count.store(0, std::memory_order_relaxed);
}

uint32_t TraceRecords::DefineRegion(absl::string_view name) {
  std::lock_guard<OwnedMutex> lock(mutex_);
  for (const trace::Region& region : regions_) {
    if (region.name == name) return region.id;
  }
  const uint32_t id = static_cast<uint32_t>(regions_.size());
  regions_.push_back(trace::Region{id, std::string(name)});
  dirty_ = true;
  g_hot.region_count.store(id + 1, std::memory_order_release);
  return id;
}

absl::StatusOr<uint32_t> TraceRecords::DefineCommunicator(
    absl::string_view name, absl::Span<const int32_t> ranks) {
  if (ranks.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator '", name, "': no ranks"));
  }
  std::vector<int32_t> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  const int32_t limit = rank_limit_.load(std::memory_order_acquire);
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || (limit > 0 && sorted[i] >= limit)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "communicator '", name, "': rank ", sorted[i],
          limit > world_size_ ? " outside the run (ranks: "
                              : " outside the world (size ",
          limit > 0 ? absl::StrCat(limit) : std::string("unknown"), ")"));
    }
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "communicator '", name, "': rank ", sorted[i], " listed twice"));
    }
  }
  std::lock_guard<OwnedMutex> lock(mutex_);
  if (communicators_.size() >= kMaxCommunicators) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "communicator '", name, "': at most ", kMaxCommunicators - 1,
        " communicators"));
  }
  const uint32_t id = static_cast<uint32_t>(communicators_.size());
  communicators_.push_back(trace::Communicator{
      id, std::string(name), std::vector<int32_t>(ranks.begin(), ranks.end())});
  dirty_ = true;
  g_comm_size[id].store(static_cast<int32_t>(ranks.size()),
                        std::memory_order_release);
  return id;
}

void TraceRecords::AllowRanksBelow(int32_t ranks_in_run) {
  int32_t limit = rank_limit_.load(std::memory_order_relaxed);
  while (limit > 0 && ranks_in_run > limit &&
         !rank_limit_.compare_exchange_weak(limit, ranks_in_run,
                                            std::memory_order_acq_rel)) {
  }
}

void TraceRecords::RecordMapping(const MappingValues& v, int64_t raw_ns,
                                 int64_t local_ns) {
  std::lock_guard<OwnedMutex> lock(mutex_);
  if (have_last_mapping_ && last_mapping_.anchor_raw_ns == v.anchor_raw_ns &&
      last_mapping_.anchor_global_ns == v.anchor_global_ns &&
      last_mapping_.rate_adj_q64 == v.rate_adj_q64 &&
      last_mapping_.bound_at_anchor_ns == v.bound_at_anchor_ns &&
      last_mapping_.bound_growth_q36 == v.bound_growth_q36 &&
      last_mapping_.status == v.status) {
    return;  // republished unchanged
  }
  // Records stay in raw order even when two threads race to record.
  if (!mappings_.empty() && raw_ns < mappings_.back().raw_ns) {
    raw_ns = mappings_.back().raw_ns;
    local_ns = std::max(local_ns, mappings_.back().local_ns);
  }
  trace::MappingRecord record;
  record.local_ns = local_ns;
  record.raw_ns = raw_ns;
  record.anchor_raw_ns = v.anchor_raw_ns;
  record.anchor_global_ns = v.anchor_global_ns;
  record.rate_adj = shm::RateAdjFromQ64(v.rate_adj_q64);
  record.bound_at_anchor_ns = v.bound_at_anchor_ns;
  record.bound_growth_ppb = shm::BoundGrowthQ36ToPpb(v.bound_growth_q36);
  record.state = v.status & CLOCKSYNC_STATUS_STATE_MASK;
  record.flags = v.status & ~uint32_t{CLOCKSYNC_STATUS_STATE_MASK};
  mappings_.push_back(record);
  dirty_ = true;
  last_mapping_ = v;
  have_last_mapping_ = true;
}

void TraceRecords::AddSession(trace::SyncSession session) {
  std::lock_guard<OwnedMutex> lock(mutex_);
  exchanges_ += session.exchanges.size();
  sessions_.push_back(std::move(session));
  dirty_ = true;
}

void TraceRecords::AddStats(TracerStats* stats) {
  std::lock_guard<OwnedMutex> lock(mutex_);
  stats->mapping_records = mappings_.size();
  stats->sync_sessions = sessions_.size();
  stats->sync_exchanges = exchanges_;
}

}  // namespace tracer
}  // namespace clocksync
