// shm/segment_reader.h: the one reader-side mapper of clocksyncd's segment
// (shm_layout.h): opens the file, validates it (regular file, size, magic,
// layout version, declared sizes), maps it read-only, and re-maps a
// restarted daemon's new file in place. The client library (client/clock)
// and the tracer (tracer/) both map the segment through it.
//
// The mapping lives at one address for the reader's whole life: a re-map
// replaces the pages underneath with mmap(MAP_FIXED), so readers holding a
// pointer into it never fault, and a read that straddles the swap is
// retried by the seqlock (two daemon instances never share sequence
// values). Two ways to start:
//   Open()     the file must be a valid segment now (the client: an error
//              names the path and the cause);
//   Reserve()  the address is taken at once with a zero page (magic 0,
//              sequence 0: "no segment") and Remap() maps the file when it
//              appears (the tracer, whose hot path compares the sequence
//              word through a constant pointer from before the daemon
//              starts).
// When an in-place re-map fails half way (an old kernel may have removed
// the old pages), a zero page is put back, so the address stays readable.
//
// Example:
//   std::unique_ptr<shm::SegmentReader> reader;
//   std::string message;
//   if (shm::SegmentReader::Open(path, &reader, &message) !=
//       shm::SegmentError::kNone) { /* message names the path */ }
//   const clocksync_shm_mapping* section = &reader->segment()->mapping;
//
// Thread safety: segment() may be read by any thread at any time; Remap()
// and the accessors of the mapped file's identity must be serialized by the
// caller (one thread, or a mutex).
#ifndef CLOCKSYNC_SHM_SEGMENT_READER_H_
#define CLOCKSYNC_SHM_SEGMENT_READER_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "shm/shm_layout.h"

namespace clocksync {
namespace shm {

// Why a file is not mapped. The client maps these to its CLOCKSYNC_E*
// codes.
enum class SegmentError {
  kNone = 0,
  kNoFile,     // the path does not exist: no daemon publishes there
  kIo,         // open, fstat, read or mmap failed
  kBadMagic,   // not a regular file, or the wrong magic
  kBadVersion, // another layout version
  kBadSize,    // the file or its declared sizes are wrong
};

class SegmentReader {
 public:
  // Validates the segment at `path` and maps it read-only. Returns kNone
  // and sets *out, or an error and sets *message (naming the path; no code
  // prefix).
  static SegmentError Open(const std::string& path,
                           std::unique_ptr<SegmentReader>* out,
                           std::string* message);

  // Reserves the mapping's address with a zero page for `path`, mapping
  // nothing yet (call Remap()). ResourceExhausted when mmap fails.
  static absl::StatusOr<std::unique_ptr<SegmentReader>> Reserve(
      const std::string& path);

  SegmentReader(const SegmentReader&) = delete;
  SegmentReader& operator=(const SegmentReader&) = delete;
  ~SegmentReader();

  // Maps the file now at the path in place when it is a valid segment other
  // than the one mapped (compared by device and inode). Returns kNone when
  // a segment is mapped afterwards (the same one or a new one); otherwise
  // the error and *message (the previous file or the zero page stays
  // mapped, except after a failed mmap: then the zero page).
  SegmentError Remap(std::string* message);

  // The mapping; its address never changes. Access the mapping section with
  // the seqlock helpers of shm_layout.h; the header is immutable between
  // re-maps.
  const clocksync_shm* segment() const { return segment_; }

  // A consistent read of the mapping section and the (even) sequence value
  // it was read under, with up to `max_attempts` attempts. False when no
  // segment is mapped (wrong magic: the zero page) or writes kept
  // overlapping.
  bool ReadMapping(MappingValues* values, uint64_t* seq,
                   int max_attempts = 1000) const noexcept;

  const std::string& path() const { return path_; }
  // Whether a file (not the zero page) is mapped.
  bool mapped() const { return mapped_; }
  // Files mapped by Remap() so far (the first one of Open() not counted).
  uint64_t remaps() const { return remaps_; }

 private:
  SegmentReader(std::string path, void* base, size_t length);

  const std::string path_;
  void* const base_;
  const size_t length_;
  const clocksync_shm* const segment_;
  bool mapped_ = false;
  dev_t dev_ = 0;  // identity of the mapped file
  ino_t ino_ = 0;
  uint64_t remaps_ = 0;
};

}  // namespace shm
}  // namespace clocksync

#endif  // CLOCKSYNC_SHM_SEGMENT_READER_H_
