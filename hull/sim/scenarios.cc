// hull/sim/scenarios.cc: The standard scenarios; see scenarios.h.

#include "hull/sim/scenarios.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace clocksync::hull {
namespace {

constexpr int64_t kUs = 1'000;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;

DelayParams Exponential(int64_t min_ns, double mean_ns) {
  DelayParams d;
  d.min_ns = min_ns;
  d.exp_mean_ns = mean_ns;
  return d;
}

// A copy of `base` named "base/what", for VariantScenarios.
Scenario Variant(const std::vector<Scenario>& all, const std::string& base,
                 const std::string& what) {
  Scenario s = *FindScenario(all, base);
  s.name += "/" + what;
  s.description += "; " + what;
  return s;
}

void ScaleJitter(SimulationParams* p, double factor) {
  for (DelayParams* d : {&p->forward, &p->backward}) {
    d->exp_mean_ns *= factor;
    d->pareto_scale_ns *= factor;
  }
}

}  // namespace

std::vector<Scenario> StandardScenarios() {
  std::vector<Scenario> all;
  {
    // chrony's default simulation model (test/simulation/test.common).
    Scenario s{"101-chrony-default",
               "freq 1e-4, random-walk wander 1e-9 N(0,1)/s, delay 100 us + "
               "exp(100 us) each way, 1 Hz, 1 h",
               {}};
    s.params.clock.frequency_ppm = 100;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    s.params.clock.offset_ns = 3 * kS;
    s.params.forward = s.params.backward = Exponential(100 * kUs, 100 * kUs);
    s.params.interval_ns = kS;
    s.params.duration_ns = 3600 * kS;
    s.params.seed = 101;
    all.push_back(s);
  }
  {
    Scenario s{"102-large-offset-linear",
               "hours of offset, freq -350 ppm, no wander, delay 50 us + "
               "exp(20 us), 10 Hz, 10 min",
               {}};
    s.params.clock.frequency_ppm = -350;
    s.params.clock.offset_ns = -5 * 3600 * kS;
    s.params.forward = s.params.backward = Exponential(50 * kUs, 20 * kUs);
    s.params.interval_ns = 100 * kMs;
    s.params.duration_ns = 600 * kS;
    s.params.seed = 102;
    all.push_back(s);
  }
  {
    Scenario s{"103-loopback-10hz",
               "freq 37 ppm, wander 1 ppb/sqrt(s), delay 10 us + exp(5 us), "
               "10 Hz, 15 min",
               {}};
    s.params.clock.frequency_ppm = 37;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    s.params.forward = s.params.backward = Exponential(10 * kUs, 5 * kUs);
    s.params.turnaround_ns = 3 * kUs;
    s.params.interval_ns = 100 * kMs;
    s.params.duration_ns = 900 * kS;
    s.params.seed = 103;
    all.push_back(s);
  }
  {
    Scenario s{"104-sine-temperature",
               "freq 20 ppm + 1 ppm sine over 30 min (temperature), wander 1, "
               "delay 30 us + exp(30 us), 1 Hz, 1 h",
               {}};
    s.params.clock.frequency_ppm = 20;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    s.params.clock.sine_amplitude_ppb = 1000;
    s.params.clock.sine_period_s = 1800;
    s.params.forward = s.params.backward = Exponential(30 * kUs, 30 * kUs);
    s.params.interval_ns = kS;
    s.params.duration_ns = 3600 * kS;
    s.params.seed = 104;
    all.push_back(s);
  }
  {
    Scenario s{"105-step",
               "freq 20 ppm, wander 1, local clock steps +5 ms at 20 min, "
               "delay 50 us + exp(50 us), 1 Hz, 40 min",
               {}};
    s.params.clock.frequency_ppm = 20;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    s.params.clock.steps = {{1200 * kS, 5 * kMs}};
    s.params.forward = s.params.backward = Exponential(50 * kUs, 50 * kUs);
    s.params.interval_ns = kS;
    s.params.duration_ns = 2400 * kS;
    s.params.seed = 105;
    all.push_back(s);
  }
  {
    Scenario s{"106-pareto-loss",
               "freq -60 ppm, wander 1, delay 200 us + Pareto(1.5, 50 us), "
               "30% loss, 2 Hz, 1 h",
               {}};
    s.params.clock.frequency_ppm = -60;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    DelayParams d;
    d.min_ns = 200 * kUs;
    d.pareto_alpha = 1.5;
    d.pareto_scale_ns = 50 * kUs;
    s.params.forward = s.params.backward = d;
    s.params.loss = 0.3;
    s.params.interval_ns = 500 * kMs;
    s.params.duration_ns = 3600 * kS;
    s.params.seed = 106;
    all.push_back(s);
  }
  {
    Scenario s{"107-outage",
               "freq 10 ppm, wander 1, delay 20 us + exp(10 us), 10 Hz, "
               "no samples from 10 to 12 min, 20 min",
               {}};
    s.params.clock.frequency_ppm = 10;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    s.params.forward = s.params.backward = Exponential(20 * kUs, 10 * kUs);
    s.params.interval_ns = 100 * kMs;
    s.params.outages = {{600 * kS, 720 * kS}};
    s.params.duration_ns = 1200 * kS;
    s.params.seed = 107;
    all.push_back(s);
  }
  {
    Scenario s{"108-asymmetric",
               "freq 5 ppm, wander 1, forward 80 us + exp(10 us), backward "
               "20 us + exp(10 us), 4 Hz, 20 min",
               {}};
    s.params.clock.frequency_ppm = 5;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    s.params.forward = Exponential(80 * kUs, 10 * kUs);
    s.params.backward = Exponential(20 * kUs, 10 * kUs);
    s.params.interval_ns = 250 * kMs;
    s.params.duration_ns = 1200 * kS;
    s.params.seed = 108;
    all.push_back(s);
  }
  {
    // What the daemon sees with kernel timestamps on both sides: a stable
    // clock (constant frequency, no wander) and sub-µs delays. The drift
    // estimate must not wander: the error must not ramp.
    Scenario s{"109-kernel-stamps-16hz",
               "freq 37 ppm, no wander, forward 150 ns + exp(1 us), backward "
               "150 ns + exp(200 ns), 16 Hz, 10 min",
               {}};
    s.params.clock.frequency_ppm = 37;
    s.params.forward = Exponential(150, 1000);
    s.params.backward = Exponential(150, 200);
    s.params.turnaround_ns = 2 * kUs;
    s.params.interval_ns = 62'500'000;
    s.params.duration_ns = 600 * kS;
    s.params.seed = 109;
    all.push_back(s);
  }
  {
    // chrony's simulation model with a slow, jittery path: the long
    // windows win (a 600 s window beats 300 s), and midpoint residuals are
    // dominated by the jitter, 10 times the 101 case.
    Scenario s{"110-chrony-1ms-jitter",
               "freq 1e-4, wander 1 ppb/sqrt(s), delay 100 us + exp(1 ms) "
               "each way, 1 Hz, 1 h",
               {}};
    s.params.clock.frequency_ppm = 100;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    s.params.clock.offset_ns = -2 * kS;
    s.params.forward = s.params.backward = Exponential(100 * kUs, 1 * kMs);
    s.params.interval_ns = kS;
    s.params.duration_ns = 3600 * kS;
    s.params.seed = 110;
    all.push_back(s);
  }
  {
    // Heavy-tailed queueing (Pareto, infinite variance for alpha < 2) at a
    // high probe rate: many near-minimum samples, and rare huge outliers
    // that dominate any mean of residuals.
    Scenario s{"111-pareto-10hz",
               "freq -25 ppm, wander 1, delay 50 us + Pareto(1.2, 20 us) "
               "each way, 10 Hz, 30 min",
               {}};
    s.params.clock.frequency_ppm = -25;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    DelayParams d;
    d.min_ns = 50 * kUs;
    d.pareto_alpha = 1.2;
    d.pareto_scale_ns = 20 * kUs;
    s.params.forward = s.params.backward = d;
    s.params.interval_ns = 100 * kMs;
    s.params.duration_ns = 1800 * kS;
    s.params.seed = 111;
    all.push_back(s);
  }
  {
    // Jitter on one direction only (a loaded uplink): the midpoint of a
    // sample is biased by half the forward jitter; the hulls are not.
    Scenario s{"112-asymmetric-jitter-20hz",
               "freq 12 ppm, wander 1, forward 40 us + exp(40 us), backward "
               "40 us + exp(4 us), 20 Hz, 20 min",
               {}};
    s.params.clock.frequency_ppm = 12;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    s.params.forward = Exponential(40 * kUs, 40 * kUs);
    s.params.backward = Exponential(40 * kUs, 4 * kUs);
    s.params.interval_ns = 50 * kMs;
    s.params.duration_ns = 1200 * kS;
    s.params.seed = 112;
    all.push_back(s);
  }
  {
    // Congestion episodes: for 90 s in every 5 minutes a queue builds on
    // the forward path (a standing 300 us plus bursts) and a little on the
    // way back. No sample of an episode is near the hulls.
    Scenario s{"113-congestion",
               "freq 30 ppm, wander 1, delay 20 us + exp(20 us), 4 Hz, 40 min; "
               "every 5 min 90 s of +300 us + exp(400 us) forward, "
               "+exp(50 us) back",
               {}};
    s.params.clock.frequency_ppm = 30;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    s.params.forward = s.params.backward = Exponential(20 * kUs, 20 * kUs);
    s.params.interval_ns = 250 * kMs;
    s.params.duration_ns = 2400 * kS;
    for (int64_t begin_s = 150; begin_s < 2400; begin_s += 300) {
      CongestionEpisode e;
      e.begin_ns = begin_s * kS;
      e.end_ns = (begin_s + 90) * kS;
      e.forward_extra = Exponential(300 * kUs, 400 * kUs);
      e.backward_extra = Exponential(0, 50 * kUs);
      s.params.congestion.push_back(e);
    }
    s.params.seed = 113;
    all.push_back(s);
  }
  {
    // A thermal swing faster than 104's: 400 ppb over a 15-minute cycle
    // (a machine whose load, hence temperature, cycles), low jitter at 2 Hz:
    // the bend, not the jitter, limits the long windows.
    Scenario s{"114-thermal-swing",
               "freq -8 ppm + 400 ppb sine over 15 min, wander 1, delay "
               "15 us + exp(15 us), 2 Hz, 1 h",
               {}};
    s.params.clock.frequency_ppm = -8;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    s.params.clock.sine_amplitude_ppb = 400;
    s.params.clock.sine_period_s = 900;
    s.params.forward = s.params.backward = Exponential(15 * kUs, 15 * kUs);
    s.params.interval_ns = 500 * kMs;
    s.params.duration_ns = 3600 * kS;
    s.params.seed = 114;
    all.push_back(s);
  }
  return all;
}

