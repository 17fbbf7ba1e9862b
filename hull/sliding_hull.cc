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
  front_seq_.clear();
  undo_log_.clear();
  front_base_ = head_;
  split_ = tail_;
  undo_begin_.resize(static_cast<size_t>(tail_ - head_));
  // Prepend points right to left; a chain right to left with the leftmost
  // vertex last. For increasing x the chain reads c (new), b, a: b goes
  // when the turn (c, b, a) is wrong for this side.
  for (uint64_t seq = tail_; seq-- != head_;) {
    const Point& c = point(static_cast<uint32_t>(seq));
    undo_begin_[seq - front_base_] = static_cast<uint32_t>(undo_log_.size());
    while (front_chain_.size() >= 2 &&
           Removes(c, front_chain_.back(),
                   front_chain_[front_chain_.size() - 2])) {
      undo_log_.push_back(front_seq_.back());
      front_chain_.pop_back();
      front_seq_.pop_back();
    }
    front_chain_.push_back(c);
    front_seq_.push_back(static_cast<uint32_t>(seq));
  }
  undo_end_ = static_cast<uint32_t>(undo_log_.size());
}

void SlidingHull::PopFront() {
  assert(!empty());
  if (head_ == split_) RebuildFront();
  const uint64_t seq = head_++;
  // The leftmost point of a suffix is always a vertex of its hull.
  assert(!front_seq_.empty() &&
         front_seq_.back() == static_cast<uint32_t>(seq));
  front_chain_.pop_back();
  front_seq_.pop_back();
  const size_t k = static_cast<size_t>(seq - front_base_);
  const uint32_t begin = undo_begin_[k];
  const uint32_t end = k == 0 ? undo_end_ : undo_begin_[k - 1];
  // Undo the prepend: restore popped vertices, last popped first.
  for (uint32_t i = end; i-- != begin;) {
    front_seq_.push_back(undo_log_[i]);
    front_chain_.push_back(point(undo_log_[i]));
  }
  if (head_ == split_) {
    // Front part used up; release the log so memory follows the window.
    front_chain_.clear();
    front_seq_.clear();
    undo_log_.clear();
    undo_begin_.clear();
  }
}

void SlidingHull::Clear() {
  head_ = split_ = tail_ = 0;
  back_chain_.clear();
  front_chain_.clear();
  front_seq_.clear();
  undo_log_.clear();
  undo_begin_.clear();
  front_base_ = 0;
  undo_end_ = 0;
}

ChainView SlidingHull::front_chain() const {
  return ChainView(front_chain_.data(), static_cast<int>(front_chain_.size()),
                   /*reversed=*/true);
}

ChainView SlidingHull::back_chain() const {
  return ChainView(back_chain_.data(), static_cast<int>(back_chain_.size()),
                   /*reversed=*/false);
}

size_t SlidingHull::memory_bytes() const {
  return sizeof(*this) + ring_.capacity() * sizeof(Point) +
         (back_chain_.capacity() + front_chain_.capacity()) * sizeof(Point) +
         (front_seq_.capacity() + undo_log_.capacity() +
          undo_begin_.capacity()) *
             sizeof(uint32_t);
}

}  // namespace clocksync::hull
