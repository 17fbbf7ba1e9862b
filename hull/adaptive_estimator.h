// hull/adaptive_estimator.h: AdaptiveWindowEstimator, an Estimator
// (hull/estimator.h) that picks the sliding window's length from the data.
//
// A line fits a clock only over so long: when the frequency bends (a
// temperature swing), a long window averages over the bend and the estimate
// lags; when it does not, the longest window averages most delay noise
// away. This estimator runs `levels` two-hull estimators side by side on the
// same samples, with windows W, W/2, W/4, ... and answers from one of them.
//
// Which one is decided on what the hulls can see, not on raw residuals (the
// midpoint of a single sample carries its delay noise, (d_fwd − d_back) / 2,
// which swamps the differences between windows):
//
// 1. Checkpoints. Every D/2 (D = half the shortest window) each level's
//    estimate θ_k(x) at the newest sample's t4 = x is recorded, with the
//    answering level's slope β. The samples of the next D seconds bound
//    θ(x) from both sides, projected back with β:
//      θ(x) ≤ min over requests  of (t2 − t1) − β (t1 − x)   (upper)
//      θ(x) ≥ max over responses of (t3 − t4) − β (t4 − x)   (lower)
//    Only the lowest-delay samples of those seconds set these minima, and
//    none of them was known to any level when it predicted: the middle of
//    [lower, upper] is an independent, low-noise reference for θ(x).
//    For the short reference β is the answer's slope when it is scored,
//    D after x (its samples are kept as convex chains, convex_chain.h):
//    on a bend a slope lags (a window W's by c W / 2, c the bend in
//    ppb/s), and the slope at x projected the later samples off the way
//    the bend goes, which favoured whatever lagged less (on 114, a
//    reference about 600 ns ahead of θ(x) where the 37.5 s window lags by
//    330); at x + D the shortest window's slope is centred on x.
//    A second, long reference runs 2D: candidates that both lean on
//    windows of at least 4D are compared on it (its minima come from twice
//    the samples: at 1 probe/s the short one's noise hides the difference
//    between the long windows), the others on the short one.
//    With more jitter one way than the other, the middle misses θ by half
//    the difference of the two minima's excesses, more than a long
//    window's estimate does (1.3 µs against 0.2–0.5 at 20 probes/s with
//    1 ms of jitter one way), which favoured the short windows; that miss
//    is learnt from how the references' middles move with their widths
//    and taken out (ReferenceAsymmetry, reference_asymmetry.h; from 4D
//    after the start or a step).
// 2. Purity. A checkpoint whose reference interval is much wider than the
//    recent ones (width > median + 3 × (median − minimum) of the last 31:
//    a congestion episode, no low-delay sample in those D seconds) is not
//    scored, nor is one when a level's range blew up (step 4) between D
//    before it and its scoring.
// 3. Significance. The candidates are the levels, the means of
//    neighbouring levels, and each shorter level's estimate extrapolated
//    away from its longer neighbour's, (4 θ_W − θ_2W) / 3: a line fitted
//    over W to a bending clock lags by about c W² / 12, four times as much
//    over 2W, and the extrapolation removes that lag at about 1.3 times
//    the noise (it answers inside the shorter level's bound, and only when
//    better by 2.5 standard errors instead of 1.5: through the flat parts
//    of a swing its noise costs more than the lag it removes; 114 1.044 ×
//    the best fixed window against 1.051 × at 1.5). Every pair (a, b) is
//    scored by the paired difference d = (θ_a − ref)² − (θ_b − ref)², its
//    exponentially weighted mean μ and standard error s over
//    `score_time_constant_ns` (the checkpoints counted as independent: one
//    per D for the short reference, per 2D for the long one, and at most
//    one per quarter of the shorter window of the pair, over whose length
//    the two windows' errors stay correlated). The variance behind s is at
//    least what the reference's own noise gives: with ref = θ + n,
//    d = (θ_a − θ)² − (θ_b − θ)² − 2 n (θ_a − θ_b), which n moves by
//    4 (θ_a − θ_b)² r in variance, r the short references' noise as
//    ReferenceWander measures it (a quarter of it for the long ones): the
//    spread of a few checkpoints' differences lies below that now and
//    then by chance, and on a noisy path a short window answered, far
//    off (1 ms of jitter one way at 20 probes/s, seeds 60–69: 1.071 →
//    1.021 × the best fixed window). Where more, r is what the
//    references' widths give (ReferenceAsymmetry::NoiseNs2, each kind
//    from its own): the widths do not move with θ, so this holds from
//    the fourth reference on, while ReferenceWander cannot yet tell its
//    references' scatter from a wander (1 ms of jitter forward and 500 µs
//    back at 5 probes/s: r 2–3 × 10⁶ ns² over the first 200 s, 2.5 × 10⁷
//    later and from the widths; the 37.5 s level answered at 120–210 s,
//    4–6 µs off where the 300 s window was 1–2). The answer moves from the
//    incumbent b to the candidate a with the lowest
//    μ + 1.5 s (2.5 s for an extrapolation), when that is negative:
//    another candidate answers only when it is better beyond what the
//    reference's noise explains. Against references too noisy to resolve
//    a wander (step 5) the 1.5 and 2.5 are Student's t quantiles at the
//    same probability, with the effective checkpoints less one as the
//    degrees of freedom (2.04 and 5.25 at the minimum of 4).
// 4. Eligibility. A young level may not answer: one whose samples span
//    less than half of what its window could hold by now (after an outage
//    the short windows restart from a few samples), or that was cut alone
//    less than a window ago (its hulls became inconsistent while the
//    shortest level's did not: a bend its window cannot hold; it restarts
//    from its newest samples). A cut of the shortest level (a step: every
//    level is cut) restarts them all: the checkpoints and drift samples
//    from before it are dropped. A level whose hulls' range at x (without
//    the wander allowance) is more than 4 times its own recent median has
//    lost its low-delay samples (a congestion episode fills a short
//    window) and may not answer, nor may any shorter one. The level next
//    to the shortest counts as blown up with it (half its window is the
//    same congested samples). A level that stayed blown up for a quarter
//    of its window or more may answer again only a whole window after its
//    last blow-up: its range at x shrinks with the first clean samples,
//    its slope does not. A blown-up or young range is not added to the
//    median, and a range counts as blown up only a whole window after the
//    windows began filling or were restarted. When the home's levels are
//    not eligible, the nearest eligible candidate stands in for it
//    (shorter first when they are young, longer first when congested),
//    unless they are congested, not young, and the stand-in predicted
//    worse before the episode (its paired score against the home, which
//    stops while the episode lasts) than a quarter of the home's range
//    growth, squared: a queue moves a level's middle by at most half the
//    growth, and on a steep swing the longer stand-in lags by far more.
//    The quarter rises to the half as the level's window goes from 75 %
//    to wholly congested (the round trips' reading), except on a swing
//    (below): with no clean sample left its middle moves by the whole
//    half, and by up to half the floor's rise, the queue's depth (a 60 µs
//    queue one way at 10 probes/s, where the stand-in's score came from
//    the episode before, its window full of it: the 75 s level answered
//    47 µs off; that kind 1.01–1.52 → 0.94–0.99 × the 300 s window; with
//    30 µs the range, mostly the minimum delays, hardly grows, and only
//    the floor tells); on a swing the stand-in's score is its lag.
//    Congestion is also seen directly, in the round trips (RoundTrips,
//    round_trips.h): a run of 8 round trips above the clean limit (the
//    clean minimum + 2 × the clean spread, the median of the last spreads
//    recorded outside congestion) opens a congested interval, from the
//    last clean sample to the first one at or below the limit again; so
//    does a floor risen below that limit (a standing queue smaller than
//    2 spreads: the smallest round trip of the last D seconds more than
//    0.75 clean spreads above the clean floor). A level whose window (as
//    far as it has filled) is more than 75 % congested may not answer:
//    its hulls rest on delayed samples, whatever its range says (with
//    minimum delays far above the jitter, a standing queue of several
//    jitter scales does not make the range 4 times wider). A candidate
//    other than the home answers on scores from before the episode (none
//    is scored during one): one that leans on a shorter window than the
//    home's may not while that window is more than half congested (the
//    home, whose W* counts clean time, answers): a queue's short draws
//    break the runs, and the 37.5 s level, a third to two thirds
//    congested, answered 10–40 µs off through 20 µs + exp(276 µs) one way
//    on 520 µs of minimum delays (random seed 12's r11: 2.51 → 1.74 × the
//    best fixed window; at a quarter, swings through episodes lose more
//    than that gains). While the
//    home's wander exceeds twice the allowance (a swing) only the runs
//    bar a level or lengthen W* (step 5): a floor rise of a few jitter
//    scales costs a short level less than a longer one's lag on the
//    swing. (Not at the allowance itself: a shallow queue one way biases
//    the references, which then read a wander just above it, 1.09 ppb/√s
//    on a clock wandering at 1, and the floor rises, the only sign of
//    such a queue, stopped barring the levels it filled: 16 µs off for
//    minutes.) A run
//    open for half the longest window, or a floor risen for all of it, is
//    a new normal (a longer route), not an episode: the intervals are
//    dropped and the limits are learnt afresh; so is a range blown up for
//    half of it, which is judged afresh (blown ranges never enter the
//    median it is judged by). Either only while every shorter level that
//    is not young answers inside the longest level's bound, and within an
//    eighth of its own bound's width (plus the longest level's wander
//    allowance) of the longest level's answer: a queue one way moves the
//    middle of the levels it fills by half its depth and widens their
//    bounds on one side, while a longer route both ways widens them on
//    both and leaves the middle (with the daemon's 300 s windows, a 200 s
//    episode of 375 µs one way at 1 probe/s: 19–29 µs instead of the 300 s
//    level's 0.5–1.4 µs; 204 µs + exp(1.5 ms) one way on 60 µs + exp(78
//    µs), where the longest level's bound is ±70 µs and more: 100–150 µs
//    off). Once the longest window has passed such a queue, every level
//    agrees and it is the new normal.
//    With no candidate eligible, the nearest to the home whose levels are
//    not young answers (a congested level's bound still holds; a young
//    one rests on a few samples, or was cut alone by a bend it cannot
//    hold), and the longest only when every level is young.
// 5. Home. Before any evidence, and whenever it is not significant, the
//    answer comes from a home candidate: the window where the error the
//    wander σ (ppb/√s) predicts over a window W (∝ σ W^1.5) meets the
//    delay noise's (∝ spread / (rate W)),
//      W* = 2.4 s × (spread / (rate σ))^0.4,
//    σ the configured wander allowance or, when smaller, a 95 % upper
//    confidence bound of the wander the drifts show (a level's drift
//    sampled a window W apart, T: (Δβ)² / (T − W/3) estimates σ², plus
//    the drifts' own noise; the smallest bound of any level with at
//    least 2 differences), or, when smaller still, the prior: what an
//    earlier run of this clock learnt (AdaptiveConfig::
//    wander_prior_ppb_per_sqrt_s, LearntWanderPpb: the references' 95 %
//    upper bound of σ², read as a chi-squared estimate; the daemon's
//    wander_state_file), which stands in for the allowance below until
//    the references overrule it. The references measure σ with their own noise
//    taken out (ReferenceWander, reference_wander.h: how far the middle
//    of three references misses the chord of the outer two, at spacings
//    of D to 16 D, from the first reference on; those a congestion
//    episode touched are left out): once they count 4 independent
//    readings, the allowance (or the prior) stands only inside their interval, σ² less
//    1 standard error to σ² plus 0.75; outside it the nearer end does,
//    below the allowance (and
//    below the drifts' bound) or above it (a clock wandering faster than
//    the allowance: a shorter home). From 2 readings they count only
//    where that interval lies wholly above the allowance and below 20
//    times it: a steep swing shows that soon, and a faster wander from
//    so few readings is the references' own noise. Nor does the lower
//    end count where the standard error of their σ² exceeds (100 σ)²:
//    so noisy (1–2 ms of jitter at 1 probe/s), they cannot resolve a
//    wander a clock has from their own noise. A steep swing shows in
//    the samples sooner than the references' interval clears the
//    allowance: over the first longest window, from 5 stretches of 15 s
//    on, the samples give the lower end of the wander's likelihood
//    interval where the allowance lies below it (LinearityCheck,
//    linearity_check.h), and once the references (2 readings or more)
//    read σ² above the allowance's (and can resolve a wander, above),
//    σ for W* is at least the lesser of that lower end and the
//    references' σ, outside congestion (which the samples read as
//    wander) (variants 26, 25 → 27, 27 of 29; random 121 → 123 of 200;
//    r18 of random seed 4, a 1.3 ppm swing at 160 µs of jitter, 1.258 →
//    1.187 ×: on its seed 0 the 300|600 s home answered until 360 s,
//    not 420). Spread is the median round trip's
//    excess over the minimum (ns) and rate the samples per second, both
//    over the last 127 samples (the spread: the smallest at the last 4
//    checkpoints, and none recorded while those samples hold a congested
//    run, so that a congestion episode's round trips do not move the
//    home), or, where less, what the two directions' floors give in the
//    same unit (DirectionSpread, direction_spread.h: for heavy-tailed
//    delays the median lies far out, and W* came out too long; Pareto
//    delays with α 1.1–2 at 10 probes/s 4 % lower on average, the
//    heavy-tailed kind that missed on seeds 100–109 1.118 → 1.046 ×).
//    Where congested intervals leave holes, the home weighs what a window
//    holds: the delay noise's error, K / L² in mean square for L clean
//    seconds, against the wander's, W³ over the W it spans (K / W² + W³ is
//    least at W*: K = 1.5 W*⁵), the noise's times (1 + 3 (1 + 2 g / L)²)
//    / 4 while an episode has lasted g (a least-squares line extrapolated
//    g past its L). The home window is the one of least cost, and its
//    place among the levels is where the clean seconds they hold reach
//    that window's (a longer level may hold no more than a shorter one:
//    the levels are not the ladder of windows between them). A clean
//    stretch shorter than W*/4 between two intervals counts as congested
//    (a queue's short draws break its runs: those stretches hold its
//    draws). The home used to hold W* clean seconds wherever they lay
//    (during an episode W* plus its age) and answer from the blend
//    nearest that window in log2: at 1 probe/s with 180 s episodes in every 5 minutes W* does
//    not fit between them, and mid-episode a 150|300 blend answered whose
//    150 s level, mostly congested, extrapolated far (congestion kinds
//    350 → 373 of 432 on the 12 seed sets: every one at 4 probes/s holds;
//    the 1 probe/s 180 s ones' median 1.038 → 1.023 × the 300 s window).
//    Without congestion the home is the candidate nearest W* in log2,
//    and it answers from W* itself: the estimates of the two levels
//    around W* blended by where W* falls between their windows in log2
//    (with congestion, by that place among them) (a level
//    and its neighbour's mean are half a step apart; a window between
//    them is better than either where W* is: chrony's default model,
//    101, 1,006 → 990 ns), unless the home has predicted significantly
//    better than the neighbour it would lean towards (step 3's test: a
//    swing steeper than σ, where the blend only adds the longer level's
//    lag). Any other candidate answers only while it is
//    significantly better than the home (step 3's test, against the
//    home, with the checkpoints counted as one independent score per
//    tenth of the longer window of the pair: the home's errors and a
//    neighbour's stay correlated that long, and a pair's differences
//    drift slowly on noise) as well as than the incumbent. A candidate
//    shorter than the home needs 2.5 standard errors instead of 1.5
//    while the samples' check (below) finds a linear clock more likely
//    than 0.3 at the lean's prior odds: on a linear clock no shorter
//    window predicts better, so its win is the references' noise (102 on
//    seeds 10-19: 1.119 → 1.066 × the best fixed window; from 0.15 the
//    swings at 2 probes/s lose 1-2 %, from 0.5 nothing moves).
//    The allowance is an upper bound of the wander; when the clock
//    wanders far less (some level's drift, sampled a window apart T once
//    its window is half full, changes by less than 0.1 σ √T in RMS over
//    at least 3 such differences, or 0.05 σ √T over 2: a linear clock at
//    this noise level), the home is the longest window, unless the
//    longest window has predicted significantly worse than the
//    allowance's home (step 3's test): with delays as quiet as kernel
//    timestamps' even a tenth of the allowance outweighs their noise
//    over the longest window. Before any level can have 3 differences
//    (3.5 shortest windows, 131 s), the longest level's errors e against
//    the short references (checkpoints whose span S is at least 0.75
//    shortest windows) tell it instead: a line fitted over S to a clock
//    wandering at σ misses by about 0.025 σ² S³ in mean square, and
//    Σ e² below 0.025 (0.1 σ)² Σ S³ over 2 checkpoints (by 56 s) counts
//    as linear (a kernel-stamped linear clock, 109, answers from the
//    longest window 40–75 s earlier; at 0.2 σ it called a clock wandering
//    at 0.3 σ linear on 7 of 10 seeds, at 0.1 σ on 3). So does the references' interval
//    lying wholly below (0.1 σ)² once they count 4
//    readings (often minutes before a level's drifts have 3
//    differences: a linear clock at 1–2 probes/s with loss, 390
//    against 760 s). Every verdict needs the references,
//    once they count 4 readings, to agree: their estimate of σ² below
//    (0.1 σ)² as well (one level's drifts can stay nearly unchanged for a
//    few hundred seconds on a clock that wanders as the allowance says),
//    and the samples of the first longest window to fit a line, from 5
//    stretches of 15 s on, each left out in turn before 8 (LinearityCheck,
//    linearity_check.h: with kernel timestamps a tenth of σ hides in the
//    drifts' noise, not in theirs).
//    Before any verdict, at the allowance's noise balance the home can
//    be half the longest window or less for minutes where the longest
//    window is 2–10 times better (102: a linear clock at 10 probes/s,
//    50 µs + exp(20 µs)). While the samples' check runs and has not seen
//    a wander, such a home leans towards the longest level by the
//    check's probability of a linear clock (prior odds 3 of a wander,
//    its likelihoods at 0.01–10 σ² against none; from 75 s on), inside
//    the home's bound: 102 1.64 → 1.32 × the best fixed window (seeds
//    0–9), 1.42 → 1.11 × (10–19); the lean's cost on a clock wandering as
//    the allowance says is a few % over its first minutes. (From a
//    quarter of the longest window only, homes at 150–300 s did not
//    lean: random 126 against 128 of 200, on seeds 6–10 129 against 131.)
//
// The answering level's bound is its own (each level's bound is valid
// alone), and its estimate lies inside it; the level widens it for the
// configured wander allowance, and where the references show the clock
// wandering faster (the lower end of their interval above the allowance,
// step 5: a swing far steeper than the allowance reads as a wander of
// tens of ppb/√s), it widens by as much more.
//
// 6. The guard. Before the references show such a swing, its bend can
// outgrow a long level's allowance while that level's hulls still agree:
// the truth leaves the bound for seconds to minutes (at 1 probe/s with
// 1 ms of jitter, a 1 ppm swing over 15 minutes: 71 samples of 35,400
// over 10 seeds), while the shortest levels' bounds, which need the
// allowance over their own short windows only, still hold it. So the
// shortest level shorter than the answering one that is eligible by its
// own state (step 4, without a longer level's congestion), with at least
// 48 samples in its window (fewer, and its middle's own noise strays as
// far), guards the bound: where its middle lies more than a quarter of
// the bound's half-width from the bound's middle, which a bend does
// first, the bound takes in the guard level's bound. The answer does not
// move (every RMS figure is unchanged); the bound misses on the random
// scenarios with swings fell by most (docs/ACCURACY.md), at a mean width
// 0.5 % larger on the standard scenarios.
//
// Costs about `levels` times a TwoHullEstimator per sample plus a few
// hundred ns (see //hull:estimator_benchmark).
// Thread safety: none; one owner.

