// probe/packet_test.cc: the probe codec round-trips every field,
// writes the documented byte layout, rejects each malformed form with its
// own status, and survives random bytes.

#include "probe/packet.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace clocksync::probe {
namespace {

ProbePacket SampleRequest() {
  ProbePacket p;
  p.type = ProbeType::kRequest;
  p.nonce = 0x0123456789ABCDEFULL;
  p.sender_id = 0xFEDCBA9876543210ULL;
  p.t1_ns = -1'700'000'000'123'456'789;  // Negative: sign must survive.
  return p;
}

ProbePacket SampleReply() {
  ProbePacket p = SampleRequest();
  p.type = ProbeType::kReply;
  p.sender_id = 42;
  p.t2_ns = 1'700'000'000'000'000'001;
  p.t3_ns = 1'700'000'000'000'012'345;
  p.parent_bound_ns = 987'654;
  p.upstream_id = 7;
  p.parent_state = kProbeStateHoldover;
  p.parent_depth = 255;
  return p;
}

std::vector<uint8_t> Encode(const ProbePacket& p) {
  std::vector<uint8_t> bytes(kProbePacketSize, 0xAA);
  EXPECT_EQ(EncodeProbe(p, bytes.data()), kProbePacketSize);
  return bytes;
}

DecodeStatus Decode(const std::vector<uint8_t>& bytes) {
  ProbePacket out;
  return DecodeProbe(bytes.data(), bytes.size(), &out);
}

TEST(ProbePacketTest, RequestRoundTrips) {
  const ProbePacket in = SampleRequest();
  const std::vector<uint8_t> bytes = Encode(in);
  ProbePacket out;
  ASSERT_EQ(DecodeProbe(bytes.data(), bytes.size(), &out), DecodeStatus::kOk);
  EXPECT_EQ(out, in);
}

TEST(ProbePacketTest, ReplyRoundTripsEveryStateAndExtremes) {
  for (uint8_t state = kProbeStateUnsynced; state <= kProbeStateHoldover;
       ++state) {
    ProbePacket in = SampleReply();
    in.parent_state = state;
    in.t2_ns = INT64_MIN;
    in.t3_ns = INT64_MAX;
    in.parent_bound_ns = INT64_MAX;
    in.nonce = UINT64_MAX;
    in.upstream_id = UINT64_MAX;
    const std::vector<uint8_t> bytes = Encode(in);
    ProbePacket out;
    ASSERT_EQ(DecodeProbe(bytes.data(), bytes.size(), &out), DecodeStatus::kOk)
        << "state " << int{state};
    EXPECT_EQ(out, in);
  }
}

// The documented layout, byte for byte (docs/PROBE_PROTOCOL.md).
TEST(ProbePacketTest, GoldenBytes) {
  const std::vector<uint8_t> bytes = Encode(SampleReply());
  const std::vector<uint8_t> expected = {
      'C', 'S', 'P', 'R', 1, 2, 0, 0,                  // magic ver type flags
      0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01,  // nonce
      42, 0, 0, 0, 0, 0, 0, 0,                         // sender_id
      // t1 = -1700000000123456789 = 0xE8686301_C27A32EB (two's complement)
      0xEB, 0x32, 0x7A, 0xC2, 0x01, 0x63, 0x68, 0xE8,
      // t2 = 1700000000000000001 = 0x17979CFE_362A0001
      0x01, 0x00, 0x2A, 0x36, 0xFE, 0x9C, 0x97, 0x17,
      // t3 = 1700000000000012345 = 0x17979CFE_362A3039
      0x39, 0x30, 0x2A, 0x36, 0xFE, 0x9C, 0x97, 0x17,
      // bound = 987654 = 0x000F1206
      0x06, 0x12, 0x0F, 0, 0, 0, 0, 0,
      7, 0, 0, 0, 0, 0, 0, 0,  // upstream_id
      4, 255,                  // parent_state, parent_depth
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      0, 0, 0, 0, 0, 0, 0, 0,  // reserved 66..95
  };
  ASSERT_EQ(expected.size(), kProbePacketSize);
  EXPECT_EQ(bytes, expected);
}

TEST(ProbePacketTest, TruncatedAtEveryLength) {
  const std::vector<uint8_t> full = Encode(SampleReply());
  for (size_t len = 0; len < kProbePacketSize; ++len) {
    ProbePacket out;
    EXPECT_EQ(DecodeProbe(full.data(), len, &out), DecodeStatus::kTruncated)
        << "length " << len;
  }
}

TEST(ProbePacketTest, Oversized) {
  std::vector<uint8_t> bytes = Encode(SampleReply());
  bytes.push_back(0);
  EXPECT_EQ(Decode(bytes), DecodeStatus::kOversized);
  bytes.resize(1500, 0);
  EXPECT_EQ(Decode(bytes), DecodeStatus::kOversized);
}

TEST(ProbePacketTest, BadMagicInEachByte) {
  for (size_t i = 0; i < 4; ++i) {
    std::vector<uint8_t> bytes = Encode(SampleRequest());
    bytes[i] ^= 0x20;
    EXPECT_EQ(Decode(bytes), DecodeStatus::kBadMagic) << "byte " << i;
  }
}

TEST(ProbePacketTest, UnsupportedVersionWhateverTheSize) {
  for (uint8_t version : {0, 3, 255}) {
    std::vector<uint8_t> bytes = Encode(SampleRequest());
    bytes[kProbeOffsetVersion] = version;
    EXPECT_EQ(Decode(bytes), DecodeStatus::kUnsupportedVersion);
    // A future version may be longer or shorter: still "version".
    bytes.resize(128, 0);
    EXPECT_EQ(Decode(bytes), DecodeStatus::kUnsupportedVersion);
    bytes.resize(8);
    EXPECT_EQ(Decode(bytes), DecodeStatus::kUnsupportedVersion);
  }
}

TEST(ProbePacketTest, BadType) {
  for (uint8_t type : {0, 3, 255}) {
    std::vector<uint8_t> bytes = Encode(SampleRequest());
    bytes[kProbeOffsetType] = type;
    EXPECT_EQ(Decode(bytes), DecodeStatus::kBadType) << int{type};
  }
}

TEST(ProbePacketTest, NonzeroFlagsBesidesAuthenticated) {
  for (uint16_t flags : {uint16_t{0x0002}, uint16_t{0x0100}, uint16_t{0x8000},
                         uint16_t{0x8001}}) {
    ProbePacket p = SampleReply();
    p.flags = flags;
    EXPECT_EQ(Decode(Encode(p)), DecodeStatus::kNonzeroFlags) << flags;
  }
  // The authenticated bit without a key on this side.
  ProbePacket p = SampleReply();
  p.flags = kProbeFlagAuthenticated;
  EXPECT_EQ(Decode(Encode(p)), DecodeStatus::kUnexpectedMac);
}

// --- authentication -----------------------------------------------------

constexpr ProbeKey kKey{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
constexpr ProbeKey kOtherKey{0x0706050403020100ULL, 0x0f0e0d0c0b0a0909ULL};

std::vector<uint8_t> EncodeWith(const ProbePacket& p, const ProbeKeys& keys) {
  std::vector<uint8_t> bytes(kProbePacketSize);
  EXPECT_EQ(EncodeProbe(p, bytes.data(), &keys), kProbePacketSize);
  return bytes;
}

DecodeStatus DecodeWith(const std::vector<uint8_t>& bytes,
                        const ProbeKeys& keys, ProbePacket* out = nullptr) {
  ProbePacket ignored;
  return DecodeProbe(bytes.data(), bytes.size(), out ? out : &ignored, &keys);
}

TEST(ProbeAuthTest, AuthenticatedPacketsRoundTripUnderTheirKey) {
  for (const ProbePacket& p : {SampleRequest(), SampleReply()}) {
    const std::vector<uint8_t> bytes = EncodeWith(p, kKey);
    EXPECT_EQ(bytes[kProbeOffsetFlags] & kProbeFlagAuthenticated, 1);
    // The tag: SipHash-2-4 of bytes 0..65, little-endian at 66..73.
    uint64_t tag = 0;
    for (int i = 7; i >= 0; --i) tag = (tag << 8) | bytes[kProbeOffsetMac + i];
    EXPECT_EQ(tag, SipHash24(kKey, bytes.data(), kProbeOffsetMac));
    for (size_t i = kProbeOffsetMac + kProbeMacSize; i < kProbePacketSize; ++i) {
      EXPECT_EQ(bytes[i], 0) << i;
    }
    ProbePacket out;
    ASSERT_EQ(DecodeWith(bytes, kKey, &out), DecodeStatus::kOk);
    ProbePacket want = p;
    want.flags = kProbeFlagAuthenticated;
    EXPECT_EQ(out, want);
  }
}

TEST(ProbeAuthTest, WrongKeyMissingOrUnexpectedMacAreRefused) {
  const std::vector<uint8_t> signed_reply = EncodeWith(SampleReply(), kKey);
  EXPECT_EQ(DecodeWith(signed_reply, kOtherKey), DecodeStatus::kBadMac);
  EXPECT_EQ(Decode(signed_reply), DecodeStatus::kUnexpectedMac);
  EXPECT_EQ(DecodeWith(Encode(SampleReply()), kKey),
            DecodeStatus::kUnauthenticated);
}

// A change of keys: a node holding (new, old) signs with new and accepts
// both, so nodes holding only old or only new still talk to it.
TEST(ProbeAuthTest, TwoKeysSignWithTheFirstAndAcceptBoth) {
  const ProbeKeys rotating(kOtherKey, kKey);
  const std::vector<uint8_t> from_old = EncodeWith(SampleReply(), kKey);
  const std::vector<uint8_t> from_new = EncodeWith(SampleReply(), kOtherKey);
  EXPECT_EQ(DecodeWith(from_old, rotating), DecodeStatus::kOk);
  EXPECT_EQ(DecodeWith(from_new, rotating), DecodeStatus::kOk);
  const std::vector<uint8_t> from_rotating = EncodeWith(SampleReply(), rotating);
  EXPECT_EQ(from_rotating, from_new);
  EXPECT_EQ(DecodeWith(from_rotating, kKey), DecodeStatus::kBadMac);
  EXPECT_EQ(DecodeWith(from_rotating, kOtherKey), DecodeStatus::kOk);
  const ProbeKey third{5, 6};
  EXPECT_EQ(DecodeWith(EncodeWith(SampleReply(), third), rotating),
            DecodeStatus::kBadMac);
}

// Changing any bit of bytes 0..65 or of the tag breaks the MAC (or the
// structure); bytes after the tag must stay zero.
TEST(ProbeAuthTest, EveryTamperedByteIsRefused) {
  const std::vector<uint8_t> valid = EncodeWith(SampleReply(), kKey);
  for (size_t i = 0; i < kProbePacketSize; ++i) {
    for (uint8_t bit : {uint8_t{0x01}, uint8_t{0x80}}) {
      std::vector<uint8_t> bytes = valid;
      bytes[i] ^= bit;
      const DecodeStatus status = DecodeWith(bytes, kKey);
      EXPECT_NE(status, DecodeStatus::kOk) << "byte " << i;
      if (i >= kProbeOffsetMac + kProbeMacSize) {
        EXPECT_EQ(status, DecodeStatus::kNonzeroReserved) << i;
      } else if (i >= 8 && i != kProbeOffsetType && i != kProbeOffsetFlags &&
                 i != kProbeOffsetFlags + 1) {
        EXPECT_EQ(status, DecodeStatus::kBadMac) << i;
      }
    }
  }
}

TEST(ProbePacketTest, NonzeroReservedInEachByte) {
  for (size_t i = kProbeOffsetReserved; i < kProbePacketSize; ++i) {
    std::vector<uint8_t> bytes = Encode(SampleReply());
    bytes[i] = 1;
    EXPECT_EQ(Decode(bytes), DecodeStatus::kNonzeroReserved) << "byte " << i;
  }
}

TEST(ProbePacketTest, RequestWithAnyReplyField) {
  const auto with = [](auto set) {
    ProbePacket p = SampleRequest();
    set(p);
    return Decode(Encode(p));
  };
  EXPECT_EQ(with([](ProbePacket& p) { p.t2_ns = 1; }),
            DecodeStatus::kRequestWithReplyFields);
  EXPECT_EQ(with([](ProbePacket& p) { p.t3_ns = -1; }),
            DecodeStatus::kRequestWithReplyFields);
  EXPECT_EQ(with([](ProbePacket& p) { p.parent_bound_ns = 5; }),
            DecodeStatus::kRequestWithReplyFields);
  EXPECT_EQ(with([](ProbePacket& p) { p.upstream_id = 9; }),
            DecodeStatus::kRequestWithReplyFields);
  EXPECT_EQ(with([](ProbePacket& p) { p.parent_state = 2; }),
            DecodeStatus::kRequestWithReplyFields);
  EXPECT_EQ(with([](ProbePacket& p) { p.parent_depth = 1; }),
            DecodeStatus::kRequestWithReplyFields);
}

TEST(ProbePacketTest, ReplyWithBadParentState) {
  for (uint8_t state : {0, 5, 255}) {
    ProbePacket p = SampleReply();
    p.parent_state = state;
    EXPECT_EQ(Decode(Encode(p)), DecodeStatus::kBadParentState) << int{state};
  }
}

TEST(ProbePacketTest, ReplyWithNegativeBound) {
  for (int64_t bound : {int64_t{-1}, INT64_MIN}) {
    ProbePacket p = SampleReply();
    p.parent_bound_ns = bound;
    EXPECT_EQ(Decode(Encode(p)), DecodeStatus::kNegativeBound) << bound;
  }
}

TEST(ProbePacketTest, EveryStatusHasADistinctName) {
  std::set<std::string> names;
  for (size_t i = 0; i < kDecodeStatusCount; ++i) {
    const std::string name = DecodeStatusName(static_cast<DecodeStatus>(i));
    EXPECT_NE(name, "unknown") << i;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), kDecodeStatusCount);
  EXPECT_STREQ(DecodeStatusName(static_cast<DecodeStatus>(200)), "unknown");
  EXPECT_STREQ(DecodeStatusName(DecodeStatus::kBadMagic), "bad_magic");
}

// Random buffers (fully random, and valid packets with random bytes
// flipped) never crash, never read out of bounds (ASan), and whatever
// decodes as OK re-encodes to the same bytes.
TEST(ProbePacketTest, RandomBytesNeverCrash) {
  const uint32_t seed = 20240601;
  std::mt19937_64 rng(seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  size_t ok = 0;
  size_t statuses_seen[kDecodeStatusCount] = {};
  ProbePacket interleaved = SampleReply();
  interleaved.version = kProbeVersion2;
  interleaved.prev_nonce = 1;  // One bit flip from a stray previous stamp.
  interleaved.prev_t3_ns = 1'700'000'000'000'000'777;
  const std::vector<uint8_t> valid_v1 = Encode(SampleReply());
  const std::vector<uint8_t> valid_v2 = Encode(interleaved);
  for (int i = 0; i < 100'000; ++i) {
    const std::vector<uint8_t>& valid = rng() % 2 == 0 ? valid_v1 : valid_v2;
    std::vector<uint8_t> bytes;
    if (i % 2 == 0) {
      bytes.resize(rng() % 200);
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
      // Often give it a valid header so that later checks are reached.
      if (bytes.size() >= 8 && rng() % 2 == 0) {
        std::memcpy(bytes.data(), valid.data(), 5);
      }
    } else {
      bytes = valid;
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int f = 0; f < flips; ++f) {
        bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
      }
    }
    // Decode from an exact-size heap copy so ASan sees any overread.
    std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size()]);
    if (!bytes.empty()) std::memcpy(exact.get(), bytes.data(), bytes.size());
    ProbePacket out;
    const DecodeStatus status = DecodeProbe(exact.get(), bytes.size(), &out);
    ASSERT_LT(static_cast<size_t>(status), kDecodeStatusCount);
    ++statuses_seen[static_cast<size_t>(status)];
    if (status == DecodeStatus::kOk) {
      ++ok;
      uint8_t again[kProbePacketSize];
      EncodeProbe(out, again);
      ASSERT_EQ(std::memcmp(again, bytes.data(), kProbePacketSize), 0);
    }
  }
  // Bit flips in the timestamps and ids leave valid packets: the generator
  // reached the OK path as well as every rejection.
  EXPECT_GT(ok, 1000u);
  for (size_t s = 0; s < kDecodeStatusCount; ++s) {
    if (static_cast<DecodeStatus>(s) == DecodeStatus::kRequestWithReplyFields) {
      continue;  // Needs a type flip plus clean fields: rare by design.
    }
    if (static_cast<DecodeStatus>(s) == DecodeStatus::kUnauthenticated ||
        static_cast<DecodeStatus>(s) == DecodeStatus::kBadMac) {
      continue;  // Decoded without a key here.
    }
    EXPECT_GT(statuses_seen[s], 0u)
        << DecodeStatusName(static_cast<DecodeStatus>(s));
  }
}

