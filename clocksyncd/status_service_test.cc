// Tests of the Clocksync service and StatusServer: in-process servers on
// loopback (and a Unix socket) over FakeNodeViews; topology gathering over
// chains of servers, with dead and silent children.
#include "clocksyncd/status_service.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clocksyncd/rpc_auth.h"
#include "clocksyncd/status_service_testing.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/clocksync.grpc.pb.h"

namespace clocksync {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Clocksync::Stub> StubFor(const std::string& target) {
  return Clocksync::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
}

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

std::string Loopback(const StatusServer& server) {
  return absl::StrCat("127.0.0.1:", server.tcp_port());
}

// A fake node served on 127.0.0.1 (an ephemeral port).
struct ServedNode {
  explicit ServedNode(const std::string& id, StatusServerOptions options = {})
      : view(SampleNodeStatus(id)), server(options) {
    const absl::Status started = server.Start("127.0.0.1:0", "", &view);
    EXPECT_TRUE(started.ok()) << started;
    address = Loopback(server);
  }
  FakeNodeView view;
  StatusServer server;
  std::string address;
};

// A TCP port that accepts connections (the kernel completes the handshake)
// but never speaks: a hung node. RPCs to it end only at their deadline.
class SilentPort {
 public:
  SilentPort() {
    int port = 0;
    fd_ = ListenOnLoopback(&port);
    EXPECT_GE(fd_, 0);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  ~SilentPort() { close(fd_); }
  const std::string& address() const { return address_; }

 private:
  int fd_ = -1;
  std::string address_;
};

// A loopback port nothing listens on: connections are refused.
std::string RefusedAddress() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);  // Bound, never listened, closed: nothing there now.
  return absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
}

absl::flat_hash_map<std::string, const TopologyNode*> ById(
    const Topology& topology) {
  absl::flat_hash_map<std::string, const TopologyNode*> by_id;
  for (const TopologyNode& node : topology.nodes()) {
    EXPECT_TRUE(by_id.emplace(node.status().node_id(), &node).second)
        << node.status().node_id() << " listed twice";
  }
  return by_id;
}

// --- validation ---------------------------------------------------------

TEST(ValidationTest, NodeIds) {
  EXPECT_TRUE(ValidateNodeId("id", "node-7.rack_2").ok());
  EXPECT_THAT(ValidateNodeId("node.node_id", "").message(),
              HasSubstr("node.node_id: must not be empty"));
  EXPECT_THAT(ValidateNodeId("id", "a b").message(), HasSubstr("\"a b\""));
  EXPECT_FALSE(ValidateNodeId("id", std::string(65, 'a')).ok());
  EXPECT_TRUE(ValidateNodeId("id", std::string(64, 'a')).ok());
}

// --- GetStatus and WatchStatus ------------------------------------------

TEST(StatusServiceTest, GetStatusRoundTrip) {
  ServedNode node("n7");
  auto stub = StubFor(node.address);
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(5));
  NodeStatus status;
  const grpc::Status rpc =
      stub->GetStatus(&context, GetStatusRequest(), &status);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      status, SampleNodeStatus("n7")))
      << status.DebugString();
}

TEST(StatusServiceTest, WatchStatusStreamsAtTheIntervalAndStopsOnCancel) {
  ServedNode node("n7");
  auto stub = StubFor(node.address);
  grpc::ClientContext context;
  WatchStatusRequest request;
  request.set_interval_ms(100);
  std::unique_ptr<grpc::ClientReader<NodeStatus>> reader =
      stub->WatchStatus(&context, request);
  NodeStatus status;
  std::vector<absl::Time> arrivals;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(reader->Read(&status)) << "update " << i;
    EXPECT_EQ(status.node_id(), "n7");
    arrivals.push_back(absl::Now());
  }
  // Three intervals of 100 ms between the first and the fourth update.
  EXPECT_GE(arrivals[3] - arrivals[0], absl::Milliseconds(250));
  EXPECT_LT(arrivals[3] - arrivals[0], absl::Seconds(3));
  context.TryCancel();
  while (reader->Read(&status)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The server's loop has ended: no more snapshots are taken.
  absl::SleepFor(absl::Milliseconds(300));
  const int calls = node.view.status_calls();
  absl::SleepFor(absl::Milliseconds(400));
  EXPECT_EQ(node.view.status_calls(), calls);
}