#ifndef CLOCKSYNC_HULL_ADAPTIVE_ESTIMATOR_H_
#define CLOCKSYNC_HULL_ADAPTIVE_ESTIMATOR_H_

#include <algorithm>
#include <array>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "hull/convex_chain.h"
#include "hull/direction_spread.h"
#include "hull/drift_wander.h"
#include "hull/estimator.h"
#include "hull/recent_values.h"
#include "hull/linearity_check.h"
#include "hull/reference_asymmetry.h"
#include "hull/reference_wander.h"
#include "hull/round_trips.h"
#include "hull/two_hull_estimator.h"

namespace clocksync::hull {

// The window is config.base.window_ns / 2^k for k in [0, levels); see
// AdaptiveConfig (hull/estimator.h).
class AdaptiveWindowEstimator final : public Estimator {
 public:
  explicit AdaptiveWindowEstimator(const AdaptiveConfig& config = {});

  AddResult Add(const ProbeSample& sample) override;
  TimeEstimate Estimate(int64_t local_ns) const override;

  // The level answering now (0 = the longest window) and its window.
  int selected_level() const { return selected_; }
  int64_t selected_window_ns() const {
    return levels_[selected_]->config().window_ns;
  }
  // The answering level's estimator (its window, hulls and counters).
  const TwoHullEstimator& selected() const { return *levels_[selected_]; }
  // Statistics of the longest window (sample counters are the same for all).
  const EstimatorStats& stats() const override { return levels_[0]->stats(); }
  // The answering level's window and hulls.
  size_t window_samples() const override {
    return selected().window_samples();
  }
  int64_t window_span_ns() const override {
    return selected().window_span_ns();
  }
  size_t lower_hull_vertices() const override {
    return selected().lower_hull_vertices();
  }
  size_t upper_hull_vertices() const override {
    return selected().upper_hull_vertices();
  }
  // A 95 % upper bound of the wander, ppb/√s: once the references count
  // (and can resolve a wander), their σ² read as a chi-squared estimate
  // (adaptive_estimator_home.cc); before, the smallest of the drifts' 95 %
  // bounds (any level with 2 differences or more); 0 before either. What a
  // later start takes as its wander prior (AdaptiveConfig::
  // wander_prior_ppb_per_sqrt_s): an upper bound, so that a prior does not
  // start a wandering clock's home longer than its wander calls for
  // (docs/ACCURACY.md, "After a restart").
  double LearntWanderPpb() const override;
  int levels() const { return static_cast<int>(levels_.size()); }
  // Level k's score against the longest window: the weighted mean of the
  // paired difference of squared errors (ns²; negative = k is better) and
  // its upper confidence bound. 0 for level 0 and before any checkpoint.
  double score(int level) const {
    return level <= 0 ? 0 : PairedMean(2 * level, 0);
  }
  double score_upper_bound(int level) const {
    return level <= 0 ? 0 : PairedUpperBound(2 * level, 0);
  }
  // Checkpoints scored, and those left out as impure.
  uint64_t checkpoints_scored() const { return checkpoints_scored_; }
  uint64_t checkpoints_impure() const { return checkpoints_impure_; }

