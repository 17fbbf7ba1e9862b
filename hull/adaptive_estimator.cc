// hull/adaptive_estimator.cc: AdaptiveWindowEstimator (see
// adaptive_estimator.h for the method, estimator.h for the conventions).

#include "hull/adaptive_estimator.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace clocksync::hull {
namespace {

// Checkpoints overlap by half (every D/2, each reference D long): the
// effective number of independent scores is about half their count.
constexpr double kCheckpointOverlap = 2.0;
// The errors of two windows stay correlated over about the shorter one's
// length: a pair's checkpoints (every D/2) count as one independent score
// per shorter window / (this many D), at least (for pairs of long windows,
// whose paired differences move slowly: one per quarter window).
constexpr double kCorrelationFactor = 2.0;
// Against the home, the paired differences stay correlated over the longer
// window of the pair: leaving the home counts one independent score per
// longer window / (this many D) checkpoints (one per tenth of it).
constexpr double kHomeCorrelationFactor = 5.0;
// A level whose hull range is wider than this times the next longer
// level's has lost its low-delay samples (see the header).
constexpr double kEligibleRangeRatio = 4.0;
// After its range blew up, a level may answer again only when this
// fraction of its window has passed.
constexpr double kBlownWindowFraction = 0.25;
constexpr double kCleanWindowFraction = 1.0;
// A queue of Δ one way widens a level's range at x by Δ and moves its
// middle by Δ / 2 once every low-delay sample that way is congested;
// while its window still holds clean ones the range fans out at x about a
// middle that moves less. The home stays through an episode while this
// fraction of its range's growth, squared, is below the stand-in's excess
// error (random seeds 1-5: 117 → 118 of 200 hold; at 0.5, 117), rising to
// kFullCongestionShiftFraction as its window goes from kCongestedFraction
// to wholly congested (the round trips' reading); then the shift is also
// at least that fraction of the floor's rise, the queue's depth (header,
// step 4; not on a swing).
constexpr double kCongestionShiftFraction = 0.25;
constexpr double kFullCongestionShiftFraction = 0.5;
// A level whose samples span less than this fraction of what its window
// could hold by now (its window, or the time since the windows began
// filling) has a hole (an outage): it may not answer.
constexpr double kEligibleSpanFraction = 0.5;
// Purity: a reference wider than median + this × (median − minimum) of the
// recent ones is left out. Needs this many widths before it judges.
constexpr double kPurityFactor = 3.0;
constexpr int kPurityMinWidths = 8;
// Extrapolated candidates (see the header, step 3): a line fitted over W
// to a clock whose frequency bends at c ppb/s lags the newest offset by
// about c W² / 12, four times as much over 2W, so the shorter level's
// estimate moved a third of the way away from the longer one's,
// (4 θ_W − θ_2W) / 3, has no such lag; it has about 1.3 times the
// shorter level's noise, and answers only when it has predicted better
// than the incumbent and the home by more standard errors than the others
// (kExtrapolationConfidenceZ, adaptive_estimator_scores.cc).
constexpr double kExtrapolationWeight = -1.0 / 3;
// The long reference runs this many times D: its minima come from this many
// times more samples, so it is that much less noisy where the jitter is
// large against the rate (1 probe/s), and it is late by as much, which
// only the long windows, that change slowly, can afford.
constexpr int64_t kLongReferenceFactor = 2;
// The references' asymmetry (reference_asymmetry.h) is learnt from this
// many D after the start or a step on: the first references are projected
// with the slopes of windows that hold a few seconds.
constexpr int64_t kAsymmetryStartReferences = 4;
// Two candidates are compared on the long reference when the shorter
// window either leans on is at least this many long references.
constexpr int64_t kLongPairWindows = 2;

// The longest level's fit against the short references counts checkpoints
// whose span is at least this fraction of the shortest window
// (EarlyWanderNegligible, adaptive_estimator_home.cc).
constexpr double kEarlyMinSpanFraction = 0.75;
// While the samples' check runs and sees no wander, a home at least this
// many half-steps below the longest window (half of it or less) leans
// towards the longest level by the check's probability of a linear
// clock, at these prior odds of a wander against none (header, step 5).
constexpr double kLeanMinHomePosition = 2;
constexpr double kWanderPriorOdds = 3;

// A level whose window is more than this fraction congested (as the round
// trips show it) may not answer, whatever its range says; a candidate
// other than the home that leans on a shorter window than the home's, more
// than kShorterCongestedFraction (header, step 4).
constexpr double kCongestedFraction = 0.75;
constexpr double kShorterCongestedFraction = 0.5;

// A shorter level agrees with the longest (a new normal needs it; header,
// step 4) only while its answer lies within this fraction of its own
// bound's width of the longest level's answer (plus the longest level's
// wander allowance, by which a swing may have left it behind). A longer
// route both ways widens a level's bound on both sides and leaves its
// middle; a queue one way, d deep, widens it on one side and moves the
// middle by d / 2: caught from d > a third of the bound's width before.
constexpr double kAgreeShiftFraction = 0.125;

// The guard of the answer's bound (header, step 6): a level's middle
// further than this fraction of the bound's half-width from the bound's
// middle, and at least this many samples in its window (fewer, at 1
// probe/s or less, and its middle's own noise strays that far: the bound
// took in a wide one for nothing; 110's network with a 1 ppm swing was
// better guarded by the 75 s level than the 37.5 s one).
constexpr double kGuardOffMiddleFraction = 0.25;
constexpr size_t kGuardMinSamples = 48;

}  // namespace

