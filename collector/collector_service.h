// collector/collector_service.h: the Collector gRPC service
// (proto/collector.proto): one Stream call per traced process, its
// messages handed to a Collection (collection.h), an Ack after each stored
// batch. A refused Hello ends the call with the Collection's status; a
// malformed message later ends it with INVALID_ARGUMENT naming the field
// and marks the rank lost; a call that ends without Finish marks it lost.
// Nothing a process sends can crash the collector.
//
// Fail-safe: when a rank is lost (its call ended without Finish, or a
// message was refused), every other open stream is told (PeerLost), and a
// stream that joins later is told of the ranks lost before, right after
// its Welcome. A stream's writes (acks, PeerLost) go through one lock per
// stream; a stream's end waits for a PeerLost being written to it.
//
// Dynamic spawning: a child's Hello (Hello.attach) waits in its stream
// until its group is complete (Collection::JoinChild); its Welcome then
// carries the group. Every Welcome carries the rank's attach key.
//
// Also here: BuildCollectorServer, the gRPC server a collector runs.
#ifndef CLOCKSYNC_COLLECTOR_COLLECTOR_SERVICE_H_
#define CLOCKSYNC_COLLECTOR_COLLECTOR_SERVICE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "collector/collection.h"
#include "grpcpp/grpcpp.h"
#include "proto/collector.grpc.pb.h"

namespace clocksync::collector {

// The longest an Attach, or a child's wait for its group, lasts when the
// caller set no deadline.
inline constexpr int kMaxAttachWaitS = 600;

class CollectorService final : public Collector::Service {
 public:
  // `log`: one line per refused stream and per lost rank (may be empty).
  CollectorService(Collection* collection,
                   std::function<void(const std::string&)> log);

  grpc::Status Stream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<CollectorMessage, ProcessMessage>* stream)
      override;
  // Dynamic spawning: Collection::Attach for the request's wait_ms, within
  // the call's deadline (at most kMaxAttachWaitS).
  grpc::Status Attach(grpc::ServerContext* context,
                      const AttachRequest* request,
                      AttachReply* reply) override;

 private:
  using ServerStream =
      grpc::ServerReaderWriter<CollectorMessage, ProcessMessage>;
  // An open stream past its Welcome.
  struct Open {
    int32_t rank = 0;
    ServerStream* stream = nullptr;
    std::mutex write_mutex;  // one Write at a time
    int users = 0;           // PeerLost writers at work (streams_mutex_)
  };
  // Registers an open stream for the PeerLost messages; unregisters it
  // (waiting for a PeerLost being written) when it goes.
  class Registration {
   public:
    Registration(CollectorService* service, Open* open);
    ~Registration();

   private:
    CollectorService* const service_;
    Open* const open_;
  };

  void Log(const std::string& line) const {
    if (log_) log_(line);
  }
  static bool Write(Open* open, const CollectorMessage& message);
  // Tells every open stream but `rank`'s that `rank` was lost.
  void TellPeersLost(int32_t rank, const std::string& why);

  Collection* const collection_;
  const std::function<void(const std::string&)> log_;
  std::mutex streams_mutex_;  // open_ and each Open's users
  std::condition_variable streams_changed_;
  std::list<Open*> open_;
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