// --- version 2 (interleaved) -----------------------------------------------

ProbePacket SampleRequestV2() {
  ProbePacket p = SampleRequest();
  p.version = kProbeVersion2;
  p.prev_nonce = 0x1122334455667788ULL;
  return p;
}

ProbePacket SampleReplyV2() {
  ProbePacket p = SampleReply();
  p.version = kProbeVersion2;
  p.prev_nonce = 0x1122334455667788ULL;
  p.prev_t3_ns = -5;  // Any value: the sign must survive.
  return p;
}

TEST(ProbePacketV2Test, RoundTripsWithAndWithoutKey) {
  for (const ProbePacket& p : {SampleRequestV2(), SampleReplyV2()}) {
    const std::vector<uint8_t> bytes = Encode(p);
    EXPECT_EQ(bytes[kProbeOffsetVersion], 2);
    EXPECT_EQ(bytes[kProbeOffsetPrevNonce], 0x88);
    ProbePacket out;
    ASSERT_EQ(DecodeProbe(bytes.data(), bytes.size(), &out),
              DecodeStatus::kOk);
    EXPECT_EQ(out, p);
    const std::vector<uint8_t> signed_bytes = EncodeWith(p, kKey);
    // The tag covers bytes 0..87, interleaving fields included.
    uint64_t tag = 0;
    for (int i = 7; i >= 0; --i) {
      tag = (tag << 8) | signed_bytes[kProbeOffsetMacV2 + i];
    }
    EXPECT_EQ(tag, SipHash24(kKey, signed_bytes.data(), kProbeOffsetMacV2));
    ASSERT_EQ(DecodeWith(signed_bytes, kKey, &out), DecodeStatus::kOk);
    ProbePacket want = p;
    want.flags = kProbeFlagAuthenticated;
    EXPECT_EQ(out, want);
  }
}

