// probe/requester_test.cc: requester and responder on loopback with a
// fake global time (raw + 1 hour): samples are ordered and carry the offset
// and the parent's bound; keys authenticate both ways; unknown, duplicate,
// late, mismatched and malformed replies from a hand-driven fake parent are
// counted and dropped; a full table evicts; a parent that is not listening
// is seen; injected delays are network delay; address errors name the
// address.

#include "probe/requester.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "probe/loopback_testing.h"
#include "probe/packet.h"
#include "probe/raw_clock.h"
#include "probe/responder.h"

namespace clocksync::probe {
namespace {

using ::testing::HasSubstr;
using ::clocksync::probe::loopback::Encoded;
using ::clocksync::probe::loopback::kChildId;
using ::clocksync::probe::loopback::kHourNs;
using ::clocksync::probe::loopback::kParentId;
using ::clocksync::probe::loopback::MakeRequester;
using ::clocksync::probe::loopback::PollFor;
using ::clocksync::probe::loopback::RawSocket;
using ::clocksync::probe::loopback::ReplyTo;
using ::clocksync::probe::loopback::ServingResponder;
using ::clocksync::probe::loopback::WaitFor;

// Local time is the raw clock plus a fixed offset.
class OffsetClock : public LocalClock {
 public:
  explicit OffsetClock(int64_t offset_ns) : offset_ns_(offset_ns) {}
  int64_t LocalAt(int64_t raw_ns) override { return raw_ns + offset_ns_; }

