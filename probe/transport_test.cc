// probe/transport_test.cc: responder and requester on loopback
// with a fake global time (raw + 1 hour): samples are ordered and carry the
// offset; garbage, unknown, duplicate, late and mismatched packets are
// counted and dropped; delay injection delays; the stop flag stops Serve();
// addresses and delay specs are validated with useful messages.

#include "probe/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "probe/packet.h"
#include "probe/raw_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace clocksync::probe {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kHourNs = int64_t{3600} * 1'000'000'000;
constexpr uint64_t kParentId = 0xA1;
constexpr uint64_t kChildId = 0xC1;

// Global time is the raw clock plus one hour; the parent is synced at
// depth 3 with a bound of 1234 ns under node 77.
class FakeGlobalTime : public GlobalTimeSource {
 public:
  ParentTime GlobalAt(int64_t raw_ns) const override {
    ParentTime t;
    t.global_ns = raw_ns + kHourNs;
    t.state = kProbeStateSynced;
    t.depth = 3;
    t.bound_ns = 1234;
    t.upstream_id = 77;
    return t;
  }
};

// Local time is the raw clock plus a fixed offset.
class OffsetClock : public LocalClock {
 public:
  explicit OffsetClock(int64_t offset_ns) : offset_ns_(offset_ns) {}
  int64_t LocalAt(int64_t raw_ns) override { return raw_ns + offset_ns_; }

 private:
  int64_t offset_ns_;
};

// A responder serving on its own thread until destroyed.
class ServingResponder {
 public:
  explicit ServingResponder(ProbeResponder::Options options) {
    options.time_source = &time_;
    options.node_id = kParentId;
    if (options.listen_address.empty()) options.listen_address = "127.0.0.1:0";
    auto created = ProbeResponder::Create(options);
    status_ = created.status();
    if (!created.ok()) return;
    responder_ = std::move(*created);
    thread_ = std::thread([this] { serve_status_ = responder_->Serve(stop_); });
  }
  ~ServingResponder() { Stop().IgnoreError(); }

  absl::Status Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    return serve_status_;
  }
  const absl::Status& status() const { return status_; }
  ProbeResponder& responder() { return *responder_; }
  std::string address() const {
    return "127.0.0.1:" + std::to_string(responder_->port());
  }

 private:
  FakeGlobalTime time_;
  absl::Status status_;
  std::unique_ptr<ProbeResponder> responder_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  absl::Status serve_status_;
};

// Polls until `want` replies arrived or 5 s passed.
std::vector<ProbeResult> PollFor(ProbeRequester& requester, size_t want,
                                 absl::Duration timeout = absl::Seconds(5)) {
  std::vector<ProbeResult> results;
  const int64_t deadline = RawNowNs() + absl::ToInt64Nanoseconds(timeout);
  while (results.size() < want && RawNowNs() < deadline) {
    absl::StatusOr<int> n = requester.Poll(
        50, [&](const ProbeResult& r) { results.push_back(r); });
    EXPECT_TRUE(n.ok()) << n.status();
  }
  return results;
}

// Waits until `counter` reaches `want` (5 s at most).
bool WaitFor(const std::atomic<uint64_t>& counter, uint64_t want) {
  const int64_t deadline = RawNowNs() + 5'000'000'000;
  while (counter.load() < want && RawNowNs() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return counter.load() >= want;
}

// A plain UDP socket on 127.0.0.1 for sending hand-made datagrams.
class RawSocket {
 public:
  RawSocket() {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&any), sizeof(any)), 0);
    timeval timeout{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~RawSocket() { close(fd_); }

  uint16_t port() const {
    sockaddr_in self{};
    socklen_t len = sizeof(self);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&self), &len);
    return ntohs(self.sin_port);
  }
  void SendTo(uint16_t port, const std::vector<uint8_t>& bytes) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(port);
    ASSERT_EQ(sendto(fd_, bytes.data(), bytes.size(), 0,
                     reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              static_cast<ssize_t>(bytes.size()));
  }
  // Receives one datagram; returns its sender's port (0 on timeout).
  uint16_t Receive(std::vector<uint8_t>* bytes) {
    bytes->assign(2048, 0);
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    const ssize_t n = recvfrom(fd_, bytes->data(), bytes->size(), 0,
                               reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 0) return 0;
    bytes->resize(static_cast<size_t>(n));
    return ntohs(from.sin_port);
  }

 private:
  int fd_ = -1;
};

