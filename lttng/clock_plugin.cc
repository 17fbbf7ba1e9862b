// lttng/clock_plugin.cc: ClockPlugin (clock_plugin.h): the global and the
// fallback clock, the mode decision, uuids and descriptions.

#include "lttng/clock_plugin.h"

#include <time.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace clocksync::lttng {
namespace {

// This thread's last value and its last good global - raw offset.
struct PerThread {
  int64_t last_value = 0;
  int64_t offset_ns = 0;
  bool has_offset = false;
};
thread_local PerThread per_thread;

// SplitMix64's finalizer: a bijective 64-bit mix.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15u;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

// 64-bit FNV-1a.
uint64_t Fnv1a(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325u;
  for (const char c : bytes) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3u;
  }
  return hash;
}

// A version-8 uuid (RFC 9562) whose 122 free bits come from `seed` and
// `domain` (which keeps tree and host uuids apart).
std::string UuidOf(uint64_t seed, uint64_t domain) {
  const uint64_t high = Mix(seed ^ domain);
  const uint64_t low = Mix(high ^ Mix(domain));
  uint8_t b[16];
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<uint8_t>(high >> (56 - 8 * i));
    b[8 + i] = static_cast<uint8_t>(low >> (56 - 8 * i));
  }
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x80);  // version 8
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);  // variant 10
  return absl::StrFormat(
      "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
      b[12], b[13], b[14], b[15]);
}

constexpr uint64_t kTreeDomain = 0x636c6f636b747265u;  // "clocktre"
constexpr uint64_t kRawDomain = 0x636c6f636b726177u;   // "clockraw"

int64_t RealtimeNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Text safe inside a CTF metadata string (LTTng prints it between double
// quotes, unescaped): no quote, backslash or control character.
std::string CtfSafe(std::string text) {
  for (char& c : text) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '_';
  }
  return text;
}

}  // namespace

struct ClockPlugin::KeptString {
  std::string text;
  KeptString* next;
};

ProcessRole RoleOfExecutable(std::string_view executable_path) {
  const size_t slash = executable_path.rfind('/');
  const std::string_view name = slash == std::string_view::npos
                                    ? executable_path
                                    : executable_path.substr(slash + 1);
  if (name == "lttng-sessiond") return ProcessRole::kSessionDaemon;
  if (name == "lttng-consumerd") return ProcessRole::kConsumerDaemon;
  return ProcessRole::kTraced;
}

std::string TreeClockUuid(uint64_t tree_id) {
  return UuidOf(tree_id, kTreeDomain);
}

std::string RawClockUuid(std::string_view boot_id) {
  return UuidOf(Fnv1a(boot_id), kRawDomain);
}

ClockPlugin::ClockPlugin(PluginOptions options) : options_(std::move(options)) {}

ClockPlugin::~ClockPlugin() {
  while (kept_ != nullptr) delete std::exchange(kept_, kept_->next);
}

void ClockPlugin::Say(const std::string& line) noexcept {
  if (options_.say) {
    try {
      options_.say(line);
    } catch (...) {
    }
    return;
  }
  std::fprintf(stderr, "clocksync-lttng: %s\n", line.c_str());
}

uint64_t ClockPlugin::GlobalValue() noexcept {
  PerThread& t = per_thread;
  int64_t tsc_error_ns;
  const int64_t raw_ns = clock_->FastRawNowNs(&tsc_error_ns);
  const TimeReading reading = clock_->AtWithExtraBound(raw_ns, tsc_error_ns);
  int64_t global_ns;
  if (__builtin_expect(reading.error == CLOCKSYNC_OK ||
                           reading.error == CLOCKSYNC_ESTALE,
                       1)) {
    global_ns = reading.global_ns;
    t.offset_ns = global_ns - raw_ns;
    t.has_offset = true;
  } else {
    // A restarted daemon not synchronized yet, or a mapping that stays
    // busy: carry on from the last good offset at the raw clock's rate.
    global_ns = raw_ns + (t.has_offset
                              ? t.offset_ns
                              : first_offset_ns_.load(std::memory_order_relaxed));
  }
  int64_t value = global_ns - kValueBiasNs;
  if (__builtin_expect(value < t.last_value, 0)) value = t.last_value;
  t.last_value = value;
  return static_cast<uint64_t>(value);
}

uint64_t ClockPlugin::Read64Slow() noexcept {
  Mode mode = mode_.load(std::memory_order_acquire);
  if (mode == Mode::kUndecided) {
    Recheck(true);
    mode = mode_.load(std::memory_order_acquire);
  } else if (mode == Mode::kRaw) {
    const int64_t raw_ns = Clock::RawNowNs();
    if (raw_ns < next_check_raw_ns_.load(std::memory_order_relaxed)) {
      return static_cast<uint64_t>(raw_ns);
    }
    Recheck(false);
    mode = mode_.load(std::memory_order_acquire);
  }
  if (mode == Mode::kGlobal) {
    // lttng-sessiond: CLOCK_REALTIME, so that the offset it measures
    // (CLOCK_REALTIME - read64) is the bias on every node (clock_plugin.h).
    if (options_.role == ProcessRole::kSessionDaemon) {
      return static_cast<uint64_t>(RealtimeNs() - kValueBiasNs);
    }
    return GlobalValue();
  }
  return static_cast<uint64_t>(Clock::RawNowNs());
}

