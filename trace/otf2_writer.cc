// trace/otf2_writer.cc: one process's trace as an OTF2 archive + sidecar.

#include "trace/otf2_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <otf2/otf2.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trace/archive_dir.h"
#include "trace/otf2_common.h"
#include "trace/sidecar.h"

namespace clocksync::trace {

Otf2Writer::Otf2Writer(std::string archive_dir, ProcessInfo info)
    : archive_dir_(std::move(archive_dir)), info_(std::move(info)) {}

absl::StatusOr<std::unique_ptr<Otf2Writer>> Otf2Writer::Create(
    const std::string& archive_dir, const ProcessInfo& info) {
  if (!(info.tick_period_ns > 0) || !std::isfinite(info.tick_period_ns)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace ", archive_dir, ": tick_period_ns must be positive, got ",
        info.tick_period_ns));
  }
  if (info.rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace ", archive_dir, ": rank must be >= 0, got ", info.rank));
  }
  if (archive_dir.empty()) {
    return absl::InvalidArgumentError("trace: empty archive directory");
  }
  absl::Status created = CreateArchiveDirectory(archive_dir);
  if (!created.ok()) return created;
  std::unique_ptr<Otf2Writer> writer(new Otf2Writer(archive_dir, info));
  const std::string sidecar_path =
      absl::StrCat(archive_dir, "/", kSidecarFileName);
  writer->sidecar_fd_ =
      open(sidecar_path.c_str(),
           O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (writer->sidecar_fd_ < 0) {
    return ErrnoStatus(errno, "cannot create", sidecar_path);
  }
  absl::Status status = writer->AppendSidecar(
      absl::StrCat(sidecar::VersionLine(), sidecar::ProcessLine(info)));
  if (!status.ok()) return status;

  InstallOtf2ErrorCapture();
  ClearOtf2Error();
  writer->archive_ = OTF2_Archive_Open(
      archive_dir.c_str(), kOtf2ArchiveName, OTF2_FILEMODE_WRITE,
      kOtf2EventChunkBytes, kOtf2DefinitionChunkBytes, OTF2_SUBSTRATE_POSIX,
      OTF2_COMPRESSION_NONE);
  if (writer->archive_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot open OTF2 archive in ", archive_dir, ": ",
                     LastOtf2Error()));
  }
  const std::string archive_path =
      absl::StrCat(archive_dir, "/", kOtf2ArchiveName, ".otf2");
  status = writer->CheckOtf2(
      SetFlushCallbacks(writer->archive_),
      "setting flush callbacks of", archive_path);
  if (status.ok()) {
    status = writer->CheckOtf2(
        SetStreamingMemoryCallbacks(writer->archive_),
        "setting memory callbacks of", archive_path);
  }
  if (status.ok()) {
    status = writer->CheckOtf2(
        OTF2_Archive_SetSerialCollectiveCallbacks(writer->archive_),
        "setting collective callbacks of", archive_path);
  }
  if (status.ok()) {
    status = writer->CheckOtf2(
        OTF2_Archive_SetCreator(writer->archive_, "clocksync tracer"),
        "setting the creator of", archive_path);
  }
  if (status.ok()) {
    status = writer->CheckOtf2(
        OTF2_Archive_SetDescription(
            writer->archive_,
            absl::StrCat("clocksync trace of rank ", info.rank, " (",
                         info.process_name, ", pid ", info.pid, ")")
                .c_str()),
        "setting the description of", archive_path);
  }
  if (status.ok()) {
    status = writer->CheckOtf2(OTF2_Archive_OpenEvtFiles(writer->archive_),
                               "opening the event files of", archive_path);
  }
  if (!status.ok()) return status;
  return writer;
}

Otf2Writer::~Otf2Writer() {
  if (!finished_) {
    // Best effort: a readable archive with generated definitions, and a
    // sidecar without its end line, so readers call the trace truncated.
    unfinished_ = true;
    (void)Finish({}, {}, {}, {}, std::nullopt);
  }
  CloseArchive();
  if (sidecar_fd_ >= 0) close(sidecar_fd_);
}

absl::Status Otf2Writer::Fail(absl::Status status) {
  if (error_.ok()) error_ = status;
  return error_;
}

