// lttng/plugin_main.cc: the entry point of libclocksync-lttng.so, which
// LTTng-UST dlopen()s when LTTNG_UST_CLOCK_PLUGIN names it and then calls
// lttng_ust_clock_plugin_init(): one ClockPlugin (clock_plugin.h) for the
// process, its callbacks handed to LTTng-UST. The only exported symbol
// (libclocksync-lttng.map).
//
// The plugin never makes the traced program fail: when it cannot set
// itself up it says why on stderr and returns, and LTTng keeps its own
// clock. The lttng_ust_trace_clock_* functions are weak references,
// resolved from the liblttng-ust-common.so.1 already loaded in the process
// that dlopen()s the plugin; so the library does not depend on LTTng's
// (and loaded by anything else, it says so instead of failing to load).

#include <lttng/ust-clock.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "lttng/clock_plugin.h"

#pragma weak lttng_ust_trace_clock_set_read64_cb
#pragma weak lttng_ust_trace_clock_set_freq_cb
#pragma weak lttng_ust_trace_clock_set_uuid_cb
#pragma weak lttng_ust_trace_clock_set_name_cb
#pragma weak lttng_ust_trace_clock_set_description_cb
#pragma weak lttng_ust_enable_trace_clock_override

namespace {

using clocksync::lttng::ClockPlugin;

// The process's plugin: never deleted, because LTTng may read the clock
// until the process ends (in its own destructors too).
ClockPlugin* plugin = nullptr;

uint64_t Read64() { return plugin->Read64(); }
uint64_t Frequency() { return clocksync::lttng::kFrequencyHz; }
int Uuid(char* uuid) { return plugin->Uuid(uuid); }
const char* Name() { return plugin->Name(); }
const char* Description() { return plugin->Description(); }

// The options of this process: CLOCKSYNC_SHM names the segment, the
// executable's name the role.
clocksync::lttng::PluginOptions OptionsFromEnvironment() {
  clocksync::lttng::PluginOptions options;
  if (const char* path = std::getenv("CLOCKSYNC_SHM");
      path != nullptr && path[0] != '\0') {
    options.shm_path = path;
  }
  char exe[4096];
  const ssize_t length = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (length > 0) {
    exe[length] = '\0';
    options.role = clocksync::lttng::RoleOfExecutable(exe);
  }
  return options;
}

// Reports a refused step; LTTng keeps its default clock.
void Refused(const char* what, int code) {
  std::fprintf(stderr,
               "clocksync-lttng: LTTng-UST refused %s (%s): events keep "
               "LTTng's default clock\n",
               what, std::strerror(code < 0 ? -code : code));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void
lttng_ust_clock_plugin_init(void) {
  if (&lttng_ust_trace_clock_set_read64_cb == nullptr ||
      &lttng_ust_enable_trace_clock_override == nullptr) {
    std::fprintf(stderr,
                 "clocksync-lttng: loaded by a process without LTTng-UST "
                 "(liblttng-ust-common): nothing to do\n");
    return;
  }
  if (plugin == nullptr) {
    try {
      plugin = new ClockPlugin(OptionsFromEnvironment());
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "clocksync-lttng: out of memory: events keep "
                           "LTTng's default clock\n");
      return;
    }
  }
  int code;
  if ((code = lttng_ust_trace_clock_set_read64_cb(Read64)) != 0) {
    return Refused("the read64 callback", code);
  }
  if ((code = lttng_ust_trace_clock_set_freq_cb(Frequency)) != 0) {
    return Refused("the freq callback", code);
  }
  if ((code = lttng_ust_trace_clock_set_uuid_cb(Uuid)) != 0) {
    return Refused("the uuid callback", code);
  }
  if ((code = lttng_ust_trace_clock_set_name_cb(Name)) != 0) {
    return Refused("the name callback", code);
  }
  if ((code = lttng_ust_trace_clock_set_description_cb(Description)) != 0) {
    return Refused("the description callback", code);
  }
  if ((code = lttng_ust_enable_trace_clock_override()) != 0) {
    return Refused("the clock override", code);
  }
  // At start-up, not in the first tracepoint (clock_plugin.h: Modes).
  plugin->Decide();
}