AdaptiveWindowEstimator::AdaptiveWindowEstimator(const AdaptiveConfig& config)
    : config_(config),
      round_trips_(config.base.window_ns,
                   (config.base.window_ns >> (config.levels - 1)) / 2),
      reference_wander_(2 * config.base.window_ns,
                        config.base.wander_ppb_per_sqrt_s),
      reference_asymmetry_(config.score_time_constant_ns),
      linearity_(config.base.window_ns, config.base.wander_ppb_per_sqrt_s) {
  for (int k = 0; k < config.levels; ++k) {
    EstimatorConfig c = config.base;
    c.window_ns = config.base.window_ns >> k;
    levels_.push_back(std::make_unique<TwoHullEstimator>(c));
  }
  blends_ = 2 * config.levels - 1;
  candidates_ = blends_ + config.levels - 1;
  home_wander_ppb_ = config.base.wander_ppb_per_sqrt_s;
  bound_cache_.assign(static_cast<size_t>(2 * candidates_ * candidates_), 0);
  bound_valid_.assign(bound_cache_.size(), 0);
  ranges_.resize(levels_.size());
  const size_t pairs = static_cast<size_t>(candidates_ * candidates_);
  overlap_.assign(pairs, 0);
  home_overlap_.assign(pairs, 0);
  scores_.assign(pairs, PairedScore());
  reference_ns_ = std::max<int64_t>(1, levels_.back()->config().window_ns / 2);
  early_wander_ns_ = static_cast<int64_t>(
      (DriftWander::kFullWindowFraction + DriftWander::kMinDifferences) *
      static_cast<double>(levels_.back()->config().window_ns));
  long_reference_ns_ = kLongReferenceFactor * reference_ns_;
  for (int a = 0; a < candidates_; ++a) {
    for (int b = 0; b < candidates_; ++b) {
      const int64_t shorter = std::min(
          levels_[ShorterLevel(a)]->config().window_ns,
          levels_[ShorterLevel(b)]->config().window_ns);
      kind_[a][b] = shorter >= kLongPairWindows * long_reference_ns_ ? 1 : 0;
      overlap_[Pair(a, b)] = std::max(
          kCheckpointOverlap * (kind_[a][b] == 1 ? kLongReferenceFactor : 1),
          static_cast<double>(shorter) /
              (kCorrelationFactor * static_cast<double>(reference_ns_)));
      const int64_t longer =
          std::max(levels_[LongerLevel(a)]->config().window_ns,
                   levels_[LongerLevel(b)]->config().window_ns);
      home_overlap_[Pair(a, b)] = std::max(
          overlap_[Pair(a, b)],
          static_cast<double>(longer) /
              (kHomeCorrelationFactor * static_cast<double>(reference_ns_)));
    }
  }
}

double AdaptiveWindowEstimator::LongerWeight(int c) const {
  return c >= blends_ ? kExtrapolationWeight : (c % 2 == 0 ? 0.0 : 0.5);
}

