// trace/huge_page_array.cc: the storage of HugePageArray: operator new for
// small arrays, aligned mappings advised for transparent huge pages, moved
// by mremap as they grow (see huge_page_array.h).

#include "trace/huge_page_array.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>

namespace clocksync::trace {
namespace {

size_t Rounded(size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

// An aligned mapping of `size` bytes (a multiple of kHugePageBytes): one
// huge page more is mapped, so that an aligned start fits, and the ends
// are given back.
void* MapAligned(size_t size) {
  void* map = mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t base = reinterpret_cast<uintptr_t>(map);
  const uintptr_t start = Rounded(base);
  if (start > base) munmap(map, start - base);
  const uintptr_t tail = base + size + kHugePageBytes - (start + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(start + size), tail);
  void* p = reinterpret_cast<void*>(start);
  madvise(p, size, MADV_HUGEPAGE);  // advice: without it, small pages
  return p;
}

}  // namespace

void* AllocateRecords(size_t bytes, size_t* capacity) {
  if (bytes < kHugePageBytes) {
    *capacity = bytes;
    return ::operator new(bytes);
  }
  *capacity = Rounded(bytes);
  return MapAligned(*capacity);
}

void* GrowRecords(void* p, size_t used, size_t* capacity, size_t bytes) {
  if (*capacity < kHugePageBytes) {
    size_t grown = 0;
    void* q = AllocateRecords(bytes, &grown);
    if (used > 0) std::memcpy(q, p, used);
    ::operator delete(p);
    *capacity = grown;
    return q;
  }
  // The pages move to an aligned place of the new size; nothing is copied.
  const size_t size = Rounded(bytes);
  void* target = MapAligned(size);
  void* moved = mremap(p, *capacity, size, MREMAP_MAYMOVE | MREMAP_FIXED, target);
  if (moved == MAP_FAILED) {
    munmap(target, size);
    throw std::bad_alloc();
  }
  *capacity = size;
  return moved;
}

void FreeRecords(void* p, size_t capacity) {
  if (capacity < kHugePageBytes) {
    ::operator delete(p);
  } else {
    munmap(p, capacity);
  }
}

}  // namespace clocksync::trace