std::vector<uint8_t> Encoded(const ProbePacket& p) {
  std::vector<uint8_t> bytes(kProbePacketSize);
  EncodeProbe(p, bytes.data());
  return bytes;
}

ProbePacket Request(uint64_t nonce) {
  ProbePacket p;
  p.type = ProbeType::kRequest;
  p.nonce = nonce;
  p.sender_id = kChildId;
  p.t1_ns = 1000;
  return p;
}

ProbePacket ReplyTo(const ProbePacket& request) {
  ProbePacket p = request;
  p.type = ProbeType::kReply;
  p.sender_id = kParentId;
  p.t2_ns = request.t1_ns + kHourNs;
  p.t3_ns = p.t2_ns + 10;
  p.parent_state = kProbeStateSynced;
  p.parent_bound_ns = 5;
  return p;
}

std::unique_ptr<ProbeRequester> MakeRequester(ProbeRequester::Options options) {
  options.node_id = kChildId;
  auto created = ProbeRequester::Create(options);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? std::move(*created) : nullptr;
}

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
    // Raw instants in causal order: t1 (read before send) <= t2 (kernel
    // receive stamp, converted late) <= t3 (read before send) <= t4.
    EXPECT_LE(s.t1_ns, s.t2_ns - kHourNs);
    EXPECT_LE(s.t2_ns, s.t3_ns);
    EXPECT_LE(s.t3_ns - kHourNs, s.t4_ns);
    EXPECT_LT(s.t4_ns - s.t1_ns, 100'000'000) << "round trip over 100 ms";
    // The offset estimate from this sample is one hour, within the round
    // trip.
    const double offset_ns =
        ((s.t2_ns - s.t1_ns) + (s.t3_ns - s.t4_ns)) / 2.0;
    EXPECT_NEAR(offset_ns, static_cast<double>(kHourNs),
                static_cast<double>(s.t4_ns - s.t1_ns));
    EXPECT_EQ(r.parent_state, kProbeStateSynced);
    EXPECT_EQ(r.parent_depth, 3);
    EXPECT_EQ(r.parent_bound_ns, 1234);
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

TEST(ProbeTransportTest, LoopbackIpv4SamplesAreOrderedAndCarryTheOffset) {
  CheckLoopbackRoundTrips("127.0.0.1:0", "127.0.0.1:");
}

TEST(ProbeTransportTest, LoopbackIpv6) {
  CheckLoopbackRoundTrips("[::1]:0", "[::1]:");
}

TEST(ProbeTransportTest, LocalClockStampsT1AndT4) {
  ServingResponder serving({});
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  constexpr int64_t kLocalOffsetNs = -5'000'000'000'000;  // 5000 s behind.
  OffsetClock clock(kLocalOffsetNs);
  ProbeRequester::Options options;
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
  EXPECT_LE(s.t1_ns - kLocalOffsetNs, s.t2_ns - kHourNs);
  EXPECT_LE(s.t3_ns - kHourNs, s.t4_ns - kLocalOffsetNs);
}

// --- authentication ---------------------------------------------------------

