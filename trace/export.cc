// trace/export.cc: text, Chrome JSON and merged OTF2 output of a timeline.

#include "trace/export.h"

#include <errno.h>
#include <otf2/otf2.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "trace/otf2_common.h"
#include "trace/sidecar.h"

namespace clocksync::trace {
namespace {

std::string RegionName(const ProcessTrace& trace, uint32_t id) {
  for (const Region& r : trace.regions) {
    if (r.id == id) return r.name;
  }
  return absl::StrCat("region ", id);
}

// ns since base as µs with exactly three decimals.
std::string Microseconds(int64_t ns_since_base) {
  const bool negative = ns_since_base < 0;
  const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(ns_since_base)
                                      : static_cast<uint64_t>(ns_since_base);
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%s%llu.%03llu", negative ? "-" : "",
                static_cast<unsigned long long>(magnitude / 1000),
                static_cast<unsigned long long>(magnitude % 1000));
  return buffer;
}

int64_t EarliestGlobalNs(const Timeline& timeline) {
  int64_t earliest = std::numeric_limits<int64_t>::max();
  for (const ProcessTimeline& p : timeline.processes) {
    if (!p.available) continue;
    for (const std::vector<int64_t>& thread : p.global_ns) {
      if (!thread.empty()) earliest = std::min(earliest, thread.front());
    }
  }
  return earliest == std::numeric_limits<int64_t>::max() ? 0 : earliest;
}

}  // namespace

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
      out += buffer;
    } else {
      out.push_back(ch);
    }
  }
  out.push_back('"');
  return out;
}

void WriteMergedText(absl::Span<const ProcessTrace> traces,
                     const Timeline& timeline, std::ostream& out) {
  for (const TimedEvent& t : MergedEvents(timeline)) {
    const ProcessTrace& trace = traces[t.process];
    const Event& e = trace.threads[t.thread].events[t.index];
    std::string line = absl::StrCat(t.global_ns, " rank=", trace.info.rank,
                                    " thread=", trace.threads[t.thread].thread_index,
                                    " ", EventKindName(e.kind));
    switch (e.kind) {
      case EventKind::kEnter:
      case EventKind::kLeave:
        absl::StrAppend(&line, " region=",
                        sidecar::Encode(RegionName(trace, e.region)));
        break;
      case EventKind::kSend:
      case EventKind::kRecv:
        absl::StrAppend(&line, " peer=", e.peer, " tag=", e.tag,
                        " comm=", e.comm, " bytes=", e.bytes);
        break;
      case EventKind::kCollectiveBegin:
      case EventKind::kCollectiveEnd:
        absl::StrAppend(&line, " op=", CollectiveKindName(e.collective),
                        " root=", e.peer, " comm=", e.comm, " bytes=", e.bytes);
        break;
    }
    absl::StrAppend(&line, " local_ns=", t.local_ns, "\n");
    out << line;
  }
}