std::vector<Scenario> VariantScenarios() {
  const std::vector<Scenario> all = StandardScenarios();
  std::vector<Scenario> out;
  auto rate = [&](const std::string& base, double hz) {
    Scenario s = Variant(all, base, absl::StrCat("rate=", hz, "Hz"));
    s.params.interval_ns = static_cast<int64_t>(std::llround(1e9 / hz));
    out.push_back(s);
  };
  auto jitter = [&](const std::string& base, double factor) {
    Scenario s = Variant(all, base, absl::StrCat("jitter*", factor));
    ScaleJitter(&s.params, factor);
    out.push_back(s);
  };
  auto sine = [&](const std::string& base, double amplitude_ppb,
                  double period_s) {
    Scenario s = Variant(all, base,
                         absl::StrCat("sine=", amplitude_ppb, "ppb/", period_s,
                                      "s"));
    s.params.clock.sine_amplitude_ppb = amplitude_ppb;
    s.params.clock.sine_period_s = period_s;
    out.push_back(s);
  };
  rate("101-chrony-default", 0.5);
  rate("101-chrony-default", 2);
  jitter("101-chrony-default", 0.5);
  jitter("101-chrony-default", 2);
  rate("103-loopback-10hz", 2);
  sine("104-sine-temperature", 300, 1800);
  sine("104-sine-temperature", 1000, 900);
  jitter("110-chrony-1ms-jitter", 0.5);
  jitter("110-chrony-1ms-jitter", 2);
  rate("110-chrony-1ms-jitter", 2);
  rate("111-pareto-10hz", 5);
  rate("111-pareto-10hz", 20);
  jitter("111-pareto-10hz", 3);
  rate("112-asymmetric-jitter-20hz", 10);
  rate("112-asymmetric-jitter-20hz", 40);
  jitter("112-asymmetric-jitter-20hz", 0.3);
  // Far more jitter on the loaded direction (200 us and 1 ms of it, the
  // other direction's 20 and 100 us): the references' middle misses θ by
  // half its excess, more than the long windows do (reference_asymmetry.h).
  jitter("112-asymmetric-jitter-20hz", 5);
  jitter("112-asymmetric-jitter-20hz", 25);
  rate("113-congestion", 1);
  {
    // A longer route instead of episodes: from 15 minutes on, 200 us more
    // each way for good. The estimator must take it as the new normal, not
    // as a congestion episode that never ends.
    Scenario s = Variant(all, "113-congestion", "route-change");
    s.params.congestion.clear();
    CongestionEpisode e;
    e.begin_ns = 900 * kS;
    e.end_ns = s.params.duration_ns;
    e.forward_extra = e.backward_extra = Exponential(200 * kUs, 0);
    s.params.congestion.push_back(e);
    out.push_back(s);
  }
  sine("114-thermal-swing", 200, 900);
  sine("114-thermal-swing", 800, 900);
  sine("114-thermal-swing", 400, 600);
  sine("114-thermal-swing", 400, 1800);
  // 102's network on a clock that wanders as the allowance says, and a
  // third of it: in its first minutes it looks like 102 (docs/ACCURACY.md,
  // why the adaptive estimator cannot hold both).
  for (const double wander : {0.3, 1.0}) {
    Scenario s = Variant(all, "102-large-offset-linear",
                         absl::StrCat("wander=", wander));
    s.params.clock.wander_ppb_per_sqrt_s = wander;
    out.push_back(s);
  }
  // Kernel timestamps on a clock that wanders: as the allowance says, and
  // a tenth and a third of it (still far more than the delays' noise).
  for (const double wander : {0.1, 0.3, 1.0}) {
    Scenario s = Variant(all, "109-kernel-stamps-16hz",
                         absl::StrCat("wander=", wander));
    s.params.clock.wander_ppb_per_sqrt_s = wander;
    out.push_back(s);
  }
  return out;
}