  static constexpr int kMaxLevels = 8;
  // Candidates: 2k is level k's estimate, 2k + 1 the mean of levels k and
  // k + 1 (a window between the two); then, from 2 levels − 1 on, level
  // k + 1's estimate extrapolated away from level k's (see
  // kExtrapolationWeight).
  static constexpr int kMaxCandidates = 3 * kMaxLevels - 2;
  // The candidate answering now, and the home candidate.
  int selected_candidate() const { return candidate_; }
  int home_candidate() const { return home_; }
  // The wander (ppb/√s) W* was last computed for: the allowance, or a
  // smaller upper bound the drifts show (see the header).
  double home_wander_ppb() const { return home_wander_ppb_; }
  // What the round trips show: rate, delay spread, congestion.
  const RoundTrips& round_trips() const { return round_trips_; }
  // The wander the checkpoint references show (reference_wander.h).
  const ReferenceWander& reference_wander() const { return reference_wander_; }
  const LinearityCheck& linearity() const { return linearity_; }
  // How far the home leans towards the longest level now (0–1: the
  // samples' probability of a linear clock; step 5).
  double linear_weight() const { return linear_weight_; }

 private:
  // The references' wander (reference_wander.h) moves the home once it has
  // this many independent readings, outside its estimate ± this many
  // standard errors (of σ²): one (random scenarios, seeds 1–5: 93 → 102 of
  // 200 hold; 99 with 1.645, 67 with the point estimate alone, which is
  // noisy for minutes). The interval's upper end, which lets a quiet
  // clock's home grow and gives the linear verdict (step 5), at 0.75 of
  // them (random 119 → 121 of 200, 102 1.745 → 1.640 ×; at 0.5, 120 and
  // `111/rate=5Hz` misses; the lower end at 0.75 too: `--kinds` 73 → 71).
  static constexpr double kReferenceMinReadings = 4;
  // A paired difference's variance is at least 4 (θ_a − θ_b)² r, r the
  // reference's own noise (step 3; the short references' as
  // ReferenceWander measures it, or their widths give). A long
  // reference's minima come from
  // kLongReferenceFactor times the samples: for exponential delays their
  // excesses, and so r, are a quarter (at a half: random 124 → 122 of 200,
  // `--kinds` on seeds 0–39 as at a quarter).
  static constexpr double kLongReferenceNoiseRatio = 0.25;
  static constexpr double kReferenceWanderZ = 1.0;
  static constexpr double kReferenceWanderUpperZ = 0.75;
  // From this many readings on, the references count where their interval
  // lies wholly above the allowance, and below kReferenceEarlyMaxRatio
  // times it in σ: a swing shows as soon as two spacings have triples (on
  // 114 the home shortens at 110 s instead of 120 s: 1.040 → 1.031 ×); a
  // fit of so few readings that calls the clock wandering faster than that
  // measures the references' own noise (110, 1 ms of jitter at 1 probe/s:
  // 250–680 ppb/√s from 2.7 readings; without the limit 1.047 ×).
  static constexpr double kReferenceEarlyReadings = 2;
  static constexpr double kReferenceEarlyMaxRatio = 20;
  // References whose σ² has a standard error above the square of this
  // many times the allowance cannot tell a wander they could resolve
  // (about √error and more) from their own noise: exponential jitter of
  // 1–2 ms at 1 probe/s reads as 120–800 ppb/√s now and then (with
  // errors of 1.4·10⁴–6.3·10⁵ ppb²/s wherever it did in the 1–2 ms
  // kinds scanned on seeds 0–39), while swings, on noisy paths too, read
  // with errors of 40–7,200 (114, the kinds' swings, random seeds 1–5).
  // Their interval's lower end does not count there: no shorter home, no
  // wider bound (`--kinds` on seeds 20–29 72 → 73 of 74; the standard
  // scenarios and the variants identical, random 121 of 200 as before).
  static constexpr double kReferenceMaxNoiseRatio = 100;
  // The lower end of the references' σ (ppb/√s), 0 where they are too
  // noisy to count (above). Against references that noisy the paired
  // test's z is Student's t (student_t.h) with the effective checkpoints
  // less one as its degrees of freedom (the squared errors' differences
  // are heavy-tailed there and their spread from a few checkpoints
  // uncertain: on 2 ms of jitter at 1 probe/s over 60 minutes, seeds
  // 30–39, 1.069 → 1.000 × the best fixed window; no other ratio moved
  // by more than 0.011).
  bool ReferencesTooNoisy() const {
    return reference_wander_.TooNoisy(kReferenceMaxNoiseRatio *
                                      config_.base.wander_ppb_per_sqrt_s);
  }
  double ReferenceWanderLower() const {
    return ReferencesTooNoisy() ? 0
                                : reference_wander_.Lower(kReferenceWanderZ);
  }
  // The noise variance (ns²) of a reference of `kind` (0 short, 1 long),
  // 0 until the references have measured it.
  double ReferenceNoiseNs2(int kind) const {
    const double r = std::max(0.0, reference_wander_.noise_ns2());
    return std::max(kind == 0 ? r : kLongReferenceNoiseRatio * r,
                    reference_asymmetry_.NoiseNs2(kind));
  }
  // The upper end of the references' interval of σ² (ppb²/s): W*'s and
  // the linear verdict's.
  double ReferenceWanderUpper2() const {
    return reference_wander_.wander2() +
           kReferenceWanderUpperZ * reference_wander_.wander2_error();
  }

