// lttng/clock_plugin.h: ClockPlugin, the clock that libclocksync-lttng.so
// gives LTTng-UST (LTTNG_UST_CLOCK_PLUGIN; the callbacks of
// <lttng/ust-clock.h>): cluster-global time read from the node's clocksyncd
// segment through client/clock.h, the fast path of clocksync_now.
//
// What LTTng gets (docs/LTTNG.md):
//   read64       global time in ns, less kValueBiasNs (see below); a
//                CLOCK_MONOTONIC_RAW reading while the plugin falls back
//   freq         1 GHz
//   name         "clocksync", in both modes (LTTng's metadata names the
//                clock several times per trace: it must not change between)
//   uuid         global: the same on every node of one tree (derived from
//                the segment header's tree_id; a fixed one while the tree
//                is unknown); fallback: one per host and boot (boot_id)
//   description  which of the two, the tree, the segment's path
//
// Modes. The plugin decides when LTTng-UST loads it (Decide(), from the
// process's start-up; or else at its first callback): it reads global time
// when a daemon publishes a synchronized (or holding over, or stale)
// mapping at the path, and CLOCK_MONOTONIC_RAW otherwise, saying why once
// on stderr. From raw it looks again at most once a second and moves to
// global when the daemon is synchronized (a forward jump of the stamps,
// said once); a traced program does so only when the segment was there at
// its start (opening one allocates, and a later read64 may run in a
// signal handler), the LTTng daemons also when it appears later. From
// global it never goes back: when a reading
// fails (a restarted daemon not yet synchronized, a seqlock that stays
// busy), global time is extrapolated from this thread's last good reading
// at the raw clock's rate. A thread's values never decrease.
//
// Where LTTng reads the clock. The traced program stamps its events; the
// consumer daemon stamps the packets it creates and flushes (begin/end),
// so it must load the plugin too, or babeltrace2 refuses the trace; the
// session daemon writes the metadata (name, uuid, description, freq) and
// measures the clock's offset from the Unix epoch as CLOCK_REALTIME minus
// read64. Global time is already ns since the Unix epoch (the master
// anchors it so), so the offset should be 0 on every node whatever its
// CLOCK_REALTIME's error: in lttng-sessiond (ProcessRole::kSessionDaemon)
// read64 therefore answers CLOCK_REALTIME - kValueBiasNs while its node is
// synchronized, and the measured offset is kValueBiasNs within a few tens
// of ns, on every node. kValueBiasNs keeps that offset positive: babeltrace2
// 2.0 cannot read a metadata file with a negative clock offset; every
// other reader subtracts the same bias, so that the trace's times are
// global time.
//
// Thread safety: every member may be called from any thread at any time;
// Read64 takes no lock in global mode (in raw mode a try-lock once a
// second), allocates nothing and never blocks; the first call decides under
// a lock (one open() and mmap() of the segment).
#ifndef CLOCKSYNC_LTTNG_CLOCK_PLUGIN_H_
#define CLOCKSYNC_LTTNG_CLOCK_PLUGIN_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "client/clock.h"

namespace clocksync::lttng {

// Subtracted from every global-time value read64 returns, in ns; the
// metadata's clock offset adds it back (see above).
inline constexpr int64_t kValueBiasNs = 1'000'000;
// The clock's frequency: values are ns.
inline constexpr uint64_t kFrequencyHz = 1'000'000'000;
// How often the plugin looks at the segment again while it falls back, ns.
inline constexpr int64_t kRecheckIntervalNs = 1'000'000'000;
// Length of a uuid string with its final NUL (LTTNG_UST_UUID_STR_LEN).
inline constexpr size_t kUuidStringSize = 37;

// Which LTTng process loaded the plugin.
enum class ProcessRole {
  kTraced,          // an instrumented program: stamps events
  kSessionDaemon,   // lttng-sessiond: metadata and the clock offset
  kConsumerDaemon,  // lttng-consumerd: stamps packets it creates, flushes
};

// The role of the program at `executable_path` (/proc/self/exe):
// lttng-sessiond and lttng-consumerd by their file name, anything else is
// traced.
ProcessRole RoleOfExecutable(std::string_view executable_path);

enum class Mode { kUndecided, kGlobal, kRaw };

struct PluginOptions {
  // The segment (CLOCKSYNC_SHM, default CLOCKSYNC_DEFAULT_SHM_PATH).
  std::string shm_path = CLOCKSYNC_DEFAULT_SHM_PATH;
  ProcessRole role = ProcessRole::kTraced;
  // Where the fallback uuid comes from.
  std::string boot_id_path = "/proc/sys/kernel/random/boot_id";
  // Receives the one-line messages (fallback, move to global); default:
  // stderr, prefixed "clocksync-lttng: ".
  std::function<void(const std::string&)> say;
};

// The uuid string (lowercase 8-4-4-4-12, RFC 9562 version 8) of the
// clock of a tree: a function of tree_id only, so the same on every node.
// tree_id 0 (unknown) gives the fixed uuid of "a clocksync tree".
std::string TreeClockUuid(uint64_t tree_id);
// The fallback clock's uuid: a function of the host's boot_id text.
std::string RawClockUuid(std::string_view boot_id);

class ClockPlugin {
 public:
  explicit ClockPlugin(PluginOptions options);
  ClockPlugin(const ClockPlugin&) = delete;
  ClockPlugin& operator=(const ClockPlugin&) = delete;
  ~ClockPlugin();

  // The clock value now (LTTng's read64).
  uint64_t Read64() noexcept {
    if (__builtin_expect(mode_.load(std::memory_order_acquire) ==
                             Mode::kGlobal,
                         1) &&
        options_.role != ProcessRole::kSessionDaemon) {
      return GlobalValue();
    }
    return Read64Slow();
  }

  // LTTng's uuid callback: writes kUuidStringSize bytes; 0, or -1 when
  // there is none to give (fallback without a boot_id).
  int Uuid(char* out) noexcept;
  const char* Name() const noexcept { return "clocksync"; }
  // LTTng's description callback; valid until the process ends.
  const char* Description() noexcept;

  // Decides the mode if undecided (the plugin's init calls it).
  void Decide() noexcept;
  // The mode now (deciding if undecided; looking again when due).
  Mode CurrentMode() noexcept;
  // The tree id the segment's header holds now (0: unknown or none).
  uint64_t TreeId() noexcept;

 private:
  struct ThreadState;
  // Global time less the bias, never below this thread's last value.
  uint64_t GlobalValue() noexcept;
  uint64_t Read64Slow() noexcept;
  // Decides (first call) or looks again (raw, rate-limited; try-lock).
  void Recheck(bool first) noexcept;
  void Say(const std::string& line) noexcept;
  const char* KeepString(std::string text);

  const PluginOptions options_;
  std::atomic<Mode> mode_{Mode::kUndecided};
  // Set once, under mu_, before mode_ becomes kGlobal.
  std::unique_ptr<Clock> clock_;
  // global - raw at the reading that chose global, for a thread's
  // extrapolation before its first good reading of its own.
  std::atomic<int64_t> first_offset_ns_{0};
  // Raw time of the next look at the segment while raw.
  std::atomic<int64_t> next_check_raw_ns_{0};
  std::mutex mu_;
  // Why the plugin falls back (for the description); guarded by mu_.
  std::string raw_reason_ = "not decided yet";
  // Descriptions handed out, kept alive (a handful per process).
  std::mutex strings_mu_;
  struct KeptString;
  KeptString* kept_ = nullptr;
};

}  // namespace clocksync::lttng

#endif  // CLOCKSYNC_LTTNG_CLOCK_PLUGIN_H_
