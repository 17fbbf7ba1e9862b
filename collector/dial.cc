// collector/dial.cc: the reverse start-up's listening endpoint and dial
// (dial.h), over plain TCP sockets.

#include "collector/dial.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "probe/address.h"

namespace clocksync::collector {
namespace {

constexpr int kDialVersion = 1;
// The longest dial line accepted (a contact string is < 400 bytes).
constexpr size_t kMaxLineBytes = 1024;

int64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Waits until `fd` is ready for `events` or `deadline_ns` passes.
bool PollUntil(int fd, short events, int64_t deadline_ns) {
  for (;;) {
    const int64_t left_ms = (deadline_ns - MonotonicNs()) / 1'000'000;
    if (left_ms <= 0) return false;
    struct pollfd p = {fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// Reads one line (without '\n') within the deadline.
bool ReadLine(int fd, int64_t deadline_ns, std::string* line) {
  line->clear();
  char c;
  while (line->size() < kMaxLineBytes) {
    if (!PollUntil(fd, POLLIN, deadline_ns)) return false;
    const ssize_t n = read(fd, &c, 1);
    if (n <= 0) return false;
    if (c == '\n') return true;
    line->push_back(c);
  }
  return false;
}

bool WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = send(fd, text.data() + done, text.size() - done,
                           MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// A connected TCP socket to `address` (host:port), or -1 and *error.
int ConnectTcp(const std::string& address, int64_t deadline_ns,
               std::string* error) {
  absl::StatusOr<probe::HostPort> hp = probe::ParseHostPort("contact", address);
  if (!hp.ok()) {
    *error = std::string(hp.status().message());
    return -1;
  }
  struct addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* found = nullptr;
  const std::string port = absl::StrCat(hp->port);
  if (const int rc = getaddrinfo(hp->host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    *error = absl::StrCat("cannot resolve ", hp->host, ": ", gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (struct addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      *error = strerror(errno);
      close(fd);
      fd = -1;
      continue;
    }
    int so_error = 0;
    socklen_t length = sizeof(so_error);
    if (!PollUntil(fd, POLLOUT, deadline_ns) ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &length) != 0 ||
        so_error != 0) {
      *error = so_error != 0 ? strerror(so_error) : "no connection in time";
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

}  // namespace

absl::StatusOr<DialOrder> ParseDialLine(const std::string& line,
                                        const std::string& token) {
  const std::vector<std::string> words = absl::StrSplit(line, ' ');
  if (words.size() != 6 || words[0] != "clocksync-dial") {
    return absl::InvalidArgumentError("not a clocksync dial line");
  }
  int version = 0;
  if (!absl::SimpleAtoi(words[1], &version) || version != kDialVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("dial version ", words[1], " (this process speaks ",
                     kDialVersion, ")"));
  }
  if (!TokensEqual(words[2], token)) {
    return absl::PermissionDeniedError("not this endpoint's token");
  }
  DialOrder order;
  if (!absl::SimpleAtoi(words[3], &order.rank) ||
      !absl::SimpleAtoi(words[4], &order.world_size) || order.world_size < 1 ||
      order.rank < 0 || order.rank >= order.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dial: rank ", words[3], " of ", words[4], " is not a rank of the run"));
  }
  absl::StatusOr<Contact> collector = ParseContact("dial", words[5]);
  if (!collector.ok()) return collector.status();
  order.collector = *collector;
  return order;
}

std::string FormatDialLine(const std::string& process_token,
                           const DialOrder& order) {
  return absl::StrCat("clocksync-dial ", kDialVersion, " ", process_token, " ",
                      order.rank, " ", order.world_size, " ",
                      FormatContact(order.collector), "\n");
}

absl::StatusOr<std::unique_ptr<ListenEndpoint>> ListenEndpoint::Open(
    const std::string& field, const std::string& listen,
    const std::string& advertise) {
  absl::StatusOr<probe::HostPort> hp = probe::ParseHostPort(
      field, listen, {.allow_port_zero = true, .allow_empty_host = true});
  if (!hp.ok()) return hp.status();
  absl::StatusOr<std::string> token = NewToken();
  if (!token.ok()) return token.status();
  struct addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  struct addrinfo* found = nullptr;
  const std::string port = absl::StrCat(hp->port);
  if (const int rc = getaddrinfo(hp->host.empty() ? nullptr : hp->host.c_str(),
                                 port.c_str(), &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": cannot resolve ", hp->host, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string error = "no address";
  for (struct addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 16) != 0) {
      error = strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat(field, ": cannot listen on ", listen, ": ", error));
  }
  struct sockaddr_storage bound = {};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  const std::string host = AdvertisedHost(advertise, hp->host);
  const std::string contact =
      FormatContact(Contact{*token, probe::JoinHostPort(host, bound_port)});
  return std::unique_ptr<ListenEndpoint>(
      new ListenEndpoint(fd, *token, contact));
}

ListenEndpoint::~ListenEndpoint() { close(fd_); }

absl::StatusOr<DialOrder> ListenEndpoint::WaitForDial(
    int64_t timeout_ns, const std::atomic<bool>* abort) {
  const int64_t deadline_ns = MonotonicNs() + timeout_ns;
  for (;;) {
    if (abort != nullptr && abort->load(std::memory_order_acquire)) {
      return absl::CancelledError(
          absl::StrCat(contact_.substr(contact_.find('@') + 1),
                       ": init aborted while waiting for the collector's "
                       "dial (abort called from another thread)"));
    }
    if (MonotonicNs() >= deadline_ns) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no collector dialed ", contact_.substr(contact_.find('@') + 1),
          " within ", timeout_ns / 1'000'000, " ms"));
    }
    struct pollfd p = {fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    std::string line;
    // One dialer at a time; a silent one gets 2 s.
    const bool read = ReadLine(conn, MonotonicNs() + 2'000'000'000, &line);
    absl::StatusOr<DialOrder> order =
        read ? ParseDialLine(line, token_)
             : absl::InvalidArgumentError("no dial line");
    WriteAll(conn, order.ok() ? std::string("ok\n")
                              : absl::StrCat("refused ",
                                             order.status().message(), "\n"));
    close(conn);
    if (order.ok()) return order;
  }
}

std::vector<absl::Status> DialProcesses(const std::vector<Contact>& processes,
                                        const Contact& collector,
                                        absl::Duration timeout) {
  std::vector<absl::Status> results(processes.size());
  std::vector<std::thread> dialers;
  const int64_t deadline_ns = MonotonicNs() + absl::ToInt64Nanoseconds(timeout);
  for (size_t i = 0; i < processes.size(); ++i) {
    dialers.emplace_back([&, i] {
      const Contact& process = processes[i];
      DialOrder order;
      order.rank = static_cast<int32_t>(i);
      order.world_size = static_cast<int32_t>(processes.size());
      order.collector = collector;
      std::string error = "no connection";
      while (MonotonicNs() < deadline_ns) {
        const int fd = ConnectTcp(process.address, deadline_ns, &error);
        if (fd < 0) {
          usleep(100'000);  // not listening yet
          continue;
        }
        std::string answer;
        const bool answered =
            WriteAll(fd, FormatDialLine(process.token, order)) &&
            ReadLine(fd, deadline_ns, &answer);
        close(fd);
        if (answered && answer == "ok") return;
        results[i] = absl::FailedPreconditionError(absl::StrCat(
            "process ", process.address, " (rank ", i, "): ",
            answered ? answer : std::string("no answer to the dial")));
        return;
      }
      results[i] = absl::UnavailableError(absl::StrCat(
          "process ", process.address, " (rank ", i, "): ", error));
    });
  }
  for (std::thread& t : dialers) t.join();
  return results;
}

}  // namespace clocksync::collector