bool AdaptiveWindowEstimator::HomeOutlastsCongestion(
    int home, int stand_in, const std::array<double, kMaxLevels>& hull_range,
    const std::array<double, kMaxLevels>& congested) const {
  double shift = 0;  // How far congestion may have moved the home (ns).
  for (const int k : {LongerLevel(home), ShorterLevel(home)}) {
    const double full =
        Swinging() ? 0.0
                   : std::clamp((congested[k] - kCongestedFraction) /
                                    (1 - kCongestedFraction),
                                0.0, 1.0);
    const double fraction =
        kCongestionShiftFraction +
        full * (kFullCongestionShiftFraction - kCongestionShiftFraction);
    shift = std::max(shift, fraction * (hull_range[k] - median_range_[k]));
    // A window wholly congested rests on the queue's draws alone: its
    // middle moves by up to half the floor's rise (a shallow queue hardly
    // widens a range whose minimum delays dominate it).
    shift = std::max(shift, full * kFullCongestionShiftFraction *
                                round_trips_.FloorRiseNs());
  }
  // The scores stop while the episode lasts (step 2): they are those of
  // before it, where the stand-in did worse by this in mean square.
  return PairedMean(stand_in, home) > shift * shift;
}

bool AdaptiveWindowEstimator::IsPure(double width_ns, int kind) {
  RecentValues<31>& widths = widths_[kind];
  widths.Add(width_ns);
  if (widths.count() < kPurityMinWidths) return true;
  const double minimum = widths.min();
  const double median = widths.median();
  return width_ns <= median + kPurityFactor * (median - minimum);
}

void AdaptiveWindowEstimator::ScoreCheckpoint(const Checkpoint& c, int kind) {
  if (!c.has_upper[kind] || !c.has_lower[kind]) return;
  // A congestion episode near the checkpoint (a level's range blew up
  // from D before it until now) biases its reference.
  const bool congested =
      have_last_blown_ && last_blown_x_ >= c.x - reference_ns_;
  if (!IsPure(c.upper[kind] - c.lower[kind], kind) || congested) {
    if (kind == 0) ++checkpoints_impure_;
    return;
  }
  if (kind == 0) ++checkpoints_scored_;
  // Less what unequal jitter both ways does to the middle, learnt once the
  // first references' slopes have settled (reference_asymmetry.h).
  const double reference = reference_asymmetry_.Reference(
      kind, c.x, c.upper[kind], c.lower[kind], last_estimate_.drift_ppb * 1e-9,
      c.x - start_x_ >= kAsymmetryStartReferences * reference_ns_);
  // The references measure the wander from the first one on (computed
  // when scored, with the answer's slope then, the early ones are as good
  // as the later), but not one whose samples, or the answer before it, a
  // congestion episode delayed (its offset is biased: it reads as wander).
  if (kind == 0 &&
      !(round_trips_.congested_intervals() > 0 &&
        round_trips_.CongestedNs(c.x - reference_ns_, c.due_x) > 0)) {
    reference_wander_.Add(c.x, reference);
  }
  // The longest level's fit against the short reference, while the clock
  // has not shown its wander yet (see EarlyWanderNegligible).
  if (kind == 0 && c.x - first_x_ <= early_wander_ns_ &&
      static_cast<double>(c.longest_span_ns) >=
          kEarlyMinSpanFraction *
              static_cast<double>(levels_.back()->config().window_ns)) {
    const double e = c.predicted[0] - reference;
    const double span_s = static_cast<double>(c.longest_span_ns) * 1e-9;
    fit_error_sum_ += e * e;
    fit_span3_sum_ += span_s * span_s * span_s;
    ++fit_error_count_;
  }
  const double decay =
      scored_[kind]++ == 0
          ? 0.0
          : std::exp(-static_cast<double>(
                         std::max<int64_t>(0, c.x - last_score_x_[kind])) /
                     static_cast<double>(config_.score_time_constant_ns));
  last_score_x_[kind] = c.x;
  std::fill(bound_valid_.begin(), bound_valid_.end(), 0);
  weight_sum_[kind] = weight_sum_[kind] * decay + 1;
  weight_sum2_[kind] = weight_sum2_[kind] * decay * decay + 1;
  const size_t n = static_cast<size_t>(candidates_);
  for (size_t a = 0; a < n; ++a) {
    const double ea = c.predicted[a] - reference;
    for (size_t b = 0; b < n; ++b) {
      if (a == b || kind_[a][b] != kind) continue;
      const double eb = c.predicted[b] - reference;
      const double d = ea * ea - eb * eb;
      PairedScore& p = scores_[Pair(static_cast<int>(a), static_cast<int>(b))];
      p.sum_d = p.sum_d * decay + d;
      p.sum_d2 = p.sum_d2 * decay + d * d;
      p.sum_gap2 = p.sum_gap2 * decay + (ea - eb) * (ea - eb);
    }
  }
}

