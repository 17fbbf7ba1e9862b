// testing/alloc_counter.h: counts the heap allocations of the threads that
// ask for it, for tests that prove a path allocates nothing.
//
// Linking the alloc_counter library replaces the global operator new (plain,
// array and their nothrow forms) and operator delete with malloc/free
// versions that count; so a test that uses it is its own binary (no other
// test should run with the replacement) and the library is alwayslink (a
// replaced operator new must be in the test binary, referenced or not).
// Aligned forms are not replaced (nothing we test uses them).
//
// Counting is per thread: only the allocations a thread makes between
// CountAllocations(true) and CountAllocations(false) count, in that
// thread's own count.
//
// Example:
//   CountAllocations(true);
//   RunTheHotPath();
//   CountAllocations(false);
//   EXPECT_EQ(CountedAllocations(), 0u);
#ifndef CLOCKSYNC_TESTING_ALLOC_COUNTER_H_
#define CLOCKSYNC_TESTING_ALLOC_COUNTER_H_

#include <cstdint>

namespace clocksync::alloc_counter {

// Starts (true) or stops (false) counting this thread's allocations. The
// count is kept across stops; ResetCount() clears it.
void CountAllocations(bool on);

// This thread's allocations counted so far.
uint64_t CountedAllocations();

// Sets this thread's count back to 0.
void ResetCount();

}  // namespace clocksync::alloc_counter

#endif  // CLOCKSYNC_TESTING_ALLOC_COUNTER_H_
