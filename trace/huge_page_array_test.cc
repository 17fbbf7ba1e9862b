// HugePageArray: small arrays on the heap, big ones in aligned mappings
// that keep every record as they grow (moved by mremap), copies and moves.

#include "trace/huge_page_array.h"

#include <cstdint>
#include <utility>

#include "gtest/gtest.h"

namespace clocksync::trace {
namespace {

struct Record {
  uint64_t a;
  uint64_t b;
};

TEST(HugePageArray, GrowsFromTheHeapToAlignedMappingsKeepingEveryRecord) {
  HugePageArray<Record> v;
  EXPECT_TRUE(v.empty());
  // From a few records past 2 MiB, then past the doubled capacity twice.
  const size_t n = 5 * kHugePageBytes / sizeof(Record) + 3;
  for (size_t i = 0; i < n; ++i) {
    v.push_back(Record{i, ~i});
    if (v.size() * sizeof(Record) > kHugePageBytes) {
      ASSERT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes, 0u) << i;
    }
  }
  ASSERT_EQ(v.size(), n);
  EXPECT_GE(v.capacity(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(v[i].a, i) << i;
    ASSERT_EQ(v[i].b, ~i) << i;
  }
  EXPECT_EQ(v.back().a, n - 1);
}

TEST(HugePageArray, ReserveMakesRoomWithoutLosingRecords) {
  HugePageArray<Record> v;
  v.push_back(Record{1, 2});
  v.reserve(kHugePageBytes / sizeof(Record) * 3);
  EXPECT_GE(v.capacity(), kHugePageBytes / sizeof(Record) * 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes, 0u);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].b, 2u);
  v.reserve(1);  // never shrinks
  EXPECT_GE(v.capacity(), kHugePageBytes / sizeof(Record) * 3);
}

TEST(HugePageArray, CopiesAndMovesBigAndSmall) {
  for (size_t n : {size_t{10}, 2 * kHugePageBytes / sizeof(Record)}) {
    HugePageArray<Record> v;
    for (size_t i = 0; i < n; ++i) v.push_back(Record{i, i * 7});
    HugePageArray<Record> copy(v);
    ASSERT_EQ(copy.size(), n);
    EXPECT_NE(copy.data(), v.data());
    EXPECT_EQ(copy[n - 1].b, (n - 1) * 7);
    HugePageArray<Record> moved(std::move(v));
    EXPECT_EQ(moved.size(), n);
    EXPECT_EQ(moved[n / 2].a, n / 2);
    copy = std::move(moved);
    EXPECT_EQ(copy[n - 1].a, n - 1);
    copy.clear();
    EXPECT_TRUE(copy.empty());
  }
}

}  // namespace
}  // namespace clocksync::trace
