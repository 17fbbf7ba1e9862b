// hull/round_trips.cc: RoundTrips (see round_trips.h).

#include "hull/round_trips.h"

#include <algorithm>
#include <limits>

namespace clocksync::hull {
namespace {

// The median is found by stepping from the last one over at most this many
// distinct values (each two passes over the round trips), else selected
// afresh.
constexpr int kMedianMaxSteps = 4;
// A round trip above the clean minimum + this many clean spreads is
// congested (by chance hardly a run of kCongestedRun: an hour of Pareto
// delays with α 1.5 at 20 probes/s had 3 congested samples of 72,000,
// AdaptiveEstimatorTest.HeavyTailsAreNotCongestion).
constexpr double kCleanLimitSpreads = 2.0;

}  // namespace

static_assert(RoundTrips::kSize <= 256, "queue_ holds ring positions");

RoundTrips::RoundTrips(int64_t longest_window_ns, int64_t floor_window_ns)
    : longest_window_ns_(longest_window_ns),
      floor_window_ns_(floor_window_ns) {}

void RoundTrips::Add(double round_trip_ns, int64_t x) {
  const int newest = next_;
  values_[next_] = round_trip_ns;
  x_[next_] = x;
  next_ = (next_ + 1) % kSize;
  count_ = std::min(count_ + 1, kSize);
  TrackCongestion(round_trip_ns, x);
  TrackFloor(newest, x);
}

int64_t RoundTrips::SpanNs() const {
  if (count_ == 0) return 0;
  const int newest = (next_ + kSize - 1) % kSize;
  const int oldest = count_ < kSize ? 0 : next_;
  return x_[newest] - x_[oldest];
}

double RoundTrips::SpreadFloor(int64_t x) {
  double median, minimum;
  Median(&median, &minimum);
  if (spreads_count_ == 0 || !CongestionHeld(x)) {
    spreads_[spreads_next_] = median - minimum;
    spreads_next_ = (spreads_next_ + 1) % kSpreadFloorCheckpoints;
    spreads_count_ = std::min(spreads_count_ + 1, kSpreadFloorCheckpoints);
    RecordCleanSpread(median - minimum, minimum);
  }
  return std::max(
      *std::min_element(spreads_.begin(), spreads_.begin() + spreads_count_),
      1.0);
}

double RoundTrips::CongestedNs(int64_t from, int64_t to,
                               Intervals which) const {
  // The union of the two kinds' intervals within [from, to]: each list is
  // in time order and its intervals do not overlap; merged by their
  // beginnings, every interval adds what lies beyond the reach of those
  // before it.
  const auto& runs = runs_.intervals;
  const auto& risen = risen_.intervals;
  const size_t risen_count = which == Intervals::kAll ? risen.size() : 0;
  double total = 0;
  int64_t reach = from;
  size_t i = 0, j = 0;
  while (i < runs.size() || j < risen_count) {
    const bool run = j >= risen_count ||
                     (i < runs.size() && runs[i].first <= risen[j].first);
    const auto& [begin, end] = run ? runs[i++] : risen[j++];
    const int64_t low = std::max(begin, reach);
    const int64_t high = std::min(end, to);
    if (high > low) total += static_cast<double>(high - low);
    reach = std::max(reach, high);
  }
  return total;
}

double RoundTrips::FloorRiseNs() const {
  if (!have_limit_ || queue_size_ == 0) return 0;
  return std::max(0.0, values_[queue_[queue_head_]] - clean_floor_);
}

void RoundTrips::TrackCongestion(double round_trip_ns, int64_t x) {
  if (have_limit_ && round_trip_ns > limit_) {
    // From the last clean round trip: nothing after it reached the hulls'
    // low-delay edge.
    if (++run_ >= kCongestedRun) runs_.Mark(last_clean_x_, x);
  } else {
    run_ = 0;
    runs_.open = false;
    last_clean_x_ = x;
  }
  if (new_normal_allowed_ &&
      static_cast<double>(runs_.OpenFor(x)) >
          kNewNormalFraction * static_cast<double>(longest_window_ns_)) {
    // Congested for so long: the delays have changed for good (a longer
    // route). Forget the episode and learn the limit afresh.
    StartAfresh();
  }
  runs_.Expire(x - longest_window_ns_);
}

void RoundTrips::TrackFloor(int newest, int64_t x) {
  const int64_t seq = added_++;
  // The window: the round trips of the last floor_window_ns_, at least
  // kFloorMinRoundTrips of them, at most the ring's.
  while (window_begin_ < added_ - kSize ||
         (window_begin_ < added_ - kFloorMinRoundTrips &&
          x_[window_begin_ % kSize] < x - floor_window_ns_)) {
    ++window_begin_;
  }
  // Ring position → sequence number, for the positions the ring holds
  // (the newest round trip's position held the one kSize before it: an
  // entry there left the window).
  auto seq_at = [&](int position) {
    return position == newest ? seq - kSize
                              : seq - (newest - position + kSize) % kSize;
  };
  while (queue_size_ > 0 && seq_at(queue_[queue_head_]) < window_begin_) {
    queue_head_ = (queue_head_ + 1) % kSize;
    --queue_size_;
  }
  const double round_trip_ns = values_[newest];
  while (queue_size_ > 0 &&
         values_[queue_[(queue_head_ + queue_size_ - 1) % kSize]] >=
             round_trip_ns) {
    --queue_size_;
  }
  queue_[(queue_head_ + queue_size_) % kSize] = static_cast<uint8_t>(newest);
  ++queue_size_;

  if (!have_limit_ || round_trip_ns <= floor_limit_) last_low_x_ = x;
  const bool risen = have_limit_ &&
                     added_ - window_begin_ >=
                         std::min(kFloorMinRoundTrips, count_) &&
                     values_[queue_[queue_head_]] > floor_limit_;
  if (risen) {
    // From the last round trip at or below the floor limit: the queue
    // stood in every one after it.
    risen_.Mark(last_low_x_, x);
  } else {
    risen_.open = false;
  }
  if (risen_.OpenFor(x) > longest_window_ns_) {
    // No window holds a round trip at the clean floor any more: a longer
    // route, as in TrackCongestion.
    StartAfresh();
  }
  risen_.Expire(x - longest_window_ns_);
}

void RoundTrips::StartAfresh() {
  runs_.Clear();
  run_ = 0;
  risen_.Clear();
  have_limit_ = false;
  clean_spreads_count_ = 0;
  clean_spreads_next_ = 0;
}

void RoundTrips::RecordCleanSpread(double spread_ns, double minimum_ns) {
  clean_spreads_[clean_spreads_next_] = spread_ns;
  clean_minima_[clean_spreads_next_] = minimum_ns;
  clean_spreads_next_ = (clean_spreads_next_ + 1) % kCleanSpreads;
  clean_spreads_count_ = std::min(clean_spreads_count_ + 1, kCleanSpreads);
  std::array<double, kCleanSpreads> sorted = clean_spreads_;
  const int middle = clean_spreads_count_ / 2;
  std::nth_element(sorted.begin(), sorted.begin() + middle,
                   sorted.begin() + clean_spreads_count_);
  const double clean_spread = std::max(sorted[middle], 1.0);
  limit_ = minimum_ns + kCleanLimitSpreads * clean_spread;
  clean_floor_ = *std::min_element(
      clean_minima_.begin(), clean_minima_.begin() + clean_spreads_count_);
  floor_limit_ = clean_floor_ + kFloorRiseSpreads * clean_spread;
  have_limit_ = true;
}

void RoundTrips::Median(double* median, double* minimum) {
  const int n = count_;
  const double* v = values_.data();
  const int k = n / 2;  // The median's rank (0 = the smallest).
  // Between checkpoints a few round trips change (9 of 127 at 1 probe/s)
  // and the median moves by a few ranks: counting from the last median m
  // finds the new one in a few branch-free passes, where a selection
  // (std::nth_element) over the whole ring cost more than the rest of the
  // checkpoint. The same value: the k-th smallest of the multiset.
  if (have_last_median_) {
    const double m = last_median_;
    int less = 0, equal = 0;
    double lowest = v[0];
    for (int i = 0; i < n; ++i) {
      less += v[i] < m ? 1 : 0;
      equal += v[i] == m ? 1 : 0;
      lowest = std::min(lowest, v[i]);
    }
    // The values below m fill ranks [0, less), m [less, less + equal),
    // those above [less + equal, n). Step from m towards rank k over the
    // distinct values, largest below m first or smallest above it first.
    const bool below = k < less;
    int steps = below ? less - k : k - (less + equal) + 1;
    if (steps <= 0) {
      *median = m;
      *minimum = lowest;
      return;
    }
    if (steps <= kMedianMaxSteps) {
      double at = m;
      for (;;) {
        // The next distinct value beyond `at`, and how many hold it.
        double next = below ? -std::numeric_limits<double>::infinity()
                            : std::numeric_limits<double>::infinity();
        for (int i = 0; i < n; ++i) {
          next = below ? (v[i] < at ? std::max(next, v[i]) : next)
                       : (v[i] > at ? std::min(next, v[i]) : next);
        }
        int count = 0;
        for (int i = 0; i < n; ++i) count += v[i] == next ? 1 : 0;
        if (steps <= count) {
          *median = last_median_ = next;
          *minimum = lowest;
          return;
        }
        steps -= count;
        at = next;
      }
    }
  }
  // The first median, or one far from the last: select.
  std::array<double, kSize> sorted = values_;
  std::nth_element(sorted.begin(), sorted.begin() + k, sorted.begin() + n);
  *median = last_median_ = sorted[k];
  *minimum = *std::min_element(sorted.begin(), sorted.begin() + n);
  have_last_median_ = true;
}

}  // namespace clocksync::hull