absl::Status Otf2Writer::CheckOtf2(int code, const char* what,
                                   const std::string& path) {
  if (code == OTF2_SUCCESS) return absl::OkStatus();
  std::string detail = LastOtf2Error();
  if (detail.empty()) {
    detail = absl::StrCat(OTF2_Error_GetName(static_cast<OTF2_ErrorCode>(code)),
                          ": ",
                          OTF2_Error_GetDescription(
                              static_cast<OTF2_ErrorCode>(code)));
  }
  // OTF2 cannot be closed after a failed flush (it flushes the same buffer
  // again and corrupts memory), so the archive is abandoned: its buffers
  // leak (at most kEventChunksInMemory chunks per thread).
  abandoned_ = true;
  return Fail(absl::UnavailableError(
      absl::StrCat("OTF2 error ", what, " ", path, ": ", detail)));
}

absl::Status Otf2Writer::AppendSidecar(const std::string& text) {
  absl::Status status = WriteFully(
      sidecar_fd_, text, absl::StrCat(archive_dir_, "/", kSidecarFileName));
  return status.ok() ? status : Fail(std::move(status));
}

absl::Status Otf2Writer::StreamRecords(
    const std::vector<Region>& regions,
    const std::vector<Communicator>& communicators,
    const std::vector<MappingRecord>& mappings,
    const std::vector<SyncSession>& sessions,
    const std::optional<GroundTruth>& truth) {
  if (sidecar_fd_ < 0) return error_;
  const std::string text = streamed_.NewLines(regions, communicators,
                                              mappings, sessions, truth);
  if (text.empty()) return absl::OkStatus();
  return AppendSidecar(text);
}

absl::Status Otf2Writer::AppendEvents(uint32_t thread_index,
                                      const std::string& thread_name,
                                      absl::Span<const Event> events) {
  if (!error_.ok()) return error_;
  if (finished_ || archive_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("trace ", archive_dir_, ": AppendEvents after Finish"));
  }
  const uint64_t location = Otf2LocationId(info_.rank, thread_index);
  const std::string evt_path = absl::StrCat(archive_dir_, "/", kOtf2ArchiveName,
                                            "/", location, ".evt");
  auto [it, inserted] = threads_.try_emplace(thread_index);
  ThreadState& thread = it->second;
  if (inserted) {
    thread.name = thread_name;
    ClearOtf2Error();
    thread.writer = OTF2_Archive_GetEvtWriter(archive_, location);
    if (thread.writer == nullptr) {
      threads_.erase(it);
      return Fail(absl::UnavailableError(
          absl::StrCat("cannot open OTF2 event writer for ", evt_path, ": ",
                       LastOtf2Error())));
    }
    if (absl::Status s = AppendSidecar(
            sidecar::ThreadLine(thread_index, thread.name));
        !s.ok()) {
      return s;
    }
  }
  OTF2_EvtWriter* writer = thread.writer;
  ClearOtf2Error();
  for (const Event& e : events) {
    if (thread.has_last && e.stamp <= thread.last_stamp) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trace ", archive_dir_, ": thread ", thread_index, ": stamp ",
          e.stamp, " is not above the previous stamp ", thread.last_stamp));
    }
    OTF2_ErrorCode code = OTF2_SUCCESS;
    switch (e.kind) {
      case EventKind::kEnter:
        code = OTF2_EvtWriter_Enter(writer, nullptr, e.stamp, e.region);
        used_regions_.Mark(e.region);
        break;
      case EventKind::kLeave:
        code = OTF2_EvtWriter_Leave(writer, nullptr, e.stamp, e.region);
        used_regions_.Mark(e.region);
        break;
      case EventKind::kSend:
        code = OTF2_EvtWriter_MpiSend(writer, nullptr, e.stamp,
                                      static_cast<uint32_t>(e.peer), e.comm,
                                      e.tag, e.bytes);
        used_comms_.Mark(e.comm);
        break;
      case EventKind::kRecv:
        code = OTF2_EvtWriter_MpiRecv(writer, nullptr, e.stamp,
                                      static_cast<uint32_t>(e.peer), e.comm,
                                      e.tag, e.bytes);
        used_comms_.Mark(e.comm);
        break;
      case EventKind::kCollectiveBegin:
        code = OTF2_EvtWriter_MpiCollectiveBegin(writer, nullptr, e.stamp);
        // OTF2's begin record has no fields: the end carries the begin's
        // bytes as sizeSent (the reader gives them back to the begin).
        thread.open_collective_bytes.push_back(e.bytes);
        used_comms_.Mark(e.comm);
        break;
      case EventKind::kCollectiveEnd: {
        uint64_t sent = 0;
        if (!thread.open_collective_bytes.empty()) {
          sent = thread.open_collective_bytes.back();
          thread.open_collective_bytes.pop_back();
        }
        code = OTF2_EvtWriter_MpiCollectiveEnd(
            writer, nullptr, e.stamp, ToOtf2CollectiveOp(e.collective), e.comm,
            static_cast<uint32_t>(e.peer), sent, e.bytes);
        used_comms_.Mark(e.comm);
        break;
      }
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "trace ", archive_dir_, ": thread ", thread_index,
            ": unknown event kind ", static_cast<int>(e.kind)));
    }
    if (code != OTF2_SUCCESS || Otf2ErrorPending()) {
      return CheckOtf2(code == OTF2_SUCCESS ? OTF2_ERROR_FILE_INTERACTION : code,
                       "writing events to", evt_path);
    }
    thread.has_last = true;
    thread.last_stamp = e.stamp;
    ++thread.events;
    ++events_written_;
    if (e.stamp > max_stamp_) max_stamp_ = e.stamp;
  }
  return absl::OkStatus();
}

