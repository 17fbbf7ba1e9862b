// trace/otf2_reader.cc: an archive back into a ProcessTrace: the OTF2
// definitions and events through the OTF2 reader API, and the sidecar; the
// repair of incomplete archives is in otf2_repair.cc.

#include "trace/otf2_reader.h"

#include <otf2/otf2.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "trace/otf2_common.h"
#include "trace/otf2_repair.h"
#include "trace/otf2_writer.h"
#include "trace/raw_archive.h"
#include "trace/sidecar.h"

namespace clocksync::trace {
namespace {

// --- definitions -------------------------------------------------------------

struct LocationDef {
  OTF2_StringRef name = OTF2_UNDEFINED_STRING;
  uint64_t events = 0;
  OTF2_LocationGroupRef group = OTF2_UNDEFINED_LOCATION_GROUP;
};

struct GroupDef {
  OTF2_GroupType type = OTF2_GROUP_TYPE_UNKNOWN;
  std::vector<uint64_t> members;
};

struct CommDef {
  OTF2_StringRef name = OTF2_UNDEFINED_STRING;
  OTF2_GroupRef group = OTF2_UNDEFINED_GROUP;
};

struct Definitions {
  uint64_t timer_resolution = 0;
  uint64_t trace_length = 0;
  std::map<OTF2_StringRef, std::string> strings;
  std::map<OTF2_LocationRef, LocationDef> locations;
  std::map<OTF2_RegionRef, OTF2_StringRef> regions;
  std::map<OTF2_GroupRef, GroupDef> groups;
  std::map<OTF2_CommRef, CommDef> comms;

