// clocksyncd/rpc_auth_test.cc: membership request tags: accepted under
// either key of a rotation, refused when absent, malformed, stale, under
// another key, or for another request or method.

#include "clocksyncd/rpc_auth.h"

#include "gtest/gtest.h"
#include "proto/clocksync.pb.h"

namespace clocksync {
namespace {

constexpr int64_t kNow = 1'790'000'000'000'000'000;
const probe::ProbeKey kKey{0x0706050403020100, 0x0f0e0d0c0b0a0908};
const probe::ProbeKey kOtherKey{1, 2};

HeartbeatRequest Heartbeat() {
  HeartbeatRequest r;
  r.set_node_id("n1");
  r.set_subtree_size(3);
  r.set_free_slot_depth(2);
  r.set_rtt_ns(12345);
  return r;
}

TEST(RpcAuthTest, AcceptsItsOwnTag) {
  const std::string value = RpcAuthValue(kKey, "Heartbeat", kNow, Heartbeat());
  EXPECT_EQ(value.substr(0, 3), "v1 ");
  EXPECT_TRUE(VerifyRpcAuthValue(kKey, "Heartbeat", Heartbeat(), value, kNow).ok());
  // Within the allowed skew on either side.
  EXPECT_TRUE(VerifyRpcAuthValue(kKey, "Heartbeat", Heartbeat(), value,
                                 kNow + kRpcAuthMaxSkewNs).ok());
  EXPECT_TRUE(VerifyRpcAuthValue(kKey, "Heartbeat", Heartbeat(), value,
                                 kNow - kRpcAuthMaxSkewNs).ok());
}

TEST(RpcAuthTest, AcceptsEitherKeyOfARotation) {
  const probe::ProbeKeys rotating(kKey, kOtherKey);
  EXPECT_TRUE(VerifyRpcAuthValue(rotating, "Heartbeat", Heartbeat(),
                                 RpcAuthValue(kOtherKey, "Heartbeat", kNow, Heartbeat()),
                                 kNow).ok());
  EXPECT_TRUE(VerifyRpcAuthValue(rotating, "Heartbeat", Heartbeat(),
                                 RpcAuthValue(kKey, "Heartbeat", kNow, Heartbeat()),
                                 kNow).ok());
}

TEST(RpcAuthTest, RefusesWhatItDidNotSign) {
  const std::string value = RpcAuthValue(kKey, "Heartbeat", kNow, Heartbeat());
  auto refused = [](const absl::Status& s, const std::string& says) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    EXPECT_NE(s.message().find(says), std::string::npos) << s;
  };
  refused(VerifyRpcAuthValue(kKey, "Heartbeat", Heartbeat(), "", kNow), "missing");
  refused(VerifyRpcAuthValue(kKey, "Heartbeat", Heartbeat(), "v1 12 zz", kNow), "malformed");
  refused(VerifyRpcAuthValue(kKey, "Heartbeat", Heartbeat(), "v2 1 0123456789abcdef", kNow),
          "malformed");
  refused(VerifyRpcAuthValue(kKey, "Heartbeat", Heartbeat(), value,
                             kNow + kRpcAuthMaxSkewNs + 1),
          "replay");
  refused(VerifyRpcAuthValue(kOtherKey, "Heartbeat", Heartbeat(), value, kNow),
          "does not match");
  refused(VerifyRpcAuthValue(kKey, "Leave", Heartbeat(), value, kNow), "does not match");
  HeartbeatRequest bigger = Heartbeat();
  bigger.set_subtree_size(4);
  refused(VerifyRpcAuthValue(kKey, "Heartbeat", bigger, value, kNow), "does not match");
  // Another time in the same tag: the time is covered too.
  std::string moved = value;
  moved.replace(3, 19, std::to_string(kNow + 1));
  refused(VerifyRpcAuthValue(kKey, "Heartbeat", Heartbeat(), moved, kNow), "does not match");
}

}  // namespace
}  // namespace clocksync
