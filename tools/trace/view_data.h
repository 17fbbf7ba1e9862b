// tools/trace/view_data.h: what `clocksync-trace view` shows, as data: the
// level-of-detail index (trace/lod_index.h) of the archive set under every
// correction, built once into a cache directory and mapped (rebuilt when
// missing or damaged), and the JSON the page draws: the model (rows,
// regions and their colours, the profile, each correction's embedded
// levels) and the answer to one query (`/lod?...` of --serve).
//
// Times in the JSON are ns since the correction's origin (its first
// event), so a browser's doubles hold them exactly; the origin itself is a
// string.
//
// Thread safety: a ViewModel is immutable once made; AnswerLodQuery may
// run on the server's thread while nothing else touches it.

#ifndef CLOCKSYNC_TOOLS_TRACE_VIEW_DATA_H_
#define CLOCKSYNC_TOOLS_TRACE_VIEW_DATA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hull/correction.h"
#include "hull/postmortem.h"
#include "tools/trace/view_cache.h"
#include "trace/lod_index.h"
#include "trace/timeline.h"
#include "trace/trace.h"

namespace clocksync::trace {

struct ViewCorrection {
  hull::CorrectionKind kind = hull::CorrectionKind::kNone;
  bool available = false;
  std::string unavailable_reason;
  std::string index_path;
  std::unique_ptr<LodIndex> index;  // when available
};

struct ViewModel {
  std::string title;
  hull::CorrectionKind initial = hull::CorrectionKind::kOnline;
  std::vector<ViewCorrection> corrections;  // every kind, in order
  std::string profile_json;  // [{rank, region, calls, total_ns, ...}]
  // What was built and what was found in the cache, for the user.
  std::vector<std::string> notes;

  const ViewCorrection* Find(hull::CorrectionKind kind) const;
};

struct ViewOptions {
  std::string index_dir;  // "" = $XDG_CACHE_HOME or ~/.cache, /clocksync-trace
  // The cache's bound (tools/trace/view_cache.h), applied after this
  // run's indexes are built or found.
  IndexCacheLimits cache_limits;
  hull::CorrectionKind initial = hull::CorrectionKind::kOnline;
  hull::PostmortemOptions postmortem;
};

// The cache directory of ViewOptions::index_dir "" (not created).
std::string DefaultIndexDir();

// The index file of `archives` under `kind`: a hash of the archives' paths,
// every file's name, size and modification time in them, the correction,
// its options and the index version, so a changed archive gets a new index.
std::string IndexPath(const std::string& index_dir,
                      const std::vector<std::string>& archives,
                      hull::CorrectionKind kind,
                      const hull::PostmortemOptions& postmortem);

// Opens the index at `path`, or (missing, damaged, another version)
// builds it from the traces and writes it there first; *note says which.
absl::StatusOr<std::unique_ptr<LodIndex>> OpenOrBuildIndex(
    const std::string& path, absl::Span<const ProcessTrace> traces,
    const Timeline& timeline, const MessageMatch& messages, std::string* note);

// The model of a run: every correction the traces support (the initial one
// must be: FailedPrecondition naming the archive otherwise), indexed; then
// the cache is pruned (a note says what was removed).
absl::StatusOr<ViewModel> MakeViewModel(const std::vector<std::string>& archives,
                                        absl::Span<const ProcessTrace> traces,
                                        const ViewOptions& options);

// One answer as JSON: {"level","levels","slot_ns","f":[[row,begin,end,
// region,region_ns,events]...],"m":[[send_row,recv_row,send,recv,count,
// mean_bytes,mean_latency_ns,max_latency_ns]...],"c":[[comm,begin,end,
// kind,count]...]}, times since the index's origin.
std::string AnswerJson(const LodIndex& index, const LodAnswer& answer);

// The whole model as JSON for the page. Per available correction, the
// levels from the one a `px`-wide view of the whole run reads down to the
// finest whose records (with those already taken) stay within
// `max_records`; `serve` tells the page to ask /lod for the rest.
std::string ModelJson(const ViewModel& model, int32_t px, int64_t max_records,
                      bool serve);

// The /lod page: the query "t0=&t1=&px=&correction=" (t0, t1 ns since the
// correction's origin) answered from the index, or {"error": "..."}.
std::string AnswerLodQuery(const ViewModel& model, const std::string& query);

// The colour of a region name, "#rrggbb" (the page and the SVG alike).
std::string RegionColor(const std::string& name);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TOOLS_TRACE_VIEW_DATA_H_
