// probe/hw_timestamping_test.cc: loopback has no hardware timestamps, and
// the summary says which interface and why; an address no interface holds
// is said so.

#include "probe/hw_timestamping.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "gtest/gtest.h"

namespace clocksync::probe {
namespace {

sockaddr_storage V4(const char* text) {
  sockaddr_storage address{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  v4->sin_family = AF_INET;
  EXPECT_EQ(inet_pton(AF_INET, text, &v4->sin_addr), 1);
  return address;
}

TEST(HardwareTimestampingTest, LoopbackHasNone) {
  const HardwareTimestamping hw = ProbeHardwareTimestamping(V4("127.0.0.1"));
  EXPECT_EQ(hw.interface, "lo");
  EXPECT_FALSE(hw.tx && hw.rx && hw.phc_index >= 0);
  EXPECT_NE(hw.summary.find("lo: no hardware timestamps"), std::string::npos)
      << hw.summary;
}

TEST(HardwareTimestampingTest, AnAddressNoInterfaceHolds) {
  const HardwareTimestamping hw = ProbeHardwareTimestamping(V4("192.0.2.77"));
  EXPECT_TRUE(hw.interface.empty());
  EXPECT_NE(hw.summary.find("no interface"), std::string::npos) << hw.summary;
}

}  // namespace
}  // namespace clocksync::probe