void AdaptiveWindowEstimator::UpdateCheckpoints(const ProbeSample& s,
                                                int64_t request_y,
                                                int64_t response_y) {
  for (Checkpoint& c : pending_) {
    // The short reference takes samples until it is scored, the long one
    // until the checkpoint leaves.
    if (!c.short_scored) {
      if (s.t1_ns >= c.x) {
        c.requests.Add(static_cast<double>(s.t1_ns - c.x),
                       static_cast<double>(request_y));
      }
      if (s.t4_ns > c.x) {
        c.responses.Add(static_cast<double>(s.t4_ns - c.x),
                        static_cast<double>(response_y));
      }
    }
    if (s.t1_ns >= c.x) {
      const double y = static_cast<double>(request_y) -
                       c.slope * static_cast<double>(s.t1_ns - c.x);
      c.upper[1] = c.has_upper[1] ? std::min(c.upper[1], y) : y;
      c.has_upper[1] = true;
    }
    if (s.t4_ns > c.x) {
      const double y = static_cast<double>(response_y) -
                       c.slope * static_cast<double>(s.t4_ns - c.x);
      c.lower[1] = c.has_lower[1] ? std::max(c.lower[1], y) : y;
      c.has_lower[1] = true;
    }
    if (!c.short_scored && s.t4_ns >= c.due_x) {
      // Projected with the answer's slope now, not at x: on a bend the
      // answer's slope lags (by c W / 2 for a window W), and a slope from
      // before the reference's seconds biases it the way the bend goes,
      // which favours whatever lags less (the slope now is centred on x
      // for the shortest window).
      if (!c.requests.empty() && !c.responses.empty()) {
        const double slope = last_estimate_.drift_ppb * 1e-9;
        c.upper[0] = c.requests.Extreme(slope);
        c.lower[0] = c.responses.Extreme(slope);
        c.has_upper[0] = c.has_lower[0] = true;
      }
      c.requests.Clear();
      c.responses.Clear();
      ScoreCheckpoint(c, 0);
      c.short_scored = true;
    }
  }
  while (!pending_.empty() && s.t4_ns >= pending_.front().long_due_x) {
    ScoreCheckpoint(pending_.front(), 1);
    pending_.pop_front();
  }
}

