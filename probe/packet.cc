// probe/packet.cc: little-endian encoding and strict decoding of
// probe packets (see probe_packet.h and docs/PROBE_PROTOCOL.md).

#include "probe/packet.h"

#include <cstring>

namespace clocksync::probe {
namespace {

static_assert(kProbeOffsetReserved == 66 && kProbePacketSize == 96,
              "layout changed: update docs/PROBE_PROTOCOL.md");
static_assert(static_cast<size_t>(DecodeStatus::kUnexpectedMac) + 1 ==
                  kDecodeStatusCount,
              "kDecodeStatusCount must count every DecodeStatus");

// Little-endian stores and loads of single fields, independent of host
// byte order and alignment: a memcpy of one integer (a single move on x86),
// byte-swapped on big-endian hosts.
template <typename T>
T ToLittle(T v) {
  if constexpr (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__) {
    if constexpr (sizeof(T) == 2) return __builtin_bswap16(v);
    if constexpr (sizeof(T) == 8) return __builtin_bswap64(v);
  }
  return v;
}

void Store16(uint8_t* p, uint16_t v) {
  v = ToLittle(v);
  std::memcpy(p, &v, sizeof(v));
}

void Store64(uint8_t* p, uint64_t v) {
  v = ToLittle(v);
  std::memcpy(p, &v, sizeof(v));
}

uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return ToLittle(v);
}

uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return ToLittle(v);
}

}  // namespace

const char* DecodeStatusName(DecodeStatus status) {
  switch (status) {
    case DecodeStatus::kOk:
      return "ok";
    case DecodeStatus::kTruncated:
      return "truncated";
    case DecodeStatus::kOversized:
      return "oversized";
    case DecodeStatus::kBadMagic:
      return "bad_magic";
    case DecodeStatus::kUnsupportedVersion:
      return "unsupported_version";
    case DecodeStatus::kBadType:
      return "bad_type";
    case DecodeStatus::kNonzeroFlags:
      return "nonzero_flags";
    case DecodeStatus::kNonzeroReserved:
      return "nonzero_reserved";
    case DecodeStatus::kRequestWithReplyFields:
      return "request_with_reply_fields";
    case DecodeStatus::kBadParentState:
      return "bad_parent_state";
    case DecodeStatus::kNegativeBound:
      return "negative_bound";
    case DecodeStatus::kUnauthenticated:
      return "unauthenticated";
    case DecodeStatus::kBadMac:
      return "bad_mac";
    case DecodeStatus::kUnexpectedMac:
      return "unexpected_mac";
  }
  return "unknown";
}

size_t EncodeProbe(const ProbePacket& packet, uint8_t* out,
                   const ProbeKeys* keys) {
  std::memcpy(out + kProbeOffsetMagic, kProbeMagic, sizeof(kProbeMagic));
  out[kProbeOffsetVersion] = kProbeVersion;
  out[kProbeOffsetType] = static_cast<uint8_t>(packet.type);
  Store16(out + kProbeOffsetFlags,
          keys != nullptr ? packet.flags | kProbeFlagAuthenticated
                          : packet.flags);
  Store64(out + kProbeOffsetNonce, packet.nonce);
  Store64(out + kProbeOffsetSenderId, packet.sender_id);
  Store64(out + kProbeOffsetT1, static_cast<uint64_t>(packet.t1_ns));
  Store64(out + kProbeOffsetT2, static_cast<uint64_t>(packet.t2_ns));
  Store64(out + kProbeOffsetT3, static_cast<uint64_t>(packet.t3_ns));
  Store64(out + kProbeOffsetParentBound,
          static_cast<uint64_t>(packet.parent_bound_ns));
  Store64(out + kProbeOffsetUpstreamId, packet.upstream_id);
  out[kProbeOffsetParentState] = packet.parent_state;
  out[kProbeOffsetParentDepth] = packet.parent_depth;
  std::memset(out + kProbeOffsetReserved, 0,
              kProbePacketSize - kProbeOffsetReserved);
  if (keys != nullptr) {
    Store64(out + kProbeOffsetMac,
            SipHash24(keys->signing, out, kProbeOffsetMac));
  }
  return kProbePacketSize;
}

