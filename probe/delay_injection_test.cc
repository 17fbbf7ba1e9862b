// probe/delay_injection_test.cc: delay specs parse, and bad ones are
// refused with the key or value named; the sampler is seeded, streams
// differ, and the mean is right; the queue releases packets in due order.

#include "probe/delay_injection.h"

#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace clocksync::probe {
namespace {

using ::testing::HasSubstr;

TEST(DelayInjectionTest, ParsesAFullSpec) {
  DelayInjection d;
  std::string error;
  ASSERT_TRUE(ParseDelayInjection("min=50us,mean=20us,seed=3", &d, &error))
      << error;
  EXPECT_TRUE(d.enabled);
  EXPECT_EQ(d.min_ns, 50'000);
  EXPECT_DOUBLE_EQ(d.exp_mean_ns, 20'000.0);
  EXPECT_EQ(d.seed, 3u);
  ASSERT_TRUE(ParseDelayInjection("mean=1.5ms", &d, &error)) << error;
  EXPECT_EQ(d.min_ns, 0);
  EXPECT_DOUBLE_EQ(d.exp_mean_ns, 1'500'000.0);
  EXPECT_EQ(d.seed, 1u);
}

TEST(DelayInjectionTest, ErrorsNameTheKeyOrValue) {
  const auto error_of = [](const std::string& spec) {
    DelayInjection d;
    std::string error;
    EXPECT_FALSE(ParseDelayInjection(spec, &d, &error)) << spec;
    EXPECT_FALSE(d.enabled) << spec;
    return error;
  };
  EXPECT_THAT(error_of(""), HasSubstr("empty"));
  EXPECT_THAT(error_of("min=50"), HasSubstr("min: bad duration '50'"));
  EXPECT_THAT(error_of("min=-5us"), HasSubstr("'-5us'"));
  EXPECT_THAT(error_of("mean=1h"), HasSubstr("mean: bad duration '1h'"));
  EXPECT_THAT(error_of("max=1us"), HasSubstr("unknown key 'max'"));
  EXPECT_THAT(error_of("min=1us,seed=x"), HasSubstr("seed: bad value 'x'"));
  EXPECT_THAT(error_of("min=1us,min=2us"), HasSubstr("duplicate key 'min'"));
  EXPECT_THAT(error_of("seed=3"), HasSubstr("needs min or mean"));
  EXPECT_THAT(error_of("min"), HasSubstr("'min'"));
}

TEST(DelayInjectionTest, SamplerIsSeededAndHasTheRightMean) {
  const DelayInjection d{true, 50'000, 20'000.0, 3};
  DelaySampler a(d, 1);
  DelaySampler b(d, 1);
  DelaySampler other_stream(d, 2);
  double sum = 0;
  int same_as_other = 0;
  constexpr int kDraws = 200'000;
  for (int i = 0; i < kDraws; ++i) {
    const int64_t x = a.NextNs();
    ASSERT_EQ(x, b.NextNs());
    ASSERT_GE(x, d.min_ns);
    same_as_other += x == other_stream.NextNs() ? 1 : 0;
    sum += static_cast<double>(x);
  }
  // Mean min + 20 µs; the standard error of the mean is 20 µs / sqrt(2e5).
  EXPECT_NEAR(sum / kDraws, 70'000.0, 300.0);
  EXPECT_LT(same_as_other, kDraws / 100);
}

TEST(DelayQueueTest, ReleasesInDueOrderTiesInArrivalOrder) {
  DelayQueue queue(3);
  EXPECT_TRUE(queue.empty());
  uint8_t packet[kProbePacketSize] = {};
  const int64_t dues_ns[] = {300, 100, 300};
  for (int i = 0; i < 3; ++i) {
    packet[0] = static_cast<uint8_t>(i);
    ASSERT_TRUE(queue.Push(dues_ns[i], packet, nullptr, 0));
  }
  EXPECT_FALSE(queue.Push(50, packet, nullptr, 0)) << "full";
  const uint8_t expected_order[] = {1, 0, 2};
  for (uint8_t want : expected_order) {
    ASSERT_FALSE(queue.empty());
    EXPECT_EQ(queue.next_due_ns(), dues_ns[want]);
    queue.Pop(packet, nullptr, nullptr);
    EXPECT_EQ(packet[0], want);
  }
  EXPECT_TRUE(queue.empty());
}

}  // namespace
}  // namespace clocksync::probe
