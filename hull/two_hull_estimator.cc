// hull/two_hull_estimator.cc: TwoHullEstimator (see two_hull_estimator.h
// for the model and costs, estimator.h for the conventions).

#include "hull/two_hull_estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace clocksync::hull {
namespace {

// A point closer than this (ns) to a cached line counts as touching it, so
// rounding in the double-valued lines can only cause extra recomputation.
constexpr double kTouchToleranceNs = 0.01;

// std::floor, std::ceil and std::llround of a double, as integers, with
// the same results; inline (without SSE4.1 the library's are calls, three
// per estimate). Below 2^62 in magnitude the truncating conversion is exact
// for integers and x - trunc(x) is exact; beyond, the library decides.
constexpr double kExactTruncation = 0x1p62;

int64_t FloorToInt(double x) {
  if (!(std::fabs(x) < kExactTruncation)) {
    return static_cast<int64_t>(std::floor(x));
  }
  const int64_t t = static_cast<int64_t>(x);  // Towards zero.
  return static_cast<double>(t) > x ? t - 1 : t;
}

int64_t CeilToInt(double x) {
  if (!(std::fabs(x) < kExactTruncation)) {
    return static_cast<int64_t>(std::ceil(x));
  }
  const int64_t t = static_cast<int64_t>(x);
  return static_cast<double>(t) < x ? t + 1 : t;
}

// Rounds half away from zero, as std::llround.
int64_t RoundToInt(double x) {
  if (!(std::fabs(x) < kExactTruncation)) return std::llround(x);
  const int64_t t = static_cast<int64_t>(x);
  const double fraction = x - static_cast<double>(t);
  return t + (fraction >= 0.5) - (fraction <= -0.5);
}

// True when a bounded, feasible separation's lines all have |slope| above
// max_drift (ns per ns): physically implausible, treated as inconsistent.
bool BeyondMaxDrift(const Separation& sep, double max_drift) {
  return sep.bounded && sep.feasible &&
         (sep.min_slope.value() > max_drift ||
          sep.max_slope.value() < -max_drift);
}

}  // namespace

TwoHullEstimator::TwoHullEstimator(const EstimatorConfig& config)
    : config_(config) {}

HullChains TwoHullEstimator::Chains() const {
  HullChains chains;
  chains.lower = {requests_.front_chain(), requests_.back_chain()};
  chains.upper = {responses_.front_chain(), responses_.back_chain()};
  return chains;
}

void TwoHullEstimator::Recompute() {
  // While the max-margin line stands (and the supports are known), only
  // the extreme lines that moved are walked to again.
  const bool partial = (dirty_ & kDirtyMid) == 0 && sep_.bounded &&
                       sep_.feasible && sep_.supports_known;
  if (!partial || !UpdateExtremeLines(Chains(), (dirty_ & kDirtyMin) != 0,
                                      (dirty_ & kDirtyMax) != 0, &sep_)) {
    sep_ = Separate(Chains());
  }
  dirty_ = 0;
  ++stats_.line_recomputations;
}

int TwoHullEstimator::Touches(const Point& request,
                              const Point& response) const {
  if (dirty_ == kDirtyAll || !sep_.bounded || !sep_.feasible) {
    return kDirtyAll;
  }
  const double room = sep_.margin + kTouchToleranceNs;
  // Request points must stay above every cached line, response points below.
  int touched = 0;
  if (static_cast<double>(request.y) - sep_.mid.At(request.x) < room ||
      sep_.mid.At(response.x) - static_cast<double>(response.y) < room) {
    touched |= kDirtyMid;
  }
  if (static_cast<double>(request.y) - sep_.max_line.At(request.x) <
          kTouchToleranceNs ||
      sep_.max_line.At(response.x) - static_cast<double>(response.y) <
          kTouchToleranceNs) {
    touched |= kDirtyMax;
  }
  if (static_cast<double>(request.y) - sep_.min_line.At(request.x) <
          kTouchToleranceNs ||
      sep_.min_line.At(response.x) - static_cast<double>(response.y) <
          kTouchToleranceNs) {
    touched |= kDirtyMin;
  }
  return touched;
}

void TwoHullEstimator::PushPoints(const Point& request,
                                  const Point& response) {
  requests_.PushBack(request);
  responses_.PushBack(response);
}

