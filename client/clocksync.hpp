// client/clocksync.hpp: a header-only C++ wrapper of the C API
// (client/clocksync.h), for programs that link the shared library
// libclocksync (pkg-config clocksync, or CMake's clocksync::clocksync) and
// include <clocksync/clocksync.hpp>. It adds ownership and nothing else:
// every call is the C function of the same name.
//
//   clocksync::GlobalClock clock;
//   if (clock.Open() < 0) { std::cerr << clock.open_error() << "\n"; ... }
//   clocksync_time t;
//   if (clock.Now(&t) == 0) use(t.global_ns, t.earliest_ns, t.latest_ns);
//
// Inside the tree, clocksync::Clock (client/clock.h) is the C++ API the
// daemon and tools use; it is not part of the shared library's ABI.
#ifndef CLOCKSYNC_CLIENT_CLOCKSYNC_HPP_
#define CLOCKSYNC_CLIENT_CLOCKSYNC_HPP_

#include <cstdint>
#include <utility>

#include "client/clocksync.h"

namespace clocksync {
// Versioned so that these inline classes never share a mangled name with
// the library's internal ones.
inline namespace c_api_v1 {

// One mapped segment (a clocksync_handle), closed on destruction. Movable,
// not copyable; Now() and At() may be called from many threads at once.
class GlobalClock {
 public:
  GlobalClock() = default;
  GlobalClock(const GlobalClock&) = delete;
  GlobalClock& operator=(const GlobalClock&) = delete;
  GlobalClock(GlobalClock&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)) {}
  GlobalClock& operator=(GlobalClock&& other) noexcept {
    if (this != &other) {
      clocksync_close(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  ~GlobalClock() { clocksync_close(handle_); }

  // Maps the segment at `path` (nullptr: CLOCKSYNC_DEFAULT_SHM_PATH) with
  // `options` (nullptr: defaults), closing any segment open before. 0 or a
  // negative CLOCKSYNC_E* code; open_error() says why.
  int Open(const char* path = nullptr,
           const clocksync_options* options = nullptr) {
    clocksync_close(std::exchange(handle_, nullptr));
    return clocksync_open_with_options(path, options, &handle_);
  }
  bool is_open() const { return handle_ != nullptr; }

  // Global time now; 0 or a negative code (*out is filled for
  // CLOCKSYNC_ESTALE and CLOCKSYNC_ENOTSYNCED too). CLOCKSYNC_EINVAL when
  // not open.
  int Now(clocksync_time* out) const {
    if (handle_ == nullptr) return CLOCKSYNC_EINVAL;
    return clocksync_now(handle_, out);
  }
  // Global time at a CLOCK_MONOTONIC_RAW reading (RawNowNs()).
  int At(std::int64_t raw_ns, clocksync_time* out) const {
    if (handle_ == nullptr) return CLOCKSYNC_EINVAL;
    return clocksync_at(handle_, raw_ns, out);
  }

  static std::int64_t RawNowNs() { return clocksync_raw_now_ns(); }
  // The message of the last failed Open on this thread.
  static const char* open_error() { return clocksync_open_error(); }
  static const char* version() { return clocksync_version(); }
  static const char* strerror(int code) { return clocksync_strerror(code); }

 private:
  clocksync_handle* handle_ = nullptr;
};

}  // namespace c_api_v1
}  // namespace clocksync

#endif  // CLOCKSYNC_CLIENT_CLOCKSYNC_HPP_
