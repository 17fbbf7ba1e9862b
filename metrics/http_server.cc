// metrics/http_server.cc: HttpServer: one poll(2) loop over the listening
// sockets and the connections, each connection reading its request head,
// writing its answer, then draining what the client still sends until it
// closes (so that closing does not reset the answer away).
#include "metrics/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "metrics/http_request.h"
#include "probe/address.h"
#include "spdlog/spdlog.h"

namespace clocksync::metrics {
namespace {

// Connections accepted per listener and loop, so that a flood of them
// cannot starve the open ones.
constexpr int kAcceptsPerRound = 64;
// Out of descriptors or memory: how long accepting pauses.
constexpr absl::Duration kAcceptPause = absl::Milliseconds(100);
// After the answer: how long, and how much, the client may still send
// before the connection is closed anyway.
constexpr absl::Duration kDrainTime = absl::Seconds(1);
constexpr size_t kMaxDrainBytes = 64 * 1024;
// At most one problem logged per this interval.
constexpr absl::Duration kLogInterval = absl::Minutes(1);
constexpr int kListenBacklog = 64;

absl::string_view ReasonPhrase(int status_code) {
  switch (status_code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

// A whole answer. HEAD gets the headers GET would, without the body.
std::string Response(int status_code, absl::string_view content_type,
                     absl::string_view body, bool head_only,
                     absl::string_view extra_headers = "") {
  return absl::StrCat(
      "HTTP/1.1 ", status_code, " ", ReasonPhrase(status_code), "\r\n",
      "Date: ",
      absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", absl::Now(),
                       absl::UTCTimeZone()),
      "\r\nContent-Type: ", content_type, "\r\nContent-Length: ", body.size(),
      "\r\n", extra_headers, "Connection: close\r\n\r\n",
      head_only ? "" : body);
}

std::string ErrorResponse(int status_code, absl::string_view why,
                          bool head_only = false,
                          absl::string_view extra_headers = "") {
  return Response(status_code, "text/plain; charset=utf-8",
                  absl::StrCat(status_code, " ", ReasonPhrase(status_code),
                               ": ", why, "\n"),
                  head_only, extra_headers);
}

// "10.0.0.5:41234" or "[::1]:41234".
std::string PeerName(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  return probe::JoinHostPort(host, port);
}

absl::Status BindError(int error) {
  return absl::UnavailableError(
      error == EADDRINUSE ? "address already in use (another clocksyncd, or "
                            "another service, listens there)"
      : error == EACCES   ? "permission denied (ports below 1024 need root or "
                            "CAP_NET_BIND_SERVICE)"
      : error == EADDRNOTAVAIL ? "not an address of this host"
                               : absl::StrCat("cannot bind: ", std::strerror(error)));
}

// A path or method for the log (visible ASCII already, but long).
std::string Shortened(absl::string_view text) {
  constexpr size_t kMaxLoggedBytes = 64;
  if (text.size() <= kMaxLoggedBytes) return std::string(text);
  return absl::StrCat(text.substr(0, kMaxLoggedBytes), "...");
}

void SetPort(sockaddr* address, int port) {
  if (address->sa_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(address)->sin_port = htons(port);
  } else if (address->sa_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(address)->sin6_port = htons(port);
  }
}

}  // namespace

struct HttpServer::Connection {
  enum class State { kReading, kWriting, kDraining };
  int fd = -1;
  std::string peer;  // For the log.
  State state = State::kReading;
  absl::Time deadline;  // Of the current state.
  std::string in;       // The request so far (at most the head's limit).
  std::string out;      // The answer.
  size_t sent = 0;      // Bytes of `out` sent.
  size_t drained = 0;   // Bytes read and dropped after the answer.
};

HttpServer::HttpServer(HttpServerOptions options,
                       std::map<std::string, HttpPage> pages)
    : options_(std::move(options)), pages_(std::move(pages)) {}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Start(const std::string& address) {
  const absl::StatusOr<probe::HostPort> parsed =
      probe::ParseHostPort("address", address, {.allow_port_zero = true});
  if (!parsed.ok()) return parsed.status();
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(parsed->port);
  const int resolved =
      getaddrinfo(parsed->host.c_str(), port_text.c_str(), &hints, &found);
  if (resolved != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot resolve host \"", parsed->host, "\": ", gai_strerror(resolved)));
  }
  // Every address the host resolves to; one this host cannot bind (IPv6
  // disabled, say) is skipped while another binds, but a port in use or
  // not permitted on any of them fails the whole.
  int port = parsed->port;
  absl::Status failure = absl::OkStatus();
  absl::Status skipped = absl::OkStatus();
  for (addrinfo* a = found; a != nullptr && failure.ok(); a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                          a->ai_protocol);
    if (fd < 0) {
      skipped = absl::UnavailableError(absl::StrCat("cannot open a socket: ",
                                                    std::strerror(errno)));
      continue;
    }
    // A TIME_WAIT leftover of our previous run is no conflict; a live
    // listener is (no SO_REUSEPORT).
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    SetPort(a->ai_addr, port);  // Port 0: the first bind's pick for all.
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      const int error = errno;
      close(fd);
      if (error == EADDRINUSE || error == EACCES) {
        failure = BindError(error);
      } else {
        skipped = BindError(error);
      }
      continue;
    }
    if (listen(fd, kListenBacklog) != 0) {
      failure = absl::UnavailableError(
          absl::StrCat("cannot listen: ", std::strerror(errno)));
      close(fd);
      continue;
    }
    if (port == 0) {
      sockaddr_storage bound = {};
      socklen_t length = sizeof(bound);
      getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
      port = bound.ss_family == AF_INET6
                 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                 : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    }
    listen_fds_.push_back(fd);
  }
  freeaddrinfo(found);
  if (failure.ok() && listen_fds_.empty()) {
    failure = skipped.ok() ? absl::UnavailableError("no address to listen on")
                           : skipped;
  }
  if (failure.ok()) {
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
      failure = absl::InternalError(
          absl::StrCat("eventfd: ", std::strerror(errno)));
    }
  }
  if (!failure.ok()) {
    for (const int fd : listen_fds_) close(fd);
    listen_fds_.clear();
    return failure;
  }
  port_ = port;
  thread_ = std::thread([this] { Serve(); });
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    // Cannot fail: the counter is far from overflowing.
    (void)!write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  for (const int fd : listen_fds_) close(fd);
  listen_fds_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
}

