// probe/source_rate_limiter_test.cc: a host's burst and rate, hosts
// independent of each other and of ports, IPv6, eviction of idle hosts.

#include "probe/source_rate_limiter.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace clocksync::probe {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;

sockaddr_storage V4(const std::string& address, uint16_t port) {
  sockaddr_storage s{};
  auto& v4 = reinterpret_cast<sockaddr_in&>(s);
  v4.sin_family = AF_INET;
  v4.sin_port = htons(port);
  inet_pton(AF_INET, address.c_str(), &v4.sin_addr);
  return s;
}

sockaddr_storage V6(const std::string& address) {
  sockaddr_storage s{};
  auto& v6 = reinterpret_cast<sockaddr_in6&>(s);
  v6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, address.c_str(), &v6.sin6_addr);
  return s;
}

int Admitted(SourceRateLimiter* limiter, const sockaddr_storage& from, int count,
             int64_t at_ns, int64_t step_ns = 0) {
  int admitted = 0;
  for (int i = 0; i < count; ++i) admitted += limiter->Admit(from, at_ns + i * step_ns);
  return admitted;
}

TEST(SourceRateLimiterTest, OptionsAreValidated) {
  EXPECT_EQ(SourceRateLimiter::Validate({}), "");
  EXPECT_NE(SourceRateLimiter::Validate({.rate_per_s = 0}).find("rate_per_s"),
            std::string::npos);
  EXPECT_NE(SourceRateLimiter::Validate({.burst_packets = 0.5}).find("burst_packets"),
            std::string::npos);
}

TEST(SourceRateLimiterTest, BurstThenRate) {
  SourceRateLimiter limiter({.rate_per_s = 100, .burst_packets = 50, .hosts = 64});
  const sockaddr_storage a = V4("10.0.0.1", 1000);
  EXPECT_EQ(Admitted(&limiter, a, 80, 0), 50);  // The burst, at once.
  // One second later: 100 more tokens, capped at the burst.
  EXPECT_EQ(Admitted(&limiter, a, 80, kS), 50);
  // At the rate: 100/s over 2 s, one every 10 ms, all admitted.
  EXPECT_EQ(Admitted(&limiter, a, 200, 3 * kS, 10 * kMs), 200);
  // Twice the rate for 10 s: about half dropped.
  const int admitted = Admitted(&limiter, a, 2000, 10 * kS, 5 * kMs);
  EXPECT_GE(admitted, 1000);
  EXPECT_LE(admitted, 1000 + 50 + 2);
}

TEST(SourceRateLimiterTest, HostsAreIndependentAndPortsDoNotMatter) {
  SourceRateLimiter limiter({.rate_per_s = 10, .burst_packets = 10, .hosts = 64});
  EXPECT_EQ(Admitted(&limiter, V4("10.0.0.1", 1), 20, 0), 10);
  // Another port of the same host shares its budget.
  EXPECT_EQ(Admitted(&limiter, V4("10.0.0.1", 2), 5, 0), 0);
  // Other hosts, v4 and v6, have their own.
  EXPECT_EQ(Admitted(&limiter, V4("10.0.0.2", 1), 20, 0), 10);
  EXPECT_EQ(Admitted(&limiter, V6("fd00::1"), 20, 0), 10);
  EXPECT_EQ(Admitted(&limiter, V6("fd00::2"), 20, 0), 10);
  // Other families are not limited.
  sockaddr_storage unix_address{};
  unix_address.ss_family = AF_UNIX;
  EXPECT_EQ(Admitted(&limiter, unix_address, 100, 0), 100);
}

// A flooding host is held to the rate while a child probing at 10/s on the
// same table is never dropped, even with many other hosts passing through.
TEST(SourceRateLimiterTest, AChildIsNeverDroppedWhileAStrangerFloods) {
  SourceRateLimiter limiter({.rate_per_s = 1000, .burst_packets = 2000, .hosts = 256});
  const sockaddr_storage child = V4("10.0.0.7", 3190);
  const sockaddr_storage stranger = V4("10.9.9.9", 4444);
  int child_dropped = 0, stranger_admitted = 0;
  for (int64_t t = 0; t < 10 * kS; t += 10'000) {  // 100,000 datagrams/s
    stranger_admitted += limiter.Admit(stranger, t);
    if (t % (100 * kMs) == 0) child_dropped += !limiter.Admit(child, t);
    if (t % kMs == 0) {
      // A thousand other hosts a second, each once.
      limiter.Admit(V4("10.1." + std::to_string((t / kMs) % 200) + "." +
                           std::to_string((t / kMs) % 251), 1),
                    t);
    }
  }
  EXPECT_EQ(child_dropped, 0);
  EXPECT_LE(stranger_admitted, 2000 + 10 * 1000 + 1);
  EXPECT_GE(stranger_admitted, 10 * 1000);
}

}  // namespace
}  // namespace clocksync::probe