 private:
  int64_t offset_ns_;
};

// --- round trips ----------------------------------------------------------

void CheckLoopbackRoundTrips(const std::string& listen,
                             const std::string& parent_prefix) {
  ProbeResponder::Options responder_options;
  responder_options.listen_address = listen;
  ServingResponder serving(responder_options);
  const std::string error(serving.status().message());
  if (error.find("Cannot assign") != std::string::npos ||
      error.find("not supported") != std::string::npos) {
    GTEST_SKIP() << "no such loopback here: " << serving.status();
  }
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  ProbeRequester::Options options;
  options.interleaved = false;  // One sample per reply, at once.
  options.parent_address =
      parent_prefix + std::to_string(serving.responder().port());
  std::unique_ptr<ProbeRequester> requester = MakeRequester(options);
  ASSERT_NE(requester, nullptr);

  constexpr int kProbes = 50;
  for (int i = 0; i < kProbes; ++i) {
    ASSERT_TRUE(requester->SendProbe().ok());
    const std::vector<ProbeResult> got = PollFor(*requester, 1);
    ASSERT_EQ(got.size(), 1u) << "probe " << i;
    const ProbeResult& r = got[0];
    const hull::ProbeSample& s = r.sample;
    // Raw instants in causal order: t1 (kernel transmit stamp, converted
    // early) <= t2 (kernel receive stamp) <= t3 (read before send) <= t4
    // (t2 and t4 within the sample's widening: the middles of their
    // receive stamps' ranges, hull/probe_sample.h.)
    EXPECT_LE(s.t1_ns, s.t2_ns - kHourNs + s.parent_bound_ns);
    EXPECT_LE(s.t2_ns, s.t3_ns);
    EXPECT_LE(s.t3_ns - kHourNs - s.parent_bound_ns, s.t4_ns);
    EXPECT_LT(s.t4_ns - s.t1_ns, 100'000'000) << "round trip over 100 ms";
    // The offset estimate from this sample is one hour, within the round
    // trip.
    const double offset_ns =
        ((s.t2_ns - s.t1_ns) + (s.t3_ns - s.t4_ns)) / 2.0;
    EXPECT_NEAR(offset_ns, static_cast<double>(kHourNs),
                static_cast<double>(s.t4_ns - s.t1_ns));
    EXPECT_EQ(r.parent_state, kProbeStateSynced);
    EXPECT_EQ(r.parent_depth, 3);
    // The parent's 1234 ns plus the receive stamps' widening (< 1 ms).
    EXPECT_GE(s.parent_bound_ns, 1234);
    EXPECT_LT(s.parent_bound_ns, 1234 + 1'000'000);
    EXPECT_EQ(r.parent_id, kParentId);
    EXPECT_EQ(r.upstream_id, 77u);
  }
  const RequesterCounters& rc = requester->counters();
  EXPECT_EQ(rc.sent.load(), uint64_t{kProbes});
  EXPECT_EQ(rc.answered.load(), uint64_t{kProbes});
  EXPECT_EQ(rc.lost.load(), 0u);
  EXPECT_EQ(rc.malformed_total(), 0u);
  // The kernel stamped every reply (SO_TIMESTAMPNS works on loopback).
  EXPECT_EQ(rc.rx_timestamp_fallbacks.load(), 0u);
  EXPECT_EQ(requester->outstanding(), 0u);

  ASSERT_TRUE(serving.Stop().ok());
  const ResponderCounters& pc = serving.responder().counters();
  EXPECT_EQ(pc.received.load(), uint64_t{kProbes});
  EXPECT_EQ(pc.answered.load(), uint64_t{kProbes});
  EXPECT_EQ(pc.malformed_total(), 0u);
  EXPECT_EQ(pc.send_errors.load(), 0u);
  EXPECT_EQ(pc.rx_timestamp_fallbacks.load(), 0u);
}

TEST(ProbeRequesterTest, LoopbackIpv4SamplesAreOrderedAndCarryTheOffset) {
  CheckLoopbackRoundTrips("127.0.0.1:0", "127.0.0.1:");
}

TEST(ProbeRequesterTest, LoopbackIpv6) {
  CheckLoopbackRoundTrips("[::1]:0", "[::1]:");
}

TEST(ProbeRequesterTest, LocalClockStampsT1AndT4) {
  ServingResponder serving({});
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  constexpr int64_t kLocalOffsetNs = -5'000'000'000'000;  // 5000 s behind.
  OffsetClock clock(kLocalOffsetNs);
  ProbeRequester::Options options;
  options.interleaved = false;  // One sample per reply, at once.
  options.parent_address = serving.address();
  options.clock = &clock;
  std::unique_ptr<ProbeRequester> requester = MakeRequester(options);
  ASSERT_NE(requester, nullptr);
  const int64_t before = RawNowNs();
  ASSERT_TRUE(requester->SendProbe().ok());
  const std::vector<ProbeResult> got = PollFor(*requester, 1);
  const int64_t after = RawNowNs();
  ASSERT_EQ(got.size(), 1u);
  const hull::ProbeSample& s = got[0].sample;
  EXPECT_GE(s.t1_ns, before + kLocalOffsetNs);
  EXPECT_LE(s.t4_ns, after + kLocalOffsetNs);
  EXPECT_LE(s.t1_ns - kLocalOffsetNs, s.t2_ns - kHourNs + s.parent_bound_ns);
  EXPECT_LE(s.t3_ns - kHourNs - s.parent_bound_ns, s.t4_ns - kLocalOffsetNs);
}

// --- authentication ---------------------------------------------------------

TEST(ProbeRequesterTest, SharedKeyAuthenticatesBothWays) {
  const ProbeKey key{0x1111111111111111ULL, 0x2222222222222222ULL};
  ProbeResponder::Options responder_options;
  responder_options.key = key;
  ServingResponder serving(responder_options);
  ASSERT_TRUE(serving.status().ok()) << serving.status();

  // The same key: answered, and the reply is authenticated.
  ProbeRequester::Options options;
  options.interleaved = false;  // One sample per reply, at once.
  options.parent_address = serving.address();
  options.key = key;
  std::unique_ptr<ProbeRequester> keyed = MakeRequester(options);
  ASSERT_NE(keyed, nullptr);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(keyed->SendProbe().ok());
    ASSERT_EQ(PollFor(*keyed, 1).size(), 1u) << i;
  }
  EXPECT_EQ(keyed->counters().malformed_total(), 0u);