HttpServerStats HttpServer::stats() const {
  HttpServerStats s;
  s.connections = connections_.load();
  s.ok = ok_.load();
  s.refused_busy = refused_busy_.load();
  s.bad_requests = bad_requests_.load();
  s.timeouts = timeouts_.load();
  s.io_errors = io_errors_.load();
  return s;
}

void HttpServer::Serve() {
  std::vector<Connection> connections;
  std::vector<Connection> kept;
  std::vector<pollfd> polled;
  absl::Time accept_paused_until = absl::InfinitePast();
  for (;;) {
    const absl::Time now = absl::Now();
    const bool accepting = now >= accept_paused_until;
    absl::Time wake_at = accepting ? absl::InfiniteFuture() : accept_paused_until;
    polled.clear();
    polled.push_back({wake_fd_, POLLIN, 0});
    for (const int fd : listen_fds_) {
      polled.push_back({fd, static_cast<short>(accepting ? POLLIN : 0), 0});
    }
    for (const Connection& c : connections) {
      const bool writing = c.state == Connection::State::kWriting;
      polled.push_back({c.fd, static_cast<short>(writing ? POLLOUT : POLLIN), 0});
      wake_at = std::min(wake_at, c.deadline);
    }
    int timeout_ms = -1;
    if (wake_at != absl::InfiniteFuture()) {
      // Rounded up: waking before the deadline would spin.
      timeout_ms = static_cast<int>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(wake_at - now) + 1, 0, 60'000));
    }
    if (poll(polled.data(), polled.size(), timeout_ms) < 0 && errno != EINTR) {
      Report(Problem::kIoError, absl::StrCat("poll: ", std::strerror(errno)));
      absl::SleepFor(kAcceptPause);
      continue;
    }
    if (polled[0].revents != 0) break;  // Stop().
    const size_t first_connection = 1 + listen_fds_.size();
    kept.clear();
    for (size_t i = 0; i < connections.size(); ++i) {
      Connection& c = connections[i];
      bool open = true;
      if (polled[first_connection + i].revents != 0) {
        switch (c.state) {
          case Connection::State::kReading: open = Read(&c); break;
          case Connection::State::kWriting: open = Write(&c); break;
          case Connection::State::kDraining: open = Drain(&c); break;
        }
      }
      if (open && absl::Now() >= c.deadline) {
        open = false;
        if (c.state == Connection::State::kReading) {
          Report(Problem::kTimeout,
                 absl::StrCat(c.peer, ": no whole request within ",
                              absl::FormatDuration(options_.read_timeout),
                              " (", c.in.size(), " bytes)"));
          // One try, not waited for: the client may not be reading.
          const std::string answer = ErrorResponse(408, "request too slow");
          (void)!send(c.fd, answer.data(), answer.size(),
                      MSG_NOSIGNAL | MSG_DONTWAIT);
        } else if (c.state == Connection::State::kWriting) {
          Report(Problem::kTimeout,
                 absl::StrCat(c.peer, ": answer not taken within ",
                              absl::FormatDuration(options_.write_timeout)));
        }
      }
      if (open) {
        kept.push_back(std::move(c));
      } else {
        close(c.fd);
      }
    }
    connections.swap(kept);
    for (size_t i = 0; i < listen_fds_.size(); ++i) {
      if ((polled[1 + i].revents & POLLIN) == 0) continue;
      Accept(listen_fds_[i], &connections);
    }
    // Out of descriptors or memory: Accept asked for a pause.
    if (accept_pause_requested_) {
      accept_pause_requested_ = false;
      accept_paused_until = absl::Now() + kAcceptPause;
    }
  }
  for (const Connection& c : connections) close(c.fd);
}

