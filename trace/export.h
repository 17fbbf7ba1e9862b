// trace/export.h: a global timeline (trace/timeline.h) written out as
// text, as Chrome/Perfetto trace-event JSON, or as one merged OTF2 archive.
//
// All three take the traces, the timeline built from them and (for the
// formats that show messages) the matched messages; only the timeline's
// available processes are written. `path` "-" means standard output for the
// text formats.

#ifndef CLOCKSYNC_TRACE_EXPORT_H_
#define CLOCKSYNC_TRACE_EXPORT_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trace/timeline.h"
#include "trace/trace.h"

namespace clocksync::trace {

// A JSON string literal of `s`: quotes, backslashes and control bytes
// escaped; other bytes pass through, so UTF-8 stays UTF-8.
std::string JsonString(absl::string_view s);

// One event per line, in global order:
//   <global_ns> rank=<r> thread=<t> <kind> [region=<name>] [peer=<p>
//   tag=<t> comm=<c> bytes=<b>] [op=<collective> root=<p>] local_ns=<l>
// Names are percent-encoded like sidecar values (no spaces).
void WriteMergedText(absl::Span<const ProcessTrace> traces,
                     const Timeline& timeline, std::ostream& out);

// Chrome trace-event JSON ({"traceEvents": [...]}), for chrome://tracing
// and ui.perfetto.dev: pid = rank, tid = thread index, process and thread
// names as metadata events; regions and collectives as B/E slices; sends
// and receives as zero-length X slices joined by flow events ("s" at the
// send, "f" with "bp":"e" at the receive, one id per matched message).
// Timestamps are µs (three decimals, so ns exact) since base_global_ns,
// the earliest global time, which "otherData" records.
void WriteChromeJson(absl::Span<const ProcessTrace> traces,
                     const Timeline& timeline, const MessageMatch& messages,
                     std::ostream& out);

// A merged OTF2 archive in directory `archive_dir` (created; its parent
// must exist): every process a location group "rank N", every thread a
// location (id rank << 32 | thread), regions unified by name, timestamps
// the corrected global ns (timerResolution 1e9, globalOffset the earliest
// one). Errors name the path.
absl::Status WriteMergedOtf2(absl::Span<const ProcessTrace> traces,
                             const Timeline& timeline,
                             const std::string& archive_dir);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_EXPORT_H_