DecodeStatus DecodeProbe(const uint8_t* data, size_t len, ProbePacket* out,
                         const ProbeKeys* keys) {
  // Magic and version first (8 bytes), so that another version's packet is
  // reported as such whatever its size.
  if (len < 8) return DecodeStatus::kTruncated;
  if (std::memcmp(data + kProbeOffsetMagic, kProbeMagic, sizeof(kProbeMagic)) !=
      0) {
    return DecodeStatus::kBadMagic;
  }
  if (data[kProbeOffsetVersion] != kProbeVersion) {
    return DecodeStatus::kUnsupportedVersion;
  }
  if (len < kProbePacketSize) return DecodeStatus::kTruncated;
  if (len > kProbePacketSize) return DecodeStatus::kOversized;

  const uint8_t type = data[kProbeOffsetType];
  if (type != static_cast<uint8_t>(ProbeType::kRequest) &&
      type != static_cast<uint8_t>(ProbeType::kReply)) {
    return DecodeStatus::kBadType;
  }
  const uint16_t flags = Load16(data + kProbeOffsetFlags);
  if ((flags & ~kProbeFlagAuthenticated) != 0) {
    return DecodeStatus::kNonzeroFlags;
  }
  const bool authenticated = (flags & kProbeFlagAuthenticated) != 0;
  if (keys != nullptr && !authenticated) return DecodeStatus::kUnauthenticated;
  if (keys == nullptr && authenticated) return DecodeStatus::kUnexpectedMac;
  if (authenticated) {
    // Both tags are computed and compared without an early exit, so the
    // time taken says nothing about the tag.
    const uint64_t tag = Load64(data + kProbeOffsetMac);
    const uint64_t signing =
        tag ^ SipHash24(keys->signing, data, kProbeOffsetMac);
    const uint64_t other =
        keys->other.has_value()
            ? tag ^ SipHash24(*keys->other, data, kProbeOffsetMac)
            : ~uint64_t{0};
    if (signing != 0 && other != 0) return DecodeStatus::kBadMac;
    // Bytes 74..95 (22 bytes) as 64-bit words 74..81, 82..89, 88..95.
    const uint64_t reserved_or =
        Load64(data + 74) | Load64(data + 82) | Load64(data + 88);
    if (reserved_or != 0) return DecodeStatus::kNonzeroReserved;
  } else {
    // Bytes 66..95 (30 bytes) as one 16-bit word (66..67) and four 64-bit
    // words (68..75, 76..83, 84..91, 88..95; the last two overlap).
    const uint64_t reserved_or =
        Load16(data + 66) | Load64(data + 68) | Load64(data + 76) |
        Load64(data + 84) | Load64(data + 88);
    if (reserved_or != 0) return DecodeStatus::kNonzeroReserved;
  }

  out->type = static_cast<ProbeType>(type);
  out->flags = flags;
  out->nonce = Load64(data + kProbeOffsetNonce);
  out->sender_id = Load64(data + kProbeOffsetSenderId);
  out->t1_ns = static_cast<int64_t>(Load64(data + kProbeOffsetT1));
  out->t2_ns = static_cast<int64_t>(Load64(data + kProbeOffsetT2));
  out->t3_ns = static_cast<int64_t>(Load64(data + kProbeOffsetT3));
  out->parent_bound_ns =
      static_cast<int64_t>(Load64(data + kProbeOffsetParentBound));
  out->upstream_id = Load64(data + kProbeOffsetUpstreamId);
  out->parent_state = data[kProbeOffsetParentState];
  out->parent_depth = data[kProbeOffsetParentDepth];

  if (out->type == ProbeType::kRequest) {
    if (out->t2_ns != 0 || out->t3_ns != 0 || out->parent_bound_ns != 0 ||
        out->upstream_id != 0 || out->parent_state != 0 ||
        out->parent_depth != 0) {
      return DecodeStatus::kRequestWithReplyFields;
    }
  } else {
    if (out->parent_state < kProbeStateUnsynced ||
        out->parent_state > kProbeStateHoldover) {
      return DecodeStatus::kBadParentState;
    }
    if (out->parent_bound_ns < 0) return DecodeStatus::kNegativeBound;
  }
  return DecodeStatus::kOk;
}

}  // namespace clocksync::probe
