// probe/packet.h: the probe wire format (versions 1 and 2), one fixed
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
// the daemon can count what it drops.
//
// Version 2 adds interleaving (as NTP's interleaved mode and PTP's two-step
// messages): a request names an earlier exchange (prev_nonce) and the reply
// carries the kernel's transmit stamp of the reply to that exchange
// (prev_t3_ns), which a reply cannot carry of itself. A responder answers
// each request in the request's version, so version-1 peers keep working. Decoding checks structure, not
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

// Size of every probe packet (both versions), bytes.
inline constexpr size_t kProbePacketSize = 96;
// Magic at offset 0: the ASCII bytes "CSPR" (ClockSync PRobe).
inline constexpr uint8_t kProbeMagic[4] = {'C', 'S', 'P', 'R'};
// The versions this code speaks: 1 (basic) and 2 (interleaved).
inline constexpr uint8_t kProbeVersion1 = 1;
inline constexpr uint8_t kProbeVersion2 = 2;
// The newest version this code speaks.
inline constexpr uint8_t kProbeVersion = kProbeVersion2;
// Flag bit of authenticated packets (a MAC in the tail).
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
// Bytes from 66 on are reserved and must be zero, but for the fields below.
inline constexpr size_t kProbeOffsetReserved = 66;
// Version 1, authenticated: the 8-byte MAC opens the reserved tail and
// covers bytes 0..65.
inline constexpr size_t kProbeOffsetMac = 66;
inline constexpr size_t kProbeMacSize = 8;
// Version 2: 66..71 reserved, then the interleaving fields, then the MAC
// (authenticated; zero otherwise) covering bytes 0..87.
inline constexpr size_t kProbeOffsetPrevNonce = 72;
inline constexpr size_t kProbeOffsetPrevT3 = 80;
inline constexpr size_t kProbeOffsetMacV2 = 88;

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
  // kProbeVersion1 or kProbeVersion2. A reply has its request's version.
  uint8_t version = kProbeVersion1;
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
  // Version 2 only (zero in version 1). In a request: the nonce of an
  // earlier answered request of this child whose reply's transmit stamp it
  // asks for, or 0. In a reply: that nonce when the parent has the stamp,
  // else 0.
  uint64_t prev_nonce = 0;
  // Version 2 replies only: the parent's global time when the reply to
  // prev_nonce left, from the kernel's transmit stamp, ns; 0 when
  // prev_nonce is 0.
  int64_t prev_t3_ns = 0;

  friend bool operator==(const ProbePacket&, const ProbePacket&) = default;
};

// Why a buffer is not a valid probe packet. Checked in this order, so a
// future version's packet of another size reads as kUnsupportedVersion.
enum class DecodeStatus : uint8_t {
  kOk = 0,
  kTruncated,               // Fewer than 8 bytes, or fewer than 96.
  kOversized,               // More than 96 bytes.
  kBadMagic,                // Bytes 0..3 are not "CSPR".
  kUnsupportedVersion,      // Version byte is neither 1 nor 2.
  kBadType,                 // Type is neither request nor reply.
  kNonzeroFlags,            // A flag bit other than authenticated is set.
  kNonzeroReserved,         // A reserved byte is not zero (v1: 66..95,
                            // 74..95 with a MAC; v2: 66..71, and 88..95
                            // without a MAC).
  kRequestWithReplyFields,  // A request with t2/t3/parent fields set.
  kBadParentState,          // A reply whose parent_state is not 1..4.
  kNegativeBound,           // A reply whose parent_bound_ns < 0.
  kUnauthenticated,         // This node has a key; the packet has no MAC.
  kBadMac,                  // The MAC is not the key's tag of the bytes
                            // before it.
  kUnexpectedMac,           // The packet has a MAC; this node has no key.
  // Version 2: a request with prev_t3 set, or a reply with prev_t3 set
  // but no prev_nonce.
  kStrayPreviousStamp,
};
// Number of DecodeStatus values (for arrays of counters indexed by status).
inline constexpr size_t kDecodeStatusCount = 15;

// A short lower-case name ("truncated", "bad_magic", ...) for logs and
// metrics; "unknown" for values outside the enum.
const char* DecodeStatusName(DecodeStatus status);

// Writes `packet` into out[0..kProbePacketSize) in packet.version's layout
// and returns kProbePacketSize. Reserved bytes are written as zero (and in
// version 1 the interleaving fields are not written). Writes the fields as
// given: a packet that would not decode (nonzero flags, an unknown version)
// is encoded as such, which is how the tests build malformed packets.
//
// With `keys`: sets kProbeFlagAuthenticated and writes the SipHash-2-4 tag
// of the bytes before the MAC under keys->signing at the version's MAC
// offset (docs/PROBE_PROTOCOL.md).
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
