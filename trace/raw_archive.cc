// trace/raw_archive.cc: the raw archive's writer and reader (both versions),
// and the fixed 40-byte event layout (raw_archive.h).

#include "trace/raw_archive.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "trace/archive_dir.h"
#include "trace/packed_events.h"

namespace clocksync::trace {
namespace {

constexpr char kMarker[] = "clocksync-raw 2\n";
constexpr char kMarkerVersion1[] = "clocksync-raw 1\n";
constexpr uint8_t kLastEventKind = static_cast<uint8_t>(EventKind::kCollectiveEnd);
constexpr uint8_t kLastCollectiveKind = static_cast<uint8_t>(CollectiveKind::kOther);

// Little-endian stores and loads (plain moves on little-endian hosts).
void Put64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void Put32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint64_t Get64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  }
  return v;
}
uint32_t Get32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  }
  return v;
}

// Whether one record's kinds are known (the per-event check).
inline bool RecordOk(const char* p) {
  return static_cast<uint8_t>(p[32]) <= kLastEventKind &&
         static_cast<uint8_t>(p[33]) <= kLastCollectiveKind;
}

// What is wrong with a record RecordOk refused.
std::string CheckRecord(const char* p) {
  const uint8_t kind = static_cast<uint8_t>(p[32]);
  const uint8_t collective = static_cast<uint8_t>(p[33]);
  if (kind > kLastEventKind) {
    return absl::StrCat("kind ", kind, " is not an event kind");
  }
  if (collective > kLastCollectiveKind) {
    return absl::StrCat("collective ", collective,
                        " is not a collective kind");
  }
  return "";
}

// Whether trace::Event in memory is the wire layout (a little-endian host
// and the field offsets of raw_archive.h): then events are copied whole.
constexpr bool kEventIsWireLayout =
    std::endian::native == std::endian::little && sizeof(Event) == 40 &&
    offsetof(Event, stamp) == 0 && offsetof(Event, bytes) == 8 &&
    offsetof(Event, region) == 16 && offsetof(Event, peer) == 20 &&
    offsetof(Event, tag) == 24 && offsetof(Event, comm) == 28 &&
    offsetof(Event, kind) == 32 && offsetof(Event, collective) == 33;

Event DecodeOne(const char* p) {
  Event e;
  e.stamp = Get64(p);
  e.bytes = Get64(p + 8);
  e.region = Get32(p + 16);
  e.peer = static_cast<int32_t>(Get32(p + 20));
  e.tag = Get32(p + 24);
  e.comm = Get32(p + 28);
  e.kind = static_cast<EventKind>(p[32]);
  e.collective = static_cast<CollectiveKind>(p[33]);
  return e;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  std::string text;
  struct stat st;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    text.reserve(static_cast<size_t>(st.st_size));
  }
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      close(fd);
      return ErrnoStatus(error, "cannot read", path);
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

std::string EventFileName(uint32_t thread_index) {
  return absl::StrCat("events.", thread_index, ".raw");
}

// Reads the event file at `path` into *events. In the wire layout the
// file is read in chunks into a small reused buffer (it stays in cache),
// checked there and appended, so the events' memory is written once
// (reading the whole file first and copying it wrote three times as much
// fresh memory: 100 M events took minutes). A cut last record is dropped
// with a note.
absl::Status ReadEventFile(const std::string& path, std::vector<Event>* events,
                           std::vector<std::string>* notes) {
  if constexpr (!kEventIsWireLayout) {
    absl::StatusOr<std::string> bytes = ReadFile(path);
    if (!bytes.ok()) return bytes.status();
    const size_t whole = bytes->size() - bytes->size() % kEventWireBytes;
    if (whole != bytes->size()) {
      notes->push_back(absl::StrCat(path, " ends in a cut record (",
                                    bytes->size() - whole, " bytes dropped)"));
    }
    if (absl::Status s = DecodeEvents(absl::string_view(*bytes).substr(0, whole), events);
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
    }
    return absl::OkStatus();
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    events->reserve(static_cast<size_t>(st.st_size) / kEventWireBytes);
  }
  constexpr size_t kChunk = 1 << 14;  // events: 640 KiB
  std::vector<Event> chunk(kChunk);
  char* const buffer = reinterpret_cast<char*>(chunk.data());
  size_t held = 0;  // bytes in the buffer
  for (;;) {
    const ssize_t n = read(fd, buffer + held, kChunk * kEventWireBytes - held);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      close(fd);
      return ErrnoStatus(error, "cannot read", path);
    }
    held += static_cast<size_t>(n);
    const bool end = n == 0;
    if (!end && held < kChunk * kEventWireBytes) continue;
    const size_t records = held / kEventWireBytes;
    for (size_t i = 0; i < records; ++i) {
      const char* p = buffer + i * kEventWireBytes;
      if (!RecordOk(p)) {
        close(fd);
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": event ", events->size() + i, ": ", CheckRecord(p)));
      }
    }
    events->insert(events->end(), chunk.begin(),
                   chunk.begin() + static_cast<std::ptrdiff_t>(records));
    const size_t rest = held - records * kEventWireBytes;
    if (end) {
      if (rest > 0) {
        notes->push_back(
            absl::StrCat(path, " ends in a cut record (", rest, " bytes dropped)"));
      }
      break;
    }
    std::memmove(buffer, buffer + records * kEventWireBytes, rest);
    held = rest;
  }
  close(fd);
  return absl::OkStatus();
}