// A version-1 packet has no interleaving fields: encoding drops them, and
// bytes where version 2 keeps them are reserved in version 1.
TEST(ProbePacketV2Test, VersionOneCarriesNoInterleavingFields) {
  ProbePacket p = SampleReplyV2();
  p.version = kProbeVersion1;
  const std::vector<uint8_t> bytes = Encode(p);
  for (size_t i = kProbeOffsetReserved; i < kProbePacketSize; ++i) {
    EXPECT_EQ(bytes[i], 0) << i;
  }
  ProbePacket out;
  ASSERT_EQ(DecodeProbe(bytes.data(), bytes.size(), &out), DecodeStatus::kOk);
  EXPECT_EQ(out.prev_nonce, 0u);
  EXPECT_EQ(out.prev_t3_ns, 0);
  std::vector<uint8_t> v1_with_field = bytes;
  v1_with_field[kProbeOffsetPrevNonce] = 1;
  EXPECT_EQ(Decode(v1_with_field), DecodeStatus::kNonzeroReserved);
}

TEST(ProbePacketV2Test, ReservedBytesAndTheMacPlace) {
  for (size_t i = kProbeOffsetReserved; i < kProbeOffsetPrevNonce; ++i) {
    std::vector<uint8_t> bytes = Encode(SampleReplyV2());
    bytes[i] = 1;
    EXPECT_EQ(Decode(bytes), DecodeStatus::kNonzeroReserved) << i;
  }
  for (size_t i = kProbeOffsetMacV2; i < kProbePacketSize; ++i) {
    std::vector<uint8_t> bytes = Encode(SampleReplyV2());
    bytes[i] = 1;  // A MAC's place without the authenticated flag.
    EXPECT_EQ(Decode(bytes), DecodeStatus::kNonzeroReserved) << i;
  }
}

