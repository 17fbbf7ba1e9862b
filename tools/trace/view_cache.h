// tools/trace/view_cache.h: the bound on `clocksync-trace view`'s index
// cache (--index_dir): what each index was built from, and pruning.
//
// Beside every index `<hash>-<correction>.lodidx` the view writes
// `<hash>-<correction>.lodidx.src`: the correction, the post-mortem
// options and the absolute path of every archive, so the index's name can
// be computed again (IndexPath, tools/trace/view_data.h). An index's
// modification time is set to now each time the view uses it.
//
// PruneIndexCache removes, except the indexes in use:
//   stale   indexes whose archives are gone or changed (the name computed
//           again from the .src differs: a changed archive has a new index)
//           and .src files without their index;
//   old     indexes not used for longer than the age limit (also those
//           without a .src, from older versions);
//   over    the least recently used ones while the cache is over the size
//           limit;
//   temp    files left by a write that never finished (`*.tmp.<pid>`)
//           older than an hour.
// Nothing else in the directory is touched.
//
// Thread safety: none; two views pruning one directory at once may both
// try to remove a file (harmless: a missing file is not an error).

#ifndef CLOCKSYNC_TOOLS_TRACE_VIEW_CACHE_H_
#define CLOCKSYNC_TOOLS_TRACE_VIEW_CACHE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "hull/correction.h"

namespace clocksync::trace {

struct IndexCacheLimits {
  int64_t max_bytes = int64_t{8} << 30;         // 0: no size limit
  absl::Duration max_age = absl::Hours(24 * 30);  // zero: no age limit
};

struct IndexCachePruned {
  int stale = 0;  // archives gone or changed (and orphaned .src files)
  int old = 0;    // unused for longer than the age limit
  int over = 0;   // least recently used, over the size limit
  int temp = 0;   // unfinished writes
  int64_t bytes = 0;       // removed
  int kept = 0;            // indexes left
  int64_t kept_bytes = 0;  // their size
};

// Writes `index_path`.src and sets the index's modification time to now.
absl::Status RecordIndexUse(const std::string& index_path,
                            const std::vector<std::string>& archives,
                            hull::CorrectionKind kind,
                            const hull::PostmortemOptions& postmortem);

// Prunes `dir` as above at time `now`; `in_use` (index paths) are kept
// whatever their age and size.
absl::StatusOr<IndexCachePruned> PruneIndexCache(
    const std::string& dir, const std::vector<std::string>& in_use,
    const IndexCacheLimits& limits, absl::Time now);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TOOLS_TRACE_VIEW_CACHE_H_