  // No key, or another key: the responder drops the request and counts
  // why; nothing comes back.
  options.key.reset();
  std::unique_ptr<ProbeRequester> keyless = MakeRequester(options);
  options.key = ProbeKey{0x1111111111111111ULL, 0x2222222222222223ULL};
  std::unique_ptr<ProbeRequester> wrong = MakeRequester(options);
  ASSERT_NE(keyless, nullptr);
  ASSERT_NE(wrong, nullptr);
  ASSERT_TRUE(keyless->SendProbe().ok());
  ASSERT_TRUE(wrong->SendProbe().ok());
  const ResponderCounters& c = serving.responder().counters();
  // `received` counts a datagram before it is decoded: wait for the
  // drops' own counters (a slow responder thread, under TSan, is still
  // between the two).
  const auto& unauthenticated =
      c.malformed[static_cast<size_t>(DecodeStatus::kUnauthenticated)];
  const auto& bad_mac = c.malformed[static_cast<size_t>(DecodeStatus::kBadMac)];
  ASSERT_TRUE(WaitFor(unauthenticated, 1));
  ASSERT_TRUE(WaitFor(bad_mac, 1));
  EXPECT_EQ(c.received.load(), 7u);
  EXPECT_EQ(unauthenticated.load(), 1u);
  EXPECT_EQ(bad_mac.load(), 1u);
  EXPECT_EQ(c.answered.load(), 5u);
  EXPECT_TRUE(PollFor(*keyless, 1, absl::Milliseconds(200)).empty());
  EXPECT_TRUE(PollFor(*wrong, 1, absl::Milliseconds(200)).empty());
}

TEST(ProbeRequesterTest, KeyedRequesterRefusesUnauthenticatedReplies) {
  ServingResponder serving({});  // no key
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  ProbeRequester::Options options;
  options.interleaved = false;  // One sample per reply, at once.
  options.parent_address = serving.address();
  options.key = ProbeKey{1, 2};
  std::unique_ptr<ProbeRequester> requester = MakeRequester(options);
  ASSERT_NE(requester, nullptr);
  ASSERT_TRUE(requester->SendProbe().ok());
  // The keyless responder refuses the authenticated request itself.
  const ResponderCounters& c = serving.responder().counters();
  // `received` counts a datagram before it is decoded: wait for the drop.
  const auto& unexpected_mac =
      c.malformed[static_cast<size_t>(DecodeStatus::kUnexpectedMac)];
  ASSERT_TRUE(WaitFor(unexpected_mac, 1));
  EXPECT_EQ(unexpected_mac.load(), 1u);
  EXPECT_EQ(c.received.load(), 1u);
  EXPECT_TRUE(PollFor(*requester, 1, absl::Milliseconds(200)).empty());
}

// A reload replaces the keys of both ends while they run: the responder
// answers the new key from then on and drops the old one's requests; the
// requester signs with its new key.
TEST(ProbeRequesterTest, ReplacedKeysApplyToTheNextPackets) {
  const ProbeKey old_key{1, 2};
  const ProbeKey new_key{3, 4};
  ProbeResponder::Options responder_options;
  responder_options.key = old_key;
  ServingResponder serving(responder_options);
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  ProbeRequester::Options options;
  options.interleaved = false;  // One sample per reply, at once.
  options.parent_address = serving.address();
  options.key = old_key;
  std::unique_ptr<ProbeRequester> requester = MakeRequester(options);
  ASSERT_NE(requester, nullptr);
  ASSERT_TRUE(requester->SendProbe().ok());
  ASSERT_EQ(PollFor(*requester, 1).size(), 1u);

  serving.responder().SetKey(ProbeKeys(new_key));
  const ResponderCounters& c = serving.responder().counters();
  ASSERT_TRUE(requester->SendProbe().ok());  // Still the old key: dropped.
  const auto& bad_mac = c.malformed[static_cast<size_t>(DecodeStatus::kBadMac)];
  ASSERT_TRUE(WaitFor(bad_mac, 1));  // Counted once decoded, after `received`.
  EXPECT_TRUE(PollFor(*requester, 1, absl::Milliseconds(200)).empty());
  EXPECT_EQ(bad_mac.load(), 1u);
  requester->SetKey(ProbeKeys(new_key));
  ASSERT_TRUE(requester->SendProbe().ok());
  ASSERT_EQ(PollFor(*requester, 1).size(), 1u);
  EXPECT_TRUE(WaitFor(c.answered, 2));

  // Without a key on either end: unauthenticated probes again.
  serving.responder().SetKey(std::nullopt);
  requester->SetKey(std::nullopt);
  ASSERT_TRUE(requester->SendProbe().ok());
  ASSERT_EQ(PollFor(*requester, 1).size(), 1u);
  EXPECT_TRUE(WaitFor(c.answered, 3));
  EXPECT_EQ(bad_mac.load(), 1u);
}

// --- replies from a fake parent -------------------------------------------

// The requester against a hand-driven fake parent.
class FakeParentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ProbeRequester::Options options;
    options.interleaved = false;  // One sample per reply, at once.
    options.parent_address = "127.0.0.1:" + std::to_string(parent_.port());
    options.expiry_ns = 200'000'000;
    requester_ = MakeRequester(options);
    ASSERT_NE(requester_, nullptr);
  }

  // Sends a probe and returns the request as the parent received it.
  ProbePacket SendAndCatch() {
    EXPECT_TRUE(requester_->SendProbe().ok());
    std::vector<uint8_t> bytes;
    child_port_ = parent_.Receive(&bytes);
    EXPECT_NE(child_port_, 0);
    ProbePacket request;
    EXPECT_EQ(DecodeProbe(bytes.data(), bytes.size(), &request),
              DecodeStatus::kOk);
    EXPECT_EQ(request.type, ProbeType::kRequest);
    EXPECT_EQ(request.sender_id, kChildId);
    return request;
  }

  // Polls until nothing arrives for 100 ms; returns the replies delivered.
  std::vector<ProbeResult> Drain() {
    std::vector<ProbeResult> results;
    for (;;) {
      absl::StatusOr<int> n = requester_->Poll(
          100, [&](const ProbeResult& r) { results.push_back(r); });
      EXPECT_TRUE(n.ok()) << n.status();
      if (!n.ok()) break;
      const RequesterCounters& c = requester_->counters();
      if (*n == 0 && c.answered.load() + c.duplicate.load() +
                             c.unknown.load() + c.late.load() +
                             c.malformed_total() + c.unexpected_type.load() +
                             c.echo_mismatch.load() >=
                         expected_datagrams_) {
        break;
      }
    }
    return results;
  }

  void ToChild(const std::vector<uint8_t>& bytes) {
    parent_.SendTo(child_port_, bytes);
    ++expected_datagrams_;
  }

  RawSocket parent_;
  uint16_t child_port_ = 0;
  uint64_t expected_datagrams_ = 0;
  std::unique_ptr<ProbeRequester> requester_;
};

