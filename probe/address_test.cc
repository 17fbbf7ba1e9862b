// probe/address_test.cc: the one address parser accepts and refuses the
// same strings everywhere, with the field in every message.
#include "probe/address.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace clocksync::probe {
namespace {

using ::testing::HasSubstr;

TEST(AddressTest, Validation) {
  EXPECT_TRUE(ValidateHostPort("a", "10.0.0.1:3190").ok());
  EXPECT_TRUE(ValidateHostPort("a", "node7.cluster:1").ok());
  EXPECT_TRUE(ValidateHostPort("a", "[::1]:65535").ok());
  EXPECT_FALSE(ValidateHostPort("a", "10.0.0.1").ok());
  EXPECT_FALSE(ValidateHostPort("a", ":3190").ok());
  EXPECT_FALSE(ValidateHostPort("a", "::1:3190").ok());
  EXPECT_FALSE(ValidateHostPort("a", "host:65536").ok());
  EXPECT_FALSE(ValidateHostPort("a", "host:0").ok());
  EXPECT_TRUE(ValidateHostPort("a", "host:0", /*allow_port_zero=*/true).ok());
  EXPECT_THAT(ValidateHostPort("node.probe_address", "host:x").message(),
              HasSubstr("node.probe_address: port must be 1..65535"));
  EXPECT_TRUE(ValidateGrpcAddress("a", "unix:/run/clocksyncd/admin.sock").ok());
  EXPECT_FALSE(ValidateGrpcAddress("a", "unix:").ok());
  EXPECT_TRUE(ValidateGrpcAddress("a", "127.0.0.1:3191").ok());
}

TEST(AddressTest, ParsesHostAndPort) {
  absl::StatusOr<HostPort> v6 = ParseHostPort("a", "[fe80::1%eth0]:3190");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "fe80::1%eth0");
  EXPECT_EQ(v6->port, 3190);
  AddressRules wildcard;
  wildcard.allow_empty_host = true;
  wildcard.allow_port_zero = true;
  absl::StatusOr<HostPort> any = ParseHostPort("a", ":0", wildcard);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->host, "");
  EXPECT_EQ(any->port, 0);
  EXPECT_THAT(ParseHostPort("--listen", "127.0.0.1").status().message(),
              HasSubstr("--listen: missing ':port'"));
  EXPECT_THAT(ParseHostPort("a", "[::1:3190").status().message(),
              HasSubstr("unbalanced"));
}

TEST(AddressTest, LengthsAreCapped) {
  EXPECT_TRUE(ValidateHostPort("a", std::string(253, 'h') + ":1").ok());
  EXPECT_THAT(ValidateHostPort("node.probe_address",
                               std::string(1 << 20, 'h') + ":1")
                  .message(),
              HasSubstr("node.probe_address: host longer than 253 bytes"));
  EXPECT_TRUE(ValidateGrpcAddress("a", "unix:/" + std::string(106, 'p')).ok());
  EXPECT_THAT(
      ValidateGrpcAddress("node.grpc_address", "unix:/" + std::string(107, 'p'))
          .message(),
      HasSubstr("node.grpc_address: unix socket path longer than 107 bytes"));
}

TEST(AddressTest, HostOfAndJoin) {
  EXPECT_EQ(HostOf("10.0.0.1:3190"), "10.0.0.1");
  EXPECT_EQ(HostOf("[::]:3190"), "::");
  EXPECT_EQ(HostOf("nohost"), "nohost");
  EXPECT_EQ(JoinHostPort("::1", 5), "[::1]:5");
  EXPECT_EQ(JoinHostPort("node7", 3191), "node7:3191");
}

}  // namespace
}  // namespace clocksync::probe