TEST(ProbeTransportTest, SharedKeyAuthenticatesBothWays) {
  const ProbeKey key{0x1111111111111111ULL, 0x2222222222222222ULL};
  ProbeResponder::Options responder_options;
  responder_options.key = key;
  ServingResponder serving(responder_options);
  ASSERT_TRUE(serving.status().ok()) << serving.status();

  // The same key: answered, and the reply is authenticated.
  ProbeRequester::Options options;
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
  ASSERT_TRUE(WaitFor(c.received, 7));
  EXPECT_EQ(c.malformed[static_cast<size_t>(DecodeStatus::kUnauthenticated)]
                .load(),
            1u);
  EXPECT_EQ(c.malformed[static_cast<size_t>(DecodeStatus::kBadMac)].load(), 1u);
  EXPECT_EQ(c.answered.load(), 5u);
  EXPECT_TRUE(PollFor(*keyless, 1, absl::Milliseconds(200)).empty());
  EXPECT_TRUE(PollFor(*wrong, 1, absl::Milliseconds(200)).empty());
}

TEST(ProbeTransportTest, KeyedRequesterRefusesUnauthenticatedReplies) {
  ServingResponder serving({});  // no key
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  ProbeRequester::Options options;
  options.parent_address = serving.address();
  options.key = ProbeKey{1, 2};
  std::unique_ptr<ProbeRequester> requester = MakeRequester(options);
  ASSERT_NE(requester, nullptr);
  ASSERT_TRUE(requester->SendProbe().ok());
  // The keyless responder refuses the authenticated request itself.
  const ResponderCounters& c = serving.responder().counters();
  ASSERT_TRUE(WaitFor(c.received, 1));
  EXPECT_EQ(
      c.malformed[static_cast<size_t>(DecodeStatus::kUnexpectedMac)].load(), 1u);
  EXPECT_TRUE(PollFor(*requester, 1, absl::Milliseconds(200)).empty());
}

// --- malformed and unexpected traffic -------------------------------------

TEST(ProbeTransportTest, ResponderCountsAndIgnoresGarbage) {
  ServingResponder serving({});
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  const uint16_t port = serving.responder().port();
  RawSocket client;

  const std::vector<uint8_t> valid = Encoded(Request(99));
  const auto mutated = [&](size_t offset, uint8_t value) {
    std::vector<uint8_t> bytes = valid;
    bytes[offset] = value;
    return bytes;
  };
  std::vector<uint8_t> truncated(valid.begin(), valid.begin() + 95);
  std::vector<uint8_t> oversized = valid;
  oversized.push_back(0);
  std::vector<uint8_t> jumbo = valid;  // Larger than the receive buffer.
  jumbo.resize(1000, 0);
  ProbePacket with_t2 = Request(99);
  with_t2.t2_ns = 5;

  client.SendTo(port, {1, 2, 3});                             // truncated
  client.SendTo(port, truncated);                             // truncated
  client.SendTo(port, oversized);                             // oversized
  client.SendTo(port, jumbo);                                 // oversized
  client.SendTo(port, mutated(0, 'X'));                       // bad magic
  client.SendTo(port, mutated(kProbeOffsetVersion, 2));       // version
  client.SendTo(port, mutated(kProbeOffsetType, 9));          // type
  client.SendTo(port, mutated(kProbeOffsetFlags, 2));         // flags
  client.SendTo(port, mutated(kProbePacketSize - 1, 1));      // reserved
  client.SendTo(port, Encoded(with_t2));                      // reply fields
  client.SendTo(port, Encoded(ReplyTo(Request(99))));         // a reply
  client.SendTo(port, valid);                                 // the good one

  std::vector<uint8_t> answer;
  ASSERT_EQ(client.Receive(&answer), port);
  ProbePacket reply;
  ASSERT_EQ(DecodeProbe(answer.data(), answer.size(), &reply),
            DecodeStatus::kOk);
  EXPECT_EQ(reply.type, ProbeType::kReply);
  EXPECT_EQ(reply.nonce, 99u);
  EXPECT_EQ(reply.t1_ns, 1000);
  EXPECT_EQ(reply.sender_id, kParentId);

  const ResponderCounters& c = serving.responder().counters();
  ASSERT_TRUE(WaitFor(c.received, 12));
  const auto malformed = [&](DecodeStatus s) {
    return c.malformed[static_cast<size_t>(s)].load();
  };
  EXPECT_EQ(malformed(DecodeStatus::kTruncated), 2u);
  EXPECT_EQ(malformed(DecodeStatus::kOversized), 2u);
  EXPECT_EQ(malformed(DecodeStatus::kBadMagic), 1u);
  EXPECT_EQ(malformed(DecodeStatus::kUnsupportedVersion), 1u);
  EXPECT_EQ(malformed(DecodeStatus::kBadType), 1u);
  EXPECT_EQ(malformed(DecodeStatus::kNonzeroFlags), 1u);
  EXPECT_EQ(malformed(DecodeStatus::kNonzeroReserved), 1u);
  EXPECT_EQ(malformed(DecodeStatus::kRequestWithReplyFields), 1u);
  EXPECT_EQ(c.malformed_total(), 10u);
  EXPECT_EQ(c.unexpected_type.load(), 1u);
  EXPECT_EQ(c.answered.load(), 1u);
  ASSERT_TRUE(serving.Stop().ok());
}