void ClockPlugin::Recheck(bool first) noexcept {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (first) {
    lock.lock();
    if (mode_.load(std::memory_order_acquire) != Mode::kUndecided) return;
  } else {
    // Another thread is looking: go on with the raw clock meanwhile.
    if (!lock.try_lock()) return;
    if (mode_.load(std::memory_order_acquire) != Mode::kRaw) return;
  }
  next_check_raw_ns_.store(Clock::RawNowNs() + kRecheckIntervalNs,
                           std::memory_order_relaxed);
  std::string reason;
  bool global = false;
  try {
    // A traced program opens the segment once, at its start (the plugin's
    // init), not in a later read64 that may run in a signal handler: an
    // open allocates. The LTTng daemons look again each time.
    if (clock_ == nullptr &&
        (first || options_.role != ProcessRole::kTraced)) {
      std::unique_ptr<Clock> clock;
      std::string message;
      if (Clock::OpenWithCode(options_.shm_path, ClockOptions(), &clock,
                              &message) == CLOCKSYNC_OK) {
        clock_ = std::move(clock);
      } else {
        reason = std::move(message);
      }
    }
    if (clock_ != nullptr) {
      int64_t tsc_error_ns;
      const int64_t raw_ns = clock_->FastRawNowNs(&tsc_error_ns);
      const TimeReading reading = clock_->AtWithExtraBound(raw_ns, tsc_error_ns);
      if (reading.error == CLOCKSYNC_OK || reading.error == CLOCKSYNC_ESTALE) {
        first_offset_ns_.store(reading.global_ns - raw_ns,
                               std::memory_order_relaxed);
        global = true;
      } else if (reading.error == CLOCKSYNC_ENOTSYNCED) {
        reason = absl::StrCat("the clocksync daemon at ", options_.shm_path,
                              " is not synchronized yet");
      } else {
        reason = absl::StrCat("reading ", options_.shm_path, ": ",
                              clocksync_strerror(reading.error));
      }
    }
    if (global) {
      if (!first) {
        Say(absl::StrCat("the clocksync daemon at ", options_.shm_path,
                         " is synchronized now: LTTng events are stamped "
                         "with global time from here on (their stamps jump "
                         "forward)"));
      }
      mode_.store(Mode::kGlobal, std::memory_order_release);
      return;
    }
    raw_reason_ = reason;
    if (clock_ == nullptr && options_.role == ProcessRole::kTraced) {
      // No segment at the start: raw for the process's life.
      next_check_raw_ns_.store(INT64_MAX, std::memory_order_relaxed);
    }
    if (first) {
      const char* until =
          clock_ != nullptr ? " until it is"
          : options_.role == ProcessRole::kTraced
              ? " (start clocksyncd before the traced program)"
              : " until a synchronized daemon publishes there";
      Say(absl::StrCat(reason,
                       ": LTTng events of this process are stamped with "
                       "CLOCK_MONOTONIC_RAW",
                       until));
    }
  } catch (const std::bad_alloc&) {
    if (first) Say("out of memory: LTTng events are stamped with CLOCK_MONOTONIC_RAW");
  }
  mode_.store(Mode::kRaw, std::memory_order_release);
}

void ClockPlugin::Decide() noexcept {
  if (mode_.load(std::memory_order_acquire) == Mode::kUndecided) Recheck(true);
}

Mode ClockPlugin::CurrentMode() noexcept {
  Read64();  // decides, or looks again when due
  return mode_.load(std::memory_order_acquire);
}

uint64_t ClockPlugin::TreeId() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (clock_ == nullptr) return 0;
  MappingSnapshot snapshot;
  if (clock_->ReadMapping(&snapshot) != CLOCKSYNC_OK) return 0;
  return snapshot.tree_id;
}

int ClockPlugin::Uuid(char* out) noexcept {
  try {
    std::string uuid;
    if (CurrentMode() == Mode::kGlobal) {
      uuid = TreeClockUuid(TreeId());
    } else {
      std::ifstream file(options_.boot_id_path);
      std::string boot_id;
      if (!std::getline(file, boot_id) || boot_id.empty()) return -1;
      uuid = RawClockUuid(boot_id);
    }
    std::memcpy(out, uuid.c_str(), kUuidStringSize);
    return 0;
  } catch (const std::bad_alloc&) {
    return -1;
  }
}

const char* ClockPlugin::KeepString(std::string text) {
  std::lock_guard<std::mutex> lock(strings_mu_);
  for (const KeptString* k = kept_; k != nullptr; k = k->next) {
    if (k->text == text) return k->text.c_str();
  }
  kept_ = new KeptString{std::move(text), kept_};
  return kept_->text.c_str();
}

const char* ClockPlugin::Description() noexcept {
  try {
    if (CurrentMode() == Mode::kGlobal) {
      const uint64_t tree_id = TreeId();
      return KeepString(CtfSafe(absl::StrCat(
          "clocksync global time of ",
          tree_id != 0 ? absl::StrFormat("tree %016x", tree_id)
                       : std::string("a tree whose master is unknown here"),
          " (", options_.shm_path, "): ns since the Unix epoch less ",
          kValueBiasNs, " ns, which the offset adds back")));
    }
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reason = raw_reason_;
    }
    return KeepString(CtfSafe(
        absl::StrCat("CLOCK_MONOTONIC_RAW of this host: clocksync fallback (",
                     reason, ")")));
  } catch (const std::bad_alloc&) {
    return "clocksync";
  }
}

}  // namespace clocksync::lttng