// 100 watchers (the attack that used to take every serving thread) get
// their share and RESOURCE_EXHAUSTED beyond it, at once; the control RPCs
// are served meanwhile.
TEST(StatusServiceTest, WatchStreamsAreBoundedAndControlRpcsStayServed) {
  for (const int per_client : {4, 16}) {
    SCOPED_TRACE(absl::StrCat("max_watch_streams_per_client=", per_client));
    StatusServerOptions options;
    options.max_watch_streams = 16;
    options.max_watch_streams_per_client = per_client;
    ServedNode node("n7", options);
    auto stub = StubFor(node.address);
    struct Watch {
      grpc::ClientContext context;
      std::unique_ptr<grpc::ClientReader<NodeStatus>> reader;
    };
    std::vector<std::unique_ptr<Watch>> open;
    int refused = 0;
    for (int i = 0; i < 100; ++i) {
      auto watch = std::make_unique<Watch>();
      SetDeadline(&watch->context, absl::Seconds(30));
      WatchStatusRequest request;
      request.set_interval_ms(1000);
      watch->reader = stub->WatchStatus(&watch->context, request);
      NodeStatus first;
      if (watch->reader->Read(&first)) {
        open.push_back(std::move(watch));
        continue;
      }
      const grpc::Status end = watch->reader->Finish();
      EXPECT_EQ(end.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
          << end.error_message();
      EXPECT_THAT(end.error_message(), HasSubstr("WatchStatus"));
      ++refused;
    }
    EXPECT_EQ(open.size(), static_cast<size_t>(std::min(per_client, 16)));
    EXPECT_EQ(refused, 100 - static_cast<int>(open.size()));
    for (int i = 0; i < 20; ++i) {  // Control RPCs still answered.
      grpc::ClientContext context;
      SetDeadline(&context, absl::Seconds(5));
      HeartbeatRequest heartbeat;
      heartbeat.set_node_id("n9");
      heartbeat.set_subtree_size(1);
      HeartbeatResponse response;
      // The fake node has no membership: UNIMPLEMENTED means served.
      EXPECT_EQ(stub->Heartbeat(&context, heartbeat, &response).error_code(),
                grpc::StatusCode::UNIMPLEMENTED);
      grpc::ClientContext status_context;
      SetDeadline(&status_context, absl::Seconds(5));
      NodeStatus status;
      EXPECT_TRUE(
          stub->GetStatus(&status_context, GetStatusRequest(), &status).ok());
    }
    // A closed stream frees its slot.
    open.back()->context.TryCancel();
    NodeStatus drain;
    while (open.back()->reader->Read(&drain)) {
    }
    open.back()->reader->Finish();
    open.pop_back();
    bool reopened = false;
    for (int attempt = 0; attempt < 50 && !reopened; ++attempt) {
      auto watch = std::make_unique<Watch>();
      WatchStatusRequest request;
      request.set_interval_ms(1000);
      watch->reader = stub->WatchStatus(&watch->context, request);
      NodeStatus first;
      reopened = watch->reader->Read(&first);
      if (reopened) {
        open.push_back(std::move(watch));
      } else {
        watch->reader->Finish();
        absl::SleepFor(absl::Milliseconds(20));
      }
    }
    EXPECT_TRUE(reopened);
    for (auto& watch : open) watch->context.TryCancel();
  }
}

TEST(StatusServerTest, RefusesLimitsThatLeaveNoThreadsForControl) {
  StatusServerOptions options;
  options.max_threads = 16;
  options.max_watch_streams = 16;
  FakeNodeView view(SampleNodeStatus("n1"));
  StatusServer server(options);
  const absl::Status started = server.Start("127.0.0.1:0", "", &view);
  EXPECT_EQ(started.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(started.message(), HasSubstr("max_watch_streams"));
}

TEST(StatusServiceTest, WatchStatusEndsPromptlyAtShutdown) {
  ServedNode node("n7");
  auto stub = StubFor(node.address);
  grpc::ClientContext context;
  WatchStatusRequest request;
  request.set_interval_ms(60'000);  // The handler sleeps a minute per tick.
  auto reader = stub->WatchStatus(&context, request);
  NodeStatus status;
  ASSERT_TRUE(reader->Read(&status));
  const absl::Time start = absl::Now();
  node.server.Shutdown(absl::Now() + absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_FALSE(reader->Read(&status));
  const grpc::Status end = reader->Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(end.error_message(), HasSubstr("shutting down"));
}

TEST(StatusServiceTest, WatchStatusRejectsABadIntervalNamingTheField) {
  ServedNode node("n7");
  auto stub = StubFor(node.address);
  for (const uint32_t interval_ms : {0u, 10u, 49u, 60'001u}) {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    WatchStatusRequest request;
    request.set_interval_ms(interval_ms);
    auto reader = stub->WatchStatus(&context, request);
    NodeStatus status;
    EXPECT_FALSE(reader->Read(&status));
    const grpc::Status end = reader->Finish();
    EXPECT_EQ(end.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << interval_ms;
    EXPECT_THAT(end.error_message(),
                HasSubstr(absl::StrCat("interval_ms: must be 50..60000, got ",
                                       interval_ms)));
  }
  EXPECT_EQ(node.view.status_calls(), 0);
}

// --- GetTopology --------------------------------------------------------

grpc::Status AskTopology(const std::string& address,
                         const GetTopologyRequest& request, Topology* topology,
                         absl::Duration timeout = absl::Seconds(5)) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  return StubFor(address)->GetTopology(&context, request, topology);
}

TEST(TopologyTest, ChainOfThreeListsEveryNodeOnceWithItsParent) {
  ServedNode a("a"), b("b"), c("c");
  a.view.SetChildren({ChildRef("b", b.address)});
  b.view.SetChildren({ChildRef("c", c.address)});
  Topology topology;
  const grpc::Status rpc = AskTopology(a.address, {}, &topology);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  ASSERT_EQ(topology.nodes_size(), 3) << topology.DebugString();
  EXPECT_FALSE(topology.truncated());
  // Depth-first: a parent before its children.
  EXPECT_EQ(topology.nodes(0).status().node_id(), "a");
  EXPECT_EQ(topology.nodes(0).parent_id(), "");
  EXPECT_EQ(topology.nodes(1).status().node_id(), "b");
  EXPECT_EQ(topology.nodes(1).parent_id(), "a");
  EXPECT_EQ(topology.nodes(1).ref().grpc_address(), b.address);
  EXPECT_EQ(topology.nodes(2).status().node_id(), "c");
  EXPECT_EQ(topology.nodes(2).parent_id(), "b");
  for (const TopologyNode& node : topology.nodes()) {
    EXPECT_FALSE(node.unreachable()) << node.error();
  }
  // The asked node keeps its ancestors; the others' are implied by the tree.
  EXPECT_EQ(topology.nodes(0).status().ancestors_size(), 2);
  EXPECT_EQ(topology.nodes(2).status().ancestors_size(), 0);
}

TEST(TopologyTest, DeadAndSilentChildrenAreUnreachableWithinTheDeadline) {
  ServedNode a("a"), b("b"), c("c");
  SilentPort silent;
  a.view.SetChildren({ChildRef("b", b.address),
                      ChildRef("dead", RefusedAddress()),
                      ChildRef("noaddr", "")});
  b.view.SetChildren(
      {ChildRef("c", c.address), ChildRef("hung", silent.address())});
  Topology topology;
  const absl::Duration timeout = absl::Seconds(2);
  const absl::Time start = absl::Now();
  const grpc::Status rpc = AskTopology(a.address, {}, &topology, timeout);
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_LT(took, timeout);
  // b waited for the silent child until its own deadline (inside ours).
  EXPECT_GT(took, absl::Milliseconds(500));
  auto by_id = ById(topology);
  ASSERT_EQ(by_id.size(), 6u) << topology.DebugString();
  for (const std::string id : {"a", "b", "c"}) {
    EXPECT_FALSE(by_id[id]->unreachable()) << id;
  }
  EXPECT_TRUE(by_id["dead"]->unreachable());
  EXPECT_EQ(by_id["dead"]->parent_id(), "a");
  EXPECT_THAT(by_id["dead"]->error(), HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(by_id["dead"]->error(),
              HasSubstr(by_id["dead"]->ref().grpc_address()));
  EXPECT_TRUE(by_id["noaddr"]->unreachable());
  EXPECT_THAT(by_id["noaddr"]->error(), HasSubstr("no usable gRPC address"));
  EXPECT_TRUE(by_id["hung"]->unreachable());
  EXPECT_EQ(by_id["hung"]->parent_id(), "b");
  EXPECT_THAT(by_id["hung"]->error(), HasSubstr("DEADLINE_EXCEEDED"));
  EXPECT_THAT(by_id["hung"]->error(), HasSubstr(silent.address()));
}

TEST(TopologyTest, HopTimeoutBoundsASilentChildWithoutAClientDeadline) {
  StatusServerOptions options;
  options.topology_hop_timeout = absl::Milliseconds(300);
  ServedNode a("a", options);
  SilentPort silent;
  a.view.SetChildren({ChildRef("hung", silent.address())});
  GetTopologyRequest request;
  request.set_max_depth(1);  // One level below: at most 1 hop timeout.
  Topology topology;
  const absl::Time start = absl::Now();
  ASSERT_TRUE(
      AskTopology(a.address, request, &topology, absl::Seconds(30)).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  ASSERT_EQ(topology.nodes_size(), 2);
  EXPECT_TRUE(topology.nodes(1).unreachable());
}

TEST(TopologyTest, ACycleListsEachNodeOnce) {
  ServedNode a("a"), b("b"), c("c");
  a.view.SetChildren({ChildRef("b", b.address)});
  b.view.SetChildren({ChildRef("c", c.address)});
  c.view.SetChildren({ChildRef("a", a.address)});  // Misconfigured: a loop.
  Topology topology;
  ASSERT_TRUE(AskTopology(a.address, {}, &topology).ok());
  auto by_id = ById(topology);
  EXPECT_EQ(by_id.size(), 3u) << topology.DebugString();
  // c's answer lists its child a as unreachable (a cycle), and a is already
  // listed as the root: the root wins.
  EXPECT_FALSE(by_id["a"]->unreachable());
  EXPECT_EQ(by_id["a"]->parent_id(), "");
}

TEST(TopologyTest, CycleIsRefusedWithFailedPrecondition) {
  ServedNode a("a");
  GetTopologyRequest request;
  request.add_path_node_ids("x");
  request.add_path_node_ids("a");
  Topology topology;
  const grpc::Status rpc = AskTopology(a.address, request, &topology);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(rpc.error_message(), HasSubstr("cycle: node a"));
}

TEST(TopologyTest, MaxDepthAndMaxNodesTruncate) {
  ServedNode a("a"), b("b"), c("c"), d("d");
  a.view.SetChildren({ChildRef("b", b.address), ChildRef("d", d.address)});
  b.view.SetChildren({ChildRef("c", c.address)});

  GetTopologyRequest depth_one;
  depth_one.set_max_depth(1);
  Topology shallow;
  ASSERT_TRUE(AskTopology(a.address, depth_one, &shallow).ok());
  auto by_id = ById(shallow);
  EXPECT_EQ(by_id.size(), 3u);  // a, b, d
  EXPECT_TRUE(shallow.truncated());
  EXPECT_TRUE(by_id["b"]->children_omitted());
  EXPECT_FALSE(by_id["d"]->children_omitted());

  GetTopologyRequest depth_zero;
  depth_zero.set_max_depth(0);
  Topology alone;
  ASSERT_TRUE(AskTopology(a.address, depth_zero, &alone).ok());
  ASSERT_EQ(alone.nodes_size(), 1);
  EXPECT_TRUE(alone.nodes(0).children_omitted());

  GetTopologyRequest two_nodes;
  two_nodes.set_max_nodes(2);
  Topology small;
  ASSERT_TRUE(AskTopology(a.address, two_nodes, &small).ok());
  ASSERT_EQ(small.nodes_size(), 2);
  EXPECT_TRUE(small.truncated());
  EXPECT_EQ(small.nodes(1).status().node_id(), "b");
  EXPECT_TRUE(small.nodes(0).children_omitted());  // d did not fit.
  EXPECT_TRUE(small.nodes(1).children_omitted());  // c did not fit.

  GetTopologyRequest all;
  Topology full;
  ASSERT_TRUE(AskTopology(a.address, all, &full).ok());
  EXPECT_EQ(full.nodes_size(), 4);
  EXPECT_FALSE(full.truncated());
}

TEST(TopologyTest, BadLimitsAreRejectedNamingTheField) {
  ServedNode a("a");
  GetTopologyRequest too_many;
  too_many.set_max_nodes(100'001);
  Topology topology;
  grpc::Status rpc = AskTopology(a.address, too_many, &topology);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(rpc.error_message(), HasSubstr("max_nodes: at most 100000"));
  GetTopologyRequest too_deep;
  too_deep.set_max_depth(256);
  rpc = AskTopology(a.address, too_deep, &topology);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(rpc.error_message(), HasSubstr("max_depth: at most 255"));
  GetTopologyRequest bad_path;
  bad_path.add_path_node_ids("no spaces");
  rpc = AskTopology(a.address, bad_path, &topology);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(rpc.error_message(), HasSubstr("path_node_ids[0]"));
}

// --- Join and Leave -----------------------------------------------------

JoinRequest SampleJoin() {
  JoinRequest request;
  request.mutable_node()->set_node_id("n9");
  request.mutable_node()->set_probe_address("10.0.0.9:3190");
  request.mutable_node()->set_grpc_address("10.0.0.9:3191");
  return request;
}

// The tree's key replaced while serving (a reload): membership calls are
// checked against the new key from then on; without a key, none is asked.
TEST(MembershipTest, ReplacedKeyIsCheckedFromThenOn) {
  const probe::ProbeKey old_key{1, 2};
  const probe::ProbeKey new_key{3, 4};
  StatusServerOptions options;
  options.membership_key = probe::ProbeKeys(old_key);
  ServedNode node("n1", options);
  JoinResponse accepted;
  accepted.mutable_accepted()->set_depth(1);
  node.view.SetJoinAnswer(accepted);
  auto stub = StubFor(node.address);
  // The code of a Join signed with `key` (none: unsigned).
  const auto join = [&](std::optional<probe::ProbeKey> key) {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    if (key) SignRpc(probe::ProbeKeys(*key), "Join", SampleJoin(), &context);
    JoinResponse response;
    return stub->Join(&context, SampleJoin(), &response).error_code();
  };
  EXPECT_EQ(join(old_key), grpc::StatusCode::OK);
  EXPECT_EQ(join(new_key), grpc::StatusCode::UNAUTHENTICATED);
  node.server.SetMembershipKey(probe::ProbeKeys(new_key));
  EXPECT_EQ(join(new_key), grpc::StatusCode::OK);
  EXPECT_EQ(join(old_key), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(join(std::nullopt), grpc::StatusCode::UNAUTHENTICATED);
  node.server.SetMembershipKey(std::nullopt);
  EXPECT_EQ(join(std::nullopt), grpc::StatusCode::OK);
}

TEST(MembershipTest, JoinIsValidatedThenForwarded) {
  ServedNode node("n1");
  auto stub = StubFor(node.address);
  {  // Without membership the daemon's UNIMPLEMENTED comes back as is.
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    JoinResponse response;
    const grpc::Status rpc = stub->Join(&context, SampleJoin(), &response);
    EXPECT_EQ(rpc.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(rpc.error_message(), HasSubstr("membership"));
  }
  JoinResponse accepted;
  accepted.mutable_accepted()->set_depth(3);
  *accepted.mutable_accepted()->add_ancestors() = ChildRef("n1", node.address);
  node.view.SetJoinAnswer(accepted);
  {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    JoinResponse response;
    ASSERT_TRUE(stub->Join(&context, SampleJoin(), &response).ok());
    EXPECT_EQ(response.accepted().depth(), 3u);
    EXPECT_EQ(response.accepted().ancestors(0).node_id(), "n1");
  }
  ASSERT_EQ(node.view.join_requests().size(), 2u);
  EXPECT_EQ(node.view.join_requests()[1].node().node_id(), "n9");
  struct Bad {
    std::function<void(JoinRequest*)> spoil;
    std::string field;
  };
  const std::vector<Bad> bad = {
      {[](JoinRequest* r) { r->clear_node(); }, "node: required"},
      {[](JoinRequest* r) { r->mutable_node()->set_node_id(""); },
       "node.node_id"},
      {[](JoinRequest* r) { r->mutable_node()->set_probe_address("x"); },
       "node.probe_address"},
      {[](JoinRequest* r) { r->mutable_node()->set_grpc_address("unix:"); },
       "node.grpc_address"},
      {[](JoinRequest* r) { r->set_subtree_size(-1); }, "subtree_size"},
      {[](JoinRequest* r) { r->set_free_slot_depth(-2); }, "free_slot_depth"},
      // Overflow attacks: sizes and depths a parent would sum or add to.
      {[](JoinRequest* r) {
         r->set_subtree_size(std::numeric_limits<int64_t>::max());
       },
       "subtree_size: must be 0..16777216"},
      {[](JoinRequest* r) {
         r->set_free_slot_depth(std::numeric_limits<int32_t>::max());
       },
       "free_slot_depth: must be 0..1048576"},
      {[](JoinRequest* r) { r->set_max_depth(100000); }, "max_depth"},
      {[](JoinRequest* r) {
         r->mutable_node()->set_probe_address(std::string(1 << 20, 'h') +
                                              ":3190");
       },
       "node.probe_address: host longer than 253 bytes"},
      {[](JoinRequest* r) {
         r->mutable_node()->set_grpc_address("unix:/" +
                                             std::string(1 << 20, 'p'));
       },
       "node.grpc_address: unix socket path longer"},
      {[](JoinRequest* r) { r->add_avoid_ids("n1 "); }, "avoid_ids[0]"},
      {[](JoinRequest* r) {
         for (int i = 0; i <= 256; ++i) r->add_avoid_ids("x");
       },
       "avoid_ids: at most 256"},
  };
  for (const Bad& b : bad) {
    JoinRequest request = SampleJoin();
    b.spoil(&request);
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    JoinResponse response;
    const grpc::Status rpc = stub->Join(&context, request, &response);
    EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << b.field;
    EXPECT_THAT(rpc.error_message(), HasSubstr(b.field));
  }
  EXPECT_EQ(node.view.join_requests().size(), 2u);  // None forwarded.
}

TEST(MembershipTest, HeartbeatIsRangeCheckedBeforeItReachesTheNode) {
  ServedNode node("n1");
  auto stub = StubFor(node.address);
  struct Bad {
    std::function<void(HeartbeatRequest*)> spoil;
    std::string field;
  };
  const std::vector<Bad> bad = {
      {[](HeartbeatRequest* r) { r->set_subtree_size(0); }, "subtree_size"},
      {[](HeartbeatRequest* r) {
         r->set_subtree_size(std::numeric_limits<int64_t>::max());
       },
       "subtree_size: must be 1..16777216"},
      {[](HeartbeatRequest* r) {
         r->set_free_slot_depth(std::numeric_limits<int32_t>::max());
       },
       "free_slot_depth: must be 0..1048576"},
      {[](HeartbeatRequest* r) { r->set_rtt_ns(-2); }, "rtt_ns"},
      {[](HeartbeatRequest* r) {
         r->set_rtt_ns(std::numeric_limits<int64_t>::max());
       },
       "rtt_ns"},
      {[](HeartbeatRequest* r) { r->set_node_id(std::string(65, 'n')); },
       "node_id"},
  };
  for (const Bad& b : bad) {
    HeartbeatRequest request;
    request.set_node_id("n9");
    request.set_subtree_size(3);
    request.set_free_slot_depth(1);
    request.set_rtt_ns(50'000);
    b.spoil(&request);
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    HeartbeatResponse response;
    const grpc::Status rpc = stub->Heartbeat(&context, request, &response);
    EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << b.field;
    EXPECT_THAT(rpc.error_message(), HasSubstr(b.field));
  }
}

// Peer and Handover: checked field by field, then handed to the node (the
// fake takes no part in mastership: UNIMPLEMENTED shows the call got there).
TEST(MembershipTest, PeerAndHandoverAreValidatedThenForwarded) {
  ServedNode node("n1");
  auto stub = StubFor(node.address);
  auto address = [](NodeAddress* a, const std::string& id) {
    a->set_node_id(id);
    a->set_probe_address("127.0.0.1:3190");
    a->set_grpc_address("127.0.0.1:3191");
  };
  struct Bad {
    std::function<void(PeerRequest*)> spoil;
    std::string field;
  };
  const std::vector<Bad> bad = {
      {[](PeerRequest* r) { r->clear_from(); }, "from: required"},
      {[](PeerRequest* r) { r->mutable_from()->set_priority(256); },
       "from.priority: must be 0..255, got 256"},
      {[](PeerRequest* r) {
         r->mutable_from()->mutable_master_node()->set_grpc_address("nohost");
       },
       "from.master_node.grpc_address"},
      {[&](PeerRequest* r) {
         for (int i = 0; i < 33; ++i) {
           address(r->mutable_from()->add_known_peers(), "p" + std::to_string(i));
         }
       },
       "from.known_peers: at most 32 entries, got 33"},
      {[](PeerRequest* r) { r->mutable_from()->mutable_node()->set_node_id("a b"); },
       "from.node.node_id"},
  };
  for (const Bad& b : bad) {
    PeerRequest request;
    address(request.mutable_from()->mutable_node(), "n2");
    address(request.mutable_from()->mutable_master_node(), "n2");
    request.mutable_from()->set_term(2);
    b.spoil(&request);
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    PeerResponse response;
    const grpc::Status rpc = stub->Peer(&context, request, &response);
    EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << b.field;
    EXPECT_THAT(rpc.error_message(), HasSubstr(b.field));
  }
  PeerRequest good;
  address(good.mutable_from()->mutable_node(), "n2");
  grpc::ClientContext peer_context;
  SetDeadline(&peer_context, absl::Seconds(5));
  PeerResponse peer_response;
  EXPECT_EQ(stub->Peer(&peer_context, good, &peer_response).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  HandoverRequest handover;
  handover.set_node_id("m0");
  grpc::ClientContext zero_context;
  SetDeadline(&zero_context, absl::Seconds(5));
  HandoverResponse handover_response;
  const grpc::Status zero = stub->Handover(&zero_context, handover, &handover_response);
  EXPECT_EQ(zero.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(zero.error_message(), HasSubstr("term: must be at least 1, got 0"));
  handover.set_term(2);
  grpc::ClientContext handover_context;
  SetDeadline(&handover_context, absl::Seconds(5));
  EXPECT_EQ(stub->Handover(&handover_context, handover, &handover_response).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST(MembershipTest, JoinWithoutOutcomeIsAnInternalError) {
  ServedNode node("n1");
  node.view.SetJoinAnswer(JoinResponse());
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(5));
  JoinResponse response;
  const grpc::Status rpc =
      StubFor(node.address)->Join(&context, SampleJoin(), &response);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INTERNAL);
}

TEST(MembershipTest, LeaveIsValidatedThenForwarded) {
  ServedNode node("n1");
  auto stub = StubFor(node.address);
  LeaveRequest request;
  request.set_node_id("n9");
  request.set_reason("shutting down");
  {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    LeaveResponse response;
    ASSERT_TRUE(stub->Leave(&context, request, &response).ok());
  }
  {  // A leaving parent names the successor.
    LeaveRequest from_parent = request;
    *from_parent.mutable_successor() = ChildRef("m0", "10.0.0.0:3191");
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    LeaveResponse response;
    ASSERT_TRUE(stub->Leave(&context, from_parent, &response).ok());
  }
  struct Bad {
    std::function<void(LeaveRequest*)> spoil;
    std::string reason;
  };
  const std::vector<Bad> bad = {
      {[](LeaveRequest* r) { r->set_reason(std::string(257, 'x')); },
       "reason: at most 256 bytes"},
      {[](LeaveRequest* r) { r->clear_node_id(); },
       "node_id: must not be empty"},
      {[](LeaveRequest* r) {
         *r->mutable_successor() = ChildRef("m0", "10.0.0.0:3191");
         r->mutable_successor()->set_probe_address("");
       },
       "successor.probe_address"},
  };
  for (const Bad& b : bad) {
    LeaveRequest spoiled = request;
    b.spoil(&spoiled);
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    LeaveResponse response;
    const grpc::Status rpc = stub->Leave(&context, spoiled, &response);
    EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << b.reason;
    EXPECT_THAT(rpc.error_message(), HasSubstr(b.reason));
  }
  ASSERT_EQ(node.view.leave_requests().size(), 2u);  // Only the valid ones.
  EXPECT_EQ(node.view.leave_requests()[0].reason(), "shutting down");
  EXPECT_EQ(node.view.leave_requests()[1].successor().node_id(), "m0");
}

// A temporary directory with a short path (a Unix socket path must fit in
// 108 bytes, which TEST_TMPDIR may not).
class ShortTempDir {
 public:
  ShortTempDir() {
    char pattern[] = "/tmp/clocksync_status_XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~ShortTempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(MembershipTest, AdminOnUnixOnlyRefusesJoinAndLeaveOnTcp) {
  ShortTempDir dir;
  const std::string socket_path = dir.path() + "/admin.sock";
  FakeNodeView view(SampleNodeStatus("n1"));
  JoinResponse redirect;
  *redirect.mutable_redirect_to() = ChildRef("n2", "10.0.0.2:3191");
  view.SetJoinAnswer(redirect);
  StatusServerOptions options;
  options.admin_on_unix_only = true;
  StatusServer server(options);
  const absl::Status started = server.Start("127.0.0.1:0", socket_path, &view);
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_EQ(std::filesystem::status(socket_path).permissions() &
                std::filesystem::perms::all,
            std::filesystem::perms(0660));

  auto tcp = StubFor(Loopback(server));
  auto unix_socket = StubFor("unix:" + socket_path);
  {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    JoinResponse response;
    const grpc::Status rpc = tcp->Join(&context, SampleJoin(), &response);
    EXPECT_EQ(rpc.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(rpc.error_message(), HasSubstr("Unix socket"));
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    LeaveRequest request;
    request.set_node_id("n9");
    LeaveResponse response;
    EXPECT_EQ(tcp->Leave(&context, request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_TRUE(view.join_requests().empty());
  EXPECT_TRUE(view.leave_requests().empty());
  {  // Status is served on TCP all the same.
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    NodeStatus status;
    EXPECT_TRUE(tcp->GetStatus(&context, GetStatusRequest(), &status).ok());
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    JoinResponse response;
    const grpc::Status rpc =
        unix_socket->Join(&context, SampleJoin(), &response);
    ASSERT_TRUE(rpc.ok()) << rpc.error_message();
    EXPECT_EQ(response.redirect_to().node_id(), "n2");
  }
  EXPECT_EQ(view.join_requests().size(), 1u);
}

// --- StatusServer -------------------------------------------------------

TEST(StatusServerTest, StartErrorsNameTheAddress) {
  FakeNodeView view(SampleNodeStatus("n1"));
  StatusServer first;
  ASSERT_TRUE(first.Start("127.0.0.1:0", "", &view).ok());
  const std::string taken = Loopback(first);
  StatusServer second;
  const absl::Status in_use = second.Start(taken, "", &view);
  EXPECT_FALSE(in_use.ok());
  EXPECT_THAT(in_use.message(), HasSubstr(taken));

  StatusServer bad_address;
  const absl::Status no_port = bad_address.Start("localhost", "", &view);
  EXPECT_EQ(no_port.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_port.message(), HasSubstr("\"localhost\""));

  StatusServer no_dir;
  const absl::Status missing =
      no_dir.Start("", "/nonexistent-clocksync-dir/admin.sock", &view);
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.message(),
              HasSubstr("unix:/nonexistent-clocksync-dir/admin.sock"));

  StatusServerOptions admin_only;
  admin_only.admin_on_unix_only = true;
  StatusServer no_socket(admin_only);
  const absl::Status refused = no_socket.Start("127.0.0.1:0", "", &view);
  EXPECT_THAT(refused.message(), HasSubstr("admin_on_unix_only"));

  StatusServer nothing;
  EXPECT_FALSE(nothing.Start("", "", &view).ok());
}

// A socket file left by a crashed server: bound, never unlinked.
void LeaveStaleSocket(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  close(fd);
  ASSERT_TRUE(std::filesystem::is_socket(path));
}

TEST(StatusServerTest, UnixSocketReplacesAStaleOneAndIsRemovedAtShutdown) {
  ShortTempDir dir;
  const std::string socket_path = dir.path() + "/status.sock";
  LeaveStaleSocket(socket_path);
  FakeNodeView view(SampleNodeStatus("n1"));
  for (int run = 0; run < 2; ++run) {
    StatusServer server;
    const absl::Status started = server.Start("", socket_path, &view);
    ASSERT_TRUE(started.ok()) << "run " << run << ": " << started;
    EXPECT_EQ(server.tcp_port(), 0);
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    NodeStatus status;
    EXPECT_TRUE(StubFor("unix:" + socket_path)
                    ->GetStatus(&context, GetStatusRequest(), &status)
                    .ok());
    EXPECT_EQ(status.node_id(), "n1");
    server.Shutdown(absl::Now() + absl::Seconds(1));
    EXPECT_FALSE(std::filesystem::exists(socket_path)) << "left behind";
  }
}

TEST(StatusServerTest, RefusesAUnixSocketAnotherServerListensOn) {
  ShortTempDir dir;
  const std::string socket_path = dir.path() + "/admin.sock";
  FakeNodeView view(SampleNodeStatus("n1"));
  StatusServer first;
  ASSERT_TRUE(first.Start("", socket_path, &view).ok());
  StatusServer second;
  const absl::Status taken = second.Start("", socket_path, &view);
  EXPECT_EQ(taken.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(taken.message(), HasSubstr("unix:" + socket_path));
  // The first server still answers there.
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(5));
  NodeStatus status;
  EXPECT_TRUE(StubFor("unix:" + socket_path)
                  ->GetStatus(&context, GetStatusRequest(), &status)
                  .ok());
  const std::string not_a_socket = dir.path() + "/file";
  std::FILE* file = std::fopen(not_a_socket.c_str(), "w");
  std::fclose(file);
  StatusServer third;
  EXPECT_THAT(third.Start("", not_a_socket, &view).message(),
              HasSubstr("is not a socket"));
}

}  // namespace
}  // namespace clocksync