TEST_F(FakeParentTest, UnknownDuplicateMismatchedAndMalformedAreDropped) {
  const ProbePacket request = SendAndCatch();
  ASSERT_NE(request.nonce, 0u);
  ProbePacket wrong_echo = ReplyTo(request);
  wrong_echo.t1_ns += 1;
  ProbePacket unknown = ReplyTo(request);
  unknown.nonce ^= 1;
  std::vector<uint8_t> truncated = Encoded(ReplyTo(request));
  truncated.resize(40);

  ToChild(Encoded(wrong_echo));        // echo mismatch (stays outstanding)
  ToChild(Encoded(ReplyTo(request)));  // the answer
  ToChild(Encoded(ReplyTo(request)));  // duplicate
  ToChild(Encoded(unknown));           // unknown nonce
  ToChild(truncated);                  // malformed
  ToChild(Encoded(request));           // a request, not a reply
  const std::vector<ProbeResult> got = Drain();

  ASSERT_EQ(got.size(), 1u);
  // t1 is the kernel's transmit stamp: after the reading the request
  // carries (the send call's path), by less than a round trip here.
  EXPECT_TRUE(got[0].kernel_t1);
  EXPECT_GE(got[0].sample.t1_ns, request.t1_ns);
  EXPECT_LT(got[0].sample.t1_ns, request.t1_ns + 100'000'000);
  EXPECT_EQ(got[0].sample.t2_ns, request.t1_ns + kHourNs);
  const RequesterCounters& c = requester_->counters();
  EXPECT_EQ(c.answered.load(), 1u);
  EXPECT_EQ(c.echo_mismatch.load(), 1u);
  EXPECT_EQ(c.duplicate.load(), 1u);
  EXPECT_EQ(c.unknown.load(), 1u);
  EXPECT_EQ(c.malformed[static_cast<size_t>(DecodeStatus::kTruncated)].load(),
            1u);
  EXPECT_EQ(c.unexpected_type.load(), 1u);
  EXPECT_EQ(c.lost.load(), 0u);
  EXPECT_EQ(requester_->outstanding(), 0u);
}

TEST_F(FakeParentTest, ReplyAfterExpiryIsLate) {
  const ProbePacket request = SendAndCatch();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(requester_->Poll(0, [](const ProbeResult&) {}).ok());
  EXPECT_EQ(requester_->counters().lost.load(), 1u);
  EXPECT_EQ(requester_->outstanding(), 0u);
  ToChild(Encoded(ReplyTo(request)));
  EXPECT_TRUE(Drain().empty());
  EXPECT_EQ(requester_->counters().late.load(), 1u);
  EXPECT_EQ(requester_->counters().unknown.load(), 0u);
  EXPECT_EQ(requester_->counters().answered.load(), 0u);
}

