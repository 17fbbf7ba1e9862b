// collector/in_process.h: a collector inside a traced process (the
// client-server model's server-init): the process serves the Collector
// service itself, traces as rank 0 over loopback, hands its contact string
// to the others, and at its end waits for every rank and writes the run's
// archive, as clocksync-collector would (the same Collection, service and
// WriteCollectedRun). Tracer::ServerInit, cs_trace_server_init use it.
//
// Thread safety: Finish once, from one thread; the rest is const.
#ifndef CLOCKSYNC_COLLECTOR_IN_PROCESS_H_
#define CLOCKSYNC_COLLECTOR_IN_PROCESS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "collector/collection.h"
#include "collector/collector_service.h"
#include "collector/run_archive.h"
#include "grpcpp/grpcpp.h"

namespace clocksync::collector {

struct InProcessOptions {
  // Processes in the run, this one (rank 0) included: 1..100000.
  int32_t world_size = 1;
  // The run's archive (must not exist); its raw archives go beside it,
  // <output>.raw.
  std::string output;
  // Where to serve ("HOST:PORT", port 0: any free one) and the host the
  // contact string names (empty: the listen host, or this machine's name
  // for a wildcard).
  std::string listen = "0.0.0.0:0";
  std::string advertise;
  RunArchiveOptions archive;
};

class InProcessCollector {
 public:
  // Serves. InvalidArgument names a bad option (`output` existing, the
  // world size, the listen address); Unavailable when it cannot bind.
  static absl::StatusOr<std::unique_ptr<InProcessCollector>> Start(
      const InProcessOptions& options);
  // Stops serving (open streams are cut).
  ~InProcessCollector();
  InProcessCollector(const InProcessCollector&) = delete;
  InProcessCollector& operator=(const InProcessCollector&) = delete;

  // TOKEN@HOST:PORT for the other processes (CLOCKSYNC_COLLECTOR).
  const std::string& contact() const { return contact_; }
  // The same for this process's own tracer (loopback).
  const std::string& self_contact() const { return self_contact_; }

  // Waits until every rank finished or was lost (without a limit: a
  // killed process is lost when its stream ends), stops serving (streams
  // still open get 5 s), and writes the run's archive. The summary's
  // lines, and whether every rank finished.
  absl::StatusOr<CollectedRun> Finish();

 private:
  InProcessCollector() = default;

  InProcessOptions options_;
  std::string raw_dir_;
  std::string contact_;
  std::string self_contact_;
  std::unique_ptr<Collection> collection_;
  std::unique_ptr<CollectorService> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace clocksync::collector

#endif  // CLOCKSYNC_COLLECTOR_IN_PROCESS_H_
