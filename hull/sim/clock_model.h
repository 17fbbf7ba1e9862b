// hull/sim/clock_model.h
//
// ModeledClock: a local clock as a known function of true time, for
// measuring synchronization against a known truth on one machine.
//
//   local(t) = t + offset + frequency * t + ∫ wander + ∫ sine + Σ steps
//
// - offset_ns: local − true at t = 0;
// - frequency_ppm: constant rate error, + = local runs fast;
// - wander_ppb_per_sqrt_s: the frequency takes a random walk, changing by
//   N(0, wander) ppb every second (chrony's simulation model: 1 ppb);
// - sine: frequency + A sin(2π t / P) (a temperature cycle);
// - steps: at true time t_s the local clock jumps by step_ns.
// Pure math: time comes in as an argument; the random walk is drawn lazily
// from a seeded generator, so a model is reproducible from its parameters.
// Used by the scenario tests and by clocksyncd's --clock_model (tests only).
//
// Thread safety: none (LocalAt extends the random walk lazily).

#ifndef CLOCKSYNC_HULL_SIM_CLOCK_MODEL_H_
#define CLOCKSYNC_HULL_SIM_CLOCK_MODEL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace clocksync::hull {

struct ClockStep {
  int64_t at_ns;    // True time since the model's origin.
  int64_t step_ns;  // + = the local clock jumps forward.
};

struct ClockModelParams {
  int64_t offset_ns = 0;
  double frequency_ppm = 0;
  double wander_ppb_per_sqrt_s = 0;
  double sine_amplitude_ppb = 0;
  double sine_period_s = 0;  // 0 = no sine.
  std::vector<ClockStep> steps;
  uint64_t seed = 1;
};

// Parses "offset_ns=5e9,frequency_ppm=-40,wander=1,sine_ppb=500,
// sine_period_s=600,step=120s:+2ms,seed=7" (every key optional; several
// step= allowed; durations take ns/us/ms/s suffixes). Returns an empty
// string on success, else a message naming the bad key or value.
std::string ParseClockModel(const std::string& spec, ClockModelParams* out);

class ModeledClock {
 public:
  explicit ModeledClock(const ClockModelParams& params);

  // Local reading (ns since the origin, plus the offset) at true time
  // `true_ns` (ns since the origin, >= 0).
  int64_t LocalAt(int64_t true_ns);
  // The frequency error (local rate − 1) at `true_ns`, in ppb.
  double FrequencyPpbAt(int64_t true_ns);
  // Draws the random walk up to true time `true_ns` now (LocalAt and
  // FrequencyPpbAt up to it then draw nothing; the walk is the same).
  void DrawUntil(int64_t true_ns);
  // Drops the random walk before true time `true_ns` (whole seconds), so a
  // long run keeps bounded memory; later queries before it are clamped to
  // its first kept second. The walk drawn stays the same.
  void ForgetBefore(int64_t true_ns);
  // Seconds of random walk held (for memory accounting).
  size_t walk_seconds_held() const { return walk_ppb_.size(); }

  const ClockModelParams& params() const { return params_; }

 private:
  void ExtendWalk(int64_t seconds);

  ClockModelParams params_;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_{0.0, 1.0};
  // walk_ppb_[k - first_second_]: random-walk frequency during second k;
  // phase_ns_[k - first_second_]: its integral over seconds [0, k).
  int64_t first_second_ = 0;
  std::vector<double> walk_ppb_;
  std::vector<double> phase_ns_;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_SIM_CLOCK_MODEL_H_
