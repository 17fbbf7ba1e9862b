// hull/recent_values.h: RecentValues<N>, the last N values of a series,
// kept in arrival order (a ring) and sorted, so that their minimum and
// median read in O(1) and a new value costs O(N) (no allocation).
//
// The adaptive estimator keeps one per reference kind (the purity test:
// a reference much wider than the recent median is left out) and one per
// level (eligibility: a hull range far above its recent median);
// ReferenceAsymmetry one per reference kind (the smallest recent width,
// and their variance: the references' noise).
//
// Thread safety: none; one owner.

#ifndef CLOCKSYNC_HULL_RECENT_VALUES_H_
#define CLOCKSYNC_HULL_RECENT_VALUES_H_

#include <algorithm>
#include <array>
#include <cstddef>

namespace clocksync::hull {

template <size_t N>
class RecentValues {
  static_assert(N > 0);

 public:
  // Adds `value`; once N are held, the oldest leaves.
  void Add(double value) {
    double* begin = sorted_.data();
    double* end = begin + count_;
    if (count_ == static_cast<int>(N)) {
      double* old = std::lower_bound(begin, end, ring_[next_]);
      std::copy(old + 1, end, old);
      --end;
    }
    double* at = std::upper_bound(begin, end, value);
    std::copy_backward(at, end, end + 1);
    *at = value;
    ring_[next_] = value;
    next_ = (next_ + 1) % static_cast<int>(N);
    count_ = std::min(count_ + 1, static_cast<int>(N));
  }

  // Forgets every value.
  void Clear() {
    count_ = 0;
    next_ = 0;
  }

  int count() const { return count_; }
  static constexpr int capacity() { return static_cast<int>(N); }
  // Both need count() > 0. The median is the upper one of an even count.
  double min() const { return sorted_[0]; }
  double median() const { return sorted_[count_ / 2]; }
  // The variance of the values held (0 below 2), in O(N).
  double variance() const {
    if (count_ < 2) return 0;
    double mean = 0;
    for (int i = 0; i < count_; ++i) mean += sorted_[i];
    mean /= count_;
    double sum2 = 0;
    for (int i = 0; i < count_; ++i) {
      sum2 += (sorted_[i] - mean) * (sorted_[i] - mean);
    }
    return sum2 / (count_ - 1);
  }

 private:
  std::array<double, N> ring_{};    // Arrival order; next_ is the oldest.
  std::array<double, N> sorted_{};  // The first count_ entries, sorted.
  int count_ = 0;
  int next_ = 0;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_RECENT_VALUES_H_
