// tracer/warn.h: the tracer's one way to tell the user something went
// wrong without failing the program: a prefixed line on stderr.
#ifndef CLOCKSYNC_TRACER_WARN_H_
#define CLOCKSYNC_TRACER_WARN_H_

#include <cstdio>
#include <string>

namespace clocksync {
namespace tracer {

// "clocksync tracer: <message>" on stderr, flushed. Not for signal
// handlers (stdio).
inline void Warn(const std::string& message) {
  std::fprintf(stderr, "clocksync tracer: %s\n", message.c_str());
  std::fflush(stderr);
}

}  // namespace tracer
}  // namespace clocksync

#endif  // CLOCKSYNC_TRACER_WARN_H_
