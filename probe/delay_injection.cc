// probe/delay_injection.cc: parsing and checking delay specs, the seeded
// delay sampler and the delay queue (see probe/delay_injection.h).

#include "probe/delay_injection.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace clocksync::probe {
namespace {

// Largest injected minimum or mean delay accepted.
constexpr int64_t kMaxInjectedDelayNs = 10'000'000'000;

}  // namespace

bool ParseDelayInjection(const std::string& spec, DelayInjection* out,
                         std::string* error) {
  constexpr absl::string_view kExpected =
      "expected min=<duration>,mean=<duration>[,seed=<n>], e.g. "
      "min=50us,mean=20us,seed=3";
  if (spec.empty()) {
    *error = absl::StrCat("empty delay spec; ", kExpected);
    return false;
  }
  DelayInjection result;
  result.enabled = true;
  bool have_min = false;
  bool have_mean = false;
  bool have_seed = false;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    const size_t equals = part.find('=');
    if (equals == absl::string_view::npos) {
      *error = absl::StrCat("'", part, "': ", kExpected);
      return false;
    }
    const absl::string_view key = part.substr(0, equals);
    const absl::string_view value = part.substr(equals + 1);
    if (key == "min" || key == "mean") {
      bool& seen = key == "min" ? have_min : have_mean;
      if (seen) {
        *error = absl::StrCat("duplicate key '", key, "'");
        return false;
      }
      seen = true;
      absl::Duration duration;
      if (!absl::ParseDuration(value, &duration) ||
          duration < absl::ZeroDuration() ||
          duration > absl::Nanoseconds(kMaxInjectedDelayNs)) {
        *error = absl::StrCat(key, ": bad duration '", value,
                              "' (expected 0..10s with a unit: ns, us, ms, s)");
        return false;
      }
      if (key == "min") {
        result.min_ns = absl::ToInt64Nanoseconds(duration);
      } else {
        result.exp_mean_ns = absl::ToDoubleNanoseconds(duration);
      }
    } else if (key == "seed") {
      if (have_seed) {
        *error = "duplicate key 'seed'";
        return false;
      }
      have_seed = true;
      if (!absl::SimpleAtoi(value, &result.seed)) {
        *error = absl::StrCat("seed: bad value '", value,
                              "' (expected a non-negative integer)");
        return false;
      }
    } else {
      *error = absl::StrCat("unknown key '", key,
                            "' (expected min, mean, seed)");
      return false;
    }
  }
  if (!have_min && !have_mean) {
    *error = absl::StrCat("needs min or mean; ", kExpected);
    return false;
  }
  *out = result;
  return true;
}

absl::Status ValidateDelayInjection(const DelayInjection& delay,
                                    size_t queue_capacity) {
  if (!delay.enabled) return absl::OkStatus();
  if (delay.min_ns < 0 || delay.min_ns > kMaxInjectedDelayNs ||
      !(delay.exp_mean_ns >= 0) ||
      delay.exp_mean_ns > static_cast<double>(kMaxInjectedDelayNs)) {
    return absl::InvalidArgumentError(
        "delay injection: min and mean must be in [0, 10s]");
  }
  if (queue_capacity == 0 || queue_capacity > (size_t{1} << 24)) {
    return absl::InvalidArgumentError(
        "delay injection: queue capacity must be in [1, 2^24]");
  }
  return absl::OkStatus();
}

// --- the sampler ------------------------------------------------------------

DelaySampler::DelaySampler(const DelayInjection& delay, uint64_t stream)
    : min_ns_(delay.min_ns),
      exp_mean_ns_(delay.exp_mean_ns),
      state_(delay.seed ^ (stream * 0xD1B54A32D192ED03ULL)) {}

// SplitMix64 (Steele, Lea, Flood 2014): small, fast, and good enough for
// emulated network delays; fully specified, so a seed replays exactly.
uint64_t DelaySampler::NextBits() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

int64_t DelaySampler::NextNs() {
  if (exp_mean_ns_ <= 0) return min_ns_;
  // Inverse transform: u in [0, 1), so log1p(-u) is finite.
  const double u = static_cast<double>(NextBits() >> 11) * 0x1.0p-53;
  return min_ns_ + std::llround(-exp_mean_ns_ * std::log1p(-u));
}

// --- the queue --------------------------------------------------------------

DelayQueue::DelayQueue(size_t capacity) : slots_(capacity) {
  heap_.reserve(capacity);
  free_.reserve(capacity);
  for (size_t i = capacity; i > 0; --i) {
    free_.push_back(static_cast<uint32_t>(i - 1));
  }
}

bool DelayQueue::Push(int64_t due_ns, const uint8_t* packet,
                      const sockaddr_storage* to, socklen_t to_len) {
  if (free_.empty()) return false;
  const uint32_t slot = free_.back();
  free_.pop_back();
  std::memcpy(slots_[slot].packet, packet, kProbePacketSize);
  slots_[slot].to_len = to == nullptr ? 0 : to_len;
  if (to != nullptr) std::memcpy(&slots_[slot].to, to, to_len);
  heap_.push_back(Due{due_ns, sequence_++, slot});
  std::push_heap(heap_.begin(), heap_.end(), Later);
  return true;
}

void DelayQueue::Pop(uint8_t* packet, sockaddr_storage* to,
                     socklen_t* to_len) {
  std::pop_heap(heap_.begin(), heap_.end(), Later);
  const uint32_t slot = heap_.back().slot;
  heap_.pop_back();
  std::memcpy(packet, slots_[slot].packet, kProbePacketSize);
  if (to != nullptr) {
    *to_len = slots_[slot].to_len;
    std::memcpy(to, &slots_[slot].to, slots_[slot].to_len);
  }
  free_.push_back(slot);
}

}  // namespace clocksync::probe
