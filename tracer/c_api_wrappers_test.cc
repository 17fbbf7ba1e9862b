// tracer/c_api_wrappers_test.cc: the header-only C++ wrappers of the C APIs
// (client/clocksync.hpp, tracer/clocksync_trace.hpp) that users of the
// shared library include: ownership, errors and results as the C calls
// give them.

#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "client/clocksync.hpp"
#include "gtest/gtest.h"
#include "shm/shm_publisher.h"
#include "tracer/clocksync_trace.hpp"

namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(GlobalClockTest, MissingSegmentIsAClearError) {
  const std::string path = TempPath("absent.shm");
  clocksync::GlobalClock clock;
  EXPECT_EQ(clock.Open(path.c_str()), CLOCKSYNC_ENODAEMON);
  EXPECT_FALSE(clock.is_open());
  EXPECT_NE(std::string(clocksync::GlobalClock::open_error()).find(path),
            std::string::npos);
  clocksync_time t;
  EXPECT_EQ(clock.Now(&t), CLOCKSYNC_EINVAL);
  EXPECT_STREQ(clocksync::GlobalClock::strerror(CLOCKSYNC_OK), "success");
}

TEST(GlobalClockTest, ReadsAPublishedMappingAndMoves) {
  const std::string path = TempPath("published.shm");
  absl::StatusOr<clocksync::ShmPublisher> publisher =
      clocksync::ShmPublisher::Open(path);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  clocksync::Mapping mapping;
  mapping.anchor_raw_ns = clocksync::GlobalClock::RawNowNs();
  mapping.anchor_global_ns = 5'000'000'000'000;
  mapping.bound_at_anchor_ns = 800;
  mapping.state = CLOCKSYNC_STATE_SYNCED;
  ASSERT_TRUE(publisher->Publish(mapping).ok());

  clocksync::GlobalClock clock;
  ASSERT_EQ(clock.Open(path.c_str()), CLOCKSYNC_OK);
  ASSERT_TRUE(clock.is_open());
  clocksync_time t;
  ASSERT_EQ(clock.Now(&t), CLOCKSYNC_OK);
  EXPECT_GE(t.global_ns, mapping.anchor_global_ns);
  EXPECT_LE(t.earliest_ns, t.global_ns);
  EXPECT_GE(t.latest_ns - t.global_ns, 800);
  EXPECT_EQ(t.status & CLOCKSYNC_STATUS_STATE_MASK, CLOCKSYNC_STATE_SYNCED);

  // At() of the anchor is the anchor.
  ASSERT_EQ(clock.At(mapping.anchor_raw_ns, &t), CLOCKSYNC_OK);
  EXPECT_EQ(t.global_ns, mapping.anchor_global_ns);

  // Moving hands the handle over; the moved-from clock is closed.
  clocksync::GlobalClock moved = std::move(clock);
  EXPECT_FALSE(clock.is_open());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(moved.Now(&t), CLOCKSYNC_OK);
}

TEST(TracingTest, ScopedRegionsMakeAnArchive) {
  const std::string dir = TempPath("wrapped_traces");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  cs_trace_options options;
  cs_trace_options_init(&options);
  options.trace_dir = dir.c_str();
  options.name = "wrapped";
  options.read_environment = 0;
  options.shm_path = "/nonexistent/clocksync.shm";
  {
    clocksync::trace_c::Tracing tracing(options);
    ASSERT_EQ(tracing.status(), 0) << tracing.error();
    // A second one while the first runs: refused, with a reason.
    clocksync::trace_c::Tracing second(options);
    EXPECT_EQ(second.status(), CLOCKSYNC_EALREADY);
    EXPECT_FALSE(second.error().empty());
    const int32_t region = cs_trace_region_def("work");
    ASSERT_GE(region, 0);
    { clocksync::trace_c::ScopedRegion scope(static_cast<uint32_t>(region)); }
    EXPECT_EQ(tracing.Finalize(), 0);
    EXPECT_EQ(tracing.Finalize(), 0);  // once only
  }
  struct stat st;
  EXPECT_EQ(stat((dir + "/wrapped.r0/traces.otf2").c_str(), &st), 0)
      << dir << "/wrapped.r0/traces.otf2";
  // Finalized: recording is refused again.
  EXPECT_EQ(cs_trace_enter(0), CLOCKSYNC_ENOTINIT);
}

}  // namespace