TEST(ProbePacketV2Test, EveryTamperedByteIsRefused) {
  const std::vector<uint8_t> valid = EncodeWith(SampleReplyV2(), kKey);
  for (size_t i = 8; i < kProbePacketSize; ++i) {
    std::vector<uint8_t> bytes = valid;
    bytes[i] ^= 0x01;
    const DecodeStatus status = DecodeWith(bytes, kKey);
    if (i == kProbeOffsetType || i == kProbeOffsetFlags) {
      EXPECT_NE(status, DecodeStatus::kOk) << i;
    } else if (i != kProbeOffsetFlags + 1) {
      EXPECT_EQ(status, DecodeStatus::kBadMac) << i;
    }
  }
}

TEST(ProbePacketV2Test, StrayPreviousStamps) {
  ProbePacket request = SampleRequestV2();
  request.prev_t3_ns = 1;  // Only a reply carries a stamp.
  EXPECT_EQ(Decode(Encode(request)), DecodeStatus::kStrayPreviousStamp);
  ProbePacket reply = SampleReplyV2();
  reply.prev_nonce = 0;  // A stamp of no exchange.
  EXPECT_EQ(Decode(Encode(reply)), DecodeStatus::kStrayPreviousStamp);
  reply.prev_t3_ns = 0;  // No stamp at all: fine.
  EXPECT_EQ(Decode(Encode(reply)), DecodeStatus::kOk);
}

}  // namespace
}  // namespace clocksync::probe
