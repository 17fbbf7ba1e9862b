// probe/udp_socket.cc: probe address resolution, timestamping UDP sockets,
// receive instants from kernel stamps, and the sendmmsg loop (see
// probe/udp_socket.h).

#include "probe/udp_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "probe/address.h"

namespace clocksync::probe::probe_internal {
namespace {

// A kernel receive stamp more than this before the raw reading taken after
// the receive call is implausible (CLOCK_REALTIME was stepped): the reading
// replaces it.
constexpr int64_t kMaxReceiveAgeNs = 1'000'000'000;
// A stamp converted to more than this after that reading is implausible
// too; smaller excesses (the late bias) are clamped to the reading.
constexpr int64_t kMaxReceiveAheadNs = 1'000'000;

// Resolves a probe address to its first socket address (see
// OpenProbeSocket).
absl::Status Resolve(const std::string& address, bool passive,
                     sockaddr_storage* out, socklen_t* out_len) {

  AddressRules rules;
  rules.allow_port_zero = true;
  rules.allow_empty_host = true;
  absl::StatusOr<HostPort> parsed =
      ParseHostPort(absl::StrCat("probe address '", address, "'"), address,
                    rules);
  if (!parsed.ok()) return parsed.status();
  const std::string& host = parsed->host;
  const std::string port = absl::StrCat(parsed->port);
  if (host.empty() && !passive) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe address '", address, "': missing host"));
  }
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                             port.c_str(), &hints, &result);
  if (rc != 0) {
    const std::string why = rc == EAI_SYSTEM ? std::strerror(errno)
                                             : gai_strerror(rc);
    return absl::UnavailableError(absl::StrCat(
        "probe address '", address, "': cannot resolve: ", why));
  }
  if (result == nullptr || result->ai_addrlen > sizeof(sockaddr_storage)) {
    if (result != nullptr) freeaddrinfo(result);
    return absl::UnavailableError(
        absl::StrCat("probe address '", address, "': no usable address"));
  }
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out, result->ai_addr, result->ai_addrlen);
  *out_len = result->ai_addrlen;
  freeaddrinfo(result);
  return absl::OkStatus();
}

}  // namespace

uint64_t Sum(const DecodeStatusCounters& counters) {
  uint64_t total = 0;
  for (const auto& counter : counters) {
    total += counter.load(std::memory_order_relaxed);
  }
  return total;
}

std::string FormatAddress(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    return absl::StrCat(text, ":", ntohs(v4->sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    return absl::StrCat("[", text, "]:", ntohs(v6->sin6_port));
  }
  return absl::StrCat("(address family ", address.ss_family, ")");
}

uint16_t PortOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  return 0;
}

absl::StatusOr<ProbeSocket> OpenProbeSocket(const std::string& address,
                                            bool passive, bool nonblocking) {
  ProbeSocket opened;
  if (absl::Status s = Resolve(address, passive, &opened.address,
                               &opened.address_len);
      !s.ok()) {
    return s;
  }
  const int type =
      SOCK_DGRAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0);
  opened.fd = socket(opened.address.ss_family, type, 0);
  if (opened.fd < 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("probe socket for '", address, "'"));
  }
  const int on = 1;
  // SO_RXQ_OVFL: each datagram carries the socket's count of datagrams the
  // kernel dropped because the receive buffer was full.
  if (setsockopt(opened.fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) !=
          0 ||
      setsockopt(opened.fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof(on)) != 0) {
    const absl::Status status = absl::ErrnoToStatus(
        errno,
        absl::StrCat("SO_TIMESTAMPNS/SO_RXQ_OVFL on probe socket for '",
                     address, "'"));
    close(opened.fd);
    return status;
  }
  return opened;
}

int64_t ReceiveRawNs(const msghdr& header, int64_t raw_after_receive_ns,
                     const RealtimeToRaw& realtime_to_raw,
                     std::atomic<uint64_t>& fallbacks,
                     int64_t* uncertainty_ns) {
  *uncertainty_ns = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr;
       c = CMSG_NXTHDR(const_cast<msghdr*>(&header), c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS ||
        c->cmsg_len < CMSG_LEN(sizeof(timespec))) {
      continue;
    }
    timespec stamp;
    std::memcpy(&stamp, CMSG_DATA(c), sizeof(stamp));
    if (stamp.tv_sec < 0 || stamp.tv_sec > INT64_MAX / 1'000'000'000 - 1) {
      break;
    }
    const int64_t realtime_ns =
        static_cast<int64_t>(stamp.tv_sec) * 1'000'000'000 + stamp.tv_nsec;
    int64_t half_ns = 0;
    const int64_t center_ns = realtime_to_raw.ToRawCentered(realtime_ns, &half_ns);
    if (half_ns > kMaxReceiveAheadNs ||
        center_ns < raw_after_receive_ns - kMaxReceiveAgeNs ||
        center_ns > raw_after_receive_ns + kMaxReceiveAheadNs) {
      break;
    }
    // The true instant is in [center − half, center + half], and not after
    // the reading: the middle of what is left.
    const int64_t early_ns = center_ns - half_ns;
    const int64_t late_ns = std::min(center_ns + half_ns, raw_after_receive_ns);
    if (late_ns < early_ns) break;  // Implausible: after the reading.
    *uncertainty_ns = (late_ns - early_ns + 1) / 2;
    return late_ns - *uncertainty_ns;
  }
  Bump(fallbacks);
  return raw_after_receive_ns;
}

void NoteReceiveBufferDrops(const msghdr& header,
                            std::atomic<uint64_t>& drops) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr;
       c = CMSG_NXTHDR(const_cast<msghdr*>(&header), c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SO_RXQ_OVFL ||
        c->cmsg_len < CMSG_LEN(sizeof(uint32_t))) {
      continue;
    }
    uint32_t total = 0;
    std::memcpy(&total, CMSG_DATA(c), sizeof(total));
    // The kernel's count is cumulative (and 32-bit): keep the largest seen,
    // carrying over wrap-arounds.
    const uint64_t before = drops.load(std::memory_order_relaxed);
    uint64_t now = (before & ~uint64_t{0xFFFFFFFF}) | total;
    if (now < before) now += uint64_t{1} << 32;
    drops.store(now, std::memory_order_relaxed);
    return;
  }
}

void SendEach(int fd, mmsghdr* msgs, size_t count,
              std::atomic<uint64_t>& sent, std::atomic<uint64_t>& errors,
              bool* accepted) {
  size_t done = 0;
  while (done < count) {
    const int n = sendmmsg(fd, msgs + done, static_cast<unsigned>(count - done),
                           MSG_DONTWAIT);
    if (n > 0) {
      if (accepted != nullptr) {
        std::fill(accepted + done, accepted + done + n, true);
      }
      done += static_cast<size_t>(n);
      Bump(sent, static_cast<uint64_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      // The datagram at `done` was refused: drop it, go on with the rest.
      Bump(errors);
      if (accepted != nullptr) accepted[done] = false;
      ++done;
    }
  }
}

}  // namespace clocksync::probe::probe_internal
