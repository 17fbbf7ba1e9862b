// tracer/tracer_alloc_test.cc: the recording path allocates nothing once a
// thread's buffer exists (no flush in between: a flush hands events to the
// archive writer, which may allocate), whether the daemon's mapping stays
// the same or not, on every event kind; and it is a single clock read per
// event (no system call: checked by the event rate in the benchmark).
//
// Full buffers handed to the writer thread allocate nothing on the
// recording thread either, once its second buffer exists.
//
// This binary links testing/alloc_counter, which replaces the global
// operator new with one that counts the allocations of threads that opted
// in (as probe/alloc_test.cc does); it is a separate test so that no other
// test runs with it.

#include <stdlib.h>

#include <cstdint>
#include <string>

#include "client/clock.h"
#include "tracer/tracer.h"
#include "shm/shm_publisher.h"
#include "testing/alloc_counter.h"
#include "gtest/gtest.h"

namespace clocksync {
namespace {

using ::clocksync::alloc_counter::CountAllocations;
using ::clocksync::alloc_counter::CountedAllocations;
using ::clocksync::alloc_counter::ResetCount;

TEST(TracerAllocTest, RecordingAllocatesNothingInSteadyState) {
  const char* base = getenv("TEST_TMPDIR");
  std::string dir = std::string(base != nullptr ? base : "/tmp") +
                    "/tracer_alloc.XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  auto publisher = ShmPublisher::Open(dir + "/node.shm");
  ASSERT_TRUE(publisher.ok());
  Mapping m;
  m.anchor_raw_ns = Clock::RawNowNs();
  m.anchor_global_ns = m.anchor_raw_ns + 1000;
  m.state = CLOCKSYNC_STATE_SYNCED;
  ASSERT_TRUE(publisher->Publish(m).ok());

  TracerOptions options;
  options.trace_dir = dir;
  options.name = "alloc";
  options.shm_path = dir + "/node.shm";
  options.buffer_events = 1 << 20;  // no flush during the test
  options.read_environment = false;
  options.world_size = 2;
  ASSERT_TRUE(Tracer::Init(options).ok());
  const uint32_t region = *Tracer::DefineRegion("r");
  ASSERT_TRUE(Tracer::Enter(region));  // the first event allocates
  ASSERT_TRUE(Tracer::Leave(region));

  CountAllocations(true);
  for (int i = 0; i < 100'000; ++i) {
    Tracer::Enter(region);
    Tracer::Send(1, 3, 64);
    Tracer::Recv(1, 3, 64);
    Tracer::CollectiveBegin(trace::CollectiveKind::kBarrier, 0, -1, 0);
    Tracer::CollectiveEnd(trace::CollectiveKind::kBarrier, 0, -1, 0);
    Tracer::Leave(region);
  }
  CountAllocations(false);
  EXPECT_EQ(CountedAllocations(), 0u) << "with an unchanged mapping";

  // The daemon republishes the same line: the sequence word changes, the
  // slow path reads the mapping, finds it unchanged, records nothing.
  const uint64_t records = Tracer::Stats().mapping_records;
  ResetCount();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(publisher->Publish(m).ok());
    CountAllocations(true);
    Tracer::Enter(region);
    Tracer::Leave(region);
    CountAllocations(false);
  }
  EXPECT_EQ(CountedAllocations(), 0u) << "with a republished mapping";
  EXPECT_EQ(Tracer::Stats().mapping_records, records);

  const TracerStats stats = Tracer::Stats();
  EXPECT_EQ(stats.flushes, 0u);
  ASSERT_TRUE(Tracer::Finalize().ok());
  EXPECT_EQ(Tracer::Stats().events_written, 600'000u + 200u + 2u);
}

// Full buffers go to the tracer's writer thread: once a thread has its
// second buffer (allocated at its first hand-off), filling buffers, handing
// them off and waiting for the writer allocate nothing on the recording
// thread (the writer thread's OTF2 allocations are its own).
TEST(TracerAllocTest, HandOffsOfFullBuffersAllocateNothing) {
  const char* base = getenv("TEST_TMPDIR");
  std::string dir = std::string(base != nullptr ? base : "/tmp") +
                    "/tracer_alloc_handoff.XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  TracerOptions options;
  options.trace_dir = dir;
  options.name = "alloc";
  options.shm_path = dir + "/absent.shm";  // no daemon: fine
  options.buffer_events = 1024;
  options.read_environment = false;
  options.install_signal_handlers = false;
  ASSERT_TRUE(Tracer::Init(options).ok());
  const uint32_t region = *Tracer::DefineRegion("r");
  for (int i = 0; i < 1024; ++i) {  // fills both buffers: two hand-offs
    Tracer::Enter(region);
    Tracer::Leave(region);
  }

  ResetCount();
  CountAllocations(true);
  for (int i = 0; i < 200'000; ++i) {
    Tracer::Enter(region);
    Tracer::Leave(region);
  }
  CountAllocations(false);
  EXPECT_EQ(CountedAllocations(), 0u) << "over ~390 hand-offs";
  ASSERT_TRUE(Tracer::Finalize().ok());
  const TracerStats stats = Tracer::Stats();
  EXPECT_EQ(stats.events_written, 2u * (1024 + 200'000));
  EXPECT_GT(stats.flushes, 300u);
}

}  // namespace
}  // namespace clocksync