TEST_F(FakeParentTest, FullTableEvictsTheOldestAsLost) {
  for (size_t i = 0; i < ProbeRequester::kMaxOutstanding; ++i) {
    SendAndCatch();
  }
  EXPECT_EQ(requester_->outstanding(), ProbeRequester::kMaxOutstanding);
  EXPECT_EQ(requester_->counters().lost.load(), 0u);
  SendAndCatch();
  EXPECT_EQ(requester_->outstanding(), ProbeRequester::kMaxOutstanding);
  EXPECT_EQ(requester_->counters().lost.load(), 1u);
  EXPECT_EQ(requester_->counters().sent.load(),
            ProbeRequester::kMaxOutstanding + 1);
}

TEST(ProbeRequesterTest, RefusedWhenNobodyListens) {
  // Grab a free port, then close it: the probes meet ICMP port unreachable.
  uint16_t port = 0;
  {
    RawSocket placeholder;
    port = placeholder.port();
  }
  ProbeRequester::Options options;
  options.interleaved = false;  // One sample per reply, at once.
  options.parent_address = "127.0.0.1:" + std::to_string(port);
  options.expiry_ns = 50'000'000;
  std::unique_ptr<ProbeRequester> requester = MakeRequester(options);
  ASSERT_NE(requester, nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(requester->SendProbe().ok());
    ASSERT_TRUE(requester->Poll(100, [](const ProbeResult&) {}).ok());
  }
  EXPECT_GE(requester->counters().refused.load(), 1u);
  EXPECT_EQ(requester->counters().answered.load(), 0u);
  EXPECT_GE(requester->counters().lost.load(), 2u);
}

// --- delay injection ------------------------------------------------------

TEST(ProbeRequesterTest, DelayInjectionAddsAtLeastTheMinimum) {
  constexpr int64_t kReplyMinNs = 30'000'000;
  constexpr int64_t kRequestMinNs = 20'000'000;
  ProbeResponder::Options responder_options;
  responder_options.delay = {true, kReplyMinNs, 1'000'000.0, 7};
  ServingResponder serving(responder_options);
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  ProbeRequester::Options options;
  options.interleaved = false;  // One sample per reply, at once.
  options.parent_address = serving.address();
  options.delay = {true, kRequestMinNs, 1'000'000.0, 8};
  std::unique_ptr<ProbeRequester> requester = MakeRequester(options);
  ASSERT_NE(requester, nullptr);

  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(requester->SendProbe().ok());
    EXPECT_EQ(requester->counters().sent.load(), static_cast<uint64_t>(i))
        << "the request must wait for its delay";
    const std::vector<ProbeResult> got = PollFor(*requester, 1);
    ASSERT_EQ(got.size(), 1u);
    const hull::ProbeSample& s = got[0].sample;
    // The delays are network delays: outside the parent's turnaround.
    EXPECT_GE(s.t2_ns - kHourNs - s.t1_ns, kRequestMinNs);
    EXPECT_GE(s.t4_ns - (s.t3_ns - kHourNs), kReplyMinNs);
    EXPECT_LT(s.t3_ns - s.t2_ns, kReplyMinNs);
    EXPECT_GE((s.t4_ns - s.t1_ns) - (s.t3_ns - s.t2_ns),
              kRequestMinNs + kReplyMinNs);
  }
  EXPECT_EQ(requester->counters().sent.load(), 5u);
  ASSERT_TRUE(serving.Stop().ok());
  EXPECT_EQ(serving.responder().counters().answered.load(), 5u);
}

// --- errors -----------------------------------------------------------------

TEST(ProbeRequesterTest, AddressErrorsNameTheAddress) {
  ProbeRequester::Options options;
  options.interleaved = false;  // One sample per reply, at once.
  options.parent_address = "no-such-host.invalid:3190";
  auto requester = ProbeRequester::Create(options);
  ASSERT_FALSE(requester.ok());
  EXPECT_THAT(requester.status().ToString(),
              HasSubstr("'no-such-host.invalid:3190': cannot resolve"));
  options.parent_address = ":3190";
  EXPECT_THAT(ProbeRequester::Create(options).status().ToString(),
              HasSubstr("missing host"));
}

}  // namespace
}  // namespace clocksync::probe
