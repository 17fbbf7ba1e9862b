// trace/lod_walk.cc: the unified region table of the level-of-detail walk
// (see lod_walk.h).

#include "trace/lod_walk.h"

#include "absl/strings/str_cat.h"

namespace clocksync::trace {

RegionTable::Process& RegionTable::ForProcess(size_t p,
                                              const ProcessTrace& trace) {
  if (processes_.size() <= p) processes_.resize(p + 1);
  Process& process = processes_[p];
  if (process.table_ == nullptr) {
    process.table_ = this;
    process.trace_ = &trace;
    process.collectives_.fill(Process::kUnknown);
  }
  return process;
}

uint32_t RegionTable::OfName(const std::string& name) {
  auto [it, fresh] =
      index_.try_emplace(name, static_cast<uint32_t>(names_.size()));
  if (fresh) names_.push_back(name);
  return it->second;
}

uint32_t RegionTable::Process::LookUp(uint32_t id) {
  if (id >= kDenseIds) {
    if (auto it = sparse_.find(id); it != sparse_.end()) return it->second;
  }
  std::string name = absl::StrCat("region ", id);
  for (const Region& def : trace_->regions) {
    if (def.id == id) name = def.name;
  }
  const uint32_t index = table_->OfName(name);
  if (id < kDenseIds) {
    if (dense_.size() <= id) dense_.resize(id + 1, kUnknown);
    dense_[id] = index;
  } else {
    sparse_[id] = index;
  }
  return index;
}

uint32_t RegionTable::Process::OfCollective(CollectiveKind kind) {
  const size_t k = static_cast<size_t>(kind) < collectives_.size()
                       ? static_cast<size_t>(kind)
                       : collectives_.size() - 1;
  if (collectives_[k] == kUnknown) {
    collectives_[k] = table_->OfName(
        absl::StrCat("collective ", CollectiveKindName(kind)));
  }
  return collectives_[k];
}

}  // namespace clocksync::trace