void WriteChromeJson(absl::Span<const ProcessTrace> traces,
                     const Timeline& timeline, const MessageMatch& messages,
                     std::ostream& out) {
  const int64_t base_ns = EarliestGlobalNs(timeline);
  // Flow ids: 1 + index of the matched message, at both of its ends.
  std::map<std::tuple<int32_t, uint32_t, uint32_t>, size_t> flow_of_send,
      flow_of_recv;
  for (size_t m = 0; m < messages.pairs.size(); ++m) {
    const MessagePair& p = messages.pairs[m];
    flow_of_send[{p.send_process, p.send_thread, p.send_index}] = m + 1;
    flow_of_recv[{p.recv_process, p.recv_thread, p.recv_index}] = m + 1;
  }
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"correction\":"
      << JsonString(hull::CorrectionKindName(timeline.kind))
      << ",\"base_global_ns\":" << base_ns << "},\n\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& event) {
    out << (first ? "" : ",\n") << event;
    first = false;
  };
  for (size_t p = 0; p < traces.size(); ++p) {
    if (!timeline.processes[p].available) continue;
    const ProcessTrace& trace = traces[p];
    const int32_t pid = trace.info.rank;
    emit(absl::StrCat(
        "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":", pid,
        ",\"args\":{\"name\":",
        JsonString(absl::StrCat("rank ", pid, " ", trace.info.process_name, "@",
                                trace.info.hostname)),
        "}}"));
    emit(absl::StrCat("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":",
                      pid, ",\"args\":{\"sort_index\":", pid, "}}"));
    for (const ThreadTrace& thread : trace.threads) {
      emit(absl::StrCat("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid,
                        ",\"tid\":", thread.thread_index,
                        ",\"args\":{\"name\":", JsonString(thread.name), "}}"));
    }
  }
  for (const TimedEvent& t : MergedEvents(timeline)) {
    const ProcessTrace& trace = traces[t.process];
    const Event& e = trace.threads[t.thread].events[t.index];
    const std::string where =
        absl::StrCat("\"pid\":", trace.info.rank,
                     ",\"tid\":", trace.threads[t.thread].thread_index,
                     ",\"ts\":", Microseconds(t.global_ns - base_ns));
    switch (e.kind) {
      case EventKind::kEnter:
      case EventKind::kLeave:
        emit(absl::StrCat("{\"ph\":\"", e.kind == EventKind::kEnter ? "B" : "E",
                          "\",\"cat\":\"region\",\"name\":",
                          JsonString(RegionName(trace, e.region)), ",", where,
                          "}"));
        break;
      case EventKind::kCollectiveBegin:
      case EventKind::kCollectiveEnd:
        emit(absl::StrCat(
            "{\"ph\":\"", e.kind == EventKind::kCollectiveBegin ? "B" : "E",
            "\",\"cat\":\"collective\",\"name\":",
            JsonString(CollectiveKindName(e.collective)), ",", where,
            ",\"args\":{\"comm\":", e.comm, ",\"root\":", e.peer,
            e.kind == EventKind::kCollectiveBegin ? ",\"bytes_sent\":"
                                                  : ",\"bytes_received\":",
            e.bytes, "}}"));
        break;
      case EventKind::kSend:
      case EventKind::kRecv: {
        const bool send = e.kind == EventKind::kSend;
        emit(absl::StrCat("{\"ph\":\"X\",\"dur\":0,\"cat\":\"message\",\"name\":\"",
                          send ? "send" : "recv", "\",", where,
                          ",\"args\":{\"peer\":", e.peer, ",\"tag\":", e.tag,
                          ",\"comm\":", e.comm, ",\"bytes\":", e.bytes, "}}"));
        const auto& flows = send ? flow_of_send : flow_of_recv;
        auto it = flows.find({t.process, t.thread, t.index});
        if (it != flows.end()) {
          emit(absl::StrCat("{\"ph\":\"", send ? "s" : "f",
                            "\",\"cat\":\"message\",\"name\":\"message\",\"id\":",
                            it->second, send ? "" : ",\"bp\":\"e\"", ",", where,
                            "}"));
        }
        break;
      }
    }
  }
  out << "\n]}\n";
}

