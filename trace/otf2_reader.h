// trace/otf2_reader.h: reads one process's archive (written by
// trace/otf2_writer.h) back into a ProcessTrace, through the OTF2 reader
// API and the sidecar parser.
//
// Example:
//   absl::StatusOr<ProcessTrace> trace = ReadProcessTrace("/tmp/run1/rank0");
//   if (!trace.ok()) { std::cerr << trace.status() << "\n"; return 2; }
//   if (trace->truncated) std::cerr << "warning: " << trace->truncation_note;
//
// Incomplete archives:
//   - an event file cut anywhere (a copy interrupted, a disk that filled up
//     after Finish): read up to its last complete event record. The reader
//     makes a repaired copy of the archive in a temporary directory in
//     which the cut chunk ends after its last whole record, reads that, and
//     deletes it;
//   - fewer events than the definitions announce: what is there is read;
//   - a sidecar cut mid-line or without its end line: the complete lines
//     are used;
// each sets ProcessTrace::truncated and says why in truncation_note. An
// archive whose writer never reached Finish has no OTF2 anchor and
// definitions (traces.otf2, traces.def): that is an error naming the
// missing file (event files without definitions cannot be interpreted).
//
// Thread safety: ReadProcessTrace may be called from several threads for
// different archives (OTF2 errors are captured per thread).

#ifndef CLOCKSYNC_TRACE_OTF2_READER_H_
#define CLOCKSYNC_TRACE_OTF2_READER_H_

#include <string>

#include "absl/status/statusor.h"
#include "trace/trace.h"

namespace clocksync::trace {

// Reads the archive in directory `archive_dir`: an OTF2 archive, or a raw
// archive the collector stored (trace/raw_archive.h, ReadRawArchive). Errors name the file and
// what is wrong with it:
//   NotFound            the directory, traces.otf2 or the sidecar is missing
//   InvalidArgument     a file is malformed (OTF2 error text, sidecar line)
//   FailedPrecondition  the archive was not finished (no anchor file)
absl::StatusOr<ProcessTrace> ReadProcessTrace(const std::string& archive_dir);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_OTF2_READER_H_
