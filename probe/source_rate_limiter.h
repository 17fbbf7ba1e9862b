// probe/source_rate_limiter.h: a token bucket per source host, so that one
// sender flooding a probe port cannot take the responder's time from the
// children it serves.
//
// A responder answers anyone who sends a well-formed (and, with a key,
// authenticated) request: children, tracers' sync sessions, operators'
// tools (docs/PROBE_PROTOCOL.md, "Who is answered"). Each source address
// (port ignored: one host, one budget) may send `burst_packets` at once and
// `rate_per_s` on average; beyond, its datagrams are dropped before they
// are decoded, and counted. A child probing at 10/s and a tracer's sync
// session (up to 100 exchanges one at a time) stay far inside the default
// budget.
//
// The table is fixed (allocated at construction, nothing while serving):
// 4-way sets; a host not in its set takes the way idle the longest. Many
// spoofed source addresses can therefore each get a fresh budget: the
// limiter stops a host, not a distributed flood (the kernel's receive
// buffer and SO_RXQ_OVFL counting are the last line there).
//
// Thread safety: one thread (the responder's Serve()).
#ifndef CLOCKSYNC_PROBE_SOURCE_RATE_LIMITER_H_
#define CLOCKSYNC_PROBE_SOURCE_RATE_LIMITER_H_

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace clocksync::probe {

class SourceRateLimiter {
 public:
  struct Options {
    // Average datagrams per second a source host may send.
    double rate_per_s = 1000;
    // Datagrams it may send at once.
    double burst_packets = 2000;
    // Hosts tracked (rounded up to a multiple of 4).
    size_t hosts = 4096;
  };

  // "" when valid, else "field: reason".
  static std::string Validate(const Options& options);

  explicit SourceRateLimiter(Options options);

  // Whether a datagram from `from` (AF_INET or AF_INET6; others are
  // admitted) at raw time now_ns is within its host's budget; takes a token
  // when it is.
  bool Admit(const sockaddr_storage& from, int64_t now_ns);

 private:
  struct Entry {
    std::array<uint8_t, 16> host{};
    bool used = false;
    double tokens = 0;
    int64_t last_ns = 0;
  };
  static constexpr size_t kWays = 4;

  Options options_;
  std::vector<Entry> entries_;  // sets of kWays
};

}  // namespace clocksync::probe

#endif  // CLOCKSYNC_PROBE_SOURCE_RATE_LIMITER_H_