void HttpServer::Accept(int listen_fd, std::vector<Connection>* connections) {
  for (int i = 0; i < kAcceptsPerRound; ++i) {
    sockaddr_storage address = {};
    socklen_t length = sizeof(address);
    const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&address),
                           &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int error = errno;
      if (error == EAGAIN || error == EWOULDBLOCK) return;
      if (error == EMFILE || error == ENFILE || error == ENOBUFS ||
          error == ENOMEM) {
        Report(Problem::kIoError,
               absl::StrCat("accept: ", std::strerror(error),
                            "; not accepting for ",
                            absl::FormatDuration(kAcceptPause)));
        accept_pause_requested_ = true;
        return;
      }
      // The client gave up before we took it (ECONNABORTED), or a
      // network error Linux reports here: next one.
      Report(Problem::kIoError, absl::StrCat("accept: ", std::strerror(error)));
      continue;
    }
    ++connections_;
    Connection c;
    c.fd = fd;
    c.peer = PeerName(address);
    if (connections->size() >= static_cast<size_t>(options_.max_connections)) {
      Report(Problem::kBusy,
             absl::StrCat(c.peer, ": refused, ", options_.max_connections,
                          " connections open"));
      const std::string answer = ErrorResponse(503, "too many connections");
      (void)!send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      close(fd);
      continue;
    }
    c.deadline = absl::Now() + options_.read_timeout;
    connections->push_back(std::move(c));
  }
}

bool HttpServer::Read(Connection* c) {
  // The parser refuses a head at the limit, so there is always room here.
  char buffer[4096];
  const size_t room = options_.max_request_head_bytes - c->in.size();
  const ssize_t n = recv(c->fd, buffer, std::min(sizeof(buffer), room), 0);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
    Report(Problem::kIoError,
           absl::StrCat(c->peer, ": recv: ", std::strerror(errno)));
    return false;
  }
  if (n == 0) {
    // Closed before a whole head: nothing to answer. Silent when nothing
    // came at all (a TCP health check).
    if (!c->in.empty()) {
      Report(Problem::kBadRequest,
             absl::StrCat(c->peer, ": closed after ", c->in.size(),
                          " bytes, before the request head ended"));
    }
    return false;
  }
  const bool first = c->in.empty();
  const bool new_line = std::memchr(buffer, '\n', n) != nullptr;
  c->in.append(buffer, n);
  // Parsed when a line ends, on the first bytes (garbage is refused at
  // once) and at the limit; on every byte of a trickling client it would
  // be quadratic.
  if (!first && !new_line && c->in.size() < options_.max_request_head_bytes) {
    return true;
  }
  const ParsedRequest parsed =
      ParseRequestHead(c->in, options_.max_request_head_bytes);
  if (parsed.state == ParseState::kIncomplete) return true;
  Answer(c, parsed);
  return Write(c);
}