void TwoHullEstimator::PopOldest() {
  const Point& request = requests_.front();
  const Point& response = responses_.front();
  if (dirty_ != kDirtyAll) {
    if (sep_.supports_known && sep_.bounded && sep_.feasible) {
      // A line moves only when a point it rests on leaves: supports 0 are
      // the smallest slope's line's, 3 the largest's, 1 and 2 the
      // max-margin line's.
      static constexpr int kLine[4] = {kDirtyMin, kDirtyMid, kDirtyMid,
                                       kDirtyMax};
      for (int k = 0; k < 4; ++k) {
        if (request.x == sep_.request_support_x[k] ||
            response.x == sep_.response_support_x[k]) {
          dirty_ |= kLine[k];
        }
      }
    } else if (Touches(request, response) != 0) {
      dirty_ = kDirtyAll;
    }
  }
  requests_.PopFront();
  responses_.PopFront();
}

AddResult TwoHullEstimator::Add(const ProbeSample& s) {
  // Plausibility first: nothing implausible reaches the hulls.
  if (s.t4_ns < s.t1_ns) {
    ++stats_.rejected_receive_before_send;
    return AddResult::kRejectedReceiveBeforeSend;
  }
  if (s.t3_ns < s.t2_ns) {
    ++stats_.rejected_reply_before_request;
    return AddResult::kRejectedReplyBeforeRequest;
  }
  if (s.parent_bound_ns < 0 || s.parent_bound_ns > config_.max_parent_bound_ns) {
    ++stats_.rejected_parent_bound;
    return AddResult::kRejectedParentBound;
  }
  // (t4 − t1) − (t3 − t2), computed without overflow for any int64 inputs.
  // t2 and t3 are known within ± parent_bound_ns (which also covers the
  // receive stamps' conversion, hull/probe_sample.h), so a round trip down
  // to −2 · parent_bound_ns is consistent with a non-negative true one.
  const __int128 round_trip = static_cast<__int128>(s.t4_ns) - s.t1_ns -
                              (static_cast<__int128>(s.t3_ns) - s.t2_ns);
  if (round_trip < -2 * static_cast<__int128>(s.parent_bound_ns) ||
      round_trip > config_.max_round_trip_ns) {
    ++stats_.rejected_round_trip;
    return AddResult::kRejectedRoundTrip;
  }
  if (have_last_ && (s.t1_ns <= last_t1_ || s.t4_ns <= last_t4_)) {
    ++stats_.rejected_time_backwards;
    return AddResult::kRejectedTimeBackwards;
  }
  have_last_ = true;
  last_t1_ = s.t1_ns;
  last_t4_ = s.t4_ns;
  ++stats_.accepted;
  const int64_t rtt = std::max<int64_t>(0, static_cast<int64_t>(round_trip));
  stats_.min_round_trip_ns = stats_.accepted == 1
                                 ? rtt
                                 : std::min(stats_.min_round_trip_ns, rtt);

  // Offsets of hours and epoch timestamps: __int128 keeps the subtraction
  // exact; relative values fit int64 for any realistic input.
  const __int128 request_offset =
      static_cast<__int128>(s.t2_ns) - s.t1_ns + s.parent_bound_ns;
  const __int128 response_offset =
      static_cast<__int128>(s.t3_ns) - s.t4_ns - s.parent_bound_ns;
  if (!have_anchor_) {
    have_anchor_ = true;
    anchor_x_ = s.t1_ns;
    anchor_y_ = static_cast<int64_t>(request_offset);
  }
  const Point request{s.t1_ns - anchor_x_,
                      static_cast<int64_t>(request_offset - anchor_y_)};
  const Point response{s.t4_ns - anchor_x_,
                       static_cast<int64_t>(response_offset - anchor_y_)};

  dirty_ |= Touches(request, response);
  PushPoints(request, response);
  // Slide the window: drop samples that are too old or over the cap.
  while (requests_.size() > config_.max_samples ||
         response.x - responses_.front().x > config_.window_ns) {
    PopOldest();
  }
  if (dirty_ == 0) return AddResult::kAccepted;
  Recompute();
  if ((sep_.bounded && !sep_.feasible) ||
      BeyondMaxDrift(sep_, config_.max_drift_ppm * 1e-6)) {
    ++stats_.inconsistencies;
    stats_.last_inconsistency_local_ns = s.t4_ns;
    Recover();
    return AddResult::kAcceptedAfterInconsistency;
  }
  return AddResult::kAccepted;
}