absl::Status Otf2Writer::WriteDefinitions(
    const std::vector<Region>& regions,
    const std::vector<Communicator>& communicators) {
  const std::string def_path =
      absl::StrCat(archive_dir_, "/", kOtf2ArchiveName, ".def");
  ClearOtf2Error();
  OTF2_GlobalDefWriter* defs = OTF2_Archive_GetGlobalDefWriter(archive_);
  if (defs == nullptr) {
    return Fail(absl::UnavailableError(absl::StrCat(
        "cannot open OTF2 definitions ", def_path, ": ", LastOtf2Error())));
  }
  Otf2StringTable strings;
  auto str = [&](const std::string& s) { return strings.Ref(s); };

  // Regions, plus a generated one for every id an event used without a
  // definition (a tracer finishing from a crash handler may lack some).
  std::set<uint32_t> defined_regions;
  std::vector<Region> all_regions;
  for (const Region& region : regions) {
    if (!defined_regions.insert(region.id).second) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "trace ", archive_dir_, ": region id ", region.id,
          " defined twice")));
    }
    all_regions.push_back(region);
  }
  for (uint32_t id : used_regions_.All()) {
    if (defined_regions.insert(id).second) {
      all_regions.push_back(Region{id, absl::StrCat("region ", id)});
    }
  }
  // OTF2 readers expect ids in increasing order (otf2-print warns
  // otherwise; dense ids from 0 avoid every warning).
  std::sort(all_regions.begin(), all_regions.end(),
            [](const Region& a, const Region& b) { return a.id < b.id; });
  // Communicators likewise; the world gets every rank known.
  int32_t world_size = info_.rank + 1;
  std::set<uint32_t> defined_comms;
  std::vector<Communicator> all_comms;
  for (const Communicator& comm : communicators) {
    if (!defined_comms.insert(comm.id).second) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "trace ", archive_dir_, ": communicator id ", comm.id,
          " defined twice")));
    }
    for (int32_t rank : comm.ranks) {
      if (rank < 0) {
        return Fail(absl::InvalidArgumentError(
            absl::StrCat("trace ", archive_dir_, ": communicator ", comm.id,
                         " lists negative rank ", rank)));
      }
      world_size = std::max(world_size, rank + 1);
    }
    all_comms.push_back(comm);
  }
  for (uint32_t id : used_comms_.All()) {
    if (defined_comms.insert(id).second) {
      Communicator comm{id, absl::StrCat("comm ", id), {}};
      if (id == kWorldCommunicator) comm.name = "world";
      all_comms.push_back(std::move(comm));
    }
  }
  std::sort(all_comms.begin(), all_comms.end(),
            [](const Communicator& a, const Communicator& b) {
              return a.id < b.id;
            });
  for (Communicator& comm : all_comms) {
    if (comm.id == kWorldCommunicator && comm.ranks.empty()) {
      for (int32_t r = 0; r < world_size; ++r) comm.ranks.push_back(r);
    }
  }

  const double resolution = 8192.0 * 1e9 / info_.tick_period_ns;
  OTF2_ErrorCode code = OTF2_GlobalDefWriter_WriteClockProperties(
      defs, static_cast<uint64_t>(std::llround(resolution)), 0,
      max_stamp_ + 1, OTF2_UNDEFINED_TIMESTAMP);
  if (code != OTF2_SUCCESS) return CheckOtf2(code, "writing", def_path);

  // Strings first (OTF2 wants definitions before their references in
  // readers that stream; writing them up front is the simple way).
  const OTF2_StringRef host = str(info_.hostname.empty() ? std::string("host")
                                                        : info_.hostname);
  const OTF2_StringRef node_class = str("node");
  const OTF2_StringRef group_name = str(absl::StrCat("rank ", info_.rank));
  const OTF2_StringRef empty = str("");
  std::vector<OTF2_StringRef> region_names, thread_names, comm_names;
  for (const Region& region : all_regions) region_names.push_back(str(region.name));
  for (const auto& [index, thread] : threads_) {
    thread_names.push_back(str(thread.name));
  }
  for (const Communicator& comm : all_comms) comm_names.push_back(str(comm.name));
  const OTF2_StringRef world_locations_name = str("world locations");
  for (const auto& [s, ref] : strings.in_order()) {
    code = OTF2_GlobalDefWriter_WriteString(defs, ref, s->c_str());
    if (code != OTF2_SUCCESS) return CheckOtf2(code, "writing", def_path);
  }

  code = OTF2_GlobalDefWriter_WriteSystemTreeNode(
      defs, 0, host, node_class, OTF2_UNDEFINED_SYSTEM_TREE_NODE);
  if (code != OTF2_SUCCESS) return CheckOtf2(code, "writing", def_path);
  const OTF2_LocationGroupRef group = static_cast<OTF2_LocationGroupRef>(info_.rank);
  code = OTF2_GlobalDefWriter_WriteLocationGroup(
      defs, group, group_name, OTF2_LOCATION_GROUP_TYPE_PROCESS, 0,
      OTF2_UNDEFINED_LOCATION_GROUP);
  if (code != OTF2_SUCCESS) return CheckOtf2(code, "writing", def_path);
  size_t t = 0;
  for (const auto& [index, thread] : threads_) {
    code = OTF2_GlobalDefWriter_WriteLocation(
        defs, Otf2LocationId(info_.rank, index), thread_names[t++],
        OTF2_LOCATION_TYPE_CPU_THREAD, thread.events, group);
    if (code != OTF2_SUCCESS) return CheckOtf2(code, "writing", def_path);
  }
  for (size_t i = 0; i < all_regions.size(); ++i) {
    code = OTF2_GlobalDefWriter_WriteRegion(
        defs, all_regions[i].id, region_names[i], region_names[i], empty,
        OTF2_REGION_ROLE_FUNCTION, OTF2_PARADIGM_USER, OTF2_REGION_FLAG_NONE,
        empty, 0, 0);
    if (code != OTF2_SUCCESS) return CheckOtf2(code, "writing", def_path);
  }
  // MPI-style communicators: one COMM_LOCATIONS group mapping program rank
  // r to the location of its thread 0, and per communicator a COMM_GROUP
  // whose members are program ranks (indices into that group).
  std::vector<uint64_t> world_locations;
  for (int32_t r = 0; r < world_size; ++r) {
    world_locations.push_back(Otf2LocationId(r, 0));
  }
  code = OTF2_GlobalDefWriter_WriteGroup(
      defs, kOtf2CommLocationsGroup, world_locations_name,
      OTF2_GROUP_TYPE_COMM_LOCATIONS, OTF2_PARADIGM_MPI, OTF2_GROUP_FLAG_NONE,
      static_cast<uint32_t>(world_locations.size()), world_locations.data());
  if (code != OTF2_SUCCESS) return CheckOtf2(code, "writing", def_path);
  for (size_t i = 0; i < all_comms.size(); ++i) {
    std::vector<uint64_t> members(all_comms[i].ranks.begin(),
                                  all_comms[i].ranks.end());
    const OTF2_GroupRef group_ref = static_cast<OTF2_GroupRef>(i + 1);
    code = OTF2_GlobalDefWriter_WriteGroup(
        defs, group_ref, comm_names[i], OTF2_GROUP_TYPE_COMM_GROUP,
        OTF2_PARADIGM_MPI, OTF2_GROUP_FLAG_NONE,
        static_cast<uint32_t>(members.size()), members.data());
    if (code != OTF2_SUCCESS) return CheckOtf2(code, "writing", def_path);
    code = OTF2_GlobalDefWriter_WriteComm(defs, all_comms[i].id, comm_names[i],
                                          group_ref, OTF2_UNDEFINED_COMM,
                                          OTF2_COMM_FLAG_NONE);
    if (code != OTF2_SUCCESS) return CheckOtf2(code, "writing", def_path);
  }
  return absl::OkStatus();
}

