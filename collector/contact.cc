// collector/contact.cc: parsing and making contact strings and session
// tokens (contact.h).

#include "collector/contact.h"

#include <errno.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "probe/address.h"
#include "probe/auth.h"

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
  if (contact.token.size() > kTokenHexDigits &&
      contact.token[kTokenHexDigits] == '.') {
    // An attach contact: TOKEN.PARENT.GROUP.
    const std::vector<std::string> parts =
        absl::StrSplit(contact.token.substr(kTokenHexDigits + 1), '.');
    int32_t parent = -1;
    uint32_t group = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &parent) ||
        parent < 0 || !absl::SimpleAtoi(parts[1], &group) ||
        parts[0] != absl::StrCat(parent) || parts[1] != absl::StrCat(group)) {
      return bad("an attach contact's token must be TOKEN.PARENT_RANK.GROUP "
                 "(two decimal numbers after the token)");
    }
    contact.attach_parent = parent;
    contact.attach_group = group;
    contact.token.resize(kTokenHexDigits);
  }
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
  if (contact.attach_parent >= 0) {
    return absl::StrCat(contact.token, ".", contact.attach_parent, ".",
                        contact.attach_group, "@", contact.address);
  }
  return absl::StrCat(contact.token, "@", contact.address);
}

namespace {

// 32 hex digits: SipHash-2-4 under `key_hex` (a token or attach key: 16
// bytes) of "<label> 0" and "<label> 1". A key that is not hex (a token
// refused elsewhere) still gives a value, one nobody can present.
std::string DeriveToken(absl::string_view key_hex, const std::string& label) {
  absl::StatusOr<probe::ProbeKey> key = probe::ParseProbeKey(key_hex);
  const probe::ProbeKey k = key.ok() ? *key : probe::ProbeKey{~0ull, ~0ull};
  std::string out;
  for (int half = 0; half < 2; ++half) {
    const std::string message = absl::StrCat(label, " ", half);
    const uint64_t h = probe::SipHash24(
        k, reinterpret_cast<const uint8_t*>(message.data()), message.size());
    absl::StrAppend(&out, absl::StrFormat("%016x", h));
  }
  return out;
}

}  // namespace

std::string RankAttachKey(absl::string_view session_token, int32_t rank) {
  return DeriveToken(session_token, absl::StrCat("clocksync attach key ", rank));
}

std::string AttachGroupToken(absl::string_view rank_key, uint32_t group) {
  return DeriveToken(rank_key, absl::StrCat("clocksync attach group ", group));
}

std::string AttachGroupName(int32_t parent_rank, uint32_t group) {
  return absl::StrCat("r", parent_rank, ".g", group);
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
