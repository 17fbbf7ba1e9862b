// Round-trips the status message through the wire format and text format, so
// that the generated library links and the schema stays self-consistent.
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
  const std::string truncated("\x0a\x64" "abc", 5);
  EXPECT_FALSE(decoded.ParseFromString(truncated));
}

TEST(ClocksyncProtoTest, ServiceIsGenerated) {
  // The service descriptor names the RPCs that clients call.
  EXPECT_STREQ(Clocksync::service_full_name(), "clocksync.Clocksync");
  const auto* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "clocksync.Clocksync");
  ASSERT_NE(service, nullptr);
  EXPECT_NE(service->FindMethodByName("GetStatus"), nullptr);
}

}  // namespace
}  // namespace clocksync
