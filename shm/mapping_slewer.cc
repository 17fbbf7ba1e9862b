// shm/mapping_slewer.cc: MappingSlewer and NodeSlewTarget: see
// mapping_slewer.h.

#include "shm/mapping_slewer.h"

#include <algorithm>
#include <cmath>

namespace clocksync {

const char* ValidateSlewConfig(const SlewConfig& c) {
  if (!(c.max_slew_ppm > 0) || c.max_slew_ppm > 10'000) {
    return "max_slew_ppm: must be in (0, 10000]";
  }
  if (c.slew_time_ns <= 0) return "slew_time: must be positive";
  if (c.step_threshold_ns < 0) return "step_threshold: must be >= 0";
  return "";
}

clocksync_state ToShmState(hull::SyncState s) {
  switch (s) {
    case hull::SyncState::kUnsynced:
      return CLOCKSYNC_STATE_UNSYNCED;
    case hull::SyncState::kSynced:
      return CLOCKSYNC_STATE_SYNCED;
    case hull::SyncState::kRecovering:
      return CLOCKSYNC_STATE_RECOVERING;
  }
  return CLOCKSYNC_STATE_UNSYNCED;
}

SlewTarget NodeSlewTarget(const hull::Estimator& estimator, int64_t raw_ns,
                          int64_t local_now, int64_t local_in_1s,
                          int64_t local_in_10s, uint32_t depth) {
  SlewTarget t;
  t.raw_ns = raw_ns;
  t.depth = depth;
  const hull::TimeEstimate now = estimator.Estimate(local_now);
  if (now.state == hull::SyncState::kUnsynced) {
    t.state = CLOCKSYNC_STATE_UNSYNCED;
    return t;
  }
  const hull::TimeEstimate in_1s = estimator.Estimate(local_in_1s);
  const hull::TimeEstimate in_10s = estimator.Estimate(local_in_10s);
  auto half = [](const hull::TimeEstimate& e) {
    return std::max(e.latest_ns - e.global_ns, e.global_ns - e.earliest_ns);
  };
  t.global_ns = now.global_ns;
  t.rate_adj = static_cast<double>(in_1s.global_ns - now.global_ns) / 1e9 - 1;
  t.earliest_ns = now.earliest_ns;
  t.latest_ns = now.latest_ns;
  t.bound_growth_ppb =
      std::max<double>(0, static_cast<double>(half(in_10s) - half(now)) / 10.0) +
      std::fabs(static_cast<double>(in_10s.global_ns - now.global_ns) / 1e10 -
                1 - t.rate_adj) * 1e9;
  t.state = ToShmState(now.state);
  return t;
}

int64_t MappingSlewer::PublishedAt(int64_t raw_ns) const {
  const int64_t dt = raw_ns - last_.anchor_raw_ns;
  return last_.anchor_global_ns + dt +
         static_cast<int64_t>(std::llround(static_cast<long double>(dt) *
                                           last_.rate_adj));
}

Mapping MappingSlewer::Update(const SlewTarget& t) {
  Mapping m;
  m.anchor_raw_ns = t.raw_ns;
  m.depth = t.depth;
  m.state = t.state;
  if (t.state == CLOCKSYNC_STATE_UNSYNCED ||
      t.state == CLOCKSYNC_STATE_UNSPECIFIED) {
    if (have_mapping_) {
      // Lost synchronization entirely (the estimator was reset): keep the
      // old line running, with an unknown bound.
      m.anchor_global_ns = PublishedAt(t.raw_ns);
      m.rate_adj = last_.rate_adj;
    } else {
      m.anchor_global_ns = t.raw_ns;
    }
    m.bound_at_anchor_ns = ShmPublisher::kUnknownBoundNs;
    last_ = m;
    return m;
  }
  const bool step =
      !have_mapping_ ||
      (t.jump_detected &&
       std::llabs(t.global_ns - PublishedAt(t.raw_ns)) > config_.step_threshold_ns);
  double correction = 0;
  if (step) {
    m.anchor_global_ns = t.global_ns;
    m.stepped = true;
    last_delta_ns_ = 0;
    ++steps_;
  } else {
    m.anchor_global_ns = PublishedAt(t.raw_ns);
    last_delta_ns_ = t.global_ns - m.anchor_global_ns;
    const double limit = config_.max_slew_ppm * 1e-6;
    correction = std::clamp(static_cast<double>(last_delta_ns_) /
                                static_cast<double>(config_.slew_time_ns),
                            -limit, limit);
  }
  m.rate_adj = std::clamp(t.rate_adj + correction, -ShmPublisher::kMaxRateAdj,
                          ShmPublisher::kMaxRateAdj);
  // The truth is in [earliest, latest]; the published value sits at
  // anchor_global: cover the farther end, rounded up.
  const int64_t half = std::max(t.latest_ns - m.anchor_global_ns,
                                m.anchor_global_ns - t.earliest_ns);
  m.bound_at_anchor_ns = std::clamp<int64_t>(half + 1, 0, ShmPublisher::kUnknownBoundNs);
  // Away from the anchor the published line and the estimate part at
  // |rate_adj − target rate|, and the estimate's own bound widens.
  m.bound_growth_ppb = std::min(
      ShmPublisher::kMaxBoundGrowthPpb,
      t.bound_growth_ppb + std::fabs(m.rate_adj - t.rate_adj) * 1e9 + 0.01);
  have_mapping_ = true;
  last_ = m;
  return m;
}

}  // namespace clocksync
