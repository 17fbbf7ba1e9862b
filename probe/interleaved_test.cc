// probe/interleaved_test.cc: kernel transmit stamps and interleaved mode on
// loopback: with both sides new, every sample but the last has the kernels'
// four stamps, causally ordered and with a shorter round trip than basic
// mode; a new child works with a parent without transmit stamps, with a
// version-1 parent (falls back, then notices an upgrade), and a version-1
// child works with a new parent.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "probe/loopback_testing.h"
#include "probe/packet.h"
#include "probe/raw_clock.h"
#include "probe/requester.h"
#include "probe/responder.h"

namespace clocksync::probe {
namespace {

using ::clocksync::probe::loopback::Encoded;
using ::clocksync::probe::loopback::kHourNs;
using ::clocksync::probe::loopback::MakeRequester;
using ::clocksync::probe::loopback::RawSocket;
using ::clocksync::probe::loopback::ReplyTo;
using ::clocksync::probe::loopback::ServingResponder;

// Sends `probes` probes one at a time, each waiting for its reply (not for
// a delivery: interleaved mode delivers the previous exchange), then
// flushes the held one. Returns every sample delivered.
std::vector<ProbeResult> Exchange(ProbeRequester& requester, int probes) {
  std::vector<ProbeResult> results;
  const auto add = [&](const ProbeResult& r) { results.push_back(r); };
  for (int i = 0; i < probes; ++i) {
    EXPECT_TRUE(requester.SendProbe().ok());
    const uint64_t want = requester.counters().answered.load() + 1;
    const int64_t deadline = RawNowNs() + 2'000'000'000;
    while (requester.counters().answered.load() < want &&
           RawNowNs() < deadline) {
      EXPECT_TRUE(requester.Poll(50, add).ok());
    }
  }
  requester.Flush(add);
  return results;
}

// Round trip of a sample: (t4 − t1) − (t3 − t2), ns.
int64_t RoundTripNs(const hull::ProbeSample& s) {
  return (s.t4_ns - s.t1_ns) - (s.t3_ns - s.t2_ns);
}

// Causal order within the sample's widening (the receive stamps t2 and t4
// are the middles of their ranges, hull/probe_sample.h).
void ExpectCausal(const hull::ProbeSample& s) {
  EXPECT_LE(s.t1_ns, s.t2_ns - kHourNs + s.parent_bound_ns);
  EXPECT_LE(s.t2_ns, s.t3_ns);
  EXPECT_LE(s.t3_ns - kHourNs - s.parent_bound_ns, s.t4_ns);
}

// The round trip with the sample's widening on both sides (t2 and t4 are
// the middles of their ranges, parent_bound_ns wide each way): never
// negative.
int64_t WidenedRoundTripNs(const hull::ProbeSample& s) {
  return RoundTripNs(s) + 2 * s.parent_bound_ns;
}

// The fake parent's side: takes the child's next request off `parent`.
void ReceiveRequest(RawSocket& parent, uint16_t* child_port,
                    ProbePacket* request) {
  std::vector<uint8_t> bytes;
  *child_port = parent.Receive(&bytes);
  ASSERT_NE(*child_port, 0);
  ASSERT_EQ(DecodeProbe(bytes.data(), bytes.size(), request),
            DecodeStatus::kOk);
}

int64_t MinRoundTripNs(const std::vector<ProbeResult>& results) {
  int64_t min_ns = INT64_MAX;
  for (const ProbeResult& r : results) {
    min_ns = std::min(min_ns, RoundTripNs(r.sample));
  }
  return min_ns;
}

TEST(InterleavedTest, BothSidesNewGiveFourKernelStamps) {
  ServingResponder serving({});
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  ASSERT_TRUE(serving.responder().kernel_tx_stamps());
  ProbeRequester::Options options;
  options.parent_address = serving.address();
  std::unique_ptr<ProbeRequester> requester = MakeRequester(options);
  ASSERT_NE(requester, nullptr);
  ASSERT_TRUE(requester->kernel_tx_stamps());

  constexpr int kProbes = 40;
  const std::vector<ProbeResult> results = Exchange(*requester, kProbes);
  ASSERT_EQ(results.size(), size_t{kProbes});
  for (size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "sample " << i);
    const ProbeResult& r = results[i];
    ExpectCausal(r.sample);
    EXPECT_TRUE(r.kernel_t1);
    // All but the last (flushed) carry the parent's transmit stamp, whose
    // bound is the parent's plus its growth since the user-space t3.
    EXPECT_EQ(r.kernel_t3, i + 1 < results.size());
    // (1234 is the fake parent's; the rest, the receive stamps' widening
    // and the growth since the user-space t3: well under 1 ms.)
    EXPECT_GE(r.sample.parent_bound_ns, 1234);
    EXPECT_LT(r.sample.parent_bound_ns, 1234 + 1'000'000);
    EXPECT_EQ(r.parent_depth, 3);
    if (i > 0) {
      EXPECT_GT(r.sample.t1_ns, results[i - 1].sample.t1_ns);
    }
  }
  const RequesterCounters& rc = requester->counters();
  EXPECT_EQ(rc.interleaved.load(), uint64_t{kProbes - 1});
  EXPECT_EQ(rc.interleave_misses.load(), 1u);  // The flushed one.
  EXPECT_EQ(rc.tx_stamps.load(), uint64_t{kProbes});
  EXPECT_EQ(rc.tx_stamps_rejected.load(), 0u);
  EXPECT_EQ(rc.version1_fallbacks.load(), 0u);
  ASSERT_TRUE(serving.Stop().ok());
  const ResponderCounters& pc = serving.responder().counters();
  EXPECT_EQ(pc.tx_stamps.load(), uint64_t{kProbes});
  EXPECT_EQ(pc.interleaved.load(), uint64_t{kProbes - 1});
  EXPECT_EQ(pc.interleave_misses.load(), 0u);
}

// The parent's kernel transmit stamp removes its send path from the round
// trip: the shortest interleaved round trip is no longer than the shortest
// with the user-space t3 (same sockets, same run).
TEST(InterleavedTest, KernelT3ShortensTheRoundTrip) {
  ServingResponder serving({});
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  ProbeRequester::Options options;
  options.parent_address = serving.address();
  std::unique_ptr<ProbeRequester> interleaved = MakeRequester(options);
  options.interleaved = false;
  std::unique_ptr<ProbeRequester> basic = MakeRequester(options);
  ASSERT_NE(interleaved, nullptr);
  ASSERT_NE(basic, nullptr);
  std::vector<ProbeResult> with_kernel_t3;
  std::vector<ProbeResult> with_user_t3;
  for (int round = 0; round < 5; ++round) {
    for (const ProbeResult& r : Exchange(*interleaved, 20)) {
      if (r.kernel_t3) with_kernel_t3.push_back(r);
    }
    for (const ProbeResult& r : Exchange(*basic, 20)) {
      EXPECT_FALSE(r.kernel_t3);
      with_user_t3.push_back(r);
    }
  }
  // Every interleaved sample but each round's flushed last carries the
  // parent's stamp, unless the stamp did not fit its exchange (none
  // should here; the sample would keep its user-space t3, counted).
  const uint64_t misfits =
      interleaved->counters().bad_previous_stamps.load();
  EXPECT_LE(misfits, 5u);
  ASSERT_EQ(with_kernel_t3.size() + misfits, 95u);
  ASSERT_EQ(with_user_t3.size(), 100u);
  EXPECT_LE(MinRoundTripNs(with_kernel_t3), MinRoundTripNs(with_user_t3));
  // On a loaded machine (a sanitizer's), a receive stamp's conversion range
  // can be wide and its middle early: the round trip itself may then come
  // out negative, never beyond the widening.
  for (const ProbeResult& r : with_kernel_t3) {
    EXPECT_GT(WidenedRoundTripNs(r.sample), 0)
        << "round trip " << RoundTripNs(r.sample) << " ns, widened by 2 × "
        << r.sample.parent_bound_ns << " ns";
  }
}

// A previous stamp that would make its exchange's round trip negative
// (the parent's time between receive and send longer than the child's
// round trip) is not that exchange's departure: the sample keeps the
// user-space t3, counted; one that fits is used.
TEST(InterleavedTest, PreviousStampBeyondTheRoundTripIsIgnored) {
  RawSocket parent;
  ProbeRequester::Options options;
  options.parent_address = "127.0.0.1:" + std::to_string(parent.port());
  std::unique_ptr<ProbeRequester> requester = MakeRequester(options);
  ASSERT_NE(requester, nullptr);
  std::vector<ProbeResult> results;
  const auto add = [&](const ProbeResult& r) { results.push_back(r); };
  // Answers one request with version 2; `prev_t3_after_ns`: the previous
  // stamp's distance after the previous reply's t3 (none when < 0).
  int64_t last_t3_ns = 0;
  uint64_t last_nonce = 0;
  const auto exchange = [&](int64_t prev_t3_after_ns) {
    ASSERT_TRUE(requester->SendProbe().ok());
    uint16_t child_port = 0;
    ProbePacket request;
    ASSERT_NO_FATAL_FAILURE(ReceiveRequest(parent, &child_port, &request));
    ASSERT_EQ(request.version, kProbeVersion2);
    ProbePacket reply = ReplyTo(request);
    if (prev_t3_after_ns >= 0) {
      ASSERT_EQ(request.prev_nonce, last_nonce);
      reply.prev_nonce = last_nonce;
      reply.prev_t3_ns = last_t3_ns + prev_t3_after_ns;
    }
    last_t3_ns = reply.t3_ns;
    last_nonce = reply.nonce;
    const uint64_t want = requester->counters().answered.load() + 1;
    parent.SendTo(child_port, Encoded(reply));
    const int64_t deadline = RawNowNs() + 2'000'000'000;
    while (requester->counters().answered.load() < want &&
           RawNowNs() < deadline) {
      ASSERT_TRUE(requester->Poll(50, add).ok());
    }
    ASSERT_EQ(requester->counters().answered.load(), want);
  };
  exchange(-1);
  // Half a second after the user-space t3: within the 1 s a stamp may come
  // late, far beyond this loopback round trip.
  exchange(500'000'000);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].kernel_t3);
  EXPECT_GT(RoundTripNs(results[0].sample), 0);
  EXPECT_EQ(requester->counters().bad_previous_stamps.load(), 1u);
  // 5 ns after: fits, used.
  exchange(5);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[1].kernel_t3);
  EXPECT_EQ(requester->counters().bad_previous_stamps.load(), 1u);
}

