// probe/packet.h: the probe wire format (version 1), one fixed
// 96-byte UDP payload for both directions, and its codec.
//
// A child sends a request (type 1) carrying a random nonce and its send time
// t1; the parent answers with a reply (type 2) that echoes nonce and t1 and
// adds its receive time t2, its send time t3 (both on its global timescale)
// and its own state, depth and error bound at t3, so that bounds add up down
// the tree. Field by field, with offsets: docs/PROBE_PROTOCOL.md.
//
// Encoding is explicit little-endian, byte by byte, never a memcpy of a
// struct, so the layout does not depend on the compiler or the host.
// Decoding is strict: every malformed form has its own DecodeStatus so that
// the daemon can count what it drops. Decoding checks structure, not
// timing: t3 < t2 and the like are for the estimator to reject.
// With a shared key (probe_auth.h), packets carry a SipHash-2-4 MAC and
// only authenticated ones decode.
//
// Example:
//   ProbePacket request;
//   request.type = ProbeType::kRequest;
//   request.nonce = nonce;
//   request.sender_id = my_id;
//   request.t1_ns = t1;
//   uint8_t buffer[kProbePacketSize];
//   size_t size = EncodeProbe(request, buffer);   // always kProbePacketSize
//   ...
//   ProbePacket reply;
//   DecodeStatus status = DecodeProbe(data, length, &reply);
//   if (status != DecodeStatus::kOk) Count(DecodeStatusName(status));
//
// Thread safety: stateless functions; safe from any thread. No allocation.
#ifndef CLOCKSYNC_PROBE_PACKET_H_
#define CLOCKSYNC_PROBE_PACKET_H_

#include <cstddef>
#include <cstdint>

#include "probe/auth.h"

namespace clocksync::probe {

// Size of every version-1 probe packet, bytes.
inline constexpr size_t kProbePacketSize = 96;
// Magic at offset 0: the ASCII bytes "CSPR" (ClockSync PRobe).
inline constexpr uint8_t kProbeMagic[4] = {'C', 'S', 'P', 'R'};
// The one version this code speaks.
inline constexpr uint8_t kProbeVersion = 1;
// Flag bit reserved for authenticated packets (a MAC in the reserved tail).
// Not implemented yet: version-1 packets must carry no flags at all.
inline constexpr uint16_t kProbeFlagAuthenticated = 0x0001;

// Byte offsets of the fields (docs/PROBE_PROTOCOL.md has the table).
inline constexpr size_t kProbeOffsetMagic = 0;
inline constexpr size_t kProbeOffsetVersion = 4;
inline constexpr size_t kProbeOffsetType = 5;
inline constexpr size_t kProbeOffsetFlags = 6;
inline constexpr size_t kProbeOffsetNonce = 8;
inline constexpr size_t kProbeOffsetSenderId = 16;
inline constexpr size_t kProbeOffsetT1 = 24;
inline constexpr size_t kProbeOffsetT2 = 32;
inline constexpr size_t kProbeOffsetT3 = 40;
inline constexpr size_t kProbeOffsetParentBound = 48;
inline constexpr size_t kProbeOffsetUpstreamId = 56;
inline constexpr size_t kProbeOffsetParentState = 64;
inline constexpr size_t kProbeOffsetParentDepth = 65;
// Bytes 66..95 are reserved and must be zero.
inline constexpr size_t kProbeOffsetReserved = 66;
// Authenticated packets: the 8-byte MAC opens the reserved tail.
inline constexpr size_t kProbeOffsetMac = 66;
inline constexpr size_t kProbeMacSize = 8;

enum class ProbeType : uint8_t {
  kRequest = 1,  // Child to parent.
  kReply = 2,    // Parent to child.
};

// Values of parent_state: those of clocksync.SyncState (proto/clocksync.proto).
inline constexpr uint8_t kProbeStateUnsynced = 1;
inline constexpr uint8_t kProbeStateSynced = 2;
inline constexpr uint8_t kProbeStateRecovering = 3;
inline constexpr uint8_t kProbeStateHoldover = 4;

// One probe packet, decoded. Magic and version are implied (constants).
// In a request every parent_* field, t2_ns and t3_ns are zero.
struct ProbePacket {
  ProbeType type = ProbeType::kRequest;
  // Flag bits: kProbeFlagAuthenticated or 0. EncodeProbe with a key sets
  // it; DecodeProbe reports it.
  uint16_t flags = 0;
  // Random per request, chosen by the child, echoed by the parent.
  uint64_t nonce = 0;
  // Node id of the packet's sender (child in a request, parent in a reply).
  uint64_t sender_id = 0;
  // Child's local clock when it sent the request, ns; echoed in the reply.
  int64_t t1_ns = 0;
  // Parent's global time when the request arrived, ns (reply only).
  int64_t t2_ns = 0;
  // Parent's global time when the reply left, ns (reply only).
  int64_t t3_ns = 0;
  // Parent's error bound (half-width of its [earliest, latest]) at t3, ns;
  // >= 0 (reply only).
  int64_t parent_bound_ns = 0;
  // Node id of the parent's own parent; 0 when the parent is the master or
  // has none (reply only). Lets a child refuse a parent that is its child.
  uint64_t upstream_id = 0;
  // Parent's SyncState (kProbeState*, 1..4) at t3 (reply only).
  uint8_t parent_state = 0;
  // Parent's depth in the tree, 0 for the master (reply only).
  uint8_t parent_depth = 0;

