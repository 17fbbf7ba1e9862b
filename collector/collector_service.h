// collector/collector_service.h: the Collector gRPC service
// (proto/collector.proto): one Stream call per traced process, its
// messages handed to a Collection (collection.h), an Ack after each stored
// batch. A refused Hello ends the call with the Collection's status; a
// malformed message later ends it with INVALID_ARGUMENT naming the field
// and marks the rank lost; a call that ends without Finish marks it lost.
// Nothing a process sends can crash the collector.
//
// Also here: BuildCollectorServer, the gRPC server a collector runs.
#ifndef CLOCKSYNC_COLLECTOR_COLLECTOR_SERVICE_H_
#define CLOCKSYNC_COLLECTOR_COLLECTOR_SERVICE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "collector/collection.h"
#include "grpcpp/grpcpp.h"
#include "proto/collector.grpc.pb.h"

namespace clocksync::collector {

class CollectorService final : public Collector::Service {
 public:
  // `log`: one line per refused stream and per lost rank (may be empty).
  CollectorService(Collection* collection,
                   std::function<void(const std::string&)> log);

  grpc::Status Stream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<CollectorMessage, ProcessMessage>* stream)
      override;

 private:
  void Log(const std::string& line) const {
    if (log_) log_(line);
  }
  Collection* const collection_;
  const std::function<void(const std::string&)> log_;
};

// Tunes this process's malloc for a collector: freed memory is kept for
// reuse (no trimming below 512 MiB, nothing mapped below 32 MiB), so the
// buffers of every received batch do not fault their pages in again
// (page faults cost more than the copies on a paravirtualized VM:
// docs/COLLECTOR.md, Figures). For the collector's own process only (the
// tracer never changes a program's malloc).
void TuneMallocForCollector();

// Optional TLS for the server: PEM files (gRPC's own credentials).
struct ServerTls {
  std::string cert_file;  // the collector's certificate chain
  std::string key_file;   // its private key
};

// A started server for `service` on `address` ("host:port" with port 0
// for any free one, or "unix:PATH"); the port it got in *selected_port.
// Messages up to kMaxMessageBytes. `tls` absent: plaintext. Unavailable
// when it cannot bind (naming the address), InvalidArgument for TLS files
// that cannot be read (naming them).
absl::StatusOr<std::unique_ptr<grpc::Server>> BuildCollectorServer(
    const std::string& address, Collector::Service* service,
    const ServerTls* tls, int* selected_port);

}  // namespace clocksync::collector

#endif  // CLOCKSYNC_COLLECTOR_COLLECTOR_SERVICE_H_