// A new child, a parent that records no transmit stamps (delay injection,
// or a kernel without SO_TIMESTAMPING): replies carry no previous stamp,
// every sample comes with the user-space t3, one probe late.
TEST(InterleavedTest, ParentWithoutTransmitStamps) {
  ProbeResponder::Options responder_options;
  responder_options.kernel_tx_stamps = false;
  ServingResponder serving(responder_options);
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  EXPECT_FALSE(serving.responder().kernel_tx_stamps());
  ProbeRequester::Options options;
  options.parent_address = serving.address();
  std::unique_ptr<ProbeRequester> requester = MakeRequester(options);
  ASSERT_NE(requester, nullptr);
  const std::vector<ProbeResult> results = Exchange(*requester, 10);
  ASSERT_EQ(results.size(), 10u);
  for (const ProbeResult& r : results) {
    ExpectCausal(r.sample);
    EXPECT_FALSE(r.kernel_t3);
    EXPECT_GE(r.sample.parent_bound_ns, 1234);
  }
  EXPECT_EQ(requester->counters().interleaved.load(), 0u);
  EXPECT_EQ(requester->counters().interleave_misses.load(), 10u);
  ASSERT_TRUE(serving.Stop().ok());
  EXPECT_EQ(serving.responder().counters().interleave_misses.load(), 9u);
}

