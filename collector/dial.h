// collector/dial.h: the reverse start-up of the client-server model. A
// traced process opens a listening endpoint at client-init
// (ListenEndpoint) and hands its contact string to whoever starts the
// collector; the collector, started with all of them
// (`clocksync-collector <contact>...`), dials each (DialProcesses) and
// tells it its rank (the contact's position), the run's size and the
// collector's own contact string; the process's init then connects as in
// the usual start-up (proto/collector.proto).
//
// The dial is one line each way over TCP:
//   collector -> process  "clocksync-dial 1 <process token> <rank>
//                          <world size> <collector contact>\n"
//   process -> collector  "ok\n", or "refused <why>\n"
// The process token proves the caller holds the process's contact string
// (a wrong one is refused and the process keeps waiting). Plaintext, as
// the stream's Hello is without TLS; with TLS the stream itself is
// checked against the CA file as usual.
#ifndef CLOCKSYNC_COLLECTOR_DIAL_H_
#define CLOCKSYNC_COLLECTOR_DIAL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collector/contact.h"

namespace clocksync::collector {

// What the collector's dial tells a process.
struct DialOrder {
  int32_t rank = 0;
  int32_t world_size = 0;
  Contact collector;
};

// The process's end: a listening TCP socket and its contact string.
class ListenEndpoint {
 public:
  // Listens on `listen` ("HOST:PORT", port 0: any free one; an empty or
  // wildcard host: every interface). The contact string's host is
  // `advertise`, else the listen host, else (wildcard) this machine's
  // name. InvalidArgument names `field` and a bad address; Unavailable
  // when the socket cannot be bound.
  static absl::StatusOr<std::unique_ptr<ListenEndpoint>> Open(
      const std::string& field, const std::string& listen,
      const std::string& advertise);
  ~ListenEndpoint();
  ListenEndpoint(const ListenEndpoint&) = delete;
  ListenEndpoint& operator=(const ListenEndpoint&) = delete;

  // TOKEN@HOST:PORT, for the collector's command line.
  const std::string& contact() const { return contact_; }

  // Waits for the collector's dial, at most timeout_ns: a dial with this
  // endpoint's token and a valid order is answered "ok" and returned;
  // others are refused and the wait goes on. Cancelled when *abort is set
  // (checked every 50 ms; may be null), DeadlineExceeded after timeout_ns.
  absl::StatusOr<DialOrder> WaitForDial(int64_t timeout_ns,
                                        const std::atomic<bool>* abort);

 private:
  ListenEndpoint(int fd, std::string token, std::string contact)
      : fd_(fd), token_(std::move(token)), contact_(std::move(contact)) {}
  const int fd_;
  const std::string token_;
  const std::string contact_;
};

// Parses a dial line (without its newline) against `token`.
// InvalidArgument says what is wrong (PermissionDenied for the token).
absl::StatusOr<DialOrder> ParseDialLine(const std::string& line,
                                        const std::string& token);
// The line the collector sends (with its newline).
std::string FormatDialLine(const std::string& process_token,
                           const DialOrder& order);

// The collector's end: dials every process, the i-th gets rank i of
// processes.size(), all at once (one thread each); each connection is
// retried until `timeout` passes (the process may not listen yet).
// Returns one status per process: OK, or the error naming its contact.
std::vector<absl::Status> DialProcesses(const std::vector<Contact>& processes,
                                        const Contact& collector,
                                        absl::Duration timeout);

}  // namespace clocksync::collector

#endif  // CLOCKSYNC_COLLECTOR_DIAL_H_
