// trace/otf2_repair.cc: the repair of incomplete archives (see
// otf2_repair.h): scanning OTF2 event chunks for their last whole record,
// the repaired copy, and the definitions rebuilt from the sidecar.

#include "trace/otf2_repair.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "trace/otf2_common.h"
#include "trace/otf2_writer.h"

namespace clocksync::trace::repair {
namespace {

namespace fs = std::filesystem;

// OTF2 event files (OTF2_Buffer): a sequence of chunks of the archive's
// chunk size, the last one shorter. A chunk starts with an 18-byte header
// (type 3, endianness, first and last event number); then records: type 0
// ends a chunk (the rest of it is unused), type 2 ends the file, type 5 is
// a timestamp (8 bytes follow) that belongs to the record after it, and
// every other type has a length (1 byte, or 0xFF and 8 bytes) and that many
// bytes of payload.
inline constexpr size_t kChunkHeaderBytes = 18;
inline constexpr uint8_t kEndOfChunk = 0;
inline constexpr uint8_t kEndOfBuffer = 1;
inline constexpr uint8_t kEndOfFile = 2;
inline constexpr uint8_t kChunkHeader = 3;
inline constexpr uint8_t kTimestamp = 5;

struct ChunkScan {
  bool end_of_file = false;  // the file's end marker was found: intact
  // Bytes of the chunk up to the end of its last whole event record (or
  // up to its end-of-chunk marker); 0 when not even the header is whole.
  size_t keep = 0;
};

ChunkScan ScanChunk(absl::string_view chunk) {
  ChunkScan scan;
  if (chunk.size() < kChunkHeaderBytes ||
      static_cast<uint8_t>(chunk[0]) != kChunkHeader) {
    return scan;
  }
  size_t pos = kChunkHeaderBytes;
  scan.keep = pos;
  while (pos < chunk.size()) {
    const uint8_t type = static_cast<uint8_t>(chunk[pos]);
    if (type == kEndOfFile) {
      scan.end_of_file = true;
      scan.keep = pos;
      return scan;
    }
    if (type == kEndOfChunk || type == kEndOfBuffer) {
      scan.keep = pos;
      return scan;
    }
    if (type == kChunkHeader) break;  // not a record: damaged
    if (type == kTimestamp) {
      pos += 9;
      continue;
    }
    if (pos + 2 > chunk.size()) break;
    uint64_t length = static_cast<uint8_t>(chunk[pos + 1]);
    size_t payload = pos + 2;
    if (length == 0xFF) {
      if (pos + 10 > chunk.size()) break;
      std::memcpy(&length, chunk.data() + pos + 2, 8);
      payload = pos + 10;
    }
    if (length > chunk.size() - payload) break;
    pos = payload + length;
    scan.keep = pos;
  }
  return scan;
}

}  // namespace

TempDir::~TempDir() {
  if (!path_.empty()) {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
}

absl::Status TempDir::Create() {
  const char* tmp = getenv("TMPDIR");
  std::string pattern = absl::StrCat(
      (tmp != nullptr && tmp[0] != '\0') ? tmp : "/tmp",
      "/clocksync-trace-repair-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot create a temporary directory ", pattern, ": ",
        std::strerror(errno)));
  }
  path_ = pattern;
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) {
    return absl::UnavailableError(absl::StrCat("cannot read ", path));
  }
  return out.str();
}

EventFileCheck CheckEventFile(const std::string& data, uint64_t chunk_bytes) {
  EventFileCheck check;
  if (data.empty()) {
    check.intact = false;
    check.what = "empty";
    return check;
  }
  uint64_t start = (data.size() - 1) / chunk_bytes * chunk_bytes;
  ChunkScan scan = ScanChunk(absl::string_view(data).substr(start));
  if (scan.end_of_file) return check;
  check.intact = false;
  check.what = data.size() % chunk_bytes == 0
                   ? "ends at a chunk boundary without its end marker"
                   : "cut inside a chunk";
  if (scan.keep <= kChunkHeaderBytes && start > 0) {
    // Nothing whole in the last chunk: end the file in the one before, at
    // its end-of-chunk marker.
    start -= chunk_bytes;
    scan = ScanChunk(absl::string_view(data).substr(start, chunk_bytes));
  }
  if (scan.keep <= kChunkHeaderBytes) return check;  // no whole record
  // Records up to the chunk's last byte leave no room for the end marker
  // (a writer always ends a chunk with one): the marker would open a chunk
  // without a header. Damaged beyond repair (found by
  // trace/event_file_fuzzer).
  if (scan.keep >= chunk_bytes) return check;
  check.repaired = data.substr(0, start + scan.keep);
  check.repaired.push_back(static_cast<char>(kEndOfFile));
  return check;
}

