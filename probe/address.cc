// probe/address.cc: parsing and checking "host:port" and "unix:PATH".
#include "probe/address.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace clocksync::probe {

// Errors quote at most this much of a bad address (a hostile one may be
// megabytes long).
constexpr size_t kMaxEchoBytes = 80;

absl::StatusOr<HostPort> ParseHostPort(absl::string_view field,
                                       absl::string_view address,
                                       AddressRules rules) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", why, " (want HOST:PORT), got \"",
                     absl::CHexEscape(address.substr(0, kMaxEchoBytes)),
                     address.size() > kMaxEchoBytes ? "\"..." : "\""));
  };
  if (address.empty()) return bad("empty");
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return bad("missing ':port'");
  absl::string_view host = address.substr(0, colon);
  const absl::string_view port_text = address.substr(colon + 1);
  if (absl::StartsWith(host, "[")) {
    if (!absl::EndsWith(host, "]") || host.size() < 3) {
      return bad("unbalanced [IPv6] host: missing ']'");
    }
    host = host.substr(1, host.size() - 2);
  } else if (absl::StrContains(host, ':')) {
    return bad("IPv6 addresses need brackets, e.g. [::1]:3190");
  }
  if (host.empty() && !rules.allow_empty_host) return bad("empty host");
  if (host.size() > kMaxHostBytes) {
    return bad(absl::StrCat("host longer than ", kMaxHostBytes, " bytes"));
  }
  for (const char c : host) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) ||
        !absl::ascii_isprint(static_cast<unsigned char>(c)) || c == '/') {
      return bad("bad character in host");
    }
  }
  int port = 0;
  const int min_port = rules.allow_port_zero ? 0 : 1;
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(port_text, &port) || port < min_port || port > 65535) {
    return bad(absl::StrCat("port must be ", min_port, "..65535"));
  }
  return HostPort{std::string(host), port};
}

absl::Status ValidateHostPort(absl::string_view field,
                              absl::string_view address,
                              bool allow_port_zero) {
  AddressRules rules;
  rules.allow_port_zero = allow_port_zero;
  return ParseHostPort(field, address, rules).status();
}

absl::Status ValidateGrpcAddress(absl::string_view field,
                                 absl::string_view address) {
  if (absl::StartsWith(address, "unix:")) {
    if (address.size() == 5) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": empty path after \"unix:\""));
    }
    if (address.size() - 5 > kMaxUnixPathBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": unix socket path longer than ", kMaxUnixPathBytes,
          " bytes (", address.size() - 5, ")"));
    }
    return absl::OkStatus();
  }
  return ValidateHostPort(field, address);
}

std::string HostOf(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return std::string(address);
  absl::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::string(host);
}

std::string JoinHostPort(absl::string_view host, int port) {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

}  // namespace clocksync::probe
