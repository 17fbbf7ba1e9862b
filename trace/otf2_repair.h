// trace/otf2_repair.h: the repair of incomplete archives for the reader
// (otf2_reader.cc): an event file cut anywhere ended after its last whole
// record, definitions rebuilt from the sidecar for an archive whose process
// never finished it, and the repaired copy of the archive, in a temporary
// directory, that the reader reads instead. Private to //trace:otf2_reader.

#ifndef CLOCKSYNC_TRACE_OTF2_REPAIR_H_
#define CLOCKSYNC_TRACE_OTF2_REPAIR_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trace/sidecar.h"

namespace clocksync::trace::repair {

// A temporary directory removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() = default;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  // Creates the directory under $TMPDIR (else /tmp).
  absl::Status Create();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The whole contents of the file at `path`; NotFound when it cannot be
// opened.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Whether an event file ends properly (its last chunk holds the end-of-file
// marker); if not, the bytes of a repaired file: everything up to the last
// whole record, then the end-of-file marker ("" when no record is whole).
struct EventFileCheck {
  bool intact = true;
  std::string repaired;
  std::string what;  // for the truncation note
};

EventFileCheck CheckEventFile(const std::string& data, uint64_t chunk_bytes);

// Copies the OTF2 part of the archive to `repair_dir`, replacing the event
// files named in `repaired` (file name -> contents; "" = drop the file)
// and linking the others. The anchor and global definitions come from
// `definitions_dir` (the archive itself, or the definitions rebuilt for it).
absl::Status WriteRepairedCopy(
    const std::string& archive_dir, const std::string& definitions_dir,
    const std::string& repair_dir,
    const std::map<std::string, std::string>& repaired);

// Writes the anchor and definitions of an archive never finished into the
// empty directory `dir`, from the sidecar and the event files present.
absl::Status WriteRecoveredDefinitions(const std::string& archive_dir,
                                       const sidecar::Contents& side,
                                       const std::string& dir);

}  // namespace clocksync::trace::repair

#endif  // CLOCKSYNC_TRACE_OTF2_REPAIR_H_
