// hull/postmortem.h: the classic post-mortem clock corrections.
//
// A trace records, besides its events, sync sessions: bursts of ping-pong
// exchanges between a process and the master. Afterwards the sessions are
// turned into a mapping from the process's local clock to the master's
// (global) clock, in one of three classic ways:
//
//   linear     least-squares line through all exchanges (as the Intel Trace
//              Collector does with a session at start and one at end);
//   spline     monotone C1 cubic spline through one point per session (as
//              with VampirTrace's VT_timesync sessions), the point being
//              the smoothed middle of the master times the session's
//              exchanges allow (see FitPostmortemCorrection);
//   piecewise  straight lines between the condensed points (what OTF2
//              readers do with ClockOffset records).
//
// All three are PostmortemCorrection objects behind the small Correction
// interface (hull/correction.h), so that they can be compared on the same
// trace with the online estimate; MakeCorrection there builds them through
// FitPostmortemCorrection below. Each exchange (hull/probe_sample.h) counts
// as the local midpoint (s + r) / 2 with s = t1, r = t4 and the master's
// mean stamp m = (t2 + t3) / 2 (MasterMidpointNs). Pure math: no clock is
// read and no file is touched.
//
// Example (when the report or the knots are wanted; else MakeCorrection):
//   absl::StatusOr<std::unique_ptr<PostmortemCorrection>> spline =
//       FitPostmortemCorrection(CorrectionKind::kSpline, sessions);
//   if (!spline.ok()) return spline.status();
//   int64_t global_ns = (*spline)->ToGlobalNs(local_ns);
//   std::cerr << (*spline)->report().ToString();

#ifndef CLOCKSYNC_HULL_POSTMORTEM_H_
#define CLOCKSYNC_HULL_POSTMORTEM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "hull/correction.h"

namespace clocksync::hull {

// The slowest rate d(global)/d(local) that two condensed points may imply
// and still be used. Real clocks differ in rate by parts per million; a
// master clock that advances less than half as fast as the local one
// between two sessions (or goes backwards) means broken data, and such a
// point is dropped (CorrectionReport::inconsistent_sessions). The margin is
// what keeps ToGlobalNs non-decreasing in floating point: every mapping
// then rises by at least kMinRate / 8 ns per local ns, far above the
// rounding error of its evaluation (see postmortem.cc, "Monotonicity").
inline constexpr double kMinRate = 0.5;

// A time in ns kept exactly enough for averages: whole_ns + frac_ns, with
// 0 <= frac_ns < 1.
struct SplitNs {
  int64_t whole_ns = 0;
  double frac_ns = 0.0;
};

// a - b in ns, as a double (exact to the double's precision of the result).
double DifferenceNs(const SplitNs& a, const SplitNs& b);

// One session condensed to a point: the mean of (s + r) / 2 and the mean of
// m over the exchanges kept. These are the knots of spline and piecewise.
struct CondensedPoint {
  SplitNs local;
  SplitNs global;
  int64_t exchanges = 0;   // exchanges averaged into the point
  int64_t session_id = 0;  // the (first) session it came from
};

// What went into a correction, and every degenerate case met on the way.
struct CorrectionReport {
  CorrectionKind method = CorrectionKind::kLinear;  // a post-mortem kind
  int64_t sessions = 0;                 // sessions given
  std::vector<int64_t> empty_sessions;  // ids: no usable exchange, skipped
  int64_t exchanges = 0;                // exchanges given
  int64_t invalid_exchanges = 0;  // t4 < t1: negative round trip, unusable
  int64_t slow_exchanges_dropped = 0;   // the slowest fraction, dropped
  int64_t exchanges_used = 0;           // exchanges that went into the fit
  int64_t knots = 0;                    // points the mapping passes through
  // Sessions whose condensed local time is below an earlier session's: the
  // numbering disagrees with the local clock. Points are sorted by local time.
  std::vector<int64_t> out_of_order_sessions;
  // Condensed points with a local time equal to another's: merged into one
  // (the exchange-weighted mean of their master times).
  int64_t merged_points = 0;
  // Sessions whose condensed point was dropped because keeping it would make
  // global time run backwards or slower than kMinRate between neighbouring
  // points (a longest consistent chain of points is kept).
  std::vector<int64_t> inconsistent_sessions;
  // Spline only: sessions whose exchanges admit no common master time at
  // the session's local time (see FitPostmortemCorrection), kept at their
  // mean point.
  std::vector<int64_t> empty_interval_sessions;
  // Fewer than two usable distinct local times (e.g. one session), or a
  // rejected linear slope: the mapping is local + constant offset.
  bool offset_only = false;
  // Linear only: the fitted slope was at most kMinRate (global time would
  // run backwards or at less than half speed); fell back to offset only.
  bool slope_rejected = false;
  double min_rate = 1.0;  // smallest d(global)/d(local) of the mapping
  double max_rate = 1.0;  // largest d(global)/d(local) of the mapping