std::vector<Scenario> RandomScenarios(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0, 1);
  auto chance = [&](double p) { return uniform(rng) < p; };
  auto log_uniform = [&](double low, double high) {
    return low * std::pow(high / low, uniform(rng));
  };
  // Congestion episodes come from a stream of their own: the rest of each
  // scenario is drawn as it was before they were added.
  std::mt19937_64 congestion_rng(seed ^ 0x9e37'79b9'7f4a'7c15ULL);
  auto congestion_uniform = [&] { return uniform(congestion_rng); };
  std::vector<Scenario> out;
  for (int i = 0; i < count; ++i) {
    Scenario s;
    SimulationParams& p = s.params;
    p.clock.frequency_ppm = (2 * uniform(rng) - 1) * 100;
    p.clock.wander_ppb_per_sqrt_s = chance(0.15) ? 0 : log_uniform(0.05, 3);
    if (chance(0.3)) {
      p.clock.sine_amplitude_ppb = log_uniform(100, 1500);
      p.clock.sine_period_s = log_uniform(600, 3600);
    }
    const double hz = log_uniform(0.5, 20);
    p.interval_ns = std::llround(1e9 / hz);
    const double min_ns = log_uniform(1 * kUs, 300 * kUs);
    const double jitter_ns = log_uniform(0.2 * kUs, 1000 * kUs);
    const bool pareto = chance(0.25);
    const double asymmetry = chance(0.3) ? log_uniform(0.1, 10) : 1;
    for (const bool forward : {true, false}) {
      DelayParams& d = forward ? p.forward : p.backward;
      const double root = std::sqrt(asymmetry);
      const double scale = jitter_ns * (forward ? root : 1 / root);
      d.min_ns = std::llround(min_ns);
      if (pareto) {
        d.pareto_alpha = 1.5;
        d.pareto_scale_ns = scale;
      } else {
        d.exp_mean_ns = scale;
      }
    }
    p.loss = chance(0.2) ? 0.3 * uniform(rng) : 0;
    p.duration_ns = std::llround(log_uniform(900, 3600)) * kS;
    // Congestion (25 %): episodes of 15-240 s every 3-20 minutes (each
    // start jittered by ±30 % of the period), adding a standing queue of
    // 0.5-30 jitter scales plus an exponential of 1-30 of them, forward
    // (50 %), back (20 %) or both ways.
    {
      // Every draw is made, congested or not, so that scenario i's
      // episodes do not depend on which earlier ones were congested.
      const double u_congested = congestion_uniform();
      const double period_s = 180 * std::pow(20.0 / 3, congestion_uniform());
      const double length_s = std::min(
          15 * std::pow(16.0, congestion_uniform()), 0.6 * period_s);
      const double standing_ns =
          jitter_ns * 0.5 * std::pow(60.0, congestion_uniform());
      const double variable_ns =
          jitter_ns * std::pow(30.0, congestion_uniform());
      const double u_direction = congestion_uniform();
      const double first = congestion_uniform();
      const uint64_t starts_seed = congestion_rng();
      if (u_congested < 0.25) {
        const bool forward = u_direction < 0.8;
        const bool backward = u_direction >= 0.5;
        std::mt19937_64 starts(starts_seed);
        for (double begin_s = period_s * (0.2 + 0.8 * first);
             begin_s < static_cast<double>(p.duration_ns / kS);
             begin_s += period_s * (0.7 + 0.6 * uniform(starts))) {
          CongestionEpisode e;
          e.begin_ns = std::llround(begin_s * 1e9);
          e.end_ns = std::llround((begin_s + length_s) * 1e9);
          const DelayParams extra =
              Exponential(std::llround(standing_ns), variable_ns);
          if (forward) e.forward_extra = extra;
          if (backward) e.backward_extra = extra;
          p.congestion.push_back(e);
        }
      }
    }
    // Apart from each other and from SeededScenario's strides (primes).
    p.seed = (seed << 32) + 104'729ULL * static_cast<uint64_t>(i);
    p.clock.seed = p.seed + 7;
    auto round = [](double v, double unit) {
      return std::round(v / unit) * unit;
    };
    s.name = absl::StrCat(
        "r", i, " w=", round(p.clock.wander_ppb_per_sqrt_s, 0.01),
        " sine=", std::llround(p.clock.sine_amplitude_ppb), "/",
        std::llround(p.clock.sine_period_s), " hz=", round(hz, 0.1),
        " jit=", round(jitter_ns / kUs, 0.1), "us", pareto ? "P" : "",
        " asym=", round(asymmetry, 0.1), " loss=", std::llround(p.loss * 100),
        "% ", p.duration_ns / kS, "s");
    if (!p.congestion.empty()) {
      // e.g. " cong=60s/3x+252us+exp(755us)fwd": length, episodes, extra.
      const CongestionEpisode& e = p.congestion.front();
      const bool forward = e.forward_extra.exp_mean_ns > 0;
      const bool backward = e.backward_extra.exp_mean_ns > 0;
      const DelayParams& d = forward ? e.forward_extra : e.backward_extra;
      absl::StrAppend(&s.name, " cong=", (e.end_ns - e.begin_ns) / kS, "s/",
                      p.congestion.size(), "x+", round(d.min_ns / kUs, 0.1),
                      "us+exp(", round(d.exp_mean_ns / kUs, 0.1), "us)",
                      forward && backward ? "both" : forward ? "fwd" : "back");
    }
    s.description = s.name;
    out.push_back(s);
  }
  return out;
}

