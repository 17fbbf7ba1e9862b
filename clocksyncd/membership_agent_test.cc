// MembershipAgent over real gRPC on loopback: several agents in one
// process, each behind its own StatusServer, with short timings. Checks the
// wire conversions, a tree forming under concurrent joins, rejoin after a
// parent dies, a clean leave with successor, the handlers' answers to
// strangers, and standby masters (takeover after the master is killed,
// handover when the new one leaves). The agent's thread, gRPC's threads and the test thread all
// touch the membership (ASan covers it; TSan cannot, Debian's gRPC being
// uninstrumented).

#include "clocksyncd/membership_agent.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clocksyncd/status_service.h"
#include "clocksyncd/status_service_testing.h"
#include "gtest/gtest.h"

namespace clocksync {
namespace {

// The daemon's NodeView reduced to membership.
class AgentView : public NodeView {
 public:
  void Set(MembershipAgent* agent) { agent_ = agent; }
  NodeStatus Status() const override {
    NodeStatus s;
    s.set_node_id(agent_->self().node_id);
    return s;
  }
  std::vector<NodeAddress> Children() const override { return agent_->Children(); }
  absl::StatusOr<JoinResponse> Join(const JoinRequest& r, absl::Time) override {
    return agent_->HandleJoin(r);
  }
  absl::Status Leave(const LeaveRequest& r) override { return agent_->HandleLeave(r); }
  absl::StatusOr<HeartbeatResponse> Heartbeat(const HeartbeatRequest& r) override {
    return agent_->HandleHeartbeat(r);
  }
  absl::StatusOr<PeerResponse> Peer(const PeerRequest& r) override {
    return agent_->HandlePeer(r);
  }
  absl::Status Handover(const HandoverRequest& r) override {
    return agent_->HandleHandover(r);
  }

 private:
  MembershipAgent* agent_ = nullptr;
};

struct TestNode {
  AgentView view;
  StatusServer server;
  std::unique_ptr<MembershipAgent> agent;
  std::string grpc_address;
};

MembershipAgentOptions FastOptions() {
  MembershipAgentOptions o;
  o.heartbeat_interval_ns = 20'000'000;
  o.rpc_timeout_ns = 300'000'000;
  o.heartbeat_failures_for_loss = 3;
  o.parent_loss.reset();  // No probes here.
  o.child_timeout_ns = 300'000'000;
  o.measure_rtt = false;
  o.retry_min_ns = 20'000'000;
  o.retry_max_ns = 200'000'000;
  o.peer_poll_interval_ns = 40'000'000;
  o.peer_rpc_timeout_ns = 100'000'000;
  return o;
}

class Cluster {
 public:
  // Starts a node; the master when `seed` is empty.
  // Others reach it at `advertised` when given (a proxy in front of it).
  TestNode* Add(const std::string& id, const std::string& seed, int max_children,
               int master_priority = 0, const std::string& advertised = "") {
    auto node = std::make_unique<TestNode>();
    EXPECT_TRUE(node->server.Start("127.0.0.1:0", "", &node->view).ok());
    node->grpc_address = absl::StrCat("127.0.0.1:", node->server.tcp_port());
    MembershipConfig config;
    config.self = {id, "127.0.0.1:9",
                   advertised.empty() ? node->grpc_address : advertised};
    config.master = seed.empty();
    config.max_children = max_children;
    config.lease_ns = 200'000'000;
    config.lease_margin_ns = 5'000'000;
    config.master_priority = master_priority;
    config.takeover_after_ns = 300'000'000;
    config.peer_answer_valid_ns = 200'000'000;
    if (!seed.empty()) config.seeds = {{"", "", seed}};
    EXPECT_EQ(ValidateMembershipAgentOptions(FastOptions(), config), "");
    node->agent = std::make_unique<MembershipAgent>(config, FastOptions());
    node->view.Set(node->agent.get());
    node->agent->Start();
    // As the sync loop would say: a mapping to continue from.
    node->agent->SetSynchronized(true);
    TestNode* raw = node.get();
    nodes_[id] = std::move(node);
    return raw;
  }
  TestNode* Get(const std::string& id) { return nodes_.at(id).get(); }
  // As a crash looks to the others: the server goes away with the agent.
  void Kill(const std::string& id) {
    TestNode* n = Get(id);
    n->server.Shutdown(absl::Now());
    n->agent->Stop();
  }
  ~Cluster() {
    for (auto& [id, n] : nodes_) {
      n->server.Shutdown(absl::Now());
      n->agent->Stop();
    }
  }