// Reads the packed event file at `path` into *events, a piece at a time
// through a reused buffer (grown only for a chunk larger than it): each
// whole chunk is checked and unpacked straight into *events, and its first
// stamp must rise above the previous chunk's last. A cut last chunk (a
// collector killed mid-write) is dropped with a note.
absl::Status ReadPackedFile(const std::string& path, std::vector<Event>* events,
                            std::vector<std::string>* notes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    // About 5 bytes an event for Enter/Leave; a guess, not a limit.
    events->reserve(static_cast<size_t>(st.st_size) / 5);
  }
  std::string buffer(size_t{1} << 20, '\0');
  size_t held = 0;      // bytes in the buffer
  uint64_t offset = 0;  // of the buffer's first byte in the file
  bool end = false;
  while (!end) {
    if (held == buffer.size()) buffer.resize(2 * buffer.size());
    const ssize_t n = read(fd, buffer.data() + held, buffer.size() - held);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      close(fd);
      return ErrnoStatus(error, "cannot read", path);
    }
    held += static_cast<size_t>(n);
    end = n == 0;
    absl::string_view rest(buffer.data(), held);
    while (!rest.empty()) {
      const size_t before = events->size();
      PackedChunkInfo info;
      const absl::Status s = UnpackChunk(rest, &info, events);
      if (absl::IsOutOfRange(s)) break;  // the rest of the chunk is to come
      if (!s.ok()) {
        close(fd);
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": chunk at byte ", offset, ": ", s.message()));
      }
      if (before > 0 && info.events > 0 &&
          info.first_stamp <= (*events)[before - 1].stamp) {
        close(fd);
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": event ", before, ": stamp ", info.first_stamp,
            " is not above the previous stamp ", (*events)[before - 1].stamp));
      }
      rest.remove_prefix(info.chunk_bytes);
      offset += info.chunk_bytes;
    }
    if (end && !rest.empty()) {
      notes->push_back(absl::StrCat(path, " ends in a cut chunk (", rest.size(),
                                    " bytes dropped)"));
    }
    std::memmove(buffer.data(), rest.data(), rest.size());
    held = rest.size();
  }
  close(fd);
  return absl::OkStatus();
}

}  // namespace

void EncodeEvents(absl::Span<const Event> events, std::string* out) {
  const size_t start = out->size();
  out->resize(start + events.size() * kEventWireBytes);
  EncodeEventsTo(events, out->data() + start);
}

void EncodeEventsTo(absl::Span<const Event> events, char* p) {
  if constexpr (kEventIsWireLayout) {
    // The struct is the wire layout on this host: one copy, then the
    // padding zeroed (it may hold anything in the caller's events).
    std::memcpy(p, events.data(), events.size() * kEventWireBytes);
    for (size_t i = 0; i < events.size(); ++i) {
      std::memset(p + i * kEventWireBytes + 34, 0, kEventWireBytes - 34);
    }
    return;
  }
  for (const Event& e : events) {
    Put64(p, e.stamp);
    Put64(p + 8, e.bytes);
    Put32(p + 16, e.region);
    Put32(p + 20, static_cast<uint32_t>(e.peer));
    Put32(p + 24, e.tag);
    Put32(p + 28, e.comm);
    p[32] = static_cast<char>(e.kind);
    p[33] = static_cast<char>(e.collective);
    std::memset(p + 34, 0, kEventWireBytes - 34);
    p += kEventWireBytes;
  }
}