  // Level estimates recorded at one instant, and the reference the samples
  // after it give for θ at that instant (offsets relative to anchor_y_).
  struct Checkpoint {
    int64_t x = 0;      // Local time of the predictions (a sample's t4).
    int64_t due_x = 0;  // Scored at the first sample with t4 >= due_x.
    double slope = 0;   // β, ns per ns, for projecting later samples to x.
    int64_t long_due_x = 0;  // The long reference ends here.
    // The references: θ(x) <= upper and >= lower, from the samples up to
    // due_x (kind 0, short) and up to long_due_x (kind 1, long; projected
    // with `slope`, the answer's at x).
    std::array<double, 2> upper{};
    std::array<double, 2> lower{};
    std::array<bool, 2> has_upper{};
    std::array<bool, 2> has_lower{};
    bool short_scored = false;
    // The short reference's samples as (t − x, y) (t1 and the request's
    // offset, t4 and the response's), as convex chains: it is computed
    // when scored, with the answer's slope then.
    ConvexChain requests{/*lower=*/true};
    ConvexChain responses{/*lower=*/false};
    int64_t longest_span_ns = 0;  // The longest level's span at x.
    std::array<double, kMaxCandidates> predicted{};  // θ_c(x), ns.
  };
  // Paired score of one level against another (exponentially weighted).
  struct PairedScore {
    double sum_d = 0;     // Σ w d
    double sum_d2 = 0;    // Σ w d²
    double sum_gap2 = 0;  // Σ w (θ_a − θ_b)²
  };
  // What candidate a is tested against (step 3): the incumbent or any
  // other candidate; the home, whose errors and a's count as correlated
  // over the longer window of the pair (home_overlap_); or a home the
  // samples' check finds likely linear, which a shorter candidate leaves
  // only beyond kLinearHomeConfidenceZ standard errors.
  enum class Against { kCandidate, kHome, kLinearHome };
  // Upper confidence bound of the mean of (θ_a − ref)² − (θ_b − ref)².
  double PairedUpperBound(int a, int b,
                          Against against = Against::kCandidate) const;
  // The mean of (θ_a − ref)² − (θ_b − ref)² (ns²), 0 before any checkpoint.
  double PairedMean(int a, int b) const {
    const double w = weight_sum_[PairKind(a, b)];
    return w <= 0 ? 0 : scores_[Pair(a, b)].sum_d / w;
  }
  // Whether the home, its levels not young but congested, should answer
  // rather than `stand_in`, the nearest eligible candidate (step 4).
  // `congested`: each level's window's congested fraction.
  bool HomeOutlastsCongestion(
      int home, int stand_in, const std::array<double, kMaxLevels>& hull_range,
      const std::array<double, kMaxLevels>& congested) const;
  double ComputePairedUpperBound(int a, int b, Against against) const;
  // Whether `linear_probability` (the samples' check's, 0 when it does not
  // run) makes the home's test of a shorter candidate kLinearHome.
  bool LikelyLinearHome(double linear_probability);
  // Which reference candidates a and b are compared on: 1 (the long one)
  // when both lean on windows at least kLongPairWindows long references,
  // else 0.
  int PairKind(int a, int b) const { return kind_[a][b]; }
  // Index of pair (a, b) in the by-pair vectors.
  size_t Pair(int a, int b) const {
    return static_cast<size_t>(a * candidates_ + b);
  }
  // Candidate c's value: its shorter level's estimate plus its weight
  // times the longer level's minus it (the same level for a level).
  int LongerLevel(int c) const { return c < blends_ ? c / 2 : c - blends_; }
  int ShorterLevel(int c) const {
    return c < blends_ ? (c + 1) / 2 : c - blends_ + 1;
  }
  double LongerWeight(int c) const;

