// hull/sliding_hull.h
//
// SlidingHull: one convex chain (lower or upper) over a first-in first-out
// window of points whose x strictly increases.
//
// The window is split in two parts, as in a queue built from two stacks:
//   - the back part [split, tail): its hull is kept by Andrew's monotone chain,
//     appending on the right (amortized O(1) per point);
//   - the front part [head, split): its hull is kept for every suffix at once.
//     It was built right to left, each prepended point popping some vertices;
//     those are logged on a stack, so removing the leftmost point undoes its
//     prepend (restores what it popped) in O(popped), reading only the top
//     of the stack.
// When the front part runs empty, the whole window becomes the new front part
// (an O(n) rebuild once per n removals). Every operation is amortized O(1);
// nothing is rebuilt per sample.
//
// The hull of the whole window is the hull of the two chains. Queries work on
// the two chains directly (see separation.h), so they are never merged.
//
// Coordinates are exact integers (ns, relative to an anchor chosen by the
// caller); orientation tests use 128-bit products, so hulls are exact.
//
// Thread safety: none; one owner.

#ifndef CLOCKSYNC_HULL_SLIDING_HULL_H_
#define CLOCKSYNC_HULL_SLIDING_HULL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace clocksync::hull {

// A point in (local time, offset) space, both in ns relative to an anchor.
struct Point {
  int64_t x;
  int64_t y;
};

// Twice the signed area of triangle (o, a, b): > 0 for a left (counter-
// clockwise) turn, < 0 for a right turn, 0 when collinear. Exact.
inline __int128 Cross(const Point& o, const Point& a, const Point& b) {
  return static_cast<__int128>(a.x - o.x) * (b.y - o.y) -
         static_cast<__int128>(a.y - o.y) * (b.x - o.x);
}

enum class HullSide {
  kLower,  // The chain below the points: every point lies on or above it.
  kUpper,  // The chain above the points: every point lies on or below it.
};

// A read-only view of one convex chain, vertices ordered by increasing x:
// `size` vertices at `vertices`, stored left to right, or right to left
// when `reversed`. Valid until the owner of the vertices modifies them.
class ChainView {
 public:
  ChainView() = default;
  ChainView(const Point* vertices, int size, bool reversed)
      : vertices_(vertices), size_(size), reversed_(reversed) {}

  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Vertex k, 0 <= k < size(), counted from the left.
  const Point& vertex(int k) const {
    return vertices_[reversed_ ? size_ - 1 - k : k];
  }
  // Copies the vertices, left to right, to out[0, size()).
  void CopyTo(Point* out) const {
    if (reversed_) {
      std::reverse_copy(vertices_, vertices_ + size_, out);
    } else {
      std::copy(vertices_, vertices_ + size_, out);
    }
  }

 private:
  const Point* vertices_ = nullptr;
  int size_ = 0;
  bool reversed_ = false;
};

// One convex chain over points sorted by strictly increasing x, built from
// scratch by Andrew's monotone chain: indices into `points`, left to right.
// (SlidingHull maintains the same chain incrementally.)
std::vector<uint32_t> BuildChain(const std::vector<Point>& points,
                                 HullSide side);
// The same chain's vertices, left to right (for a ChainView).
std::vector<Point> BuildChainPoints(const std::vector<Point>& points,
                                    HullSide side);

class SlidingHull {
 public:
  explicit SlidingHull(HullSide side) : side_(side) {}

  SlidingHull(const SlidingHull&) = delete;
  SlidingHull& operator=(const SlidingHull&) = delete;

  // Appends a point; its x must exceed the x of the newest point.
  void PushBack(const Point& p);
  // Removes the oldest point. The window must not be empty.
  void PopFront();
  // Removes every point (keeps allocated memory).
  void Clear();

  size_t size() const { return static_cast<size_t>(tail_ - head_); }
  bool empty() const { return head_ == tail_; }
  // The i-th point of the window, 0 = oldest.
  const Point& at(size_t i) const { return ring_[(head_ + i) & mask_]; }
  const Point& front() const { return at(0); }
  const Point& back() const { return ring_[(tail_ - 1) & mask_]; }

  // The hull chain of the front part (older points) and of the back part.
  // Every x of the front chain is below every x of the back chain.
  ChainView front_chain() const {
    return ChainView(front_chain_.data(),
                     static_cast<int>(front_chain_.size()), /*reversed=*/true);
  }
  ChainView back_chain() const {
    return ChainView(back_chain_.data(), static_cast<int>(back_chain_.size()),
                     /*reversed=*/false);
  }
  // Vertices in both chains (an upper bound on the merged hull's size).
  size_t chain_vertices() const {
    return front_chain_.size() + back_chain_.size();
  }

  // Bytes held by this structure (capacity, not just size).
  size_t memory_bytes() const;

 private:
  // True when b should be removed from a chain ...a, b, c (non-convex or
  // collinear turn for this side), for points in increasing x.
  bool Removes(const Point& a, const Point& b, const Point& c) const {
    const __int128 turn = Cross(a, b, c);
    return side_ == HullSide::kLower ? turn <= 0 : turn >= 0;
  }
  const Point& point(uint32_t seq) const { return ring_[seq & mask_]; }
  void Grow();
  void RebuildFront();

  HullSide side_;
  // Points by sequence number; a power-of-two ring indexed by seq & mask_.
  std::vector<Point> ring_;
  uint64_t mask_ = 0;
  uint64_t head_ = 0;   // Sequence number of the oldest point.
  uint64_t split_ = 0;  // First sequence number of the back part.
  uint64_t tail_ = 0;   // One past the newest point.

  // The chains hold their vertices (queries read them directly).
  std::vector<Point> back_chain_;    // Left to right.
  std::vector<Point> front_chain_;   // Right to left: back() is leftmost.
  // The undo log, a stack. RebuildFront prepends the front points right to
  // left and pushes, for each, the sequence numbers (truncated to 32 bits:
  // the ring is never larger than 2^31 points, so seq & mask_ recovers the
  // slot) of the vertices its prepend popped, in pop order, then their
  // count. PopFront removes the front points left to right, the reverse
  // order, so the leftmost point's entries are always on top: a pop reads
  // the end of one array (a separate index array and log would make it
  // read two places of memory, each a cache miss for a cold window).
  std::vector<uint32_t> undo_;
};

}  // namespace clocksync::hull

#endif  // CLOCKSYNC_HULL_SLIDING_HULL_H_
