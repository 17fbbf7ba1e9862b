// hull/online_correction.h: the "online" correction, the daemon's published
// raw->global mapping as a process saw it change over time.
//
// The process records a MappingSegment (hull/correction.h) each time the
// mapping changes. A local reading maps to global time through the raw
// clock: raw = local (or raw_at_local(local) when the local clock is not
// raw), then the latest segment in force at that raw time (from_raw_ns <=
// raw), evaluated there; before the first segment, the first segment.
//
// Built by MakeCorrection(CorrectionKind::kOnline, ...). Thread safety: as
// the raw_at_local function given (none when it keeps state).

#ifndef CLOCKSYNC_HULL_ONLINE_CORRECTION_H_
#define CLOCKSYNC_HULL_ONLINE_CORRECTION_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "hull/correction.h"

namespace clocksync::hull {

class OnlineCorrection final : public Correction {
 public:
  // `segments` non-empty; they are sorted by from_raw_ns (stable).
  OnlineCorrection(std::vector<MappingSegment> segments,
                   std::function<int64_t(int64_t)> raw_at_local);

  int64_t ToGlobalNs(int64_t local_ns) const override;
  // The smallest 1 + rate_adj; with a raw_at_local function 0.1% less, as a
  // modeled local clock may run up to a few hundred ppm fast of raw.
  double MinRate() const override { return min_rate_; }

 private:
  std::vector<MappingSegment> segments_;  // from_raw_ns ascending, non-empty
  std::function<int64_t(int64_t)> raw_at_local_;  // empty: raw = local
  double min_rate_ = 1.0;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_ONLINE_CORRECTION_H_
