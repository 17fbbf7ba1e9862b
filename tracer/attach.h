// tracer/attach.h: dynamic spawning on the tracer's side (docs/COLLECTOR.md,
// "Dynamic spawning"): Tracer::AttachContact, Tracer::Attach and
// Tracer::Attached are defined in attach.cc; Init calls the hook below.
// The collector's side is collector/collection.h (JoinChild, Attach).
#ifndef CLOCKSYNC_TRACER_ATTACH_H_
#define CLOCKSYNC_TRACER_ATTACH_H_

#include <cstdint>

#include "tracer/session.h"

namespace clocksync::tracer {

// Init, under the lifecycle lock, once the session's records exist: a new
// trace (phase 0) starts its attach groups at 0; a child of an attach
// group (its stream's Welcome said so) defines the group's two
// communicators and remembers the group (Tracer::Attached); the records
// accept the ranks the collector said the run has.
void NoteAttachAtInit(TracingSession* session, uint32_t phase);

}  // namespace clocksync::tracer

#endif  // CLOCKSYNC_TRACER_ATTACH_H_