absl::Status Otf2Writer::Finish(const std::vector<Region>& regions,
                                const std::vector<Communicator>& communicators,
                                const std::vector<MappingRecord>& mappings,
                                const std::vector<SyncSession>& sessions,
                                const std::optional<GroundTruth>& truth) {
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("trace ", archive_dir_, ": Finish called twice"));
  }
  finished_ = true;
  // The sidecar first: it is independent of OTF2 and the cheaper to save.
  (void)StreamRecords(regions, communicators, mappings, sessions, truth);

  if (archive_ != nullptr && error_.ok()) {
    const std::string archive_path =
        absl::StrCat(archive_dir_, "/", kOtf2ArchiveName);
    for (auto& [index, thread] : threads_) {
      ClearOtf2Error();
      OTF2_ErrorCode code = OTF2_Archive_CloseEvtWriter(archive_, thread.writer);
      thread.writer = nullptr;
      if (code != OTF2_SUCCESS) {
        (void)CheckOtf2(code, "closing events in", archive_path);
        break;
      }
    }
    if (error_.ok()) {
      (void)CheckOtf2(OTF2_Archive_CloseEvtFiles(archive_),
                      "closing event files in", archive_path);
    }
    if (error_.ok()) {
      (void)CheckOtf2(OTF2_Archive_OpenDefFiles(archive_),
                      "opening definition files in", archive_path);
    }
    if (error_.ok()) {
      // Empty local definition files: some readers expect one per location.
      for (const auto& [index, thread] : threads_) {
        OTF2_DefWriter* local = OTF2_Archive_GetDefWriter(
            archive_, Otf2LocationId(info_.rank, index));
        if (local == nullptr) {
          (void)CheckOtf2(OTF2_ERROR_INVALID, "opening local definitions in",
                          archive_path);
          break;
        }
        if (OTF2_ErrorCode code = OTF2_Archive_CloseDefWriter(archive_, local);
            code != OTF2_SUCCESS) {
          (void)CheckOtf2(code, "closing local definitions in", archive_path);
          break;
        }
      }
    }
    if (error_.ok()) {
      (void)CheckOtf2(OTF2_Archive_CloseDefFiles(archive_),
                      "closing definition files in", archive_path);
    }
    if (error_.ok()) (void)WriteDefinitions(regions, communicators);
  }
  CloseArchive();
  // The end line promises a complete archive, so it goes in only when
  // everything before it was written without error.
  if (error_.ok() && !unfinished_) {
    // Checksums of the definitions let a reader tell a damaged anchor or
    // global definition file (and rebuild them from the sidecar) before
    // OTF2 reads it: OTF2 can take seconds over a damaged anchor.
    std::optional<sidecar::DefinitionChecksums> sums;
    const std::string base = absl::StrCat(archive_dir_, "/", kOtf2ArchiveName);
    absl::StatusOr<uint64_t> anchor = sidecar::FileChecksum(base + ".otf2");
    absl::StatusOr<uint64_t> defs = sidecar::FileChecksum(base + ".def");
    if (anchor.ok() && defs.ok()) sums = sidecar::DefinitionChecksums{*anchor, *defs};
    (void)AppendSidecar(sidecar::EndLine(events_written_, sums));
  }
  if (sidecar_fd_ >= 0) {
    if (error_.ok() && fsync(sidecar_fd_) != 0 && errno != EINVAL) {
      (void)Fail(ErrnoStatus(errno, "cannot sync",
                             absl::StrCat(archive_dir_, "/", kSidecarFileName)));
    }
    close(sidecar_fd_);
    sidecar_fd_ = -1;
  }
  return error_;
}

void Otf2Writer::CloseArchive() {
  if (archive_ == nullptr) return;
  if (abandoned_) {
    archive_ = nullptr;  // see CheckOtf2
    return;
  }
  ClearOtf2Error();
  const OTF2_ErrorCode code = OTF2_Archive_Close(archive_);
  archive_ = nullptr;
  if (code != OTF2_SUCCESS && finished_) {
    (void)CheckOtf2(code, "closing", absl::StrCat(archive_dir_, "/",
                                                  kOtf2ArchiveName, ".otf2"));
  }
}

}  // namespace clocksync::trace
