// probe/address.h: the one parser of node addresses: "host:port",
// "[v6]:port", and for gRPC also "unix:PATH". Every place that takes an
// address (probe sockets, --join, --listen, gRPC targets, Join requests)
// goes through it, so they all accept and refuse the same strings with the
// same messages.
#ifndef CLOCKSYNC_PROBE_ADDRESS_H_
#define CLOCKSYNC_PROBE_ADDRESS_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace clocksync::probe {

// A DNS name has at most 253 characters; a Unix socket path must fit
// sockaddr_un's 108 bytes with its terminating NUL.
inline constexpr size_t kMaxHostBytes = 253;
inline constexpr size_t kMaxUnixPathBytes = 107;

struct HostPort {
  std::string host;  // without brackets; may be empty if allowed
  int port = 0;
};

struct AddressRules {
  bool allow_port_zero = false;  // listen addresses: 0 picks a free port
  bool allow_empty_host = false;  // ":3190" binds the wildcard address
};

// Splits `address` into host and port. Errors are INVALID_ARGUMENT with
// "<field>: <reason> (want HOST:PORT), got \"<address>\"".
absl::StatusOr<HostPort> ParseHostPort(absl::string_view field,
                                       absl::string_view address,
                                       AddressRules rules = {});

// OK when ParseHostPort accepts it.
absl::Status ValidateHostPort(absl::string_view field,
                              absl::string_view address,
                              bool allow_port_zero = false);

// A gRPC target or listen address: "host:port" or "unix:PATH" (PATH not
// empty).
absl::Status ValidateGrpcAddress(absl::string_view field,
                                 absl::string_view address);

// The host part of "host:port" ("[v6]" brackets removed); the whole string
// when it has no port.
std::string HostOf(absl::string_view address);

// "host:port", bracketing an IPv6 host.
std::string JoinHostPort(absl::string_view host, int port);

}  // namespace clocksync::probe

#endif  // CLOCKSYNC_PROBE_ADDRESS_H_
