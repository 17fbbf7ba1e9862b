// collector/contact.cc: parsing and making contact strings and session
// tokens (contact.h).

#include "collector/contact.h"

#include <errno.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "probe/address.h"

namespace clocksync::collector {

absl::StatusOr<Contact> ParseContact(absl::string_view field,
                                     absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", why, " (want TOKEN@HOST:PORT), got \"", text, "\""));
  };
  const size_t at = text.find('@');
  if (at == absl::string_view::npos) return bad("no '@' between token and address");
  Contact contact;
  contact.token = std::string(text.substr(0, at));
  contact.address = std::string(text.substr(at + 1));
  if (contact.token.size() != kTokenHexDigits) {
    return bad(absl::StrCat("the token must be ", kTokenHexDigits,
                            " lowercase hex digits"));
  }
  for (char c : contact.token) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) &&
        !(c >= 'a' && c <= 'f')) {
      return bad(absl::StrCat("the token must be ", kTokenHexDigits,
                              " lowercase hex digits"));
    }
  }
  if (contact.address.empty()) return bad("no address after '@'");
  if (absl::Status s = probe::ValidateGrpcAddress(field, contact.address);
      !s.ok()) {
    return bad(absl::StrCat("bad address: ", s.message()));
  }
  return contact;
}

std::string FormatContact(const Contact& contact) {
  return absl::StrCat(contact.token, "@", contact.address);
}

absl::StatusOr<std::string> NewToken() {
  unsigned char bytes[kTokenHexDigits / 2];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("getrandom: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  return token;
}

bool TokensEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return differ == 0;
}

bool IsWildcardHost(absl::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

std::string AdvertisedHost(absl::string_view advertise,
                           absl::string_view listen_host) {
  if (!advertise.empty()) return std::string(advertise);
  if (!IsWildcardHost(listen_host)) return std::string(listen_host);
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

}  // namespace clocksync::collector