absl::Status DecodeEvents(absl::string_view encoded, std::vector<Event>* out) {
  if (encoded.size() % kEventWireBytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("events: ", encoded.size(),
                     " bytes is not a whole number of ", kEventWireBytes,
                     "-byte records"));
  }
  const size_t n = encoded.size() / kEventWireBytes;
  for (size_t i = 0; i < n; ++i) {
    const char* p = encoded.data() + i * kEventWireBytes;
    if (!RecordOk(p)) {
      return absl::InvalidArgumentError(
          absl::StrCat("event ", i, ": ", CheckRecord(p)));
    }
  }
  if (out != nullptr) {
    if constexpr (kEventIsWireLayout) {
      const size_t start = out->size();
      out->resize(start + n);
      std::memcpy(static_cast<void*>(out->data() + start), encoded.data(),
                  encoded.size());
    } else {
      out->reserve(out->size() + n);
      for (size_t i = 0; i < n; ++i) {
        out->push_back(DecodeOne(encoded.data() + i * kEventWireBytes));
      }
    }
  }
  return absl::OkStatus();
}

bool IsRawArchive(const std::string& dir) {
  struct stat st;
  return stat(absl::StrCat(dir, "/", kRawMarkerFileName).c_str(), &st) == 0 &&
         S_ISREG(st.st_mode);
}

// --- writer -------------------------------------------------------------

RawArchiveWriter::RawArchiveWriter(std::string dir, ProcessInfo info)
    : dir_(std::move(dir)), info_(std::move(info)) {}

absl::StatusOr<std::unique_ptr<RawArchiveWriter>> RawArchiveWriter::Create(
    const std::string& dir, const ProcessInfo& info) {
  if (dir.empty()) {
    return absl::InvalidArgumentError("raw archive: empty directory name");
  }
  if (!(info.tick_period_ns > 0) || !std::isfinite(info.tick_period_ns)) {
    return absl::InvalidArgumentError(
        absl::StrCat("raw archive ", dir,
                     ": tick_period_ns must be positive, got ",
                     info.tick_period_ns));
  }
  if (info.rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "raw archive ", dir, ": rank must be >= 0, got ", info.rank));
  }
  absl::Status created = CreateArchiveDirectory(dir);
  if (!created.ok()) return created;
  std::unique_ptr<RawArchiveWriter> writer(new RawArchiveWriter(dir, info));
  const std::string marker = absl::StrCat(dir, "/", kRawMarkerFileName);
  const int marker_fd =
      open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (marker_fd < 0) return ErrnoStatus(errno, "cannot create", marker);
  absl::Status status =
      writer->WriteAll(marker_fd, kMarker, sizeof(kMarker) - 1, marker);
  close(marker_fd);
  if (!status.ok()) return status;
  const std::string sidecar_path = absl::StrCat(dir, "/", kSidecarFileName);
  writer->sidecar_fd_ =
      open(sidecar_path.c_str(),
           O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (writer->sidecar_fd_ < 0) {
    return ErrnoStatus(errno, "cannot create", sidecar_path);
  }
  status = writer->AppendSidecar(
      absl::StrCat(sidecar::VersionLine(), sidecar::ProcessLine(info)));
  if (!status.ok()) return status;
  return writer;
}

RawArchiveWriter::~RawArchiveWriter() {
  for (auto& [index, thread] : threads_) {
    if (thread.fd >= 0) close(thread.fd);
  }
  if (sidecar_fd_ >= 0) close(sidecar_fd_);
}

absl::Status RawArchiveWriter::Fail(absl::Status status) {
  if (error_.ok()) error_ = status;
  return error_;
}

absl::Status RawArchiveWriter::WriteAll(int fd, const char* data, size_t size,
                                        const std::string& path) {
  absl::Status status = WriteFully(fd, absl::string_view(data, size), path);
  return status.ok() ? status : Fail(std::move(status));
}

absl::Status RawArchiveWriter::AppendSidecar(const std::string& text) {
  return WriteAll(sidecar_fd_, text.data(), text.size(),
                  absl::StrCat(dir_, "/", kSidecarFileName));
}

