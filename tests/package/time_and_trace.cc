// tests/package/time_and_trace.cc: a C++ program built with plain CMake
// (find_package(clocksync)) against the installed libclocksync-dev by
// tests/package_install_test.sh, through the header-only C++ wrappers.
//   time_and_trace_cpp SHM_PATH TRACE_DIR
#include <clocksync/clocksync.hpp>
#include <clocksync/clocksync_trace.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SHM_PATH TRACE_DIR\n", argv[0]);
    return 2;
  }
  clocksync::GlobalClock clock;
  if (clock.Open(argv[1]) < 0) {
    std::fprintf(stderr, "Open: %s\n", clocksync::GlobalClock::open_error());
    return 1;
  }
  clocksync_time t;
  const int rc = clock.Now(&t);
  if (rc < 0 || t.earliest_ns > t.global_ns || t.global_ns > t.latest_ns) {
    std::fprintf(stderr, "Now: %s\n", clocksync::GlobalClock::strerror(rc));
    return 1;
  }
  std::printf("C++: global %lld ns, bound %lld ns\n",
              static_cast<long long>(t.global_ns),
              static_cast<long long>(t.latest_ns - t.global_ns));

  cs_trace_options options;
  cs_trace_options_init(&options);
  options.trace_dir = argv[2];
  options.name = "cpp_program";
  options.shm_path = argv[1];
  clocksync::trace_c::Tracing tracing(options);
  if (tracing.status() < 0) {
    std::fprintf(stderr, "Tracing: %s\n", tracing.error().c_str());
    return 1;
  }
  const int32_t solve = cs_trace_region_def("solve");
  for (int i = 0; i < 100; ++i) {
    clocksync::trace_c::ScopedRegion region(static_cast<uint32_t>(solve));
  }
  return tracing.Finalize() < 0 ? 1 : 0;
}