void TwoHullEstimator::Recover() {
  const size_t n = requests_.size();
  std::vector<Point> req(n), resp(n);
  for (size_t i = 0; i < n; ++i) {
    req[i] = requests_.at(i);
    resp[i] = responses_.at(i);
  }
  // Is the run of the newest k samples consistent (or still unbounded)?
  std::vector<Point> sub_req, sub_resp;
  auto consistent = [&](size_t k) {
    sub_req.assign(req.end() - k, req.end());
    sub_resp.assign(resp.end() - k, resp.end());
    const std::vector<Point> lower =
        BuildChainPoints(sub_req, HullSide::kLower);
    const std::vector<Point> upper =
        BuildChainPoints(sub_resp, HullSide::kUpper);
    HullChains chains;
    chains.lower[0] =
        ChainView(lower.data(), static_cast<int>(lower.size()), false);
    chains.upper[0] =
        ChainView(upper.data(), static_cast<int>(upper.size()), false);
    const Separation sep = Separate(chains);
    return !sep.bounded ||
           (sep.feasible && !BeyondMaxDrift(sep, config_.max_drift_ppm * 1e-6));
  };
  // Consistency only gets harder as samples are added (more constraints):
  // gallop from the newest sample, then bisect.
  size_t good = 1, bad = n;  // consistent(good), !consistent(bad).
  for (size_t k = 2; k < n; k *= 2) {
    if (!consistent(k)) {
      bad = k;
      break;
    }
    good = k;
  }
  while (bad - good > 1) {
    const size_t mid = good + (bad - good) / 2;
    (consistent(mid) ? good : bad) = mid;
  }
  requests_.Clear();
  responses_.Clear();
  for (size_t i = n - good; i < n; ++i) PushPoints(req[i], resp[i]);
  dirty_ = kDirtyAll;
  Recompute();
}

void TwoHullEstimator::Reset() {
  requests_.Clear();
  responses_.Clear();
  have_anchor_ = false;
  have_last_ = false;
  sep_ = Separation();
  dirty_ = kDirtyAll;
}

int64_t TwoHullEstimator::window_span_ns() const {
  if (responses_.empty()) return 0;
  return responses_.back().x - responses_.front().x;
}

size_t TwoHullEstimator::memory_bytes() const {
  return sizeof(*this) - sizeof(requests_) - sizeof(responses_) +
         requests_.memory_bytes() + responses_.memory_bytes();
}

double TwoHullEstimator::AllowanceNs(int64_t x_rel) const {
  if (config_.wander_ppb_per_sqrt_s == 0) return 0;
  const int64_t newest = std::max(requests_.back().x, responses_.back().x);
  const int64_t oldest = std::min(requests_.front().x, responses_.front().x);
  const int64_t outside =
      std::max<int64_t>({0, x_rel - newest, oldest - x_rel});
  const double seconds =
      static_cast<double>(newest - oldest + outside) * 1e-9;
  return config_.wander_ppb_per_sqrt_s * seconds * std::sqrt(seconds);
}

double TwoHullEstimator::AllowanceAtNs(int64_t local_ns) const {
  if (requests_.empty()) return 0;
  return AllowanceNs(local_ns - anchor_x_);
}

TimeEstimate TwoHullEstimator::Estimate(int64_t local_ns) const {
  double allowance_ns;
  return Estimate(local_ns, &allowance_ns);
}

TimeEstimate TwoHullEstimator::Estimate(int64_t local_ns,
                                        double* allowance_ns) const {
  TimeEstimate e;
  if (requests_.empty() || dirty_ != 0 || !sep_.bounded || !sep_.feasible) {
    return e;
  }
  const bool recovering =
      stats_.inconsistencies > 0 &&
      last_t4_ - stats_.last_inconsistency_local_ns < config_.recovery_hold_ns;
  e.state = recovering ? SyncState::kRecovering : SyncState::kSynced;

  const int64_t x = local_ns - anchor_x_;
  double low, high;
  if (x >= requests_.back().x && x >= responses_.back().x) {
    // At or after the newest sample: the extreme lines bound it.
    low = sep_.min_line.At(x);
    high = sep_.max_line.At(x);
  } else {
    const OffsetRange range = FeasibleRangeAt(Chains(), sep_, x);
    low = range.low;
    high = range.high;
  }
  const double estimate = std::clamp(sep_.mid.At(x), low, high);
  const double allowance = AllowanceNs(x);
  *allowance_ns = allowance;
  // global = local + anchor_y + θ_rel; the bound rounds outwards.
  const int64_t base = local_ns + anchor_y_;
  e.global_ns = base + RoundToInt(estimate);
  e.earliest_ns = base + FloorToInt(low - allowance);
  e.latest_ns = base + CeilToInt(high + allowance);
  e.offset_ns = e.global_ns - local_ns;
  e.drift_ppb = sep_.mid.slope * 1e9;
  return e;
}

}  // namespace clocksync::hull