  std::string String(OTF2_StringRef ref) const {
    auto it = strings.find(ref);
    return it == strings.end() ? std::string() : it->second;
  }
};

OTF2_CallbackCode OnClockProperties(void* user, uint64_t resolution,
                                    uint64_t /*offset*/, uint64_t length,
                                    uint64_t /*realtime*/) {
  auto* defs = static_cast<Definitions*>(user);
  defs->timer_resolution = resolution;
  defs->trace_length = length;
  return OTF2_CALLBACK_SUCCESS;
}

OTF2_CallbackCode OnString(void* user, OTF2_StringRef self, const char* s) {
  static_cast<Definitions*>(user)->strings[self] = s != nullptr ? s : "";
  return OTF2_CALLBACK_SUCCESS;
}

OTF2_CallbackCode OnLocation(void* user, OTF2_LocationRef self,
                             OTF2_StringRef name, OTF2_LocationType /*type*/,
                             uint64_t events, OTF2_LocationGroupRef group) {
  static_cast<Definitions*>(user)->locations[self] =
      LocationDef{name, events, group};
  return OTF2_CALLBACK_SUCCESS;
}

OTF2_CallbackCode OnRegion(void* user, OTF2_RegionRef self, OTF2_StringRef name,
                           OTF2_StringRef, OTF2_StringRef, OTF2_RegionRole,
                           OTF2_Paradigm, OTF2_RegionFlag, OTF2_StringRef,
                           uint32_t, uint32_t) {
  static_cast<Definitions*>(user)->regions[self] = name;
  return OTF2_CALLBACK_SUCCESS;
}

OTF2_CallbackCode OnGroup(void* user, OTF2_GroupRef self, OTF2_StringRef,
                          OTF2_GroupType type, OTF2_Paradigm, OTF2_GroupFlag,
                          uint32_t count, const uint64_t* members) {
  GroupDef& group = static_cast<Definitions*>(user)->groups[self];
  group.type = type;
  group.members.assign(members, members + count);
  return OTF2_CALLBACK_SUCCESS;
}

OTF2_CallbackCode OnComm(void* user, OTF2_CommRef self, OTF2_StringRef name,
                         OTF2_GroupRef group, OTF2_CommRef /*parent*/,
                         OTF2_CommFlag /*flags*/) {
  static_cast<Definitions*>(user)->comms[self] = CommDef{name, group};
  return OTF2_CALLBACK_SUCCESS;
}

// --- events ------------------------------------------------------------------

struct LocationEvents {
  std::vector<Event> events;
  std::vector<size_t> open_collectives;  // indices of begins without end
  uint64_t other_records = 0;            // record types clocksync never writes
};

LocationEvents* Events(void* user) { return static_cast<LocationEvents*>(user); }

OTF2_CallbackCode OnEnter(OTF2_LocationRef, OTF2_TimeStamp time, uint64_t,
                          void* user, OTF2_AttributeList*,
                          OTF2_RegionRef region) {
  Event e;
  e.stamp = time;
  e.kind = EventKind::kEnter;
  e.region = region;
  Events(user)->events.push_back(e);
  return OTF2_CALLBACK_SUCCESS;
}

OTF2_CallbackCode OnLeave(OTF2_LocationRef, OTF2_TimeStamp time, uint64_t,
                          void* user, OTF2_AttributeList*,
                          OTF2_RegionRef region) {
  Event e;
  e.stamp = time;
  e.kind = EventKind::kLeave;
  e.region = region;
  Events(user)->events.push_back(e);
  return OTF2_CALLBACK_SUCCESS;
}

Event Message(EventKind kind, OTF2_TimeStamp time, uint32_t peer,
              OTF2_CommRef comm, uint32_t tag, uint64_t bytes) {
  Event e;
  e.stamp = time;
  e.kind = kind;
  e.peer = static_cast<int32_t>(peer);
  e.comm = comm;
  e.tag = tag;
  e.bytes = bytes;
  return e;
}

OTF2_CallbackCode OnSend(OTF2_LocationRef, OTF2_TimeStamp time, uint64_t,
                         void* user, OTF2_AttributeList*, uint32_t receiver,
                         OTF2_CommRef comm, uint32_t tag, uint64_t length) {
  Events(user)->events.push_back(
      Message(EventKind::kSend, time, receiver, comm, tag, length));
  return OTF2_CALLBACK_SUCCESS;
}

OTF2_CallbackCode OnRecv(OTF2_LocationRef, OTF2_TimeStamp time, uint64_t,
                         void* user, OTF2_AttributeList*, uint32_t sender,
                         OTF2_CommRef comm, uint32_t tag, uint64_t length) {
  Events(user)->events.push_back(
      Message(EventKind::kRecv, time, sender, comm, tag, length));
  return OTF2_CALLBACK_SUCCESS;
}

OTF2_CallbackCode OnCollectiveBegin(OTF2_LocationRef, OTF2_TimeStamp time,
                                    uint64_t, void* user,
                                    OTF2_AttributeList*) {
  LocationEvents* state = Events(user);
  Event e;
  e.stamp = time;
  e.kind = EventKind::kCollectiveBegin;
  // Operation, communicator, root and bytes sent arrive with the end.
  state->open_collectives.push_back(state->events.size());
  state->events.push_back(e);
  return OTF2_CALLBACK_SUCCESS;
}

OTF2_CallbackCode OnCollectiveEnd(OTF2_LocationRef, OTF2_TimeStamp time,
                                  uint64_t, void* user, OTF2_AttributeList*,
                                  OTF2_CollectiveOp op, OTF2_CommRef comm,
                                  uint32_t root, uint64_t sent,
                                  uint64_t received) {
  LocationEvents* state = Events(user);
  Event e;
  e.stamp = time;
  e.kind = EventKind::kCollectiveEnd;
  e.collective = FromOtf2CollectiveOp(op);
  e.comm = comm;
  e.peer = static_cast<int32_t>(root);
  e.bytes = received;
  if (!state->open_collectives.empty()) {
    Event& begin = state->events[state->open_collectives.back()];
    state->open_collectives.pop_back();
    begin.collective = e.collective;
    begin.comm = comm;
    begin.peer = e.peer;
    begin.bytes = sent;
  }
  state->events.push_back(e);
  return OTF2_CALLBACK_SUCCESS;
}

OTF2_CallbackCode OnUnknown(OTF2_LocationRef, OTF2_TimeStamp, uint64_t,
                            void* user, OTF2_AttributeList*) {
  ++Events(user)->other_records;
  return OTF2_CALLBACK_SUCCESS;
}

// --- helpers -----------------------------------------------------------------

struct ReaderCloser {
  void operator()(OTF2_Reader* reader) const { OTF2_Reader_Close(reader); }
};
using ReaderPtr = std::unique_ptr<OTF2_Reader, ReaderCloser>;

absl::Status Otf2Failure(const std::string& path, absl::string_view what,
                         OTF2_ErrorCode code) {
  std::string detail = LastOtf2Error();
  if (detail.empty()) {
    detail = absl::StrCat(OTF2_Error_GetName(code), ": ",
                          OTF2_Error_GetDescription(code));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": ", what, ": ", detail));
}

// Opens the anchor file at `anchor` and reads the global definitions.
absl::StatusOr<ReaderPtr> OpenAndReadDefinitions(const std::string& anchor,
                                                 Definitions* defs) {
  ClearOtf2Error();
  ReaderPtr reader(OTF2_Reader_Open(anchor.c_str()));
  if (reader == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        anchor, ": not a readable OTF2 anchor file: ", LastOtf2Error()));
  }
  OTF2_ErrorCode code = OTF2_Reader_SetSerialCollectiveCallbacks(reader.get());
  if (code != OTF2_SUCCESS) {
    return Otf2Failure(anchor, "setting up the reader", code);
  }
  OTF2_GlobalDefReader* global = OTF2_Reader_GetGlobalDefReader(reader.get());
  if (global == nullptr) {
    return Otf2Failure(anchor, "opening the global definitions",
                       OTF2_ERROR_FILE_CAN_NOT_OPEN);
  }
  OTF2_GlobalDefReaderCallbacks* callbacks = OTF2_GlobalDefReaderCallbacks_New();
  OTF2_GlobalDefReaderCallbacks_SetClockPropertiesCallback(callbacks,
                                                           OnClockProperties);
  OTF2_GlobalDefReaderCallbacks_SetStringCallback(callbacks, OnString);
  OTF2_GlobalDefReaderCallbacks_SetLocationCallback(callbacks, OnLocation);
  OTF2_GlobalDefReaderCallbacks_SetRegionCallback(callbacks, OnRegion);
  OTF2_GlobalDefReaderCallbacks_SetGroupCallback(callbacks, OnGroup);
  OTF2_GlobalDefReaderCallbacks_SetCommCallback(callbacks, OnComm);
  code = OTF2_Reader_RegisterGlobalDefCallbacks(reader.get(), global, callbacks,
                                                defs);
  OTF2_GlobalDefReaderCallbacks_Delete(callbacks);
  if (code != OTF2_SUCCESS) {
    return Otf2Failure(anchor, "registering definition callbacks", code);
  }
  uint64_t read = 0;
  code = OTF2_Reader_ReadAllGlobalDefinitions(reader.get(), global, &read);
  if (code != OTF2_SUCCESS) {
    return Otf2Failure(
        absl::StrCat(anchor.substr(0, anchor.size() - 5), ".def"),
        "reading the global definitions", code);
  }
  return reader;
}

