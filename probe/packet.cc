// probe/packet.cc: little-endian encoding and strict decoding of
// probe packets (see probe_packet.h and docs/PROBE_PROTOCOL.md).

#include "probe/packet.h"

#include <cstring>

namespace clocksync::probe {
namespace {

static_assert(kProbeOffsetReserved == 66 && kProbePacketSize == 96,
              "layout changed: update docs/PROBE_PROTOCOL.md");
static_assert(kProbeOffsetPrevNonce == 72 && kProbeOffsetPrevT3 == 80 &&
                  kProbeOffsetMacV2 + kProbeMacSize == kProbePacketSize,
              "layout changed: update docs/PROBE_PROTOCOL.md");
static_assert(static_cast<size_t>(DecodeStatus::kStrayPreviousStamp) + 1 ==
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
    case DecodeStatus::kStrayPreviousStamp:
      return "stray_previous_stamp";
  }
  return "unknown";
}

size_t EncodeProbe(const ProbePacket& packet, uint8_t* out,
                   const ProbeKeys* keys) {
  std::memcpy(out + kProbeOffsetMagic, kProbeMagic, sizeof(kProbeMagic));
  out[kProbeOffsetVersion] = packet.version;
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
  const bool v2 = packet.version == kProbeVersion2;
  if (v2) {
    Store64(out + kProbeOffsetPrevNonce, packet.prev_nonce);
    Store64(out + kProbeOffsetPrevT3, static_cast<uint64_t>(packet.prev_t3_ns));
  }
  if (keys != nullptr) {
    const size_t mac_offset = v2 ? kProbeOffsetMacV2 : kProbeOffsetMac;
    Store64(out + mac_offset, SipHash24(keys->signing, out, mac_offset));
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
  const uint8_t version = data[kProbeOffsetVersion];
  if (version != kProbeVersion1 && version != kProbeVersion2) {
    return DecodeStatus::kUnsupportedVersion;
  }
  const bool v2 = version == kProbeVersion2;
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
    const size_t mac_offset = v2 ? kProbeOffsetMacV2 : kProbeOffsetMac;
    const uint64_t tag = Load64(data + mac_offset);
    const uint64_t signing = tag ^ SipHash24(keys->signing, data, mac_offset);
    const uint64_t other =
        keys->other.has_value()
            ? tag ^ SipHash24(*keys->other, data, mac_offset)
            : ~uint64_t{0};
    if (signing != 0 && other != 0) return DecodeStatus::kBadMac;
  }
  if (v2) {
    // Bytes 66..71 (two 16-bit words and one more 16-bit word), and the
    // MAC's place when there is none.
    uint64_t reserved_or = Load16(data + 66) | Load16(data + 68) |
                           Load16(data + 70);
    if (!authenticated) reserved_or |= Load64(data + kProbeOffsetMacV2);
    if (reserved_or != 0) return DecodeStatus::kNonzeroReserved;
  } else if (authenticated) {
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

  out->version = version;
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
  out->prev_nonce = v2 ? Load64(data + kProbeOffsetPrevNonce) : 0;
  out->prev_t3_ns =
      v2 ? static_cast<int64_t>(Load64(data + kProbeOffsetPrevT3)) : 0;

  if (out->type == ProbeType::kRequest) {
    if (out->t2_ns != 0 || out->t3_ns != 0 || out->parent_bound_ns != 0 ||
        out->upstream_id != 0 || out->parent_state != 0 ||
        out->parent_depth != 0) {
      return DecodeStatus::kRequestWithReplyFields;
    }
    if (out->prev_t3_ns != 0) return DecodeStatus::kStrayPreviousStamp;
  } else {
    if (out->prev_nonce == 0 && out->prev_t3_ns != 0) {
      return DecodeStatus::kStrayPreviousStamp;
    }
    if (out->parent_state < kProbeStateUnsynced ||
        out->parent_state > kProbeStateHoldover) {
      return DecodeStatus::kBadParentState;
    }
    if (out->parent_bound_ns < 0) return DecodeStatus::kNegativeBound;
  }
  return DecodeStatus::kOk;
}

}  // namespace clocksync::probe
