// hull/sliding_hull.cc
//
// SlidingHull: see sliding_hull.h for the two-part (queue of two stacks)
// scheme and its amortized costs.

#include "hull/sliding_hull.h"

#include <cassert>
#include <cstdlib>

namespace clocksync::hull {

std::vector<uint32_t> BuildChain(const std::vector<Point>& points,
                                 HullSide side) {
  std::vector<uint32_t> chain;
  for (uint32_t i = 0; i < points.size(); ++i) {
    while (chain.size() >= 2) {
      const __int128 turn = Cross(points[chain[chain.size() - 2]],
                                  points[chain.back()], points[i]);
      if (side == HullSide::kLower ? turn > 0 : turn < 0) break;
      chain.pop_back();
    }
    chain.push_back(i);
  }
  return chain;
}

std::vector<Point> BuildChainPoints(const std::vector<Point>& points,
                                    HullSide side) {
  std::vector<Point> chain;
  for (const uint32_t i : BuildChain(points, side)) chain.push_back(points[i]);
  return chain;
}

void SlidingHull::Grow() {
  const size_t old_capacity = ring_.size();
  const size_t new_capacity = old_capacity == 0 ? 64 : old_capacity * 2;
  if (new_capacity > (size_t{1} << 31)) std::abort();  // 2^31 points: misuse.
  std::vector<Point> ring(new_capacity);
  const uint64_t new_mask = new_capacity - 1;
  for (uint64_t seq = head_; seq != tail_; ++seq) {
    ring[seq & new_mask] = ring_[seq & mask_];
  }
  ring_.swap(ring);
  mask_ = new_mask;
}

void SlidingHull::PushBack(const Point& p) {
  assert(empty() || p.x > back().x);
  if (size() == ring_.size()) Grow();
  const uint64_t seq = tail_++;
  ring_[seq & mask_] = p;
  while (back_chain_.size() >= 2 &&
         Removes(back_chain_[back_chain_.size() - 2], back_chain_.back(), p)) {
    back_chain_.pop_back();
  }
  back_chain_.push_back(p);
}

void SlidingHull::RebuildFront() {
  // The whole window becomes the front part; the back part starts empty.
  back_chain_.clear();
  front_chain_.clear();
  undo_.clear();
  split_ = tail_;
  // A count per point and at most one entry per point popped.
  undo_.reserve(static_cast<size_t>(2 * (tail_ - head_)));
  // front_chain_'s sequence numbers, needed only here (to log the popped
  // vertices).
  thread_local std::vector<uint32_t> front_seq;
  front_seq.clear();
  // Prepend points right to left; a chain right to left with the leftmost
  // vertex last. For increasing x the chain reads c (new), b, a: b goes
  // when the turn (c, b, a) is wrong for this side.
  for (uint64_t seq = tail_; seq-- != head_;) {
    const Point& c = point(static_cast<uint32_t>(seq));
    uint32_t popped = 0;
    while (front_chain_.size() >= 2 &&
           Removes(c, front_chain_.back(),
                   front_chain_[front_chain_.size() - 2])) {
      undo_.push_back(front_seq.back());
      front_chain_.pop_back();
      front_seq.pop_back();
      ++popped;
    }
    undo_.push_back(popped);
    front_chain_.push_back(c);
    front_seq.push_back(static_cast<uint32_t>(seq));
  }
}

void SlidingHull::PopFront() {
  assert(!empty());
  if (head_ == split_) RebuildFront();
  const uint64_t seq = head_++;
  // The leftmost point of a suffix is always a vertex of its hull.
  assert(!front_chain_.empty() &&
         front_chain_.back().x == point(static_cast<uint32_t>(seq)).x);
  (void)seq;
  front_chain_.pop_back();
  // Undo the prepend: restore popped vertices, last popped first.
  uint32_t popped = undo_.back();
  undo_.pop_back();
  for (; popped > 0; --popped) {
    front_chain_.push_back(point(undo_.back()));
    undo_.pop_back();
  }
  // Front part used up: every prepend is undone.
  assert(head_ != split_ || (front_chain_.empty() && undo_.empty()));
}

void SlidingHull::Clear() {
  head_ = split_ = tail_ = 0;
  back_chain_.clear();
  front_chain_.clear();
  undo_.clear();
}

size_t SlidingHull::memory_bytes() const {
  return sizeof(*this) + ring_.capacity() * sizeof(Point) +
         (back_chain_.capacity() + front_chain_.capacity()) * sizeof(Point) +
         undo_.capacity() * sizeof(uint32_t);
}

}  // namespace clocksync::hull