void AdaptiveWindowEstimator::Select(
    const std::array<TimeEstimate, kMaxLevels>& now,
    const std::array<double, kMaxLevels>& allowance, int64_t x) {
  // Young levels: unsynced, or whose samples span less than half of what
  // their window could hold by now (after an outage the short windows
  // restart from a few samples; a long level cut alone by a bend restarts
  // from the newest ones). Their slope is poor and their range wide: they
  // may not answer, and their range is not judged (below).
  std::array<bool, kMaxLevels> young{};
  for (size_t k = 0; k < levels_.size(); ++k) {
    const double fillable_ns = static_cast<double>(
        std::min(levels_[k]->config().window_ns, x - start_x_));
    young[k] = now[k].state == SyncState::kUnsynced ||
               static_cast<double>(levels_[k]->window_span_ns()) <
                   kEligibleSpanFraction * fillable_ns ||
               (have_lone_cut_[k] &&
                x - lone_cut_x_[k] < levels_[k]->config().window_ns);
  }
  // A new normal needs the shorter levels inside the longest level's
  // bound and near its answer (the header, step 4).
  levels_agree_ = true;
  for (size_t k = 1; k < levels_.size(); ++k) {
    if (young[k] || now[0].state == SyncState::kUnsynced) continue;
    const double shift_ns =
        std::abs(static_cast<double>(now[k].global_ns - now[0].global_ns));
    const double range_ns =
        static_cast<double>(now[k].latest_ns - now[k].earliest_ns);
    levels_agree_ =
        levels_agree_ && now[k].global_ns >= now[0].earliest_ns &&
        now[k].global_ns <= now[0].latest_ns &&
        shift_ns <= kAgreeShiftFraction * range_ns + allowance[0];
  }
  // Eligible levels: not young, and their hull range not blown up against
  // their own recent median (no low-delay sample left in a short window).
  // A congested level makes every shorter one ineligible too.
  std::array<bool, kMaxLevels> eligible{};
  // A level whose range blew up holds congested samples until about half
  // its window has passed since: it may not answer before (its range at x
  // shrinks as soon as a few clean samples arrive, its slope does not).
  // The next longer level holds most of the same congested samples: it
  // counts as blown with the shorter one.
  std::array<bool, kMaxLevels + 1> blown_now{};
  // Each synced level's hull range at x, without the wander allowance.
  std::array<double, kMaxLevels> hull_range{};
  for (size_t k = 0; k < levels_.size(); ++k) {
    const TimeEstimate& e = now[k];
    if (e.state == SyncState::kUnsynced) continue;
    hull_range[k] =
        static_cast<double>(e.latest_ns - e.earliest_ns) - 2 * allowance[k];
  }
  for (size_t k = 1; k < levels_.size(); ++k) {
    if (young[k] || ranges_count() < kPurityMinWidths) continue;
    const double range = hull_range[k];
    // Only a level that has had a whole window since the windows began
    // filling (or were cut) can lose its low-delay samples to congestion.
    blown_now[k] = range > kEligibleRangeRatio * median_range_[k] &&
                   x - start_x_ >= levels_[k]->config().window_ns;
  }
  for (size_t k = 0; k < levels_.size(); ++k) {
    const TimeEstimate& e = now[k];
    if (e.state == SyncState::kUnsynced) continue;
    // A blown range would raise the median it is judged against, and a
    // young one is wide for want of samples: the median's own value is
    // recorded instead.
    current_range_[k] =
        blown_now[k] || young[k] ? median_range_[k] : hull_range[k];
  }
  for (size_t k = 1; k < levels_.size(); ++k) {
    blown_now[k] = blown_now[k] || (k + 2 == levels_.size() &&
                                    blown_now[k + 1]);
    if (blown_now[k]) {
      if (!have_blown_[k] || x - blown_x_[k] > reference_ns_) {
        blown_since_x_[k] = x;
      }
      blown_x_[k] = x;
      have_blown_[k] = true;
      last_blown_x_ = x;
      have_last_blown_ = true;
    }
  }
  // A level blown up for half the longest window without a break, while
  // the shorter levels agree with the longest: the delays changed for
  // good (a longer route), and its blown range (never added to the
  // median) is the new normal. The ranges are judged afresh.
  for (size_t k = 1; k < levels_.size(); ++k) {
    if (!levels_agree_ || !blown_now[k] ||
        static_cast<double>(x - blown_since_x_[k]) <=
            RoundTrips::kNewNormalFraction *
                static_cast<double>(levels_[0]->config().window_ns)) {
      continue;
    }
    for (RecentValues<31>& r : ranges_) r.Clear();
    have_blown_.fill(false);
    blown_now.fill(false);
    for (size_t j = 0; j < levels_.size(); ++j) {
      if (now[j].state != SyncState::kUnsynced) {
        current_range_[j] = hull_range[j];
      }
    }
    break;
  }
  bool uncongested = true;  // No longer level is congested.
  std::array<double, kMaxLevels> congested{};  // Fraction of the window.
  // Levels that may guard the answer's bound (step 6): eligible but for a
  // longer level's congestion, which bars a shorter level from answering
  // but leaves its middle where its own range and the round trips say
  // (a clock wandering at 2.3 times the allowance: the 37.5 s level, its
  // own range clean, missed none of the 198 samples outside the bound of
  // the 300 s level answering for want of an eligible shorter one).
  std::array<bool, kMaxLevels> may_guard{};
  const RoundTrips::Intervals barring = BarringIntervals();
  for (size_t k = 0; k < levels_.size(); ++k) {
    bool own_clean = true;
    if (k > 0 && !young[k]) {
      const bool clean =
          !have_blown_[k] ||
          static_cast<double>(blown_x_[k] - blown_since_x_[k]) <
              kBlownWindowFraction *
                  static_cast<double>(levels_[k]->config().window_ns) ||
          static_cast<double>(x - blown_x_[k]) >=
              kCleanWindowFraction *
                  static_cast<double>(levels_[k]->config().window_ns);
      const bool range_ok = ranges_count() < kPurityMinWidths ||
                            hull_range[k] <=
                                kEligibleRangeRatio * median_range_[k];
      own_clean = range_ok && clean && !blown_now[k];
      uncongested = uncongested && own_clean;
    }
    // How much of it the round trips show congested (as far as it has
    // filled); mostly congested, it may not answer.
    if (k > 0 && round_trips_.congested_intervals(barring) > 0) {
      const int64_t filled =
          std::min(levels_[k]->config().window_ns, x - start_x_);
      if (filled > 0) {
        congested[k] = round_trips_.CongestedNs(x - filled, x, barring) /
                       static_cast<double>(filled);
      }
    }
    eligible[k] = uncongested && congested[k] <= kCongestedFraction &&
                  !young[k];
    may_guard[k] = own_clean && congested[k] <= kCongestedFraction &&
                   !young[k];
  }
  // A candidate is eligible when its levels are (a mean: both). With none
  // (every level young), the longest answers.
  auto candidate_eligible = [&](int c) {
    return eligible[LongerLevel(c)] && eligible[ShorterLevel(c)];
  };
  // The home, or the nearest eligible candidate to it: shorter first when
  // the home's own levels are young (a bend cut them), longer first
  // otherwise (congestion blows up the short windows first). With none
  // eligible, the nearest whose levels are not young: a congested level's
  // bound still holds (delays only widen it), but a young one rests on a
  // few samples, or was cut alone by a bend it cannot hold (a longer
  // level's blow-up makes every shorter one ineligible, and the longest,
  // cut alone, then answered through a steep swing far outside its bound).
  int home = home_;
  if (!candidate_eligible(home)) {
    const bool shorter_first =
        young[LongerLevel(home)] || young[ShorterLevel(home)];
    const int step = shorter_first ? 1 : -1;
    auto nearest = [&](auto usable) {
      for (int d = 0; d < blends_; ++d) {
        for (const int c : {home + step * d, home - step * d}) {
          if (c >= 0 && c < blends_ && usable(c)) return c;
        }
      }
      return -1;
    };
    int found = nearest(candidate_eligible);
    if (found < 0) {
      found = nearest([&](int c) {
        return !young[LongerLevel(c)] && !young[ShorterLevel(c)];
      });
    }
    if (found >= 0 && found != home && !young[LongerLevel(home)] &&
        !young[ShorterLevel(home)] &&
        HomeOutlastsCongestion(home, found, hull_range, congested)) {
      found = home;
    }
    home = std::max(found, 0);
  }
  // A candidate other than home answers only while it is significantly
  // better than home; a shorter one by more while the clock is likely
  // linear (no shorter window predicts better: its win is noise).
  const bool likely_linear = LikelyLinearHome(
      linearity_.running() && !linearity_.wander_seen()
          ? linearity_.LinearProbability(kWanderPriorOdds)
          : 0);
  // Its scores are from before any congestion (none is scored during it):
  // leaning on a shorter window than the home's, more than half
  // congested, it may not (the home, whose W* counts clean time, does).
  auto beats_home = [&](int c) {
    if (c == home) return true;
    const int k = ShorterLevel(c);
    if (k > ShorterLevel(home) && congested[k] > kShorterCongestedFraction) {
      return false;
    }
    const bool strict = likely_linear && c > home && c < blends_;
    const Against test = strict ? Against::kLinearHome : Against::kHome;
    return PairedUpperBound(c, home, test) < 0;
  };
  int incumbent = candidate_;
  if (!candidate_eligible(incumbent) || !beats_home(incumbent)) {
    incumbent = home;
  }
  // Move to the candidate that beats the incumbent by the widest
  // significant margin, if any.
  int best = incumbent;
  double best_bound = 0;
  for (int c = 0; c < candidates_; ++c) {
    if (c == incumbent || !candidate_eligible(c) || !beats_home(c)) continue;
    const double bound = PairedUpperBound(c, incumbent);
    if (bound < best_bound) {
      best = c;
      best_bound = bound;
    }
  }
  candidate_ = best;
  linear_weight_ = 0;
  if (best == home && home_position_ >= kLeanMinHomePosition && eligible[0] &&
      linearity_.running() && !linearity_.wander_seen()) {
    const double p = linearity_.LinearProbability(kWanderPriorOdds);
    if (p > 0) linear_weight_ = p;  // not before the first test (NaN)
  }
  // Candidate c is level c / 2 (c even) or halfway between levels c / 2
  // and c / 2 + 1 (c odd); the home answers from where W* falls between
  // its neighbours, when both levels there are eligible.
  double position = best;
  if (best == home && home == home_) {
    const int longer = static_cast<int>(std::floor(home_position_ / 2));
    const int shorter = static_cast<int>(std::ceil(home_position_ / 2));
    // Not towards a neighbour the home has predicted significantly better
    // than: W* from the allowance is off there (a swing bends the clock
    // faster than the allowance's wander, and the home is the shortest
    // level: the blend with the next longer one only adds its lag).
    const int towards = home_position_ < home ? home - 1 : home + 1;
    const bool neighbour_worse =
        towards >= 0 && towards < blends_ &&
        PairedUpperBound(home, towards) < 0;
    if (eligible[longer] && eligible[shorter] && !neighbour_worse) {
      position = home_position_;
    }
  }
  if (best >= blends_) {  // An extrapolation: no blend around W*.
    selected_ = ShorterLevel(best);
    longer_weight_ = LongerWeight(best);
    guard_level_ = GuardLevel(may_guard);
    return;
  }
  selected_ = static_cast<int>(std::ceil(position / 2));
  longer_weight_ = selected_ - position / 2;
  guard_level_ = GuardLevel(may_guard);
}