  void UpdateCheckpoints(const ProbeSample& s, int64_t request_y,
                         int64_t response_y);
  void ScoreCheckpoint(const Checkpoint& c, int kind);
  bool IsPure(double width_ns, int kind);
  // `allowance` holds each synced level's wander allowance at x.
  void Select(const std::array<TimeEstimate, kMaxLevels>& now,
              const std::array<double, kMaxLevels>& allowance, int64_t x);
  // Adds the current ranges to the rings and updates their medians.
  void RecordRanges() {
    for (size_t k = 0; k < levels_.size(); ++k) {
      ranges_[k].Add(current_range_[k]);
      median_range_[k] = std::max(ranges_[k].median(), 1.0);
    }
  }
  // The home candidate: the window the delay spread and the configured
  // wander allowance call for (see the header). Records the spread.
  int HomeCandidate(int64_t x);
  // The home's position at x (0 the longest level, 2 the next, 1 halfway
  // between them, ...; not clamped) for W* = clean_home_s: where the
  // congested intervals leave holes, the window that weighs them (step 5).
  double HomePosition(int64_t x, double clean_home_s, double longest_s) const;
  // The congested intervals that bar a level and lengthen W*: floor rises
  // too, except while the home's wander exceeds kSwingWanderRatio times
  // the allowance (a swing; step 4).
  static constexpr double kSwingWanderRatio = 2;
  bool Swinging() const {
    return home_wander_ppb_ >
           kSwingWanderRatio * config_.base.wander_ppb_per_sqrt_s;
  }
  RoundTrips::Intervals BarringIntervals() const {
    return Swinging() ? RoundTrips::Intervals::kRunsOnly
                      : RoundTrips::Intervals::kAll;
  }
  // The answer from the answering level's estimate and the next longer
  // level's (used when the candidate is their mean), the longest level's
  // (the lean, step 5) and the guard level's (its bound, step 6), all at
  // local_ns; allowance_ns is the answering level's wander allowance
  // there, which the bound adds again (bound_wander_ratio_ − 1) times.
  TimeEstimate Answer(const TimeEstimate& selected, double allowance_ns,
                      const TimeEstimate& longer, const TimeEstimate& longest,
                      const TimeEstimate& guard, int64_t local_ns) const;
  // The level whose bound guards the answer's (step 6), or −1: the
  // shortest level shorter than the selected one that `may_guard` (not
  // young, its own range and window not congested) with at least
  // kGuardMinSamples samples.
  int GuardLevel(const std::array<bool, kMaxLevels>& may_guard) const;
  // Samples each level's drift a window apart (see wander_).
  void RecordDrifts(const std::array<TimeEstimate, kMaxLevels>& now,
                    int64_t x) {
    for (size_t k = 0; k < levels_.size(); ++k) {
      wander_[k].Record(now[k], levels_[k]->window_span_ns(),
                        levels_[k]->config().window_ns, x);
    }
  }
  // True when the drifts show the clock wandering far less than the
  // configured allowance (a linear clock at this noise level), and the
  // references, once they count, do not read more.
  bool WanderNegligible(int64_t x) const;
  // The same from the longest level's fit, before the drifts can tell.
  bool EarlyWanderNegligible(int64_t x) const;

