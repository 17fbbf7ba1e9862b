// trace/otf2_common.h: conventions shared by the OTF2 writers and the
// reader of clocksync archives (internal to //trace).
//
//   - Location ids: (program rank << 32) | thread_index, so that ids are the
//     same in a per-process archive and in a merged one.
//   - Group 0 (kOtf2CommLocationsGroup) is the COMM_LOCATIONS group mapping
//     program rank r to location (r << 32); communicator groups are 1, 2...
//   - CollectiveKind <-> OTF2_CollectiveOp; kOther is written as
//     OTF2_UNDEFINED_TYPE (otf2-print shows it as unknown).
//   - OTF2 reports errors through one process-wide callback; the writer and
//     reader capture the last message per thread to put it into statuses.

#ifndef CLOCKSYNC_TRACE_OTF2_COMMON_H_
#define CLOCKSYNC_TRACE_OTF2_COMMON_H_

#include <otf2/otf2.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trace/trace.h"

namespace clocksync::trace {

// OTF2 buffer chunk sizes: events are written to disk a chunk at a time.
inline constexpr uint64_t kOtf2EventChunkBytes = 1024 * 1024;
inline constexpr uint64_t kOtf2DefinitionChunkBytes = 4 * 1024 * 1024;

inline constexpr OTF2_GroupRef kOtf2CommLocationsGroup = 0;

inline uint64_t Otf2LocationId(int32_t rank, uint32_t thread_index) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(rank)) << 32) |
         thread_index;
}

// Flush callbacks for writing: always flush, no BufferFlush records.
OTF2_ErrorCode SetFlushCallbacks(OTF2_Archive* archive);
// Memory callbacks for writing that bound each event writer to 4 chunks,
// so events reach the disk as they come (OTF2's default pool holds 128 MiB
// per writer before it flushes).
OTF2_ErrorCode SetStreamingMemoryCallbacks(OTF2_Archive* archive);

OTF2_CollectiveOp ToOtf2CollectiveOp(CollectiveKind kind);
CollectiveKind FromOtf2CollectiveOp(OTF2_CollectiveOp op);

// Registers (once per process) an OTF2 error callback that keeps the last
// message of each thread instead of printing it.
void InstallOtf2ErrorCapture();
void ClearOtf2Error();
// "<function>: <message> (<error name>)" of the first OTF2 error on this
// thread since ClearOtf2Error, or "".
std::string LastOtf2Error();
// Whether OTF2 reported an error on this thread since ClearOtf2Error. OTF2
// does not return every error it reports (e.g. a failed write of its file
// buffer), so the writer checks this too.
bool Otf2ErrorPending();

// Assigns OTF2 string ids (0, 1, ...) to distinct strings.
class Otf2StringTable {
 public:
  OTF2_StringRef Ref(const std::string& s) {
    auto [it, inserted] =
        refs_.try_emplace(s, static_cast<OTF2_StringRef>(refs_.size()));
    if (inserted) order_.push_back({&it->first, it->second});
    return it->second;
  }
  // (string, id) in id order.
  const std::vector<std::pair<const std::string*, OTF2_StringRef>>& in_order()
      const {
    return order_;
  }

 private:
  std::map<std::string, OTF2_StringRef> refs_;
  std::vector<std::pair<const std::string*, OTF2_StringRef>> order_;
};

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_OTF2_COMMON_H_
