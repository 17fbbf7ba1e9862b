// probe/responder_test.cc: the responder on loopback, driven by hand-made
// datagrams: garbage and unexpected packets are counted and dropped, a full
// delay queue drops and counts, the stop flag stops Serve() promptly, and
// address errors name the address. (Round trips with the requester:
// requester_test.cc.)

#include "probe/responder.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "probe/loopback_testing.h"
#include "probe/packet.h"
#include "probe/raw_clock.h"

namespace clocksync::probe {
namespace {

using ::testing::HasSubstr;
using ::clocksync::probe::loopback::Encoded;
using ::clocksync::probe::loopback::FakeGlobalTime;
using ::clocksync::probe::loopback::kParentId;
using ::clocksync::probe::loopback::RawSocket;
using ::clocksync::probe::loopback::ReplyTo;
using ::clocksync::probe::loopback::Request;
using ::clocksync::probe::loopback::ServingResponder;
using ::clocksync::probe::loopback::WaitFor;

// --- malformed and unexpected traffic -------------------------------------

// Datagrams the kernel dropped for a full receive buffer (SO_RXQ_OVFL)
// are counted: a small buffer, a flood while nobody serves, then one
// request through.
TEST(ProbeResponderTest, ReceiveBufferDropsAreCounted) {
  FakeGlobalTime time;
  ProbeResponder::Options options;
  options.listen_address = "127.0.0.1:0";
  options.time_source = &time;
  options.receive_buffer_bytes = 4096;
  auto responder = ProbeResponder::Create(options);
  ASSERT_TRUE(responder.ok()) << responder.status();
  RawSocket client;
  const std::vector<uint8_t> request = Encoded(Request(7));
  for (int i = 0; i < 2000; ++i) client.SendTo((*responder)->port(), request);
  std::atomic<bool> stop{false};
  std::thread serving([&] { (*responder)->Serve(stop).IgnoreError(); });
  std::vector<uint8_t> answer;
  ASSERT_NE(client.Receive(&answer), 0);
  // Whatever was queued is answered; the rest the kernel dropped.
  const ResponderCounters& c = (*responder)->counters();
  for (int i = 0; i < 100 && c.receive_buffer_drops.load() == 0; ++i) {
    client.SendTo((*responder)->port(), request);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop.store(true);
  serving.join();
  EXPECT_GT(c.receive_buffer_drops.load(), 0u);
  EXPECT_LT(c.received.load(), 2100u);
  EXPECT_EQ(c.received.load() + c.receive_buffer_drops.load() >= 2000, true)
      << "received " << c.received.load() << ", dropped "
      << c.receive_buffer_drops.load();
}

TEST(ProbeResponderTest, ResponderCountsAndIgnoresGarbage) {
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
  client.SendTo(port, mutated(kProbeOffsetVersion, 3));       // version
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
  // `received` counts a batch before it is handled; once Serve() returns,
  // all 12 are handled and every counter is final.
  ASSERT_TRUE(serving.Stop().ok());
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
}

// --- delay injection ------------------------------------------------------

TEST(ProbeResponderTest, FullDelayQueueDropsAndCounts) {
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
  ASSERT_TRUE(serving.Stop().ok());  // All 5 handled; counters final.
  EXPECT_EQ(c.delay_queue_drops.load(), 3u);
  EXPECT_EQ(c.answered.load(), 0u);
}

// --- lifecycle and errors -------------------------------------------------

TEST(ProbeResponderTest, StopFlagEndsServePromptly) {
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

TEST(ProbeResponderTest, AddressErrorsNameTheAddress) {
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
}

}  // namespace
}  // namespace clocksync::probe