 private:
  std::map<std::string, std::unique_ptr<TestNode>> nodes_;
};

// A TCP forwarder on loopback that can cut the network as a dropping
// firewall does: while cut, every byte on every connection is swallowed,
// and a connection that lost bytes stays dead after the heal (as one whose
// retransmissions have backed off for longer than anyone waits); the
// connections opened after the heal carry data again.
class CuttableProxy {
 public:
  CuttableProxy() {
    listen_fd_ = ListenOnLoopback(&port_);
    EXPECT_GE(listen_fd_, 0);
  }
  ~CuttableProxy() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (const Pipe& p : pipes_) {
      if (p.a >= 0) close(p.a);
      if (p.b >= 0) close(p.b);
    }
    close(listen_fd_);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  // Starts forwarding to 127.0.0.1:`target_port`.
  void Start(int target_port) {
    target_port_ = target_port;
    thread_ = std::thread([this] { Run(); });
  }
  void Cut(bool on) { cut_ = on; }

 private:
  struct Pipe {
    int a, b;            // Accepted side, target side.
    bool dead = false;   // Lost bytes in a cut: swallows everything since.
  };

  void Run() {
    std::vector<char> buffer(1 << 16);
    while (!stop_) {
      std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
      for (const Pipe& p : pipes_) {
        fds.push_back({p.a, POLLIN, 0});
        fds.push_back({p.b, POLLIN, 0});
      }
      if (poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) Accept();
      for (size_t i = 0; i + 1 < fds.size() && i / 2 < pipes_.size(); ++i) {
        if (!(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Pipe& p = pipes_[i / 2];
        const int from = i % 2 == 0 ? p.a : p.b;
        const int to = i % 2 == 0 ? p.b : p.a;
        const ssize_t n = read(from, buffer.data(), buffer.size());
        if (n <= 0) {
          // Closed: nothing more to carry either way; poll skips fd -1.
          close(p.a);
          close(p.b);
          p.a = p.b = -1;
          continue;
        }
        if (cut_) p.dead = true;
        if (!p.dead) (void)!write(to, buffer.data(), static_cast<size_t>(n));
      }
    }
  }

  void Accept() {
    const int a = accept(listen_fd_, nullptr, nullptr);
    if (a < 0) return;
    const int b = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(target_port_));
    if (connect(b, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(a);
      close(b);
      return;
    }
    pipes_.push_back({a, b, cut_.load()});
  }

  int listen_fd_ = -1;
  int port_ = 0;
  int target_port_ = 0;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stop_{false};
  std::vector<Pipe> pipes_;  // The proxy thread's only.
  std::thread thread_;
};

// Waits up to `timeout` for `done`.
template <typename F>
bool WaitFor(F done, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

TEST(MembershipAgentTest, WireConversionsRoundTrip) {
  JoinRequestInfo info;
  info.newcomer = {"n1", "10.0.0.1:3190", "10.0.0.1:3191"};
  info.subtree_size = 4;
  info.free_slot_depth = 2;
  info.pinned = true;
  info.avoid_ids = {"a", "b"};
  info.max_depth = 3;
  const JoinRequestInfo back = FromProto(ToProto(info));
  EXPECT_EQ(back.newcomer, info.newcomer);
  EXPECT_EQ(back.subtree_size, 4);
  EXPECT_EQ(back.free_slot_depth, 2);
  EXPECT_TRUE(back.pinned);
  EXPECT_EQ(back.avoid_ids, info.avoid_ids);
  EXPECT_EQ(back.max_depth, 3);
  info.max_depth = -1;
  EXPECT_EQ(FromProto(ToProto(info)).max_depth, -1);

  JoinDecision redirect;
  redirect.kind = JoinDecision::Kind::kRedirect;
  redirect.redirect_to = {"c1", "p:1", "g:1"};
  redirect.alternatives = {redirect.redirect_to, {"c2", "p:2", "g:2"}};
  const JoinDecision r = FromProto(ToProto(redirect));
  EXPECT_EQ(r.kind, JoinDecision::Kind::kRedirect);
  EXPECT_EQ(r.redirect_to, redirect.redirect_to);
  EXPECT_EQ(r.alternatives, redirect.alternatives);

  JoinDecision rejected;
  rejected.kind = JoinDecision::Kind::kRejected;
  rejected.reason = RejectReason::kTooDeep;
  rejected.detail = "why";
  const JoinDecision j = FromProto(ToProto(rejected));
  EXPECT_EQ(j.kind, JoinDecision::Kind::kRejected);
  EXPECT_EQ(j.reason, RejectReason::kTooDeep);
  EXPECT_EQ(j.detail, "why");

  Attachment a;
  a.ancestors = {{"m", "p:0", "g:0"}, {"n1", "p:1", "g:1"}};
  a.depth = 2;
  a.lease_remaining_ns = 123;
  a.landing_depth = 1;
  const Attachment b = FromProto(ToProto(a));
  EXPECT_EQ(b.ancestors, a.ancestors);
  EXPECT_EQ(b.depth, 2u);
  EXPECT_EQ(b.lease_remaining_ns, 123);
  EXPECT_EQ(b.landing_depth, 1);
}

TEST(MembershipAgentTest, MastershipWireConversionsRoundTrip) {
  PeerView v;
  v.ref = {"n1", "10.0.0.1:3190", "10.0.0.1:3191"};
  v.is_master = true;
  v.has_master = true;
  v.term = 7;
  v.master = v.ref;
  v.priority = 3;
  v.known_peers = {{"n2", "10.0.0.2:3190", "10.0.0.2:3191"}};
  const PeerView back = FromProto(ToProto(v));
  EXPECT_EQ(back.ref, v.ref);
  EXPECT_TRUE(back.is_master && back.has_master);
  EXPECT_EQ(back.term, 7u);
  EXPECT_EQ(back.master, v.master);
  EXPECT_EQ(back.priority, 3);
  EXPECT_EQ(back.known_peers, v.known_peers);
  Attachment a;
  a.ancestors = {v.ref};
  a.depth = 1;
  a.term = 4;
  a.candidates = {{v.ref, 2}, {{"n0", "a:1", "a:2"}, 1}};
  const Attachment a2 = FromProto(ToProto(a));
  EXPECT_EQ(a2.term, 4u);
  ASSERT_EQ(a2.candidates.size(), 2u);
  EXPECT_EQ(a2.candidates[0].ref.node_id, "n0");  // Ranked again.
  // Out-of-range priorities from the wire are dropped.
  JoinResponse::Accepted bad = ToProto(a);
  bad.mutable_candidates(0)->set_priority(0);
  EXPECT_EQ(FromProto(bad).candidates.size(), 1u);
}

TEST(MembershipAgentTest, OptionsAreValidated) {
  MembershipConfig config;
  config.self = {"n", "p:1", "g:1"};
  config.master = true;
  MembershipAgentOptions o = FastOptions();
  EXPECT_EQ(ValidateMembershipAgentOptions(o, config), "");
  config.lease_ns = 3 * o.heartbeat_interval_ns;
  EXPECT_NE(ValidateMembershipAgentOptions(o, config).find("lease:"), std::string::npos);
  config.lease_ns = 1'000'000'000;
  o.heartbeat_interval_ns = 1'000;
  EXPECT_NE(ValidateMembershipAgentOptions(o, config).find("heartbeat_interval:"),
            std::string::npos);
}

TEST(MembershipAgentTest, StrangersAreToldTheyAreNotChildren) {
  Cluster cluster;
  TestNode* master = cluster.Add("master", "", 2);
  HeartbeatRequest hb;
  hb.set_node_id("stranger");
  hb.set_subtree_size(1);
  hb.set_rtt_ns(-1);
  EXPECT_EQ(master->agent->HandleHeartbeat(hb).status().code(),
            absl::StatusCode::kNotFound);
  LeaveRequest leave;
  leave.set_node_id("stranger");
  EXPECT_EQ(master->agent->HandleLeave(leave).code(), absl::StatusCode::kNotFound);
}

TEST(MembershipAgentTest, TreeFormsRejoinsAndSurvivesALeave) {
  Cluster cluster;
  TestNode* master = cluster.Add("master", "", 2);
  // Seven nodes at once, fanout 2: depth <= 3 (1 + 2 + 4 = 7).
  for (int i = 1; i <= 7; ++i) cluster.Add(absl::StrCat("n", i), master->grpc_address, 2);
  auto attached = [&](const std::vector<std::string>& ids) {
    for (const std::string& id : ids) {
      if (cluster.Get(id)->agent->snapshot().state != MembershipState::kAttached) {
        return false;
      }
    }
    return true;
  };
  const std::vector<std::string> all = {"n1", "n2", "n3", "n4", "n5", "n6", "n7"};
  // New nodes first wait out a lease (200 ms).
  ASSERT_TRUE(WaitFor([&] { return attached(all); }, std::chrono::seconds(10)));
  uint32_t max_depth = 0;
  size_t children_total = master->agent->Children().size();
  EXPECT_LE(children_total, 2u);
  for (const std::string& id : all) {
    const MembershipAgent::Snapshot s = cluster.Get(id)->agent->snapshot();
    max_depth = std::max(max_depth, s.depth);
    EXPECT_EQ(s.ancestors.front().node_id, "master");
    EXPECT_EQ(s.ancestors.size(), s.depth);
    EXPECT_EQ(s.parent->node_id, s.ancestors.back().node_id);
    EXPECT_LE(s.children, 2u);
    children_total += s.children;
    // The probe target follows the parent.
    EXPECT_EQ(cluster.Get(id)->agent->probe_target().parent->node_id, s.parent->node_id);
  }
  EXPECT_EQ(children_total, 7u);
  EXPECT_LE(max_depth, 3u);

  // Kill a node with children: they re-attach elsewhere.
  std::string victim;
  for (const std::string& id : all) {
    if (cluster.Get(id)->agent->snapshot().children > 0) victim = id;
  }
  ASSERT_FALSE(victim.empty());
  std::vector<std::string> orphans;
  for (const NodeAddress& c : cluster.Get(victim)->agent->Children()) {
    orphans.push_back(c.node_id());
  }
  cluster.Kill(victim);
  auto moved = [&](const std::vector<std::string>& ids, const std::string& from) {
    for (const std::string& id : ids) {
      const MembershipAgent::Snapshot s = cluster.Get(id)->agent->snapshot();
      if (s.state != MembershipState::kAttached || s.parent->node_id == from) return false;
    }
    return true;
  };
  ASSERT_TRUE(WaitFor([&] { return moved(orphans, victim); }, std::chrono::seconds(5)));
  for (const std::string& id : orphans) {
    EXPECT_GE(cluster.Get(id)->agent->snapshot().parent_losses, 1u);
  }

  // A clean leave of a node with children: they are handed to its parent
  // (or below it) and it returns once they re-attached. First let the tree
  // settle: everyone attached again and leases renewed.
  std::vector<std::string> survivors;
  for (const std::string& id : all) {
    if (id != victim) survivors.push_back(id);
  }
  ASSERT_TRUE(WaitFor([&] { return attached(survivors); }, std::chrono::seconds(5)));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::string leaver;
  for (const std::string& id : all) {
    if (id != victim && cluster.Get(id)->agent->snapshot().children > 0) leaver = id;
  }
  if (leaver.empty()) GTEST_SKIP() << "no second node with children";
  std::vector<std::string> kids;
  std::map<std::string, uint64_t> losses_before;
  for (const NodeAddress& c : cluster.Get(leaver)->agent->Children()) {
    kids.push_back(c.node_id());
    losses_before[c.node_id()] = cluster.Get(c.node_id())->agent->snapshot().parent_losses;
  }
  const auto start = std::chrono::steady_clock::now();
  cluster.Get(leaver)->agent->LeaveAndStop(2'000'000'000);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(cluster.Get(leaver)->agent->snapshot().state, MembershipState::kLeft);
  EXPECT_TRUE(WaitFor([&] { return moved(kids, leaver); }, std::chrono::seconds(3)));
  for (const std::string& id : kids) {
    // A clean leave is not a loss: the children were told.
    EXPECT_EQ(cluster.Get(id)->agent->snapshot().parent_losses, losses_before[id]) << id;
  }
}

}  // namespace
}  // namespace clocksync

namespace clocksync {
namespace {

// The master is killed: the better candidate takes over under term 2 and
// the others join it; then it leaves cleanly and hands over to the other
// candidate under term 3, whose subtree follows.
TEST(MembershipAgentTest, CandidateTakesOverThenHandsOver) {
  Cluster cluster;
  TestNode* master = cluster.Add("master", "", 2);
  cluster.Add("c1", master->grpc_address, 2, 1);
  cluster.Add("c2", master->grpc_address, 2, 2);
  cluster.Add("x", master->grpc_address, 2);
  MembershipAgent* c1 = cluster.Get("c1")->agent.get();
  MembershipAgent* c2 = cluster.Get("c2")->agent.get();
  MembershipAgent* x = cluster.Get("x")->agent.get();
  ASSERT_TRUE(WaitFor(
      [&] {
        return x->snapshot().candidates.size() == 2 &&
               c1->snapshot().depth == 1 && c2->snapshot().depth == 1;
      },
      std::chrono::seconds(5)))
      << x->snapshot().candidates.size();
  EXPECT_EQ(x->snapshot().candidates[0].ref.node_id, "c1");
  EXPECT_EQ(x->snapshot().term, 1u);

  cluster.Kill("master");
  ASSERT_TRUE(WaitFor([&] { return c1->is_master(); }, std::chrono::seconds(5)));
  EXPECT_FALSE(c2->is_master());
  EXPECT_EQ(c1->snapshot().term, 2u);
  EXPECT_EQ(c1->snapshot().takeovers, 1u);
  ASSERT_TRUE(WaitFor(
      [&] {
        return c2->snapshot().master && c2->snapshot().master->node_id == "c1" &&
               c2->snapshot().has_master && x->snapshot().has_master &&
               x->snapshot().term == 2;
      },
      std::chrono::seconds(5)));
  EXPECT_GT(x->snapshot().masterless_ns, 0);

  std::thread leave([&] { c1->LeaveAndStop(2'000'000'000); });
  ASSERT_TRUE(WaitFor([&] { return c2->is_master(); }, std::chrono::seconds(3)));
  leave.join();
  EXPECT_EQ(c2->snapshot().term, 3u);
  EXPECT_EQ(c2->snapshot().takeovers, 1u);
  ASSERT_TRUE(WaitFor(
      [&] {
        return x->snapshot().master && x->snapshot().master->node_id == "c2" &&
               x->snapshot().term == 3 && x->snapshot().has_master;
      },
      std::chrono::seconds(5)));
}

// After a cut that swallowed its packets, a node reconnects: the channel
// of a call that ran out of time is replaced, not kept on a connection
// that will never carry data again (on a real network: not for seconds
// after the heal, while TCP's retransmissions back off).
TEST(MembershipAgentTest, ACallThatTimesOutOpensANewConnection) {
  Cluster cluster;
  CuttableProxy proxy;
  TestNode* master = cluster.Add("master", "", 2, 0, proxy.address());
  proxy.Start(master->server.tcp_port());
  MembershipAgent* child = cluster.Add("child", proxy.address(), 2)->agent.get();
  ASSERT_TRUE(WaitFor([&] { return child->snapshot().depth == 1; },
                      std::chrono::seconds(5)));
  const uint64_t joins = child->snapshot().joins;

  proxy.Cut(true);
  ASSERT_TRUE(WaitFor([&] { return child->snapshot().parent_losses > 0; },
                      std::chrono::seconds(5)));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  proxy.Cut(false);
  // Rejoin attempts are 20-200 ms apart; the heartbeats' and the joins' own
  // timeouts 300 ms.
  EXPECT_TRUE(WaitFor(
      [&] { return child->snapshot().depth == 1 && child->snapshot().joins > joins; },
      std::chrono::seconds(5)))
      << "joins " << child->snapshot().joins << " (" << joins
      << " before the cut), depth " << child->snapshot().depth;
}

}  // namespace
}  // namespace clocksync