  AdaptiveConfig config_;
  std::vector<std::unique_ptr<TwoHullEstimator>> levels_;
  int64_t reference_ns_ = 0;  // D: how long a checkpoint's reference runs.
  // How long the long reference runs (kLongReferenceFactor × D).
  int64_t long_reference_ns_ = 0;
  // PairKind by candidate pair.
  std::array<std::array<uint8_t, kMaxCandidates>, kMaxCandidates> kind_{};
  // How many checkpoints of pair (a, b) count as one independent score.
  // (By pair: entry a * candidates_ + b, sized to the candidates, not
  // kMaxCandidates: a cluster simulator holds one estimator per node.)
  std::vector<double> overlap_;
  // The same for leaving the home: over the longer window of the pair.
  std::vector<double> home_overlap_;
  // Where the windows began filling: the first sample, or the last cut.
  bool have_start_ = false;
  int64_t start_x_ = 0;
  bool have_anchor_ = false;
  int64_t anchor_y_ = 0;  // Offsets are kept relative to this, ns.
  int64_t first_x_ = 0;   // The first sample's t4.
  std::deque<Checkpoint> pending_;
  int64_t next_checkpoint_x_ = 0;
  // The last reference widths of each kind, for the purity test (rings).
  std::array<RecentValues<31>, 2> widths_{};
  // Scores: weights shared by the pairs of one reference kind.
  std::array<double, 2> weight_sum_{};   // Σ w
  std::array<double, 2> weight_sum2_{};  // Σ w²
  std::array<int64_t, 2> last_score_x_{};
  std::array<uint64_t, 2> scored_{};
  // scores_[a][b]: d = (θ_a − ref)² − (θ_b − ref)², over candidates.
  std::vector<PairedScore> scores_;  // By pair, as overlap_.
  // Each level's hull range at recent checkpoints, for eligibility: a
  // level whose range is over kEligibleRangeRatio times its recent median
  // has lost its low-delay samples. All levels record together.
  std::vector<RecentValues<31>> ranges_;  // By level.
  int ranges_count() const { return ranges_[0].count(); }
  std::array<double, kMaxLevels> median_range_{};
  std::array<double, kMaxLevels> current_range_{};  // At the newest sample.
  uint64_t checkpoints_scored_ = 0;
  uint64_t checkpoints_impure_ = 0;
  // The round trips: rate, spread and congestion, for the home and for
  // eligibility; the directions' floors, for the home's spread.
  RoundTrips round_trips_;
  DirectionSpread direction_spread_;
  ReferenceWander reference_wander_;
  // What unequal jitter in the two directions does to the references
  // (reference_asymmetry.h): taken out of each before it is scored.
  ReferenceAsymmetry reference_asymmetry_;
  // Whether the samples of the first longest window fit a line
  // (linearity_check.h): the linear verdicts need it.
  LinearityCheck linearity_;
  // Each level's drifts, sampled a window apart (drift_wander.h).
  std::array<DriftWander, kMaxLevels> wander_{};
  // The longest level's errors against the short references while the
  // drifts cannot tell the wander yet: Σ e² (ns²), Σ S³ (s³, S its span),
  // and how many (see EarlyWanderNegligible).
  double fit_error_sum_ = 0;
  double fit_span3_sum_ = 0;
  int fit_error_count_ = 0;
  // How long after the first sample that holds: until the shortest level
  // can have taken kWanderMinDifferences drift differences.
  int64_t early_wander_ns_ = 0;
  // When each level was last cut alone (a bend its window cannot hold,
  // not a step: the shortest level was not cut): it stays young for a
  // window after.
  std::array<int64_t, kMaxLevels> lone_cut_x_{};
  std::array<bool, kMaxLevels> have_lone_cut_{};
  // When each level's range last blew up (congestion), for eligibility.
  std::array<int64_t, kMaxLevels> blown_x_{};
  std::array<bool, kMaxLevels> have_blown_{};
  std::array<int64_t, kMaxLevels> blown_since_x_{};
  int64_t last_blown_x_ = 0;  // The last blow-up of any level.
  bool have_last_blown_ = false;
  // At the last sample every shorter level that is not young answered
  // inside the longest level's bound (a new normal needs it; step 4).
  bool levels_agree_ = true;
  // PairedUpperBound by (against a candidate or the home, a, b),
  // candidates_² entries per kind; valid until the next scored checkpoint
  // (sized to the candidates, not kMaxCandidates: a cluster simulator
  // holds one per node). A pair against the home is tested as kHome or
  // kLinearHome by bounds_likely_linear_ alone: LikelyLinearHome clears
  // those entries when it moves.
  mutable std::vector<double> bound_cache_;
  mutable std::vector<uint8_t> bound_valid_;
  bool bounds_likely_linear_ = false;  // At the last Select.
  // Estimate at the newest sample's t4, kept by Add (which computed every
  // level's estimate there): the daemon and the cluster simulator ask for
  // it right after each sample.
  TimeEstimate last_estimate_;
  int64_t last_estimate_x_ = 0;
  bool have_last_estimate_ = false;
  int home_ = 0;       // The home candidate.
  double home_wander_ppb_ = 0;  // See home_wander_ppb().
  // The references' wander over the allowance, when above it (at least
  // 1): the answer's bound widens by this times the level's allowance.
  double bound_wander_ratio_ = 1;
  // Where W* falls among the candidates (home_ is the nearest).
  double home_position_ = 0;
  // The answer is the selected level's estimate moved this far towards the
  // next longer level's (0, or in (0, 1) between two levels).
  double longer_weight_ = 0;
  // Then this far towards the longest level's (step 5).
  double linear_weight_ = 0;
  int selected_ = 0;   // The level whose bound answers.
  int guard_level_ = -1;  // GuardLevel at the last Select.
  int candidate_ = 0;  // The candidate whose estimate answers.
  int candidates_ = 1;
  // Levels and their means: the candidates below this index.
  int blends_ = 1;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_ADAPTIVE_ESTIMATOR_H_
