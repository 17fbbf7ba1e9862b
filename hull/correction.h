// hull/correction.h: a correction (a mapping from a local clock to global
// time), its kinds, their inputs, and the one factory that builds them.
//
// Kinds, each one small implementation of the Correction interface:
//   none       global = local (IdentityCorrection, below);
//   online     the daemon's published mapping as a process saw it change,
//              a list of MappingSegments (hull/online_correction.h);
//   linear, spline, piecewise
//              the classic post-mortem fits to sync sessions: bursts of
//              probe exchanges with the master (hull/postmortem.h).
// MakeCorrection builds any of them from a CorrectionInput and applies the
// shared rules once (inputs present, options valid), as linuxptp's
// servo_create does for its servos. Pure math: no clock is read and no
// file is touched.
//
// Example:
//   CorrectionInput input;
//   input.sessions = sessions;
//   absl::StatusOr<std::unique_ptr<Correction>> spline =
//       MakeCorrection(CorrectionKind::kSpline, input, &report);
//   if (!spline.ok()) return spline.status();
//   int64_t global_ns = (*spline)->ToGlobalNs(local_ns);

#ifndef CLOCKSYNC_HULL_CORRECTION_H_
#define CLOCKSYNC_HULL_CORRECTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "hull/probe_sample.h"

namespace clocksync::hull {

// A mapping from local clock readings to global time.
// Implementations are immutable after construction and safe to share
// between threads, except an online correction through a local-to-raw
// function that is not (see MappingSegment).
class Correction {
 public:
  virtual ~Correction() = default;

  // Global time for a local clock reading, rounded to the nearest ns.
  // Non-decreasing in `local_ns`: a correction never reorders events.
  virtual int64_t ToGlobalNs(int64_t local_ns) const = 0;

  // Converts a batch: global_ns[i] = ToGlobalNs(local_ns[i]), bit for bit.
  // Fast when `local_ns` is sorted ascending (any order is accepted).
  // Requires global_ns.size() == local_ns.size().
  virtual void ToGlobalSorted(absl::Span<const int64_t> local_ns,
                              absl::Span<int64_t> global_ns) const;

  // The smallest d(global)/d(local) over all local times. Positive for every
  // correction built by MakeCorrection.
  virtual double MinRate() const = 0;
};

enum class CorrectionKind { kNone, kOnline, kLinear, kSpline, kPiecewise };

// "none", "online", "linear", "spline", "piecewise".
absl::string_view CorrectionKindName(CorrectionKind kind);
// The kind of that name; InvalidArgument naming the expected names.
absl::StatusOr<CorrectionKind> ParseCorrectionKind(absl::string_view name);
// Every kind, in the order above.
std::vector<CorrectionKind> AllCorrectionKinds();
// linear, spline and piecewise: the fits to sync sessions.
bool IsPostmortem(CorrectionKind kind);

// global = local.
class IdentityCorrection final : public Correction {
 public:
  int64_t ToGlobalNs(int64_t local_ns) const override { return local_ns; }
  double MinRate() const override { return 1.0; }
};

// --- inputs ------------------------------------------------------------------

// One sync session: a burst of exchanges with the master taken close
// together. Each exchange counts as the point ((t1 + t4) / 2, m) with the
// master's mean stamp m = MasterMidpointNs (hull/probe_sample.h).
struct SyncSession {
  int64_t id = 0;  // numbers the sessions in time order (as in the trace)
  std::vector<ProbeSample> exchanges;
};

struct PostmortemOptions {
  // Fraction of exchanges with the largest round trip t4 - t1 that is
  // dropped before fitting (per session for spline and piecewise, over all
  // exchanges for linear). floor(n * slow_fraction) of n exchanges are
  // dropped. In [0, 1).
  double slow_fraction = 0.1;
};

// One segment of the daemon's published raw->global mapping, in force from
// raw time from_raw_ns until the next segment's (the shared-memory mapping,
// shm/shm_layout.h, as a process saw it change). Evaluated at raw time r:
//   dt = r - anchor_raw_ns
//   global = anchor_global_ns + dt + dt * rate_adj
struct MappingSegment {
  int64_t from_raw_ns = 0;  // raw (CLOCK_MONOTONIC_RAW) ns it took effect
  int64_t anchor_raw_ns = 0;
  int64_t anchor_global_ns = 0;
  double rate_adj = 0.0;  // (global ns per raw ns) - 1; + = local slow

  // Global ns at raw time `raw_ns`, rounded to nearest (saturating).
  int64_t GlobalAtRaw(int64_t raw_ns) const;
};

// What MakeCorrection builds from. Each kind reads only its part.
struct CorrectionInput {
  // linear, spline, piecewise: the sync sessions, in time order.
  absl::Span<const SyncSession> sessions;
  PostmortemOptions postmortem;
  // online: the mapping segments, in the order seen (any order of
  // from_raw_ns is accepted; equal ones keep their order). Non-empty.
  absl::Span<const MappingSegment> segments;
  // online: the raw time of a local reading when the local clock is not
  // the raw clock itself (a modeled clock in tests); empty: raw = local.
  // Called from ToGlobalNs: the correction is then as thread-safe as it.
  std::function<int64_t(int64_t local_ns)> raw_at_local;
};

// Builds the correction of `kind` from `input`. Fails (InvalidArgument)
// on invalid options, (FailedPrecondition) when the input lacks what the
// kind needs: no segment for online, no session with a usable exchange for
// the post-mortem ones. *report (if not null) gets a one-line description
// of the input and of the degenerate cases met (for the post-mortem kinds,
// CorrectionReport::ToString of hull/postmortem.h).
absl::StatusOr<std::unique_ptr<Correction>> MakeCorrection(
    CorrectionKind kind, const CorrectionInput& input,
    std::string* report = nullptr);

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_CORRECTION_H_
