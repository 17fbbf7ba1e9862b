// tracer/clocksync_trace.hpp: a header-only C++ wrapper of the tracer's C
// API (tracer/clocksync_trace.h), for programs that link the shared library
// libclocksync and include <clocksync/clocksync_trace.hpp>: tracing as a
// scoped object, regions as scopes. Every call is the cs_trace_* function
// of the same name.
//
//   cs_trace_options options;
//   cs_trace_options_init(&options);
//   options.trace_dir = "/tmp/traces";
//   clocksync::trace_c::Tracing tracing(options);  // cs_trace_init
//   if (tracing.status() < 0) std::cerr << tracing.error() << "\n";
//   const int32_t compute = cs_trace_region_def("compute");
//   {
//     clocksync::trace_c::ScopedRegion region(compute);  // enter ... leave
//     work();
//   }
//   // ~Tracing: cs_trace_finalize (or call Finalize() to see its result)
//
// Inside the tree, clocksync::trace::Tracer (tracer/tracer.h) is the C++
// API; it is not part of the shared library's ABI.
#ifndef CLOCKSYNC_TRACER_CLOCKSYNC_TRACE_HPP_
#define CLOCKSYNC_TRACER_CLOCKSYNC_TRACE_HPP_

#include <cstdint>
#include <string>

#include "tracer/clocksync_trace.h"

namespace clocksync {
inline namespace c_api_v1 {
namespace trace_c {

// cs_trace_init on construction, cs_trace_finalize on destruction (when
// init succeeded and Finalize() was not called). One at a time per process.
class Tracing {
 public:
  explicit Tracing(const cs_trace_options& options)
      : status_(cs_trace_init(&options)),
        error_(status_ < 0 ? cs_trace_last_error() : "") {}
  Tracing(const Tracing&) = delete;
  Tracing& operator=(const Tracing&) = delete;
  ~Tracing() { Finalize(); }

  // 0, or cs_trace_init's negative code; error() says why.
  int status() const { return status_; }
  const std::string& error() const { return error_; }

  // Completes the archive now: 0 or a negative code (CLOCKSYNC_EIO: part of
  // the trace could not be written; cs_trace_last_error() explains). Later
  // calls do nothing and return 0.
  int Finalize() {
    if (status_ != 0 || finalized_) return 0;
    finalized_ = true;
    return cs_trace_finalize();
  }

 private:
  int status_;
  // cs_trace_last_error() of a failed init.
  std::string error_;
  bool finalized_ = false;
};

// cs_trace_enter on construction, cs_trace_leave on destruction.
class ScopedRegion {
 public:
  explicit ScopedRegion(std::uint32_t region) : region_(region) {
    cs_trace_enter(region_);
  }
  ScopedRegion(const ScopedRegion&) = delete;
  ScopedRegion& operator=(const ScopedRegion&) = delete;
  ~ScopedRegion() { cs_trace_leave(region_); }

 private:
  std::uint32_t region_;
};

}  // namespace trace_c
}  // namespace c_api_v1
}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_CLOCKSYNC_TRACE_HPP_
