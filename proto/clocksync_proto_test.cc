// Round-trips the messages through the wire format and text format, so that
// the generated library links and the schema stays self-consistent: every
// RPC of the service, optional presence, the Join outcome, the topology.
#include <string>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "proto/clocksync.grpc.pb.h"
#include "proto/clocksync.pb.h"

namespace clocksync {
namespace {

NodeStatus SampleStatus() {
  NodeStatus status;
  status.set_node_id("node-7");
  status.set_role(ROLE_NODE);
  status.set_depth(2);
  status.set_parent("10.0.0.3:3190");
  status.set_state(SYNC_STATE_SYNCED);
  status.set_offset_to_parent_ns(-3'600'000'000'123);
  status.set_drift_ppb(-98765.25);
  status.set_error_bound_ns(1'234);
  status.set_samples_in_window(300'000);
  status.set_probes_sent(1ULL << 40);
  return status;
}

TEST(ClocksyncProtoTest, BinaryRoundTripKeepsEveryField) {
  const NodeStatus original = SampleStatus();
  std::string wire;
  ASSERT_TRUE(original.SerializeToString(&wire));
  NodeStatus decoded;
  ASSERT_TRUE(decoded.ParseFromString(wire));
  EXPECT_EQ(decoded.node_id(), "node-7");
  EXPECT_EQ(decoded.role(), ROLE_NODE);
  EXPECT_EQ(decoded.depth(), 2u);
  EXPECT_EQ(decoded.offset_to_parent_ns(), -3'600'000'000'123);
  EXPECT_DOUBLE_EQ(decoded.drift_ppb(), -98765.25);
  EXPECT_EQ(decoded.probes_sent(), 1ULL << 40);
  EXPECT_EQ(decoded.SerializeAsString(), wire);
}

TEST(ClocksyncProtoTest, TextFormatRoundTrip) {
  const NodeStatus original = SampleStatus();
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(original, &text));
  NodeStatus parsed;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &parsed));
  EXPECT_EQ(parsed.SerializeAsString(), original.SerializeAsString());
}

TEST(ClocksyncProtoTest, MalformedWireIsRejected) {
  NodeStatus decoded;
  // Field 1 (string) announces 100 bytes but carries 3.
  const std::string truncated(
      "\x0a\x64"
      "abc",
      5);
  EXPECT_FALSE(decoded.ParseFromString(truncated));
}

TEST(ClocksyncProtoTest, ServiceIsGenerated) {
  // The service descriptor names the RPCs that clients call.
  EXPECT_STREQ(Clocksync::service_full_name(), "clocksync.Clocksync");
  const auto* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "clocksync.Clocksync");
  ASSERT_NE(service, nullptr);
  for (const char* rpc :
       {"GetStatus", "WatchStatus", "GetTopology", "Join", "Leave",
        "Heartbeat", "Peer", "Handover"}) {
    const auto* method = service->FindMethodByName(rpc);
    ASSERT_NE(method, nullptr) << rpc;
    // Only WatchStatus streams (server to client).
    EXPECT_EQ(method->server_streaming(), std::string(rpc) == "WatchStatus")
        << rpc;
    EXPECT_FALSE(method->client_streaming()) << rpc;
  }
}

TEST(ClocksyncProtoTest, OptionalAgesKeepPresence) {
  // "Never" (unset) and "0 ns ago" must stay distinct on the wire.
  NodeStatus status;
  EXPECT_FALSE(status.has_last_inconsistency_age_ns());
  status.set_last_inconsistency_age_ns(0);
  status.set_last_answer_age_ns(0);
  NodeStatus decoded;
  ASSERT_TRUE(decoded.ParseFromString(status.SerializeAsString()));
  EXPECT_TRUE(decoded.has_last_inconsistency_age_ns());
  EXPECT_TRUE(decoded.has_last_answer_age_ns());
  NodeStatus empty;
  ASSERT_TRUE(empty.ParseFromString(NodeStatus().SerializeAsString()));
  EXPECT_FALSE(empty.has_last_answer_age_ns());
}

TEST(ClocksyncProtoTest, JoinResponseHasOneOutcome) {
  JoinResponse response;
  EXPECT_EQ(response.outcome_case(), JoinResponse::OUTCOME_NOT_SET);
  response.mutable_accepted()->set_depth(3);
  response.mutable_redirect_to()->set_node_id("n2");  // Replaces accepted.
  EXPECT_EQ(response.outcome_case(), JoinResponse::kRedirectTo);
  EXPECT_FALSE(response.has_accepted());
  JoinResponse decoded;
  ASSERT_TRUE(decoded.ParseFromString(response.SerializeAsString()));
  EXPECT_EQ(decoded.redirect_to().node_id(), "n2");
}

TEST(ClocksyncProtoTest, TopologyRoundTrip) {
  Topology topology;
  TopologyNode* root = topology.add_nodes();
  *root->mutable_status() = SampleStatus();
  NodeAddress* parent = root->mutable_status()->add_ancestors();
  parent->set_node_id("node-3");
  parent->set_grpc_address("unix:/run/clocksyncd/admin.sock");
  TopologyNode* child = topology.add_nodes();
  child->mutable_status()->set_node_id("node-9");
  child->set_parent_id("node-7");
  child->set_unreachable(true);
  child->set_error("DEADLINE_EXCEEDED: Deadline Exceeded (10.0.0.9:3191)");
  topology.set_truncated(true);
  Topology decoded;
  ASSERT_TRUE(decoded.ParseFromString(topology.SerializeAsString()));
  EXPECT_EQ(decoded.SerializeAsString(), topology.SerializeAsString());
  EXPECT_EQ(decoded.nodes(0).status().ancestors(0).grpc_address(),
            "unix:/run/clocksyncd/admin.sock");
  EXPECT_TRUE(decoded.nodes(1).unreachable());
  EXPECT_TRUE(decoded.truncated());
}

}  // namespace
}  // namespace clocksync