  // True when none of the degenerate cases above occurred.
  bool clean() const;
  // One line for people, e.g.
  // "spline: 61 sessions, 1220 exchanges (0 invalid, 122 slow dropped), ...".
  std::string ToString() const;
};

// Condenses every session to a point (dropping invalid and slow exchanges),
// in the order given. Sessions without a usable exchange are skipped and
// listed in report->empty_sessions; the exchange counts are added to
// `report`, which must not be null.
std::vector<CondensedPoint> CondenseSessions(
    absl::Span<const SyncSession> sessions, const PostmortemOptions& options,
    CorrectionReport* report);

// A post-mortem correction: a piecewise cubic polynomial in local time,
// linear beyond its first and last knot. The three methods differ only in
// how the pieces are fitted (see MakeCorrection).
class PostmortemCorrection final : public Correction {
 public:
  // One polynomial piece. For a local time x in the piece's range,
  //   global = y + c1·u + c2·u² + c3·u³,  u = x - x_anchor (in ns),
  // evaluated relative to the anchor so that doubles keep sub-ns precision.
  struct Piece {
    SplitNs x_anchor;
    SplitNs y_anchor;
    double c1 = 1.0;  // ns/ns
    double c2 = 0.0;  // ns/ns²
    double c3 = 0.0;  // ns/ns³

    double ValueAt(double u_ns) const;  // global - y_anchor.whole_ns, in ns
    double SlopeAt(double u_ns) const;  // d(global)/d(local)
  };

  // `pieces` are in local-time order; piece 0 covers local times below
  // starts_ns[0], piece i covers [starts_ns[i-1], starts_ns[i]), the last
  // one everything from starts_ns.back() on. Requires
  // pieces.size() == starts_ns.size() + 1, starts_ns non-decreasing.
  // Normally built by MakeCorrection.
  PostmortemCorrection(std::vector<Piece> pieces,
                       std::vector<int64_t> starts_ns,
                       std::vector<CondensedPoint> knots,
                       CorrectionReport report);

  int64_t ToGlobalNs(int64_t local_ns) const override;
  void ToGlobalSorted(absl::Span<const int64_t> local_ns,
                      absl::Span<int64_t> global_ns) const override;
  double MinRate() const override { return report_.min_rate; }

  const CorrectionReport& report() const { return report_; }
  // The points the mapping passes through (for linear: the centroid).
  const std::vector<CondensedPoint>& knots() const { return knots_; }
  const std::vector<Piece>& pieces() const { return pieces_; }
  const std::vector<int64_t>& starts_ns() const { return starts_ns_; }

 private:
  size_t FindPiece(int64_t local_ns) const;

  std::vector<Piece> pieces_;
  std::vector<int64_t> starts_ns_;
  std::vector<CondensedPoint> knots_;
  CorrectionReport report_;
};

// Fits the post-mortem correction of `kind` to a process's sync sessions
// (in time order); what MakeCorrection calls for these kinds:
//   kLinear: every exchange is the point ((s + r) / 2, m); the slowest
//     `slow_fraction` of all exchanges is dropped; least squares fit
//     global = a·local + b over the rest.
//   kSpline: each session is condensed (CondenseSessions) to its mean
//     local time; its master time there is the middle of the interval that
//     all its exchanges allow (non-negative delays; each exchange's bounds
//     carried to the mean local time at the rate between the neighbouring
//     sessions), then smoothed across sessions by a cubic smoothing spline
//     with GCV-chosen smoothing (hull/smoothing_spline.h) and clamped back
//     into the interval. A monotone C1 cubic Hermite spline (Fritsch–
//     Carlson, with Brodlie's weighted harmonic-mean tangents) passes
//     through these points; beyond the first and last point it continues
//     as a line with the end slope.
//   kPiecewise: straight lines between the condensed points, the
//     end segments' slopes beyond.
// Degenerate input gets a defined mapping and a report saying so (see
// CorrectionReport). Fails (FailedPrecondition) only when no session has a
// usable exchange, (InvalidArgument) on a kind that is not post-mortem or
// options.slow_fraction outside [0, 1).
absl::StatusOr<std::unique_ptr<PostmortemCorrection>> FitPostmortemCorrection(
    CorrectionKind kind, absl::Span<const SyncSession> sessions,
    const PostmortemOptions& options = {});

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_POSTMORTEM_H_
