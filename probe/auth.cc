// probe/auth.cc: SipHash-2-4 and the probe key file.
#include "probe/auth.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace clocksync::probe {
namespace {

inline uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

inline void SipRound(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
  v0 += v1;
  v1 = Rotl(v1, 13);
  v1 ^= v0;
  v0 = Rotl(v0, 32);
  v2 += v3;
  v3 = Rotl(v3, 16);
  v3 ^= v2;
  v0 += v3;
  v3 = Rotl(v3, 21);
  v3 ^= v0;
  v2 += v1;
  v1 = Rotl(v1, 17);
  v1 ^= v2;
  v2 = Rotl(v2, 32);
}

inline uint64_t LoadLittle64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));  // one load on x86-64
  if constexpr (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__) v = __builtin_bswap64(v);
  return v;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

uint64_t SipHash24(const ProbeKey& key, const uint8_t* data, size_t length) {
  uint64_t v0 = 0x736f6d6570736575ULL ^ key.k0;
  uint64_t v1 = 0x646f72616e646f6dULL ^ key.k1;
  uint64_t v2 = 0x6c7967656e657261ULL ^ key.k0;
  uint64_t v3 = 0x7465646279746573ULL ^ key.k1;
  const size_t whole = length - length % 8;
  for (size_t i = 0; i < whole; i += 8) {
    const uint64_t m = LoadLittle64(data + i);
    v3 ^= m;
    SipRound(v0, v1, v2, v3);
    SipRound(v0, v1, v2, v3);
    v0 ^= m;
  }
  // The last block: the remaining bytes, and the length's low byte on top.
  uint64_t last = static_cast<uint64_t>(length & 0xff) << 56;
  for (size_t i = whole; i < length; ++i) {
    last |= static_cast<uint64_t>(data[i]) << (8 * (i - whole));
  }
  v3 ^= last;
  SipRound(v0, v1, v2, v3);
  SipRound(v0, v1, v2, v3);
  v0 ^= last;
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) SipRound(v0, v1, v2, v3);
  return v0 ^ v1 ^ v2 ^ v3;
}

absl::StatusOr<ProbeKey> ParseProbeKey(absl::string_view hex) {
  hex = absl::StripAsciiWhitespace(hex);
  if (hex.size() != 32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a probe key is 32 hexadecimal digits (16 bytes), got ", hex.size(),
        " characters"));
  }
  uint8_t bytes[16];
  for (size_t i = 0; i < 16; ++i) {
    const int high = HexDigit(hex[2 * i]);
    const int low = HexDigit(hex[2 * i + 1]);
    if (high < 0 || low < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a probe key is hexadecimal digits only; character ",
          high < 0 ? 2 * i + 1 : 2 * i + 2, " is not one"));
    }
    bytes[i] = static_cast<uint8_t>(high * 16 + low);
  }
  return ProbeKey{LoadLittle64(bytes), LoadLittle64(bytes + 8)};
}

absl::StatusOr<ProbeKeys> ReadProbeKeyFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int error = errno;
    return absl::NotFoundError(
        absl::StrCat("probe key file ", path, ": ", std::strerror(error)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe key file ", path, ": not a regular file"));
  }
  if ((st.st_mode & S_IROTH) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "probe key file ", path,
        ": readable by everyone (mode o+r); chmod o-r it first"));
  }
  std::ifstream in(path);
  if (!in) {
    return absl::PermissionDeniedError(
        absl::StrCat("probe key file ", path, ": cannot be read"));
  }
  std::vector<ProbeKey> keys;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    absl::StatusOr<ProbeKey> key = ParseProbeKey(text);
    if (!key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "probe key file ", path, ":", number, ": ", key.status().message()));
    }
    if (keys.size() == 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "probe key file ", path, ":", number,
          ": a third key (at most two: the signing key, then one more "
          "accepted during a change of keys)"));
    }
    keys.push_back(*key);
  }
  if (keys.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe key file ", path, ": no key in it"));
  }
  return keys.size() == 1 ? ProbeKeys(keys[0]) : ProbeKeys(keys[0], keys[1]);
}

}  // namespace clocksync::probe