// Copies the OTF2 part of the archive to `repair_dir`, replacing the event
// files named in `repaired` (file name -> contents; "" = drop the file)
// and linking the others.
// The anchor and global definitions come from `definitions_dir` (the
// archive itself, or the definitions rebuilt for it).
absl::Status WriteRepairedCopy(
    const std::string& archive_dir, const std::string& definitions_dir,
    const std::string& repair_dir,
    const std::map<std::string, std::string>& repaired) {
  std::error_code error;
  const fs::path source(archive_dir);
  const fs::path target(repair_dir);
  for (const std::string& name :
       {absl::StrCat(kOtf2ArchiveName, ".otf2"),
        absl::StrCat(kOtf2ArchiveName, ".def")}) {
    fs::copy_file(fs::path(definitions_dir) / name, target / name, error);
    if (error) {
      return absl::UnavailableError(absl::StrCat(
          "cannot copy ", (source / name).string(), " to ", repair_dir, ": ",
          error.message()));
    }
  }
  fs::create_directory(target / kOtf2ArchiveName, error);
  for (const fs::directory_entry& entry :
       fs::directory_iterator(source / kOtf2ArchiveName, error)) {
    const std::string name = entry.path().filename().string();
    const fs::path to = target / kOtf2ArchiveName / name;
    auto it = repaired.find(name);
    if (it == repaired.end()) {
      fs::create_symlink(fs::absolute(entry.path()), to, error);
      if (error) {
        return absl::UnavailableError(absl::StrCat(
            "cannot link ", entry.path().string(), ": ", error.message()));
      }
      continue;
    }
    if (it->second.empty()) continue;
    std::ofstream out(to, std::ios::binary);
    out.write(it->second.data(), static_cast<std::streamsize>(it->second.size()));
    if (!out) {
      return absl::UnavailableError(
          absl::StrCat("cannot write repaired copy ", to.string()));
    }
  }
  if (error) {
    return absl::UnavailableError(absl::StrCat(
        "cannot list ", (source / kOtf2ArchiveName).string(), ": ",
        error.message()));
  }
  return absl::OkStatus();
}

// A process killed before it finished its archive (SIGKILL) leaves event
// files and a sidecar, but no anchor and no definitions. Writes them into
// the empty directory `dir` from what the sidecar streamed (threads,
// regions, communicators) and the event files present (one location each),
// with the writer that wrote the archive, so that chunk sizes and ids agree.
absl::Status WriteRecoveredDefinitions(const std::string& archive_dir,
                                       const sidecar::Contents& side,
                                       const std::string& dir) {
  const std::string evt_dir = absl::StrCat(archive_dir, "/", kOtf2ArchiveName);
  std::map<uint32_t, std::string> names;
  for (const sidecar::ThreadName& t : side.threads) names[t.index] = t.name;
  std::set<uint32_t> threads;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(evt_dir, error)) {
    const std::string file = entry.path().filename().string();
    uint64_t location = 0;
    if (!absl::EndsWith(file, ".evt") ||
        !absl::SimpleAtoi(absl::StripSuffix(file, ".evt"), &location)) {
      continue;
    }
    if (location >> 32 != static_cast<uint64_t>(side.info.rank)) {
      return absl::InvalidArgumentError(absl::StrCat(
          evt_dir, "/", file, ": the location is not of rank ", side.info.rank,
          " (the sidecar's)"));
    }
    threads.insert(static_cast<uint32_t>(location & 0xFFFFFFFFu));
  }
  if (error) {
    return absl::NotFoundError(absl::StrCat(
        evt_dir, ": cannot list the event files: ", error.message()));
  }
  absl::StatusOr<std::unique_ptr<Otf2Writer>> writer =
      Otf2Writer::Create(dir, side.info);
  if (!writer.ok()) return writer.status();
  for (uint32_t index : threads) {
    auto it = names.find(index);
    const std::string name =
        it != names.end() ? it->second : absl::StrCat("thread ", index);
    if (absl::Status s = (*writer)->AppendEvents(index, name, {}); !s.ok()) {
      return s;
    }
  }
  return (*writer)->Finish(side.regions, side.communicators, {}, {},
                           std::nullopt);
}

}  // namespace clocksync::trace::repair