absl::StatusOr<RawArchiveWriter::ThreadFile*> RawArchiveWriter::Thread(
    uint32_t thread_index, const std::string& thread_name) {
  auto it = threads_.find(thread_index);
  if (it != threads_.end()) return &it->second;
  const std::string path = absl::StrCat(dir_, "/", EventFileName(thread_index));
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC,
           0644);
  if (fd < 0) return Fail(ErrnoStatus(errno, "cannot create", path));
  ThreadFile& thread = threads_[thread_index];
  thread.fd = fd;
  if (absl::Status s =
          AppendSidecar(sidecar::ThreadLine(thread_index, thread_name));
      !s.ok()) {
    return s;
  }
  return &thread;
}

absl::Status RawArchiveWriter::AppendPacked(uint32_t thread_index,
                                            const std::string& thread_name,
                                            absl::string_view chunk) {
  if (!error_.ok()) return error_;
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("raw archive ", dir_, ": events after Finish"));
  }
  PackedChunkInfo info;
  if (absl::Status s = UnpackChunk(chunk, &info, nullptr); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("thread ", thread_index, ": ", s.message()));
  }
  if (info.chunk_bytes != chunk.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "thread ", thread_index, ": ", chunk.size() - info.chunk_bytes,
        " bytes after the chunk"));
  }
  if (info.events == 0) return absl::OkStatus();
  auto existing = threads_.find(thread_index);
  if (existing != threads_.end() && existing->second.has_last &&
      info.first_stamp <= existing->second.last_stamp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "thread ", thread_index, ": event 0: stamp ", info.first_stamp,
        " is not above the previous stamp ", existing->second.last_stamp));
  }
  absl::StatusOr<ThreadFile*> thread = Thread(thread_index, thread_name);
  if (!thread.ok()) return thread.status();
  if (absl::Status s =
          WriteAll((*thread)->fd, chunk.data(), chunk.size(),
                   absl::StrCat(dir_, "/", EventFileName(thread_index)));
      !s.ok()) {
    return s;
  }
  (*thread)->has_last = true;
  (*thread)->last_stamp = info.last_stamp;
  max_stamp_ = std::max(max_stamp_, info.last_stamp);
  events_written_ += info.events;
  return absl::OkStatus();
}

absl::Status RawArchiveWriter::AppendEncoded(uint32_t thread_index,
                                             const std::string& thread_name,
                                             absl::string_view encoded) {
  std::vector<Event> events;
  if (absl::Status s = DecodeEvents(encoded, &events); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("thread ", thread_index, ": ", s.message()));
  }
  for (size_t i = 1; i < events.size(); ++i) {
    if (events[i].stamp <= events[i - 1].stamp) {
      return absl::InvalidArgumentError(absl::StrCat(
          "thread ", thread_index, ": event ", i, ": stamp ", events[i].stamp,
          " is not above the previous stamp ", events[i - 1].stamp));
    }
  }
  return AppendEvents(thread_index, thread_name, events);
}

absl::Status RawArchiveWriter::AppendEvents(uint32_t thread_index,
                                            const std::string& thread_name,
                                            absl::Span<const Event> events) {
  // Chunks of at most 2^20 events: a few MiB each, whatever the caller
  // hands over (a chunk's sizes are 32-bit).
  constexpr size_t kChunkEvents = size_t{1} << 20;
  while (!events.empty()) {
    const size_t n = std::min(events.size(), kChunkEvents);
    packed_.clear();
    PackEvents(events.first(n), &packed_);
    if (absl::Status s = AppendPacked(thread_index, thread_name, packed_);
        !s.ok()) {
      return s;
    }
    events.remove_prefix(n);
  }
  return absl::OkStatus();
}

absl::Status RawArchiveWriter::StreamRecords(
    const std::vector<Region>& regions,
    const std::vector<Communicator>& communicators,
    const std::vector<MappingRecord>& mappings,
    const std::vector<SyncSession>& sessions,
    const std::optional<GroundTruth>& truth) {
  if (!error_.ok()) return error_;
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("raw archive ", dir_, ": records after Finish"));
  }
  const std::string text =
      streamed_.NewLines(regions, communicators, mappings, sessions, truth);
  if (text.empty()) return absl::OkStatus();
  return AppendSidecar(text);
}

