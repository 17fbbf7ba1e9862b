// collector/wire.cc: the protocol's messages to and from the trace model,
// checked (wire.h).

#include "collector/wire.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace clocksync::collector {
namespace {

absl::Status CheckName(const std::string& field, const std::string& value) {
  if (value.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", value.size(), " bytes, more than ", kMaxNameBytes));
  }
  return absl::OkStatus();
}

}  // namespace

void ToProto(const trace::ProcessInfo& info, ProcessInfo* out) {
  out->set_process_name(info.process_name);
  out->set_pid(info.pid);
  out->set_hostname(info.hostname);
  out->set_node_id(info.node_id);
  out->set_shm_path(info.shm_path);
  out->set_origin_ns(info.origin_ns);
  out->set_tick_period_ns(info.tick_period_ns);
}

absl::StatusOr<trace::ProcessInfo> FromProto(const ProcessInfo& in,
                                             int32_t rank) {
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string*>{"hello.process.process_name",
                                                   &in.process_name()},
        {"hello.process.hostname", &in.hostname()},
        {"hello.process.node_id", &in.node_id()},
        {"hello.process.shm_path", &in.shm_path()}}) {
    if (absl::Status s = CheckName(field, *value); !s.ok()) return s;
  }
  if (!(in.tick_period_ns() > 0) || !std::isfinite(in.tick_period_ns())) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello.process.tick_period_ns: ", in.tick_period_ns(),
                     " is not a positive number"));
  }
  trace::ProcessInfo info;
  info.rank = rank;
  info.process_name = in.process_name();
  info.pid = in.pid();
  info.hostname = in.hostname();
  info.node_id = in.node_id();
  info.shm_path = in.shm_path();
  info.origin_ns = in.origin_ns();
  info.tick_period_ns = in.tick_period_ns();
  return info;
}

void AppendRecords(const std::vector<trace::Region>& regions,
                   const std::vector<trace::Communicator>& communicators,
                   const std::vector<trace::MappingRecord>& mappings,
                   const std::vector<trace::SyncSession>& sessions,
                   const std::optional<trace::GroundTruth>& truth,
                   Records* out) {
  for (const trace::Region& r : regions) {
    Region* m = out->add_regions();
    m->set_id(r.id);
    m->set_name(r.name);
  }
  for (const trace::Communicator& c : communicators) {
    Communicator* m = out->add_communicators();
    m->set_id(c.id);
    m->set_name(c.name);
    for (int32_t rank : c.ranks) m->add_ranks(rank);
  }
  for (const trace::MappingRecord& r : mappings) {
    MappingRecord* m = out->add_mappings();
    m->set_local_ns(r.local_ns);
    m->set_raw_ns(r.raw_ns);
    m->set_anchor_raw_ns(r.anchor_raw_ns);
    m->set_anchor_global_ns(r.anchor_global_ns);
    m->set_rate_adj(r.rate_adj);
    m->set_bound_at_anchor_ns(r.bound_at_anchor_ns);
    m->set_bound_growth_ppb(r.bound_growth_ppb);
    m->set_state(r.state);
    m->set_flags(r.flags);
  }
  for (const trace::SyncSession& s : sessions) {
    SyncSession* m = out->add_sessions();
    m->set_kind(static_cast<uint32_t>(s.kind));
    for (const hull::ProbeSample& x : s.exchanges) {
      Exchange* e = m->add_exchanges();
      e->set_t1_ns(x.t1_ns);
      e->set_t2_ns(x.t2_ns);
      e->set_t3_ns(x.t3_ns);
      e->set_t4_ns(x.t4_ns);
    }
  }
  if (truth.has_value()) {
    GroundTruth* m = out->mutable_truth();
    m->set_clock_model_spec(truth->clock_model_spec);
    m->set_model_origin_raw_ns(truth->model_origin_raw_ns);
    m->set_master_offset_ns(truth->master_offset_ns);
  }
}

absl::StatusOr<DecodedRecords> FromProto(const Records& in,
                                         int32_t world_size) {
  DecodedRecords out;
  for (int i = 0; i < in.regions_size(); ++i) {
    const Region& m = in.regions(i);
    if (absl::Status s = CheckName(absl::StrCat("records.regions[", i, "].name"),
                                   m.name());
        !s.ok()) {
      return s;
    }
    out.regions.push_back(trace::Region{m.id(), m.name()});
  }
  for (int i = 0; i < in.communicators_size(); ++i) {
    const Communicator& m = in.communicators(i);
    const std::string field = absl::StrCat("records.communicators[", i, "]");
    if (absl::Status s = CheckName(field + ".name", m.name()); !s.ok()) {
      return s;
    }
    trace::Communicator c{m.id(), m.name(), {}};
    for (int j = 0; j < m.ranks_size(); ++j) {
      const int32_t rank = m.ranks(j);
      if (rank < 0 || (world_size > 0 && rank >= world_size)) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".ranks[", j, "]: ", rank, " is not a rank of the run (",
            world_size, " ranks)"));
      }
      c.ranks.push_back(rank);
    }
    out.communicators.push_back(std::move(c));
  }
  for (int i = 0; i < in.mappings_size(); ++i) {
    const MappingRecord& m = in.mappings(i);
    if (!std::isfinite(m.rate_adj()) || !std::isfinite(m.bound_growth_ppb())) {
      return absl::InvalidArgumentError(
          absl::StrCat("records.mappings[", i, "]: rate_adj ", m.rate_adj(),
                       " or bound_growth_ppb ", m.bound_growth_ppb(),
                       " is not finite"));
    }
    trace::MappingRecord r;
    r.local_ns = m.local_ns();
    r.raw_ns = m.raw_ns();
    r.anchor_raw_ns = m.anchor_raw_ns();
    r.anchor_global_ns = m.anchor_global_ns();
    r.rate_adj = m.rate_adj();
    r.bound_at_anchor_ns = m.bound_at_anchor_ns();
    r.bound_growth_ppb = m.bound_growth_ppb();
    r.state = m.state();
    r.flags = m.flags();
    out.mappings.push_back(r);
  }
  for (int i = 0; i < in.sessions_size(); ++i) {
    const SyncSession& m = in.sessions(i);
    if (m.kind() > static_cast<uint32_t>(trace::SyncSessionKind::kFinalize)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "records.sessions[", i, "].kind: ", m.kind(),
          " is not a session kind (0..3)"));
    }
    trace::SyncSession s;
    s.kind = static_cast<trace::SyncSessionKind>(m.kind());
    for (const Exchange& e : m.exchanges()) {
      hull::ProbeSample x;
      x.t1_ns = e.t1_ns();
      x.t2_ns = e.t2_ns();
      x.t3_ns = e.t3_ns();
      x.t4_ns = e.t4_ns();
      s.exchanges.push_back(x);
    }
    out.sessions.push_back(std::move(s));
  }
  if (in.has_truth()) {
    const GroundTruth& m = in.truth();
    if (absl::Status s =
            CheckName("records.truth.clock_model_spec", m.clock_model_spec());
        !s.ok()) {
      return s;
    }
    out.truth = trace::GroundTruth{m.clock_model_spec(),
                                   m.model_origin_raw_ns(),
                                   m.master_offset_ns()};
  }
  return out;
}

}  // namespace clocksync::collector