absl::Status WriteMergedOtf2(absl::Span<const ProcessTrace> traces,
                             const Timeline& timeline,
                             const std::string& archive_dir) {
  if (mkdir(archive_dir.c_str(), 0755) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot create ", archive_dir, ": ", std::strerror(errno)));
  }
  InstallOtf2ErrorCapture();
  ClearOtf2Error();
  const std::string anchor =
      absl::StrCat(archive_dir, "/", "traces.otf2");
  OTF2_Archive* archive = OTF2_Archive_Open(
      archive_dir.c_str(), "traces", OTF2_FILEMODE_WRITE, kOtf2EventChunkBytes,
      kOtf2DefinitionChunkBytes, OTF2_SUBSTRATE_POSIX, OTF2_COMPRESSION_NONE);
  if (archive == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot open OTF2 archive in ", archive_dir, ": ", LastOtf2Error()));
  }
  auto fail = [&](absl::string_view what) {
    // An archive whose writing failed is abandoned, not closed (see
    // Otf2Writer::AppendEvents).
    return absl::UnavailableError(absl::StrCat("OTF2 error ", what, " ",
                                               anchor, ": ", LastOtf2Error()));
  };
  if (SetFlushCallbacks(archive) != OTF2_SUCCESS ||
      SetStreamingMemoryCallbacks(archive) != OTF2_SUCCESS ||
      OTF2_Archive_SetSerialCollectiveCallbacks(archive) != OTF2_SUCCESS ||
      OTF2_Archive_SetCreator(archive, "clocksync-trace export") !=
          OTF2_SUCCESS ||
      OTF2_Archive_SetDescription(
          archive,
          absl::StrCat("clocksync traces merged with the ",
                       hull::CorrectionKindName(timeline.kind), " correction")
              .c_str()) != OTF2_SUCCESS ||
      OTF2_Archive_OpenEvtFiles(archive) != OTF2_SUCCESS) {
    return fail("setting up");
  }

  // Regions unified by name; communicators by name and ranks (each process
  // numbers its own: processes attached at different times define the
  // same group under different ids, and one id names different groups in
  // different processes); the world (id 0) is its first definition. A
  // communicator keeps the id of its first definition when that is free.
  std::map<std::string, uint32_t> region_ids;
  std::map<uint32_t, Communicator> comms;  // by unified id
  std::map<std::pair<std::string, std::vector<int32_t>>, uint32_t> comm_ids;
  // Per process: its communicator ids -> unified ids.
  std::vector<absl::flat_hash_map<uint32_t, uint32_t>> comm_of(traces.size());
  auto unify_comm = [&](const Communicator& c) -> uint32_t {
    if (c.id == kWorldCommunicator) {
      comms.emplace(kWorldCommunicator, c);
      return kWorldCommunicator;
    }
    auto [it, inserted] = comm_ids.emplace(std::make_pair(c.name, c.ranks), 0);
    if (!inserted) return it->second;
    uint32_t id = c.id;
    while (id == kWorldCommunicator || comms.count(id) != 0) ++id;
    it->second = id;
    Communicator unified = c;
    unified.id = id;
    comms.emplace(id, std::move(unified));
    return id;
  };
  int32_t world_size = 0;
  for (size_t p = 0; p < traces.size(); ++p) {
    if (!timeline.processes[p].available) continue;
    world_size = std::max(world_size, traces[p].info.rank + 1);
    for (const Communicator& c : traces[p].communicators) {
      comm_of[p][c.id] = unify_comm(c);
      for (int32_t r : c.ranks) world_size = std::max(world_size, r + 1);
    }
  }
  auto region_id = [&](const std::string& name) {
    auto [it, inserted] =
        region_ids.emplace(name, static_cast<uint32_t>(region_ids.size()));
    return it->second;
  };

  int64_t earliest = std::numeric_limits<int64_t>::max();
  int64_t latest = std::numeric_limits<int64_t>::min();
  struct LocationInfo {
    uint64_t id;
    std::string name;
    uint64_t events;
    int32_t rank;
  };
  std::vector<LocationInfo> locations;
  for (size_t p = 0; p < traces.size(); ++p) {
    const ProcessTimeline& process = timeline.processes[p];
    if (!process.available) continue;
    const ProcessTrace& trace = traces[p];
    // This process's region ids -> unified ids, looked up once per id (the
    // per-event path is a hash lookup, not a name search).
    // An event's communicator, unified (one the process never defined is
    // "comm <id>" without ranks).
    auto unified_comm = [&](uint32_t id) {
      auto it = comm_of[p].find(id);
      if (it != comm_of[p].end()) return it->second;
      const uint32_t u =
          unify_comm(Communicator{id, absl::StrCat("comm ", id), {}});
      comm_of[p].emplace(id, u);
      return u;
    };
    absl::flat_hash_map<uint32_t, uint32_t> unified;
    auto unified_region = [&](uint32_t id) {
      auto it = unified.find(id);
      if (it != unified.end()) return it->second;
      const uint32_t u = region_id(RegionName(trace, id));
      unified.emplace(id, u);
      return u;
    };
    for (size_t t = 0; t < trace.threads.size(); ++t) {
      const ThreadTrace& thread = trace.threads[t];
      const uint64_t location = Otf2LocationId(trace.info.rank, thread.thread_index);
      OTF2_EvtWriter* writer = OTF2_Archive_GetEvtWriter(archive, location);
      if (writer == nullptr) return fail("opening events in");
      std::vector<uint64_t> open_collective_bytes;
      for (size_t i = 0; i < thread.events.size(); ++i) {
        const Event& e = thread.events[i];
        const int64_t global = process.global_ns[t][i];
        earliest = std::min(earliest, global);
        latest = std::max(latest, global);
        // OTF2 timestamps are unsigned; global ns before 1970 clamp to 0.
        const OTF2_TimeStamp time = global < 0 ? 0 : static_cast<uint64_t>(global);
        OTF2_ErrorCode code = OTF2_SUCCESS;
        switch (e.kind) {
          case EventKind::kEnter:
            code = OTF2_EvtWriter_Enter(writer, nullptr, time,
                                        unified_region(e.region));
            break;
          case EventKind::kLeave:
            code = OTF2_EvtWriter_Leave(writer, nullptr, time,
                                        unified_region(e.region));
            break;
          case EventKind::kSend:
            code = OTF2_EvtWriter_MpiSend(writer, nullptr, time,
                                          static_cast<uint32_t>(e.peer),
                                          unified_comm(e.comm), e.tag, e.bytes);
            break;
          case EventKind::kRecv:
            code = OTF2_EvtWriter_MpiRecv(writer, nullptr, time,
                                          static_cast<uint32_t>(e.peer),
                                          unified_comm(e.comm), e.tag, e.bytes);
            break;
          case EventKind::kCollectiveBegin:
            open_collective_bytes.push_back(e.bytes);
            code = OTF2_EvtWriter_MpiCollectiveBegin(writer, nullptr, time);
            break;
          case EventKind::kCollectiveEnd: {
            uint64_t sent = 0;
            if (!open_collective_bytes.empty()) {
              sent = open_collective_bytes.back();
              open_collective_bytes.pop_back();
            }
            code = OTF2_EvtWriter_MpiCollectiveEnd(
                writer, nullptr, time, ToOtf2CollectiveOp(e.collective),
                unified_comm(e.comm), static_cast<uint32_t>(e.peer), sent,
                e.bytes);
            break;
          }
        }
        if (code != OTF2_SUCCESS || Otf2ErrorPending()) {
          return fail("writing events to");
        }
        if (e.kind == EventKind::kCollectiveBegin) unified_comm(e.comm);
      }
      if (OTF2_Archive_CloseEvtWriter(archive, writer) != OTF2_SUCCESS ||
          Otf2ErrorPending()) {
        return fail("closing events in");
      }
      locations.push_back(LocationInfo{location, thread.name,
                                       thread.events.size(), trace.info.rank});
    }
  }
  if (OTF2_Archive_CloseEvtFiles(archive) != OTF2_SUCCESS ||
      OTF2_Archive_OpenDefFiles(archive) != OTF2_SUCCESS) {
    return fail("closing event files of");
  }
  for (const LocationInfo& l : locations) {
    OTF2_DefWriter* local = OTF2_Archive_GetDefWriter(archive, l.id);
    if (local == nullptr ||
        OTF2_Archive_CloseDefWriter(archive, local) != OTF2_SUCCESS) {
      return fail("writing local definitions of");
    }
  }
  if (OTF2_Archive_CloseDefFiles(archive) != OTF2_SUCCESS) {
    return fail("closing definition files of");
  }
  OTF2_GlobalDefWriter* defs = OTF2_Archive_GetGlobalDefWriter(archive);
  if (defs == nullptr) return fail("opening definitions of");
  if (earliest > latest) earliest = latest = 0;
  const uint64_t offset = earliest < 0 ? 0 : static_cast<uint64_t>(earliest);
  bool ok = OTF2_GlobalDefWriter_WriteClockProperties(
                defs, 1'000'000'000, offset,
                static_cast<uint64_t>(latest - earliest) + 1,
                OTF2_UNDEFINED_TIMESTAMP) == OTF2_SUCCESS;
  Otf2StringTable strings;
  for (const auto& [name, id] : region_ids) strings.Ref(name);
  for (const LocationInfo& l : locations) strings.Ref(l.name);
  for (int32_t r = 0; r < world_size; ++r) strings.Ref(absl::StrCat("rank ", r));
  for (auto& [id, c] : comms) {
    if (id == kWorldCommunicator && c.ranks.empty()) {
      for (int32_t r = 0; r < world_size; ++r) c.ranks.push_back(r);
    }
    strings.Ref(c.name);
  }
  strings.Ref("cluster");
  strings.Ref("node");
  strings.Ref("world locations");
  strings.Ref("");
  for (const auto& [s, ref] : strings.in_order()) {
    ok = ok && OTF2_GlobalDefWriter_WriteString(defs, ref, s->c_str()) ==
                   OTF2_SUCCESS;
  }
  ok = ok && OTF2_GlobalDefWriter_WriteSystemTreeNode(
                 defs, 0, strings.Ref("cluster"), strings.Ref("node"),
                 OTF2_UNDEFINED_SYSTEM_TREE_NODE) == OTF2_SUCCESS;
  std::vector<bool> group_written(world_size, false);
  for (const LocationInfo& l : locations) group_written[l.rank] = true;
  for (int32_t r = 0; r < world_size; ++r) {
    if (!group_written[r]) continue;
    ok = ok && OTF2_GlobalDefWriter_WriteLocationGroup(
                   defs, static_cast<OTF2_LocationGroupRef>(r),
                   strings.Ref(absl::StrCat("rank ", r)),
                   OTF2_LOCATION_GROUP_TYPE_PROCESS, 0,
                   OTF2_UNDEFINED_LOCATION_GROUP) == OTF2_SUCCESS;
  }
  for (const LocationInfo& l : locations) {
    ok = ok && OTF2_GlobalDefWriter_WriteLocation(
                   defs, l.id, strings.Ref(l.name), OTF2_LOCATION_TYPE_CPU_THREAD,
                   l.events, static_cast<OTF2_LocationGroupRef>(l.rank)) ==
                   OTF2_SUCCESS;
  }
  std::vector<std::pair<uint32_t, std::string>> regions;
  for (const auto& [name, id] : region_ids) regions.emplace_back(id, name);
  std::sort(regions.begin(), regions.end());
  for (const auto& [id, name] : regions) {
    ok = ok && OTF2_GlobalDefWriter_WriteRegion(
                   defs, id, strings.Ref(name), strings.Ref(name),
                   strings.Ref(""), OTF2_REGION_ROLE_FUNCTION,
                   OTF2_PARADIGM_USER, OTF2_REGION_FLAG_NONE, strings.Ref(""),
                   0, 0) == OTF2_SUCCESS;
  }
  std::vector<uint64_t> world_locations;
  for (int32_t r = 0; r < world_size; ++r) {
    world_locations.push_back(Otf2LocationId(r, 0));
  }
  ok = ok && OTF2_GlobalDefWriter_WriteGroup(
                 defs, kOtf2CommLocationsGroup, strings.Ref("world locations"),
                 OTF2_GROUP_TYPE_COMM_LOCATIONS, OTF2_PARADIGM_MPI,
                 OTF2_GROUP_FLAG_NONE,
                 static_cast<uint32_t>(world_locations.size()),
                 world_locations.data()) == OTF2_SUCCESS;
  OTF2_GroupRef group = 1;
  for (const auto& [id, c] : comms) {
    std::vector<uint64_t> members(c.ranks.begin(), c.ranks.end());
    ok = ok &&
         OTF2_GlobalDefWriter_WriteGroup(
             defs, group, strings.Ref(c.name), OTF2_GROUP_TYPE_COMM_GROUP,
             OTF2_PARADIGM_MPI, OTF2_GROUP_FLAG_NONE,
             static_cast<uint32_t>(members.size()), members.data()) ==
             OTF2_SUCCESS &&
         OTF2_GlobalDefWriter_WriteComm(defs, id, strings.Ref(c.name), group,
                                        OTF2_UNDEFINED_COMM,
                                        OTF2_COMM_FLAG_NONE) == OTF2_SUCCESS;
    ++group;
  }
  if (!ok || Otf2ErrorPending()) return fail("writing definitions of");
  if (OTF2_Archive_Close(archive) != OTF2_SUCCESS) return fail("closing");
  return absl::OkStatus();
}

}  // namespace clocksync::trace
