// hull/sim/clock_model.cc: ModeledClock: see clock_model.h.

#include "hull/sim/clock_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numbers>

namespace clocksync::hull {
namespace {

// "250ms" -> 250000000; plain numbers are ns. False on malformed input.
bool ParseDurationNs(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(value)) return false;
  const std::string unit(end);
  double scale;
  if (unit.empty() || unit == "ns") {
    scale = 1;
  } else if (unit == "us") {
    scale = 1e3;
  } else if (unit == "ms") {
    scale = 1e6;
  } else if (unit == "s") {
    scale = 1e9;
  } else {
    return false;
  }
  const double ns = value * scale;
  if (std::fabs(ns) > 9e18) return false;
  *out = static_cast<int64_t>(std::llround(ns));
  return true;
}

bool ParseDouble(const std::string& text, double* out) {
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return !text.empty() && *end == '\0' && std::isfinite(*out);
}

}  // namespace

std::string ParseClockModel(const std::string& spec, ClockModelParams* out) {
  ClockModelParams p;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return "'" + item + "': expected key=value";
    const std::string key = item.substr(0, eq);
    const std::string value = item.substr(eq + 1);
    const std::string bad = key + ": bad value '" + value + "'";
    if (key == "offset" || key == "offset_ns") {
      if (!ParseDurationNs(value, &p.offset_ns)) return bad;
    } else if (key == "frequency_ppm" || key == "freq_ppm") {
      if (!ParseDouble(value, &p.frequency_ppm)) return bad;
      if (std::fabs(p.frequency_ppm) > 1000) return key + ": over 1000 ppm";
    } else if (key == "wander" || key == "wander_ppb_per_sqrt_s") {
      if (!ParseDouble(value, &p.wander_ppb_per_sqrt_s) ||
          p.wander_ppb_per_sqrt_s < 0) {
        return bad;
      }
    } else if (key == "sine_ppb") {
      if (!ParseDouble(value, &p.sine_amplitude_ppb)) return bad;
    } else if (key == "sine_period_s") {
      if (!ParseDouble(value, &p.sine_period_s) || p.sine_period_s < 0) {
        return bad;
      }
    } else if (key == "step") {
      const size_t colon = value.find(':');
      ClockStep step{};
      if (colon == std::string::npos ||
          !ParseDurationNs(value.substr(0, colon), &step.at_ns) ||
          !ParseDurationNs(value.substr(colon + 1), &step.step_ns) ||
          step.at_ns < 0) {
        return key + ": bad value '" + value + "' (expected AT:SIZE, e.g. 60s:+1ms)";
      }
      p.steps.push_back(step);
    } else if (key == "seed") {
      char* end = nullptr;
      p.seed = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0') return bad;
    } else {
      return "unknown key '" + key + "'";
    }
  }
  *out = p;
  return "";
}

ModeledClock::ModeledClock(const ClockModelParams& params)
    : params_(params), rng_(params.seed) {
  walk_ppb_.push_back(0.0);
  phase_ns_.push_back(0.0);
}

void ModeledClock::ForgetBefore(int64_t true_ns) {
  const int64_t second = true_ns / 1'000'000'000;
  if (second <= first_second_) return;
  ExtendWalk(second);
  const size_t drop = static_cast<size_t>(second - first_second_);
  walk_ppb_.erase(walk_ppb_.begin(), walk_ppb_.begin() + drop);
  phase_ns_.erase(phase_ns_.begin(), phase_ns_.begin() + drop);
  first_second_ = second;
}

void ModeledClock::DrawUntil(int64_t true_ns) {
  if (params_.wander_ppb_per_sqrt_s > 0) {
    ExtendWalk(std::max(first_second_, true_ns / 1'000'000'000));
  }
}

void ModeledClock::ExtendWalk(int64_t seconds) {
  while (first_second_ + static_cast<int64_t>(walk_ppb_.size()) <= seconds) {
    // Second k's frequency is second k-1's plus a random step; its phase
    // adds 1 s of the previous second's frequency (1 ppb over 1 s = 1 ns).
    phase_ns_.push_back(phase_ns_.back() + walk_ppb_.back());
    walk_ppb_.push_back(walk_ppb_.back() +
                        params_.wander_ppb_per_sqrt_s * normal_(rng_));
  }
}

double ModeledClock::FrequencyPpbAt(int64_t true_ns) {
  double ppb = params_.frequency_ppm * 1e3;
  if (params_.wander_ppb_per_sqrt_s > 0) {
    const int64_t second =
        std::max(first_second_, true_ns / 1'000'000'000);
    ExtendWalk(second);
    ppb += walk_ppb_[second - first_second_];
  }
  if (params_.sine_period_s > 0) {
    ppb += params_.sine_amplitude_ppb *
           std::sin(2 * std::numbers::pi * (true_ns * 1e-9) /
                    params_.sine_period_s);
  }
  return ppb;
}

int64_t ModeledClock::LocalAt(int64_t true_ns) {
  const double t_s = static_cast<double>(true_ns) * 1e-9;
  // Everything but t itself is small: sum it in double, add t exactly.
  double extra_ns = static_cast<double>(params_.offset_ns) +
                    params_.frequency_ppm * 1e3 * t_s;
  if (params_.wander_ppb_per_sqrt_s > 0) {
    const int64_t second =
        std::max(first_second_, true_ns / 1'000'000'000);
    ExtendWalk(second);
    const size_t k = static_cast<size_t>(second - first_second_);
    extra_ns += phase_ns_[k] +
                walk_ppb_[k] * (t_s - static_cast<double>(second));
  }
  if (params_.sine_period_s > 0) {
    // ∫0^t A sin(2πs/P) ds = A P / (2π) (1 − cos(2πt/P)), ppb·s = ns.
    const double w = 2 * std::numbers::pi / params_.sine_period_s;
    extra_ns += params_.sine_amplitude_ppb / w * (1 - std::cos(w * t_s));
  }
  int64_t steps_ns = 0;
  for (const ClockStep& s : params_.steps) {
    if (true_ns >= s.at_ns) steps_ns += s.step_ns;
  }
  return true_ns + steps_ns + static_cast<int64_t>(std::llround(extra_ns));
}

}  // namespace clocksync::hull