int AdaptiveWindowEstimator::GuardLevel(
    const std::array<bool, kMaxLevels>& may_guard) const {
  for (int k = static_cast<int>(levels_.size()) - 1; k > selected_; --k) {
    if (may_guard[k] && levels_[k]->window_samples() >= kGuardMinSamples) {
      return k;
    }
  }
  return -1;
}

AddResult AdaptiveWindowEstimator::Add(const ProbeSample& s) {
  AddResult result = AddResult::kAccepted;
  have_last_estimate_ = false;
  std::array<bool, kMaxLevels> level_cut{};
  for (size_t k = 0; k < levels_.size(); ++k) {
    const AddResult r = levels_[k]->Add(s);
    if (k == 0) result = r;
    level_cut[k] = r == AddResult::kAcceptedAfterInconsistency;
  }
  // The shortest level cut too: a step (or a bend beyond even the
  // shortest window), every level restarts. A longer level cut alone: a
  // bend its window cannot hold; it restarts young (Select skips it until
  // it has refilled) and the others go on.
  const bool cut = level_cut[levels_.size() - 1];
  if (!IsAccepted(result)) return result;
  // The sample's two points, as the hulls see them (estimator.h), relative
  // to the anchor; __int128 as in TwoHullEstimator for epoch timestamps.
  const __int128 request_offset =
      static_cast<__int128>(s.t2_ns) - s.t1_ns + s.parent_bound_ns;
  const __int128 response_offset =
      static_cast<__int128>(s.t3_ns) - s.t4_ns - s.parent_bound_ns;
  round_trips_.set_new_normal_allowed(levels_agree_);
  round_trips_.Add(static_cast<double>((s.t4_ns - s.t1_ns) -
                                       (s.t3_ns - s.t2_ns)),
                   s.t4_ns);
  if (!have_anchor_) {
    have_anchor_ = true;
    first_x_ = s.t4_ns;
    // Local time may be negative (any epoch): the first checkpoint is due
    // at the first sample, not at 0.
    next_checkpoint_x_ = s.t4_ns;
    anchor_y_ = static_cast<int64_t>(request_offset);
  }
  if (!have_start_ || cut) {
    have_start_ = true;
    start_x_ = s.t4_ns;
  }
  if (cut) {
    // A step or a bend beyond the windows: predictions from before it
    // cannot be checked against samples after it, nor drifts compared.
    pending_.clear();
    linearity_.Stop();
    reference_wander_.Reset();
    std::fill(bound_valid_.begin(), bound_valid_.end(), 0);
    reference_asymmetry_.Restart();
    bound_wander_ratio_ = 1;
    for (DriftWander& w : wander_) w.Restart();
    have_lone_cut_.fill(false);
  } else {
    for (size_t k = 0; k < levels_.size(); ++k) {
      if (!level_cut[k]) continue;
      wander_[k].Restart();
      lone_cut_x_[k] = s.t4_ns;
      have_lone_cut_[k] = true;
    }
    UpdateCheckpoints(s, static_cast<int64_t>(request_offset - anchor_y_),
                      static_cast<int64_t>(response_offset - anchor_y_));
  }
  const int64_t x = s.t4_ns;
  direction_spread_.Add(x, static_cast<double>(request_offset - anchor_y_),
                        static_cast<double>(anchor_y_ - response_offset));
  std::array<TimeEstimate, kMaxLevels> now;
  std::array<double, kMaxLevels> allowance{};
  for (size_t k = 0; k < levels_.size(); ++k) {
    now[k] = levels_[k]->Estimate(x, &allowance[k]);
  }
  linearity_.Add(s.t1_ns, static_cast<double>(request_offset - anchor_y_),
                 s.t4_ns, static_cast<double>(response_offset - anchor_y_),
                 now[0].state != SyncState::kUnsynced ? now[0].drift_ppb : NAN);
  Select(now, allowance, x);
  RecordDrifts(now, x);
  if (now[0].state != SyncState::kUnsynced &&
      (pending_.empty() ? x >= next_checkpoint_x_
                        : x >= pending_.back().x + reference_ns_ / 2)) {
    Checkpoint c;
    c.x = x;
    c.due_x = x + reference_ns_;
    c.long_due_x = x + long_reference_ns_;
    c.slope = now[selected_].drift_ppb * 1e-9;
    c.longest_span_ns = levels_[0]->window_span_ns();
    std::array<double, kMaxLevels> level{};
    for (size_t k = 0; k < levels_.size(); ++k) {
      const TimeEstimate& e = now[k].state != SyncState::kUnsynced ? now[k] : now[0];
      level[k] = static_cast<double>(e.offset_ns - anchor_y_);
    }
    for (int i = 0; i < candidates_; ++i) {
      const double shorter = level[ShorterLevel(i)];
      c.predicted[i] =
          shorter + LongerWeight(i) * (level[LongerLevel(i)] - shorter);
    }
    pending_.push_back(c);
    next_checkpoint_x_ = x + reference_ns_ / 2;
    RecordRanges();
    home_ = HomeCandidate(x);
  }
  last_estimate_ = Answer(now[selected_], allowance[selected_],
                          now[std::max(0, selected_ - 1)], now[0],
                          now[std::max(0, guard_level_)], x);
  last_estimate_x_ = x;
  have_last_estimate_ = true;
  reference_asymmetry_.AddSample(
      s.t1_ns, static_cast<double>(request_offset - anchor_y_), s.t4_ns,
      static_cast<double>(response_offset - anchor_y_),
      last_estimate_.drift_ppb * 1e-9,
      round_trips_.congested() || last_estimate_.state == SyncState::kUnsynced);
  return result;
}