std::vector<Scenario> KindScenarios() {
  std::vector<Scenario> out;
  uint64_t seed = 5000;
  auto add = [&](const std::string& name, const std::string& description,
                 double frequency_ppm, double hz, int64_t duration_s,
                 const DelayParams& forward, const DelayParams& backward) {
    Scenario s{name, description, {}};
    s.params.clock.frequency_ppm = frequency_ppm;
    s.params.clock.wander_ppb_per_sqrt_s = 1;
    s.params.clock.seed = seed++;
    s.params.seed = seed++;
    s.params.interval_ns = static_cast<int64_t>(std::llround(1e9 / hz));
    s.params.duration_ns = duration_s * kS;
    s.params.forward = forward;
    s.params.backward = backward;
    out.push_back(s);
    return &out.back();
  };
  // Exponential jitter of about a millisecond at 1 probe/s (110's kind).
  for (const double mean_ms : {0.5, 1.0, 2.0}) {
    for (const int64_t min_us : {50, 200}) {
      for (const int64_t minutes : {30, 60, 120}) {
        const DelayParams d = Exponential(min_us * kUs, mean_ms * kMs);
        add(absl::StrCat("jitter-1hz/", min_us, "us+exp(", mean_ms, "ms)/",
                         minutes, "min"),
            "1 ms-scale exponential jitter each way at 1 Hz", 100, 1,
            minutes * 60, d, d);
      }
    }
  }
  // Heavy-tailed delays at 10 probes/s (111's kind).
  for (const double alpha : {1.1, 1.5, 2.0}) {
    for (const double scale_us : {10, 50, 100}) {
      DelayParams d;
      d.min_ns = 50 * kUs;
      d.exp_mean_ns = 0;
      d.pareto_alpha = alpha;
      d.pareto_scale_ns = scale_us * kUs;
      add(absl::StrCat("pareto-10hz/alpha=", alpha, "/scale=", scale_us, "us"),
          "50 us + Pareto each way at 10 Hz, 30 min", -25, 10, 1800, d, d);
    }
  }
  // Jitter on one direction (112's kind), and on both unequally.
  for (const double forward_us : {20, 100, 300, 1000}) {
    for (const double backward_us : {2, 10}) {
      add(absl::StrCat("asym-20hz/fwd=exp(", forward_us, "us)/back=exp(",
                       backward_us, "us)"),
          "40 us + exponential jitter, unequal, at 20 Hz, 20 min", 12, 20,
          1200, Exponential(40 * kUs, forward_us * kUs),
          Exponential(40 * kUs, backward_us * kUs));
    }
  }
  for (const double forward_us : {100, 300, 1000}) {
    for (const double ratio : {0.25, 0.5}) {
      for (const double hz : {5.0, 20.0}) {
        add(absl::StrCat("asym2/fwd=exp(", forward_us, "us)/back=x", ratio,
                         "/", hz, "Hz"),
            "40 us + exponential jitter both ways, unequal, 20 min", 12, hz,
            1200, Exponential(40 * kUs, forward_us * kUs),
            Exponential(40 * kUs, ratio * forward_us * kUs));
      }
    }
  }
  // Thermal swings (114's kind) at 2 probes/s.
  for (const double amplitude_ppb : {200, 400, 800}) {
    for (const double period_s : {600, 900, 1800}) {
      for (const double jitter_us : {15, 50}) {
        const DelayParams d = Exponential(15 * kUs, jitter_us * kUs);
        Scenario* s = add(
            absl::StrCat("swing-2hz/", amplitude_ppb, "ppb/", period_s,
                         "s/jitter=", jitter_us, "us"),
            "a sine swing of the frequency, 15 us + exponential each way, "
            "2 Hz, 1 h",
            -8, 2, 3600, d, d);
        s->params.clock.sine_amplitude_ppb = amplitude_ppb;
        s->params.clock.sine_period_s = period_s;
      }
    }
  }
  // chrony's default model at 1 probe/s (101's kind).
  for (const double mean_us : {50, 100, 200}) {
    for (const int64_t minutes : {30, 60, 120}) {
      const DelayParams d = Exponential(100 * kUs, mean_us * kUs);
      add(absl::StrCat("chrony-1hz/100us+exp(", mean_us, "us)/", minutes,
                       "min"),
          "chrony's default model at 1 Hz", 100, 1, minutes * 60, d, d);
    }
  }
  // Congestion episodes (113's kind): on 113's network, a queue of 1.5, 3
  // or 15 jitter scales (a standing part plus an exponential as deep) for
  // 60 or 180 s of every 5 minutes, one way or both, at 1, 4 and 10
  // probes/s.
  for (const double hz : {1.0, 4.0, 10.0}) {
    for (const int64_t depth_us : {30, 60, 300}) {
      for (const int64_t episode_s : {60, 180}) {
        for (const bool both_ways : {false, true}) {
          const DelayParams d = Exponential(20 * kUs, 20 * kUs);
          Scenario* s = add(
              absl::StrCat("congestion-", hz, "hz/+", depth_us, "us+exp(",
                           depth_us, "us)/", episode_s, "s-of-300s/",
                           both_ways ? "both" : "fwd"),
              "20 us + exp(20 us) each way, 40 min; congestion episodes", 30,
              hz, 2400, d, d);
          for (int64_t begin_s = 150; begin_s < 2400; begin_s += 300) {
            CongestionEpisode e;
            e.begin_ns = begin_s * kS;
            e.end_ns = (begin_s + episode_s) * kS;
            e.forward_extra = Exponential(depth_us * kUs, depth_us * kUs);
            if (both_ways) e.backward_extra = e.forward_extra;
            s->params.congestion.push_back(e);
          }
        }
      }
    }
  }
  return out;
}

const Scenario* FindScenario(const std::vector<Scenario>& all,
                             const std::string& name) {
  for (const Scenario& s : all) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace clocksync::hull