  friend bool operator==(const ProbePacket&, const ProbePacket&) = default;
};

// Why a buffer is not a valid probe packet. Checked in this order, so a
// future version's packet of another size reads as kUnsupportedVersion.
enum class DecodeStatus : uint8_t {
  kOk = 0,
  kTruncated,               // Fewer than 8 bytes, or fewer than 96.
  kOversized,               // More than 96 bytes.
  kBadMagic,                // Bytes 0..3 are not "CSPR".
  kUnsupportedVersion,      // Version byte is not kProbeVersion.
  kBadType,                 // Type is neither request nor reply.
  kNonzeroFlags,            // A flag bit other than authenticated is set.
  kNonzeroReserved,         // A reserved byte (66..95; 74..95 with a MAC)
                            // is not zero.
  kRequestWithReplyFields,  // A request with t2/t3/parent fields set.
  kBadParentState,          // A reply whose parent_state is not 1..4.
  kNegativeBound,           // A reply whose parent_bound_ns < 0.
  kUnauthenticated,         // This node has a key; the packet has no MAC.
  kBadMac,                  // The MAC is not the key's tag of bytes 0..65.
  kUnexpectedMac,           // The packet has a MAC; this node has no key.
};
// Number of DecodeStatus values (for arrays of counters indexed by status).
inline constexpr size_t kDecodeStatusCount = 14;

// A short lower-case name ("truncated", "bad_magic", ...) for logs and
// metrics; "unknown" for values outside the enum.
const char* DecodeStatusName(DecodeStatus status);

// Writes `packet` into out[0..kProbePacketSize) and returns
// kProbePacketSize. Reserved bytes are written as zero. Writes the fields
// as given: a packet that would not decode (nonzero flags, say) is
// encoded as such, which is how the tests build malformed packets.
//
// With `keys`: sets kProbeFlagAuthenticated and writes the SipHash-2-4 tag of
// bytes 0..65 under keys->signing at kProbeOffsetMac
// (docs/PROBE_PROTOCOL.md).
size_t EncodeProbe(const ProbePacket& packet, uint8_t* out,
                   const ProbeKeys* keys = nullptr);

// Parses data[0..len). On kOk fills *out; otherwise *out is unspecified.
// Never reads past data + len; any bytes at all are safe input.
// With `keys`, only packets authenticated under one of them are accepted
// (kUnauthenticated, kBadMac); without, authenticated ones are refused
// (kUnexpectedMac). The MAC checks take the same time whatever the tag.
DecodeStatus DecodeProbe(const uint8_t* data, size_t len, ProbePacket* out,
                         const ProbeKeys* keys = nullptr);

}  // namespace clocksync::probe

#endif  // CLOCKSYNC_PROBE_PACKET_H_