// Reads every location's events. On an OTF2 error while decoding a
// location's events, returns the error; events decoded up to then stay in
// `out`.
absl::Status ReadAllEvents(OTF2_Reader* reader, const std::string& evt_dir,
                           const Definitions& defs,
                           const std::set<OTF2_LocationRef>& skip,
                           std::map<OTF2_LocationRef, LocationEvents>* out) {
  for (const auto& [location, def] : defs.locations) {
    if (skip.count(location) != 0) continue;
    OTF2_ErrorCode code = OTF2_Reader_SelectLocation(reader, location);
    if (code != OTF2_SUCCESS) {
      return Otf2Failure(evt_dir, "selecting a location", code);
    }
  }
  OTF2_ErrorCode code = OTF2_Reader_OpenDefFiles(reader);
  if (code != OTF2_SUCCESS) {
    return Otf2Failure(evt_dir, "opening local definition files", code);
  }
  for (const auto& [location, def] : defs.locations) {
    if (skip.count(location) != 0) continue;
    // Local definitions (empty from our writer) may carry id mappings that
    // OTF2 applies to the events; a missing file is fine.
    OTF2_DefReader* local = OTF2_Reader_GetDefReader(reader, location);
    if (local != nullptr) {
      uint64_t read = 0;
      (void)OTF2_Reader_ReadAllLocalDefinitions(reader, local, &read);
      (void)OTF2_Reader_CloseDefReader(reader, local);
    }
  }
  (void)OTF2_Reader_CloseDefFiles(reader);
  code = OTF2_Reader_OpenEvtFiles(reader);
  if (code != OTF2_SUCCESS) {
    return Otf2Failure(evt_dir, "opening event files", code);
  }
  absl::Status status;
  for (const auto& [location, def] : defs.locations) {
    if (skip.count(location) != 0) continue;
    const std::string path = absl::StrCat(evt_dir, "/", location, ".evt");
    ClearOtf2Error();
    OTF2_EvtReader* events = OTF2_Reader_GetEvtReader(reader, location);
    if (events == nullptr) {
      status = Otf2Failure(path, "opening events", OTF2_ERROR_FILE_CAN_NOT_OPEN);
      break;
    }
    LocationEvents& state = (*out)[location];
    OTF2_EvtReaderCallbacks* callbacks = OTF2_EvtReaderCallbacks_New();
    OTF2_EvtReaderCallbacks_SetEnterCallback(callbacks, OnEnter);
    OTF2_EvtReaderCallbacks_SetLeaveCallback(callbacks, OnLeave);
    OTF2_EvtReaderCallbacks_SetMpiSendCallback(callbacks, OnSend);
    OTF2_EvtReaderCallbacks_SetMpiRecvCallback(callbacks, OnRecv);
    OTF2_EvtReaderCallbacks_SetMpiCollectiveBeginCallback(callbacks,
                                                          OnCollectiveBegin);
    OTF2_EvtReaderCallbacks_SetMpiCollectiveEndCallback(callbacks,
                                                        OnCollectiveEnd);
    OTF2_EvtReaderCallbacks_SetUnknownCallback(callbacks, OnUnknown);
    code = OTF2_Reader_RegisterEvtCallbacks(reader, events, callbacks, &state);
    OTF2_EvtReaderCallbacks_Delete(callbacks);
    if (code == OTF2_SUCCESS) {
      uint64_t read = 0;
      code = OTF2_Reader_ReadAllLocalEvents(reader, events, &read);
    }
    (void)OTF2_Reader_CloseEvtReader(reader, events);
    if (code != OTF2_SUCCESS) {
      status = Otf2Failure(path, "reading events", code);
      break;
    }
  }
  (void)OTF2_Reader_CloseEvtFiles(reader);
  return status;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

absl::StatusOr<ProcessTrace> ReadProcessTrace(const std::string& archive_dir) {
  // The collector's raw archives (trace/raw_archive.h) read the same way.
  if (IsRawArchive(archive_dir)) return ReadRawArchive(archive_dir);
  InstallOtf2ErrorCapture();
  struct stat st;
  if (stat(archive_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(
        absl::StrCat(archive_dir, ": no such trace directory"));
  }
  const std::string sidecar_path =
      absl::StrCat(archive_dir, "/", kSidecarFileName);
  std::string anchor =
      absl::StrCat(archive_dir, "/", kOtf2ArchiveName, ".otf2");
  const std::string evt_dir = absl::StrCat(archive_dir, "/", kOtf2ArchiveName);
  if (!FileExists(sidecar_path)) {
    return absl::NotFoundError(absl::StrCat(
        sidecar_path, ": missing (not a clocksync trace directory?)"));
  }
  absl::StatusOr<std::string> sidecar_text = repair::ReadWholeFile(sidecar_path);
  if (!sidecar_text.ok()) return sidecar_text.status();
  absl::StatusOr<sidecar::Contents> side =
      sidecar::Parse(*sidecar_text, sidecar_path);
  if (!side.ok()) return side.status();

  ProcessTrace trace;
  trace.info = side->info;
  trace.mappings = std::move(side->mappings);
  trace.sessions = std::move(side->sessions);
  trace.truth = std::move(side->truth);
  std::vector<std::string> notes;
  if (!side->complete) notes.push_back(side->incomplete_note);

  // The definitions are rebuilt from the sidecar when the anchor is missing
  // (the process was killed before it could finish the archive) or, in a
  // finished archive whose end line has their checksums, when the anchor or
  // the global definitions do not match (damaged: OTF2 may take seconds
  // over a damaged anchor before it gives up).
  std::string rebuild_reason;
  if (!FileExists(anchor)) {
    rebuild_reason =
        side->complete
            ? absl::StrCat(anchor, " is missing (the archive was finished)")
            : "not finished by its process (killed?)";
  } else if (side->checksums.has_value()) {
    const std::string defs_path =
        absl::StrCat(archive_dir, "/", kOtf2ArchiveName, ".def");
    absl::StatusOr<uint64_t> anchor_sum = sidecar::FileChecksum(anchor);
    absl::StatusOr<uint64_t> defs_sum = sidecar::FileChecksum(defs_path);
    if (!anchor_sum.ok() || *anchor_sum != side->checksums->anchor) {
      rebuild_reason = absl::StrCat(anchor, " is damaged (not the file the "
                                            "writer finished)");
    } else if (!defs_sum.ok() || *defs_sum != side->checksums->definitions) {
      rebuild_reason = absl::StrCat(defs_path, " is damaged (not the file "
                                               "the writer finished)");
    }
  }
  std::string definitions_dir = archive_dir;
  repair::TempDir recovered;
  const bool recovering = !rebuild_reason.empty();
  if (recovering) {
    absl::Status status = recovered.Create();
    if (status.ok()) {
      status = repair::WriteRecoveredDefinitions(archive_dir, *side, recovered.path());
    }
    if (!status.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          archive_dir, ": ", rebuild_reason,
          ", and its definitions cannot be rebuilt: ", status.message()));
    }
    definitions_dir = recovered.path();
    anchor = absl::StrCat(definitions_dir, "/", kOtf2ArchiveName, ".otf2");
    notes.push_back(absl::StrCat(
        archive_dir, ": ", rebuild_reason,
        ": definitions rebuilt from the sidecar",
        side->complete ? "" : "; the events it had not written yet are lost"));
  }

  Definitions defs;
  absl::StatusOr<ReaderPtr> reader = OpenAndReadDefinitions(anchor, &defs);
  if (!reader.ok()) return reader.status();
  uint64_t chunk_bytes = 0, def_chunk_bytes = 0;
  if (OTF2_Reader_GetChunkSize(reader->get(), &chunk_bytes, &def_chunk_bytes) !=
          OTF2_SUCCESS ||
      chunk_bytes == 0) {
    chunk_bytes = kOtf2EventChunkBytes;
  }

  // Event files that do not end with OTF2's end-of-file marker were cut
  // (or their writer stopped): read a repaired copy instead.
  std::map<std::string, std::string> repaired;
  std::set<OTF2_LocationRef> skip;  // no whole event left
  for (const auto& [location, def] : defs.locations) {
    const std::string name = absl::StrCat(location, ".evt");
    const std::string path = absl::StrCat(evt_dir, "/", name);
    if (!FileExists(path)) {
      if (def.events == 0) {
        skip.insert(location);
        continue;
      }
      return absl::NotFoundError(absl::StrCat(
          path, ": missing, but the definitions announce ", def.events,
          " events"));
    }
    absl::StatusOr<std::string> data = repair::ReadWholeFile(path);
    if (!data.ok()) return data.status();
    repair::EventFileCheck check = repair::CheckEventFile(*data, chunk_bytes);
    if (check.intact) continue;
    notes.push_back(absl::StrCat(path, ": ", check.what, " (", data->size(),
                                 " bytes, chunks of ", chunk_bytes,
                                 "); read up to its last whole event"));
    if (check.repaired.empty()) skip.insert(location);
    repaired[name] = std::move(check.repaired);
  }
  repair::TempDir repair;
  if (!repaired.empty() || recovering) {
    reader->reset();
    absl::Status status = repair.Create();
    if (status.ok()) {
      status = repair::WriteRepairedCopy(archive_dir, definitions_dir, repair.path(),
                                 repaired);
    }
    if (!status.ok()) return status;
    Definitions again;
    reader = OpenAndReadDefinitions(
        absl::StrCat(repair.path(), "/", kOtf2ArchiveName, ".otf2"), &again);
    if (!reader.ok()) return reader.status();
  }

  std::map<OTF2_LocationRef, LocationEvents> events;
  absl::Status read_status =
      ReadAllEvents(reader->get(), evt_dir, defs, skip, &events);
  if (!read_status.ok()) {
    // A damaged file that is not cut: keep what was decoded, say so.
    notes.push_back(absl::StrCat(read_status.message(),
                                 "; events after the damage are lost"));
  }

  // Definitions -> model.
  for (const auto& [id, name] : defs.regions) {
    trace.regions.push_back(Region{id, defs.String(name)});
  }
  std::vector<uint64_t> comm_locations;
  if (auto it = defs.groups.find(kOtf2CommLocationsGroup);
      it != defs.groups.end() &&
      it->second.type == OTF2_GROUP_TYPE_COMM_LOCATIONS) {
    comm_locations = it->second.members;
  }
  for (const auto& [id, def] : defs.comms) {
    Communicator comm{id, defs.String(def.name), {}};
    auto group = defs.groups.find(def.group);
    if (group != defs.groups.end()) {
      for (uint64_t member : group->second.members) {
        // Members index the COMM_LOCATIONS group; its entries are locations
        // whose high 32 bits are the program rank.
        const uint64_t location = member < comm_locations.size()
                                      ? comm_locations[member]
                                      : member << 32;
        comm.ranks.push_back(static_cast<int32_t>(location >> 32));
      }
    }
    trace.communicators.push_back(std::move(comm));
  }
  uint64_t total_events = 0;
  for (const auto& [location, def] : defs.locations) {
    ThreadTrace thread;
    thread.thread_index = static_cast<uint32_t>(location & 0xFFFFFFFFu);
    thread.name = defs.String(def.name);
    auto it = events.find(location);
    if (it != events.end()) {
      thread.events = std::move(it->second.events);
      // Records of other types (other_records: a foreign archive) are
      // skipped; they do not make the trace incomplete.
    }
    if (thread.events.size() < def.events) {
      if (repaired.empty() && read_status.ok()) {
        notes.push_back(absl::StrCat(
            evt_dir, "/", location, ".evt: ", thread.events.size(), " of ",
            def.events, " events announced (file cut at a chunk boundary)"));
      }
    }
    total_events += thread.events.size();
    trace.threads.push_back(std::move(thread));
  }
  std::sort(trace.threads.begin(), trace.threads.end(),
            [](const ThreadTrace& a, const ThreadTrace& b) {
              return a.thread_index < b.thread_index;
            });
  // Regions events use but no definition names (in a rebuilt archive: one
  // defined just before its process was killed) are named "region N", as
  // the writer names them.
  std::set<uint32_t> undefined_regions;
  {
    std::set<uint32_t> defined;
    for (const Region& r : trace.regions) defined.insert(r.id);
    for (const ThreadTrace& thread : trace.threads) {
      for (const Event& e : thread.events) {
        if ((e.kind == EventKind::kEnter || e.kind == EventKind::kLeave) &&
            !defined.count(e.region)) {
          undefined_regions.insert(e.region);
        }
      }
    }
  }
  for (uint32_t id : undefined_regions) {
    trace.regions.push_back(Region{id, absl::StrCat("region ", id)});
  }
  std::sort(trace.regions.begin(), trace.regions.end(),
            [](const Region& a, const Region& b) { return a.id < b.id; });
  if (side->complete && notes.empty() && total_events != side->end_events) {
    notes.push_back(absl::StrCat(archive_dir, ": ", total_events,
                                 " events read, the writer wrote ",
                                 side->end_events));
  }
  if (!notes.empty()) {
    trace.truncated = true;
    for (size_t i = 0; i < notes.size(); ++i) {
      absl::StrAppend(&trace.truncation_note, i == 0 ? "" : "; ", notes[i]);
    }
  }
  return trace;
}

}  // namespace clocksync::trace