void HttpServer::Answer(Connection* c, const ParsedRequest& parsed) {
  const bool head_only = parsed.state == ParseState::kComplete &&
                         parsed.request.method == "HEAD";
  const RequestHead& request = parsed.request;
  const auto page = pages_.find(request.path);
  if (parsed.state == ParseState::kBad) {
    Report(Problem::kBadRequest,
           absl::StrCat(c->peer, ": ", parsed.status_code, " ", parsed.error));
    c->out = ErrorResponse(parsed.status_code, parsed.error);
  } else if (page == pages_.end()) {
    Report(Problem::kBadRequest,
           absl::StrCat(c->peer, ": 404 for ", Shortened(request.path)));
    c->out = ErrorResponse(404, "no such page", head_only);
  } else if (request.method != "GET" && request.method != "HEAD") {
    Report(Problem::kBadRequest,
           absl::StrCat(c->peer, ": 405 for method ",
                        Shortened(request.method)));
    c->out = ErrorResponse(405, "only GET and HEAD", /*head_only=*/false,
                           "Allow: GET, HEAD\r\n");
  } else {
    std::string body;
    bool made = true;
    try {
      body = page->second.body_for_query
                 ? page->second.body_for_query(request.query)
                 : page->second.body();
    } catch (const std::exception& e) {
      // Out of memory, most likely: the page fails, not the program.
      made = false;
      Report(Problem::kIoError,
             absl::StrCat(request.path, ": cannot make the page: ", e.what()));
    }
    if (made) {
      ++ok_;
      c->out = Response(200, page->second.content_type, body, head_only);
    } else {
      c->out = ErrorResponse(500, "cannot make the page", head_only);
    }
  }
  std::string().swap(c->in);
  c->state = Connection::State::kWriting;
  c->deadline = absl::Now() + options_.write_timeout;
}

bool HttpServer::Write(Connection* c) {
  while (c->sent < c->out.size()) {
    const ssize_t n = send(c->fd, c->out.data() + c->sent,
                           c->out.size() - c->sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
      Report(Problem::kIoError,
             absl::StrCat(c->peer, ": send: ", std::strerror(errno)));
      return false;
    }
    c->sent += n;
  }
  // All sent: say so, and read until the client closes, so that unread
  // request bytes do not make our close a reset that loses the answer.
  shutdown(c->fd, SHUT_WR);
  std::string().swap(c->out);
  c->state = Connection::State::kDraining;
  c->deadline = absl::Now() + kDrainTime;
  return true;
}

bool HttpServer::Drain(Connection* c) {
  char buffer[4096];
  const ssize_t n = recv(c->fd, buffer, sizeof(buffer), 0);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  c->drained += n;
  return n > 0 && c->drained <= kMaxDrainBytes;
}

void HttpServer::Report(Problem problem, const std::string& what) {
  switch (problem) {
    case Problem::kBadRequest: ++bad_requests_; break;
    case Problem::kTimeout: ++timeouts_; break;
    case Problem::kIoError: ++io_errors_; break;
    case Problem::kBusy: ++refused_busy_; break;
  }
  const absl::Time now = absl::Now();
  if (now < next_log_) {
    ++not_logged_;
    return;
  }
  spdlog::warn("{}: {}{}", options_.log_name, what,
               not_logged_ == 0
                   ? ""
                   : absl::StrCat(" (and ", not_logged_,
                                  " more problems since the last report; at "
                                  "most one is logged a minute)"));
  next_log_ = now + kLogInterval;
  not_logged_ = 0;
}

}  // namespace clocksync::metrics
