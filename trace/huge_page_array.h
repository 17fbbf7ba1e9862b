// trace/huge_page_array.h: a growable array of trivially copyable records
// for the level-of-detail index's build (trace/lod_index.h): once it holds
// 2 MiB it lives in an anonymous mapping aligned to 2 MiB and advised for
// transparent huge pages (MADV_HUGEPAGE), and grows by moving its pages
// (mremap), never by copying them.
//
// Why: the index of 100 M events is some 700 MB of records written once.
// On a virtual machine a page fault costs microseconds, so filling fresh
// memory 4 KiB at a time (measured 0.2 GB/s here) costs more than building
// the records; with huge pages it is one fault per 2 MiB (1 GB/s), and a
// copy on growth would touch it all twice. With the kernel's transparent
// huge pages set to `madvise` (Debian's default) the advice turns them on;
// with `never` the array works as before, with small pages.
//
// Example:
//   HugePageArray<LodFunctionRecord> records;
//   records.reserve(1 << 20);
//   records.push_back(r);
//   absl::Span<const LodFunctionRecord> all(records.data(), records.size());
//
// Thread safety: none (one owner, like std::vector).

#ifndef CLOCKSYNC_TRACE_HUGE_PAGE_ARRAY_H_
#define CLOCKSYNC_TRACE_HUGE_PAGE_ARRAY_H_

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace clocksync::trace {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Storage of at least `bytes` for HugePageArray: `*capacity` is set to
// what was given. Under kHugePageBytes, operator new; from there an
// aligned, advised mapping (a multiple of kHugePageBytes). Throws
// std::bad_alloc when the memory cannot be had.
void* AllocateRecords(size_t bytes, size_t* capacity);
// Grows `p` (of `capacity` bytes, `used` of them in use) to at least
// `bytes`: a mapping is moved (mremap) to a larger aligned one, small
// storage copied into a new one. Returns the new storage.
void* GrowRecords(void* p, size_t used, size_t* capacity, size_t bytes);
void FreeRecords(void* p, size_t capacity);

template <typename T>
class HugePageArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  HugePageArray() = default;
  HugePageArray(const HugePageArray& other) { *this = other; }
  HugePageArray(HugePageArray&& other) noexcept { swap(other); }
  HugePageArray& operator=(const HugePageArray& other) {
    if (this != &other) {
      clear();
      reserve(other.size_);
      if (other.size_ > 0) std::memcpy(data_, other.data_, other.size_ * sizeof(T));
      size_ = other.size_;
    }
    return *this;
  }
  HugePageArray& operator=(HugePageArray&& other) noexcept {
    HugePageArray moved(std::move(other));
    swap(moved);
    return *this;
  }
  ~HugePageArray() {
    if (data_ != nullptr) FreeRecords(data_, capacity_bytes_);
  }

  void swap(HugePageArray& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_bytes_, other.capacity_bytes_);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_bytes_ / sizeof(T); }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }

  // Room for `n` records; past the capacity, at least doubles it.
  void reserve(size_t n) {
    if (n <= capacity()) return;
    if (n > static_cast<size_t>(-1) / sizeof(T) / 2) throw std::bad_alloc();
    const size_t bytes = std::max(n * sizeof(T), 2 * capacity_bytes_);
    data_ = static_cast<T*>(
        data_ == nullptr ? AllocateRecords(bytes, &capacity_bytes_)
                         : GrowRecords(data_, size_ * sizeof(T), &capacity_bytes_, bytes));
  }
  void push_back(const T& r) {
    if (size_ == capacity()) reserve(size_ + 1);
    data_[size_++] = r;
  }
  void clear() { size_ = 0; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_bytes_ = 0;
};

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TRACE_HUGE_PAGE_ARRAY_H_