// A version-1 child (an older daemon, or interleaving off) and a new
// parent: version-1 replies, each sample at once.
TEST(InterleavedTest, VersionOneChildGetsVersionOneReplies) {
  ServingResponder serving({});
  ASSERT_TRUE(serving.status().ok()) << serving.status();
  ProbeRequester::Options options;
  options.parent_address = serving.address();
  options.interleaved = false;
  std::unique_ptr<ProbeRequester> requester = MakeRequester(options);
  ASSERT_NE(requester, nullptr);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(requester->SendProbe().ok());
    const std::vector<ProbeResult> got =
        loopback::PollFor(*requester, 1, absl::Seconds(2));
    ASSERT_EQ(got.size(), 1u);
    ExpectCausal(got[0].sample);
    EXPECT_TRUE(got[0].kernel_t1);
    EXPECT_FALSE(got[0].kernel_t3);
  }
  ASSERT_TRUE(serving.Stop().ok());
  EXPECT_EQ(serving.responder().counters().answered.load(), 5u);
  EXPECT_EQ(serving.responder().counters().interleaved.load(), 0u);
}

// A new child and a version-1 parent (an older daemon, which drops
// version-2 packets as unsupported): after kV1FallbackLosses losses the
// child sends version 1 and gets samples; when the parent speaks version 2
// again, the periodic version-2 request finds it.
TEST(InterleavedTest, FallsBackToVersionOneParentAndBack) {
  RawSocket parent;
  ProbeRequester::Options options;
  options.parent_address = "127.0.0.1:" + std::to_string(parent.port());
  options.expiry_ns = 20'000'000;
  std::unique_ptr<ProbeRequester> requester = MakeRequester(options);
  ASSERT_NE(requester, nullptr);
  std::vector<ProbeResult> results;
  const auto add = [&](const ProbeResult& r) { results.push_back(r); };
  // One probe: the parent answers version 1 only (as the old code did).
  const auto probe_once = [&](bool parent_speaks_v2) {
    EXPECT_TRUE(requester->SendProbe().ok());
    uint16_t child_port = 0;
    ProbePacket request;
    ASSERT_NO_FATAL_FAILURE(ReceiveRequest(parent, &child_port, &request));
    if (request.version == kProbeVersion1 || parent_speaks_v2) {
      ProbePacket reply = ReplyTo(request);
      reply.version = request.version;
      parent.SendTo(child_port, Encoded(reply));
      for (const ProbeResult& r :
           loopback::PollFor(*requester, 1, absl::Milliseconds(200))) {
        results.push_back(r);
      }
    }
    // Let an unanswered request expire (counted lost).
    const int64_t until = RawNowNs() + 30'000'000;
    while (RawNowNs() < until) ASSERT_TRUE(requester->Poll(10, add).ok());
  };
  for (int i = 0; i < ProbeRequester::kV1FallbackLosses; ++i) {
    EXPECT_TRUE(requester->sending_version2());
    probe_once(false);
  }
  EXPECT_FALSE(requester->sending_version2());
  EXPECT_EQ(requester->counters().version1_fallbacks.load(), 1u);
  EXPECT_EQ(requester->counters().lost.load(),
            uint64_t{ProbeRequester::kV1FallbackLosses});
  // Version 1 from now on: answered, delivered at once.
  for (int i = 0; i < 10; ++i) {
    probe_once(false);
  }
  EXPECT_GE(requester->counters().answered.load(), 9u);
  EXPECT_GE(results.size(), 9u);
  // The parent is upgraded: within kV2RetryEvery probes the child is back
  // to version 2.
  for (uint64_t i = 0;
       i < ProbeRequester::kV2RetryEvery && !requester->sending_version2();
       ++i) {
    probe_once(true);
  }
  EXPECT_TRUE(requester->sending_version2());
}

}  // namespace
}  // namespace clocksync::probe
