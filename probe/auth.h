// probe/auth.h: the shared key that authenticates probe packets
// (docs/PROBE_PROTOCOL.md, "Authentication"), and SipHash-2-4, the MAC.
//
// Every node of a tree (and every tracer that runs sync sessions against
// its master) loads the same 128-bit key; each packet then carries the
// SipHash-2-4 tag of its first 66 bytes. SipHash is a keyed PRF made for
// short inputs (Aumasson and Bernstein, 2012): a 64-bit tag, ~34 ns for a
// probe here (//probe:auth_benchmark), no allocation.
//
// Example:
//   absl::StatusOr<ProbeKey> key = ReadProbeKeyFile("/etc/clocksync/probe.key");
//   if (!key.ok()) return key.status();   // names the file and the problem
//
// Thread safety: pure functions.
#ifndef CLOCKSYNC_PROBE_AUTH_H_
#define CLOCKSYNC_PROBE_AUTH_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace clocksync::probe {

// A 128-bit SipHash key: k0 from key bytes 0..7, k1 from bytes 8..15, both
// little-endian (as the reference implementation reads them).
struct ProbeKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
  friend bool operator==(const ProbeKey&, const ProbeKey&) = default;
};

// The keys a node holds: it signs with `signing` and accepts packets signed
// with it or with `other`, a key being rotated in or out (see
// docs/PROBE_PROTOCOL.md, "Changing the key").
struct ProbeKeys {
  ProbeKeys() = default;
  // One key, nothing else accepted.
  ProbeKeys(const ProbeKey& key) : signing(key) {}  // NOLINT: implicit
  ProbeKeys(const ProbeKey& signing_key, const ProbeKey& other_key)
      : signing(signing_key), other(other_key) {}
  ProbeKey signing;
  std::optional<ProbeKey> other;
  friend bool operator==(const ProbeKeys&, const ProbeKeys&) = default;
};

// SipHash-2-4 of `data` under `key`.
uint64_t SipHash24(const ProbeKey& key, const uint8_t* data, size_t length);

// A key from exactly 32 hexadecimal digits (the 16 key bytes in order);
// surrounding whitespace is ignored. InvalidArgument says what is wrong.
absl::StatusOr<ProbeKey> ParseProbeKey(absl::string_view hex);

// Reads a key file: one key (32 hexadecimal digits) per line, one or two
// keys; blank lines and lines starting with '#' are skipped. The first key
// signs; both are accepted. Make one with
//   od -An -tx1 -N16 /dev/urandom | tr -d ' \n' > probe.key; chmod 600 probe.key
// Refused when others may read it (mode o+r): a key everyone can read
// authenticates nothing. Errors name the file and the line.
absl::StatusOr<ProbeKeys> ReadProbeKeyFile(const std::string& path);

}  // namespace clocksync::probe

#endif  // CLOCKSYNC_PROBE_AUTH_H_
