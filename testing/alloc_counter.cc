// testing/alloc_counter.cc: the counting replacement of the global
// operator new and delete (see testing/alloc_counter.h).

#include "testing/alloc_counter.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace clocksync::alloc_counter {
namespace {

thread_local bool t_counting = false;
thread_local uint64_t t_allocations = 0;

void* CountedAllocate(std::size_t size) noexcept {
  if (t_counting) ++t_allocations;
  return std::malloc(size == 0 ? 1 : size);
}

}  // namespace

void CountAllocations(bool on) { t_counting = on; }
uint64_t CountedAllocations() { return t_allocations; }
void ResetCount() { t_allocations = 0; }

}  // namespace clocksync::alloc_counter

using ::clocksync::alloc_counter::CountedAllocate;

// Every other form of operator new in libstdc++ forwards to these. The
// nothrow forms are replaced too (the OTF2 writer uses them), so that every
// new pairs with the free() below (AddressSanitizer checks the pairing).
void* operator new(std::size_t size) {
  if (void* p = CountedAllocate(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  if (void* p = CountedAllocate(size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return CountedAllocate(size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return CountedAllocate(size);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
