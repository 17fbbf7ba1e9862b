// probe/alloc_test.cc: the responder's Serve() loop allocates
// nothing while it answers requests (with and without delay injection), and
// neither do the requester's SendProbe() and Poll() once created.
//
// This binary links testing/alloc_counter, which replaces the global
// operator new with one that counts the allocations of threads that opted
// in; it is a separate test so that no other test runs with the
// replacement.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "probe/delay_injection.h"
#include "probe/raw_clock.h"
#include "probe/requester.h"
#include "probe/responder.h"
#include "testing/alloc_counter.h"

namespace clocksync::probe {
namespace {

using ::clocksync::alloc_counter::CountAllocations;
using ::clocksync::alloc_counter::CountedAllocations;
using ::clocksync::alloc_counter::ResetCount;

class RawPlusOne : public GlobalTimeSource {
 public:
  ParentTime GlobalAt(int64_t raw_ns) const override {
    ParentTime t;
    t.global_ns = raw_ns + 1;
    t.state = kProbeStateSynced;
    return t;
  }
};

// Counts what the requester and the responder allocate while `probes`
// probes go back and forth after set-up.
void RunAndCount(const DelayInjection& delay, uint64_t* serve_allocations,
                 uint64_t* requester_allocations, uint64_t* answered,
                 std::optional<ProbeKey> key = std::nullopt) {
  RawPlusOne time;
  ProbeResponder::Options responder_options;
  responder_options.listen_address = "127.0.0.1:0";
  responder_options.time_source = &time;
  responder_options.delay = delay;
  responder_options.key = key;
  auto responder = ProbeResponder::Create(responder_options);
  ASSERT_TRUE(responder.ok()) << responder.status();
  ProbeRequester::Options options;
  options.parent_address =
      "127.0.0.1:" + std::to_string((*responder)->port());
  options.delay = delay;
  options.key = key;
  auto requester = ProbeRequester::Create(options);
  ASSERT_TRUE(requester.ok()) << requester.status();

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> in_serve{0};
  absl::Status serve_status;
  std::thread serving([&] {
    CountAllocations(true);
    absl::Status status = (*responder)->Serve(stop);
    CountAllocations(false);
    in_serve.store(CountedAllocations());
    serve_status = status;
  });

  uint64_t replies = 0;
  CountAllocations(true);
  for (int i = 0; i < 200; ++i) {
    if (!(*requester)->SendProbe().ok()) break;
    const int64_t deadline = RawNowNs() + 2'000'000'000;
    // Interleaved: a reply delivers the previous exchange, so wait for the
    // reply itself (the answered counter), not for a delivery.
    const uint64_t want = (*requester)->counters().answered.load() + 1;
    while ((*requester)->counters().answered.load() < want &&
           RawNowNs() < deadline) {
      if (!(*requester)->Poll(50, [&](const ProbeResult&) { ++replies; }).ok()) {
        break;
      }
    }
  }
  (*requester)->Flush([&](const ProbeResult&) { ++replies; });
  CountAllocations(false);
  *requester_allocations = CountedAllocations();
  ResetCount();
  stop.store(true);
  serving.join();
  EXPECT_TRUE(serve_status.ok()) << serve_status;
  *serve_allocations = in_serve.load();
  *answered = replies;
}

TEST(ProbeAllocTest, TheCounterCountsThisThread) {
  CountAllocations(true);
  auto p = std::make_unique<int>(1);
  CountAllocations(false);
  EXPECT_EQ(CountedAllocations(), 1u);
  ResetCount();
}

TEST(ProbeAllocTest, NoAllocationWhileServingAndProbing) {
  uint64_t serve = 0, requester = 0, answered = 0;
  RunAndCount(DelayInjection{}, &serve, &requester, &answered);
  EXPECT_EQ(answered, 200u);
  EXPECT_EQ(serve, 0u);
  EXPECT_EQ(requester, 0u);
}

TEST(ProbeAllocTest, NoAllocationWithDelayInjection) {
  uint64_t serve = 0, requester = 0, answered = 0;
  RunAndCount(DelayInjection{true, 100'000, 50'000.0, 5}, &serve, &requester,
              &answered);
  EXPECT_EQ(answered, 200u);
  EXPECT_EQ(serve, 0u);
  EXPECT_EQ(requester, 0u);
}

TEST(ProbeAllocTest, NoAllocationWithAuthentication) {
  uint64_t serve = 0, requester = 0, answered = 0;
  RunAndCount(DelayInjection{}, &serve, &requester, &answered,
              ProbeKey{0x0123456789abcdefULL, 0x1122334455667788ULL});
  EXPECT_EQ(answered, 200u);
  EXPECT_EQ(serve, 0u);
  EXPECT_EQ(requester, 0u);
}

}  // namespace
}  // namespace clocksync::probe
