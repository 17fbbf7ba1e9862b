// tracer/start_modes.h: the start-up modes of the client-server model
// besides "the collector starts first" (CLOCKSYNC_COLLECTOR):
//   server-init    Tracer::ServerInit: this process serves the collector
//                  in-process (collector/in_process.h) and traces as
//                  rank 0; its Finalize waits for every rank and writes
//                  the run's archive;
//   client-listen  Tracer::ClientListen: this process opens a listening
//                  endpoint (collector/dial.h) and returns its contact
//                  string; its next Init waits for the collector's dial,
//                  which says the rank and where the collector is.
// Tracer::ServerInit and Tracer::ClientListen are defined here; Init and
// Finalize (tracer.cc) call the two hooks below.
#ifndef CLOCKSYNC_TRACER_START_MODES_H_
#define CLOCKSYNC_TRACER_START_MODES_H_

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "tracer/tracer.h"

namespace clocksync::tracer {

// Init, under the lifecycle lock, before it connects: when ClientListen
// left an endpoint and no collector is set, waits for the collector's dial
// (at most collector_timeout_ns; Cancelled when *abort is set) and sets
// options->collector, rank and world_size from it; the endpoint is closed
// either way. OK and nothing done without an endpoint.
absl::Status AwaitDialIfListening(TracerOptions* options,
                                  const std::atomic<bool>* abort);

// Under the lifecycle lock: the address in a server-init process's contact
// string (the one other hosts reach), "" in any other process.
std::string ServerRoleAddress();

// Finalize (the last phase), after the session ended: in a server-init
// process, waits for every rank, writes the run's archive and prints its
// summary on stderr. OK and nothing done otherwise.
absl::Status EndServerRole();

}  // namespace clocksync::tracer

#endif  // CLOCKSYNC_TRACER_START_MODES_H_