TimeEstimate AdaptiveWindowEstimator::Estimate(int64_t local_ns) const {
  if (have_last_estimate_ && local_ns == last_estimate_x_) {
    return last_estimate_;
  }
  double allowance_ns = 0;
  const TimeEstimate e = levels_[selected_]->Estimate(local_ns, &allowance_ns);
  const TimeEstimate longer =
      longer_weight_ == 0 ? e : levels_[selected_ - 1]->Estimate(local_ns);
  const TimeEstimate longest =
      linear_weight_ == 0 ? e : levels_[0]->Estimate(local_ns);
  const TimeEstimate guard =
      guard_level_ < 0 ? e : levels_[guard_level_]->Estimate(local_ns);
  return Answer(e, allowance_ns, longer, longest, guard, local_ns);
}

TimeEstimate AdaptiveWindowEstimator::Answer(const TimeEstimate& selected,
                                             double allowance_ns,
                                             const TimeEstimate& longer,
                                             const TimeEstimate& longest,
                                             const TimeEstimate& guard,
                                             int64_t local_ns) const {
  TimeEstimate e = selected;
  // The level's allowance is the configured wander's; where the
  // references show the clock wandering faster, the bound widens by as
  // much more.
  if (e.state != SyncState::kUnsynced && bound_wander_ratio_ > 1) {
    const int64_t extra =
        std::llround((bound_wander_ratio_ - 1) * allowance_ns);
    e.earliest_ns -= extra;
    e.latest_ns += extra;
  }
  if (e.state == SyncState::kUnsynced) return e;
  // Between two levels, then towards the longest where the clock may not
  // wander (step 5), inside the answering level's bound.
  for (const auto& [towards, weight] :
       {std::pair{&longer, longer_weight_}, {&longest, linear_weight_}}) {
    if (weight == 0 || towards->state == SyncState::kUnsynced) continue;
    const double gap_ns = static_cast<double>(towards->global_ns - e.global_ns);
    const int64_t moved = e.global_ns + std::llround(weight * gap_ns);
    e.global_ns = std::clamp(moved, e.earliest_ns, e.latest_ns);
    e.offset_ns = e.global_ns - local_ns;
    e.drift_ppb += weight * (towards->drift_ppb - e.drift_ppb);
  }
  // The guard (step 6): its middle off the middle of the bound by more
  // than kGuardOffMiddleFraction of the bound's half-width, a bend may
  // have outgrown the answering level's allowance; the bound takes in the
  // guard's. The answer itself does not move.
  if (guard_level_ >= 0 && guard.state != SyncState::kUnsynced) {
    const double half_width_ns =
        0.5 * static_cast<double>(e.latest_ns - e.earliest_ns);
    const double middle_ns =
        0.5 * (static_cast<double>(e.latest_ns) + e.earliest_ns);
    if (std::abs(static_cast<double>(guard.global_ns) - middle_ns) >
        kGuardOffMiddleFraction * half_width_ns) {
      e.earliest_ns = std::min(e.earliest_ns, guard.earliest_ns);
      e.latest_ns = std::max(e.latest_ns, guard.latest_ns);
    }
  }
  return e;
}

}  // namespace clocksync::hull