// The requester against a hand-driven fake parent.
class FakeParentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ProbeRequester::Options options;
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
  EXPECT_EQ(got[0].sample.t1_ns, request.t1_ns);
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

TEST(ProbeTransportTest, RefusedWhenNobodyListens) {
  // Grab a free port, then close it: the probes meet ICMP port unreachable.
  uint16_t port = 0;
  {
    RawSocket placeholder;
    port = placeholder.port();
  }
  ProbeRequester::Options options;
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

TEST(ProbeTransportTest, DelayInjectionAddsAtLeastTheMinimum) {
  constexpr int64_t kReplyMinNs = 30'000'000;
  constexpr int64_t kRequestMinNs = 20'000'000;
  ProbeResponder::Options responder_options;
  responder_options.delay = {true, kReplyMinNs, 1'000'000.0, 7};
  ServingResponder serving(responder_options);
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  ProbeRequester::Options options;
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

TEST(ProbeTransportTest, FullDelayQueueDropsAndCounts) {
  ProbeResponder::Options responder_options;
  responder_options.delay = {true, 2'000'000'000, 0.0, 1};
  responder_options.delay_queue_capacity = 2;
  ServingResponder serving(responder_options);
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  RawSocket client;
  for (uint64_t nonce = 1; nonce <= 5; ++nonce) {
    client.SendTo(serving.responder().port(), Encoded(Request(nonce)));
  }
  const ResponderCounters& c = serving.responder().counters();
  ASSERT_TRUE(WaitFor(c.received, 5));
  EXPECT_EQ(c.delay_queue_drops.load(), 3u);
  EXPECT_EQ(c.answered.load(), 0u);
}

TEST(DelayInjectionTest, ParsesAFullSpec) {
  DelayInjection d;
  std::string error;
  ASSERT_TRUE(ParseDelayInjection("min=50us,mean=20us,seed=3", &d, &error))
      << error;
  EXPECT_TRUE(d.enabled);
  EXPECT_EQ(d.min_ns, 50'000);
  EXPECT_DOUBLE_EQ(d.exp_mean_ns, 20'000.0);
  EXPECT_EQ(d.seed, 3u);
  ASSERT_TRUE(ParseDelayInjection("mean=1.5ms", &d, &error)) << error;
  EXPECT_EQ(d.min_ns, 0);
  EXPECT_DOUBLE_EQ(d.exp_mean_ns, 1'500'000.0);
  EXPECT_EQ(d.seed, 1u);
}

TEST(DelayInjectionTest, ErrorsNameTheKeyOrValue) {
  const auto error_of = [](const std::string& spec) {
    DelayInjection d;
    std::string error;
    EXPECT_FALSE(ParseDelayInjection(spec, &d, &error)) << spec;
    EXPECT_FALSE(d.enabled) << spec;
    return error;
  };
  EXPECT_THAT(error_of(""), HasSubstr("empty"));
  EXPECT_THAT(error_of("min=50"), HasSubstr("min: bad duration '50'"));
  EXPECT_THAT(error_of("min=-5us"), HasSubstr("'-5us'"));
  EXPECT_THAT(error_of("mean=1h"), HasSubstr("mean: bad duration '1h'"));
  EXPECT_THAT(error_of("max=1us"), HasSubstr("unknown key 'max'"));
  EXPECT_THAT(error_of("min=1us,seed=x"), HasSubstr("seed: bad value 'x'"));
  EXPECT_THAT(error_of("min=1us,min=2us"), HasSubstr("duplicate key 'min'"));
  EXPECT_THAT(error_of("seed=3"), HasSubstr("needs min or mean"));
  EXPECT_THAT(error_of("min"), HasSubstr("'min'"));
}

TEST(DelayInjectionTest, SamplerIsSeededAndHasTheRightMean) {
  const DelayInjection d{true, 50'000, 20'000.0, 3};
  DelaySampler a(d, 1);
  DelaySampler b(d, 1);
  DelaySampler other_stream(d, 2);
  double sum = 0;
  int same_as_other = 0;
  constexpr int kDraws = 200'000;
  for (int i = 0; i < kDraws; ++i) {
    const int64_t x = a.NextNs();
    ASSERT_EQ(x, b.NextNs());
    ASSERT_GE(x, d.min_ns);
    same_as_other += x == other_stream.NextNs() ? 1 : 0;
    sum += static_cast<double>(x);
  }
  // Mean min + 20 µs; the standard error of the mean is 20 µs / sqrt(2e5).
  EXPECT_NEAR(sum / kDraws, 70'000.0, 300.0);
  EXPECT_LT(same_as_other, kDraws / 100);
}

// --- lifecycle and errors -------------------------------------------------

TEST(ProbeTransportTest, StopFlagEndsServePromptly) {
  FakeGlobalTime time;
  ProbeResponder::Options options;
  options.listen_address = "127.0.0.1:0";
  options.time_source = &time;
  auto responder = ProbeResponder::Create(options);
  ASSERT_TRUE(responder.ok()) << responder.status();
  std::atomic<bool> stop{false};
  absl::Status status = absl::UnknownError("not run");
  std::thread serving([&] { status = (*responder)->Serve(stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const int64_t stop_raw_ns = RawNowNs();
  stop.store(true);
  serving.join();
  const int64_t stopped_after_ns = RawNowNs() - stop_raw_ns;
  EXPECT_TRUE(status.ok()) << status;
  // Stated: within ~100 ms; slack for loaded machines and sanitizers.
  EXPECT_LT(stopped_after_ns, 400'000'000);
}

TEST(ProbeTransportTest, AddressErrorsNameTheAddress) {
  FakeGlobalTime time;
  const auto responder_error = [&](const std::string& address) {
    ProbeResponder::Options options;
    options.listen_address = address;
    options.time_source = &time;
    auto created = ProbeResponder::Create(options);
    EXPECT_FALSE(created.ok()) << address;
    return created.ok() ? std::string() : std::string(created.status().ToString());
  };
  EXPECT_THAT(responder_error("127.0.0.1:99999"),
              HasSubstr("'127.0.0.1:99999': port must be 0..65535"));
  EXPECT_THAT(responder_error("127.0.0.1"), HasSubstr("missing ':port'"));
  EXPECT_THAT(responder_error("::1:80"), HasSubstr("need brackets"));
  EXPECT_THAT(responder_error("[::1:80"), HasSubstr("missing ']'"));
  EXPECT_THAT(responder_error(""), HasSubstr("empty"));

  // A port already taken.
  ServingResponder first({});
  ASSERT_TRUE(first.status().ok());
  EXPECT_THAT(responder_error(first.address()),
              HasSubstr(absl::StrCat("bind probe responder to '",
                                     first.address(), "'")));
  EXPECT_THAT(responder_error(first.address()),
              HasSubstr("Address already in use"));

  ProbeResponder::Options no_source;
  no_source.listen_address = "127.0.0.1:0";
  EXPECT_FALSE(ProbeResponder::Create(no_source).ok());

  ProbeRequester::Options options;
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
