// metrics/http_server.h: HttpServer, a small HTTP/1.1 server for GET and
// HEAD of a few fixed pages (clocksyncd's /metrics), built so that a
// hostile client cannot knock it, or the program around it, over.
//
// One thread polls the listening sockets and every connection (non-blocking
// sockets, poll(2)); each connection carries one request and is closed
// after its answer (`Connection: close`). The limits:
//   - a request head larger than max_request_head_bytes: 431, and nothing
//     more is read from it; malformed: 400 (metrics/http_request.h);
//   - the whole head must arrive within read_timeout of the connection's
//     accept, however slowly it trickles (slowloris): else 408 and close;
//   - the answer must be taken within write_timeout, else the connection
//     is dropped (a client that never reads);
//   - at most max_connections at once: one more gets 503 and is closed at
//     once (no queue builds up behind a flood);
//   - out of file descriptors: accepting pauses for 100 ms, no busy loop.
// Other paths get 404, other methods 405 (with Allow: GET, HEAD). Bodies
// of requests are never read. Problems are counted (stats()) and logged at
// most once a minute, each log line saying how many were not logged.
//
// Example:
//   HttpServer server({}, {{"/metrics", {kExpositionContentType,
//                                        [&] { return Text(); }}}});
//   RETURN_IF_ERROR(server.Start("0.0.0.0:9100"));
//   ...
//   server.Stop();
//
// Thread safety: Start() and Stop() from one thread. Page bodies are made
// on the server's thread, one at a time; they must be thread-safe against
// the caller's other threads and quick (the server waits for them).
#ifndef CLOCKSYNC_METRICS_HTTP_SERVER_H_
#define CLOCKSYNC_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "metrics/http_request.h"

namespace clocksync::metrics {

struct HttpServerOptions {
  // Open connections at once; one more is answered 503 and closed.
  int max_connections = 16;
  // Request line and header fields together, > 0 (Prometheus sends ~300
  // bytes).
  size_t max_request_head_bytes = 8192;
  // From accept to the end of the request head.
  absl::Duration read_timeout = absl::Seconds(5);
  // From the end of the request head to the last byte of the answer.
  absl::Duration write_timeout = absl::Seconds(5);
  // Names the server in log lines ("metrics endpoint").
  std::string log_name = "HTTP server";
};

// A page: its Content-Type and a function making its body per request;
// a page that answers queries (`/lod?t0=...`) sets body_for_query instead,
// which gets the request's query string (after '?', not decoded).
struct HttpPage {
  std::string content_type;
  std::function<std::string()> body;
  std::function<std::string(const std::string& query)> body_for_query = {};
};

// What happened since Start(), for tests and logs.
struct HttpServerStats {
  uint64_t connections = 0;   // Accepted, the refused ones included.
  uint64_t ok = 0;            // Answered 200.
  uint64_t refused_busy = 0;  // 503: at max_connections.
  uint64_t bad_requests = 0;  // 400, 404, 405, 431, 505.
  uint64_t timeouts = 0;      // Read (408) or write timeouts.
  uint64_t io_errors = 0;     // accept, recv or send failed.
};

class HttpServer {
 public:
  // `pages` by path ("/metrics"); the query string goes to pages with
  // body_for_query and is ignored by the others.
  HttpServer(HttpServerOptions options, std::map<std::string, HttpPage> pages);
  // Stops if still running.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on `address` ("host:port"; port 0 picks one; a host name
  // binds every address it resolves to) and starts the server's thread.
  // Errors say why in words ("address already in use (...)", "not an
  // address of this host"); the caller names the address. Call once.
  absl::Status Start(const std::string& address);

  // The TCP port listened on (the one picked for port 0); 0 before Start().
  int port() const { return port_; }

  // Closes every connection and the listening sockets and joins the
  // thread. Idempotent.
  void Stop();

  HttpServerStats stats() const;

 private:
  struct Connection;
  enum class Problem { kBadRequest, kTimeout, kIoError, kBusy };

  void Serve();
  void Accept(int listen_fd, std::vector<Connection>* connections);
  // Advances one connection; false when it is done and must be closed.
  bool Read(Connection* c);
  bool Write(Connection* c);
  bool Drain(Connection* c);
  // Makes the answer to a complete or refused request head.
  void Answer(Connection* c, const ParsedRequest& parsed);
  // Counts a problem and logs it (at most one line a minute).
  void Report(Problem problem, const std::string& what);

  const HttpServerOptions options_;
  const std::map<std::string, HttpPage> pages_;
  std::vector<int> listen_fds_;
  int wake_fd_ = -1;  // eventfd: Stop() wakes the poll.
  int port_ = 0;
  std::thread thread_;
  // Set by Accept() when out of descriptors or memory (server thread).
  bool accept_pause_requested_ = false;
  std::atomic<uint64_t> connections_{0}, ok_{0}, refused_busy_{0},
      bad_requests_{0}, timeouts_{0}, io_errors_{0};
  // The log's rate limit (server thread only).
  absl::Time next_log_ = absl::InfinitePast();
  uint64_t not_logged_ = 0;
};

}  // namespace clocksync::metrics

#endif  // CLOCKSYNC_METRICS_HTTP_SERVER_H_