absl::Status RawArchiveWriter::Finish(
    const std::vector<Region>& regions,
    const std::vector<Communicator>& communicators,
    const std::vector<MappingRecord>& mappings,
    const std::vector<SyncSession>& sessions,
    const std::optional<GroundTruth>& truth) {
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("raw archive ", dir_, ": Finish called twice"));
  }
  absl::Status status =
      StreamRecords(regions, communicators, mappings, sessions, truth);
  finished_ = true;
  if (status.ok()) {
    status = AppendSidecar(sidecar::EndLine(events_written_, std::nullopt));
  }
  for (auto& [index, thread] : threads_) {
    if (thread.fd >= 0 && close(thread.fd) != 0 && status.ok()) {
      status = Fail(ErrnoStatus(errno, "cannot close",
                                absl::StrCat(dir_, "/", EventFileName(index))));
    }
    thread.fd = -1;
  }
  if (sidecar_fd_ >= 0) {
    if (close(sidecar_fd_) != 0 && status.ok()) {
      status = Fail(ErrnoStatus(errno, "cannot close",
                                absl::StrCat(dir_, "/", kSidecarFileName)));
    }
    sidecar_fd_ = -1;
  }
  return status;
}

// --- reader -------------------------------------------------------------

absl::StatusOr<ProcessTrace> ReadRawArchive(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no such trace directory"));
  }
  const std::string sidecar_path = absl::StrCat(dir, "/", kSidecarFileName);
  absl::StatusOr<std::string> text = ReadFile(sidecar_path);
  if (!text.ok()) return text.status();
  absl::StatusOr<sidecar::Contents> side = sidecar::Parse(*text, sidecar_path);
  if (!side.ok()) return side.status();

  ProcessTrace trace;
  trace.info = side->info;
  trace.regions = std::move(side->regions);
  trace.communicators = std::move(side->communicators);
  trace.mappings = std::move(side->mappings);
  trace.sessions = std::move(side->sessions);
  trace.truth = std::move(side->truth);
  std::vector<std::string> notes;
  if (!side->complete) notes.push_back(side->incomplete_note);

  // The event files present, by thread index.
  std::map<uint32_t, std::string> names;
  for (const sidecar::ThreadName& t : side->threads) names[t.index] = t.name;
  std::vector<uint32_t> indices;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return ErrnoStatus(errno, "cannot list", dir);
  while (struct dirent* entry = readdir(d)) {
    absl::string_view name = entry->d_name;
    if (!absl::ConsumePrefix(&name, "events.") ||
        !absl::ConsumeSuffix(&name, ".raw")) {
      continue;
    }
    uint32_t index = 0;
    if (absl::SimpleAtoi(name, &index)) indices.push_back(index);
  }
  closedir(d);
  std::sort(indices.begin(), indices.end());

  const std::string marker_path = absl::StrCat(dir, "/", kRawMarkerFileName);
  absl::StatusOr<std::string> marker = ReadFile(marker_path);
  if (!marker.ok()) return marker.status();
  const bool packed = *marker == kMarker;
  if (!packed && *marker != kMarkerVersion1) {
    return absl::InvalidArgumentError(absl::StrCat(
        marker_path, ": not a raw archive marker of version 1 or 2"));
  }
  uint64_t events = 0;
  for (uint32_t index : indices) {
    const std::string path = absl::StrCat(dir, "/", EventFileName(index));
    ThreadTrace thread;
    thread.thread_index = index;
    auto name = names.find(index);
    thread.name = name != names.end() ? name->second
                                      : absl::StrCat("thread ", index);
    if (packed) {
      // Stamps rise within a chunk (UnpackChunk) and across (the reader).
      if (absl::Status s = ReadPackedFile(path, &thread.events, &notes);
          !s.ok()) {
        return s;
      }
      events += thread.events.size();
      trace.threads.push_back(std::move(thread));
      continue;
    }
    if (absl::Status s = ReadEventFile(path, &thread.events, &notes); !s.ok()) {
      return s;
    }
    for (size_t i = 1; i < thread.events.size(); ++i) {
      if (thread.events[i].stamp <= thread.events[i - 1].stamp) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": event ", i, ": stamp ", thread.events[i].stamp,
            " is not above the previous stamp ", thread.events[i - 1].stamp));
      }
    }
    events += thread.events.size();
    trace.threads.push_back(std::move(thread));
  }
  if (side->complete && events < side->end_events) {
    notes.push_back(absl::StrCat(events, " events of the ", side->end_events,
                                 " the end line counts"));
  }
  if (!notes.empty()) {
    trace.truncated = true;
    trace.truncation_note = absl::StrJoin(notes, "; ");
  }
  return trace;
}

}  // namespace clocksync::trace
