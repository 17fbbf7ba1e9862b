// Tests of clocksyncctl's output and exit codes: golden text for status,
// tree and sources; JSON parsed back (generically and into the messages);
// the health verdict at and around the bound, for every state.
#include "tools/clocksyncctl/ctl_format.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "clocksyncd/status_service_testing.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "metrics/exposition.h"

namespace clocksync::ctl {
namespace {

using ::google::protobuf::util::JsonStringToMessage;
using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kOneMs = 1'000'000;

NodeStatus MasterStatus() {
  NodeStatus status;
  status.set_node_id("m0");
  status.set_role(ROLE_MASTER);
  status.set_state(SYNC_STATE_SYNCED);
  status.set_children_count(2);
  status.set_uptime_ns(90'061'000'000'000);  // 1d 01h 01m 01s
  status.set_version("0.3.0");
  status.set_grpc_address("10.0.0.0:3191");
  return status;
}

// Any JSON text parses into a Struct; fails the test when it is not JSON.
google::protobuf::Struct ParseJson(const std::string& json) {
  google::protobuf::Struct parsed;
  const auto status = JsonStringToMessage(json, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return parsed;
}

// --- health and exit codes ----------------------------------------------

TEST(HealthTest, SynchronizedWithinTheBoundIsOk) {
  const NodeStatus status = SampleNodeStatus("n3");  // bound 2137 ns
  const Health health = CheckHealth(status, kOneMs);
  EXPECT_EQ(health.exit_code, kExitOk);
  EXPECT_EQ(health.reason, "synchronized, error bound 2.137 us <= 1.000 ms");
  EXPECT_EQ(CheckHealth(status, 2'137).exit_code, kExitOk);  // Equal: ok.
}

TEST(HealthTest, BoundTooLargeIsUnhealthy) {
  const NodeStatus status = SampleNodeStatus("n3");
  const Health health = CheckHealth(status, 2'136);
  EXPECT_EQ(health.exit_code, kExitUnhealthy);
  EXPECT_EQ(health.reason,
            "error bound 2.137 us exceeds --max_error_ns=2136 (2.136 us)");
}

TEST(HealthTest, EveryStateButSyncedAndRecoveringIsUnhealthy) {
  const std::vector<std::pair<SyncState, ExitCode>> cases = {
      {SYNC_STATE_SYNCED, kExitOk},
      {SYNC_STATE_RECOVERING, kExitOk},
      {SYNC_STATE_UNSYNCED, kExitUnhealthy},
      {SYNC_STATE_HOLDOVER, kExitUnhealthy},
      {SYNC_STATE_UNSPECIFIED, kExitUnhealthy},
  };
  for (const auto& [state, code] : cases) {
    NodeStatus status = SampleNodeStatus("n3");
    status.set_state(state);
    const Health health = CheckHealth(status, kOneMs);
    EXPECT_EQ(health.exit_code, code) << SyncState_Name(state);
    if (code != kExitOk) {
      EXPECT_THAT(health.reason, StartsWith("not synchronized: "));
    }
  }
  NodeStatus holdover = SampleNodeStatus("n3");
  holdover.set_state(SYNC_STATE_HOLDOVER);
  EXPECT_THAT(CheckHealth(holdover, kOneMs).reason, HasSubstr("holdover"));
}

TEST(HealthTest, RpcFailuresMapToExitCodesNamingTheTarget) {
  const RpcFailure unreachable = DescribeRpcFailure(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"),
      "10.0.0.9:3191", "GetStatus");
  EXPECT_EQ(unreachable.exit_code, kExitUnreachable);
  EXPECT_EQ(unreachable.message,
            "cannot reach clocksyncd at 10.0.0.9:3191 (GetStatus): "
            "UNAVAILABLE: connection refused");
  EXPECT_EQ(
      DescribeRpcFailure(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, ""),
                         "unix:/run/x.sock", "GetTopology")
          .exit_code,
      kExitUnreachable);
  const RpcFailure invalid = DescribeRpcFailure(
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "interval_ms: must be"),
      "h:1", "WatchStatus");
  EXPECT_EQ(invalid.exit_code, kExitUsage);
  EXPECT_THAT(invalid.message, HasSubstr("interval_ms"));
  const RpcFailure other = DescribeRpcFailure(
      grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""), "h:1", "GetTopology");
  EXPECT_EQ(other.exit_code, kExitUnreachable);
  EXPECT_THAT(other.message, HasSubstr("not a clocksyncd"));
}

// --- durations ----------------------------------------------------------

TEST(FormatTest, Durations) {
  EXPECT_EQ(FormatDurationNs(0), "0 ns");
  EXPECT_EQ(FormatDurationNs(845), "845 ns");
  EXPECT_EQ(FormatDurationNs(-845), "-845 ns");
  EXPECT_EQ(FormatDurationNs(2'137), "2.137 us");
  EXPECT_EQ(FormatDurationNs(12'500'000), "12.500 ms");
  EXPECT_EQ(FormatDurationNs(-3'250'000'000), "-3.250 s");
  EXPECT_EQ(FormatDurationNs(INT64_MIN), "-9223372036.855 s");
  EXPECT_EQ(FormatUptimeNs(42'900'000'000), "42s");
  EXPECT_EQ(FormatUptimeNs(184'000'000'000), "3m 04s");
  EXPECT_EQ(FormatUptimeNs(3'723'000'000'000), "1h 02m 03s");
  EXPECT_EQ(FormatUptimeNs(90'061'000'000'000), "1d 01h 01m 01s");
  EXPECT_EQ(FormatOffsetNs(-1'234'567), "-0.001234567 s");
  EXPECT_EQ(FormatOffsetNs(1'732'240'000'123'456'789),
            "+1732240000.123456789 s");
  EXPECT_EQ(FormatOffsetNs(INT64_MIN), "-9223372036.854775808 s");
}

// --- status -------------------------------------------------------------

TEST(StatusTextTest, SynchronizedNodeLayout) {
  EXPECT_EQ(FormatStatusText(SampleNodeStatus("n3"), kOneMs),
            "State           : synchronized\n"
            "Error bound     : 2.137 us (limit 1.000 ms: ok)\n"
            "Offset          : -0.001234567 s (global - local)\n"
            "Drift           : +12345.678 ppb (local clock slow)\n"
            "Parent          : n1 at 10.0.0.1:3190\n"
            "Node            : n3, node, depth 2\n"
            "Samples         : 2997 in window (hulls: 12 lower, 14 upper)\n"
            "Min round trip  : 45.210 us\n"
            "Probes          : 3000 sent, 2998 answered, 1 lost, 1 rejected\n"
            "Last answer     : 102.000 ms ago\n"
            "Inconsistencies : 1, last 42.000 s ago (step: samples contradict "
            "every line)\n"
            "Holdover        : no\n"
            "Children        : 3\n"
            "Uptime          : 1h 02m 03s\n"
            "Version         : 0.3.0\n");
}

TEST(StatusTextTest, MasterLayout) {
  EXPECT_EQ(FormatStatusText(MasterStatus(), kOneMs),
            "State           : synchronized\n"
            "Error bound     : 0 ns (limit 1.000 ms: ok)\n"
            "Offset          : - (master: its clock defines global time)\n"
            "Parent          : none (master)\n"
            "Node            : m0, master, depth 0\n"
            "Children        : 2\n"
            "Uptime          : 1d 01h 01m 01s\n"
            "Version         : 0.3.0\n");
}

TEST(StatusTextTest, MastershipLinesNameTheMasterTermAndCandidates) {
  NodeStatus status = MasterStatus();
  status.set_term(2);
  status.set_master_id("m0");
  status.set_has_master(true);
  status.set_takeovers(1);
  status.set_master_priority(1);
  status.set_masterless_ns(3'250'000'000);
  for (const auto& [id, priority] :
       std::vector<std::pair<std::string, int>>{{"m0", 1}, {"n2", 2}}) {
    MasterCandidate* c = status.add_candidates();
    c->mutable_node()->set_node_id(id);
    c->set_priority(priority);
  }
  const std::string text = FormatStatusText(status, kOneMs);
  EXPECT_THAT(text, HasSubstr("Offset          : - (master by takeover: it "
                              "continues global time from its synchronized "
                              "mapping)\n"));
  EXPECT_THAT(text, HasSubstr("Master          : m0, term 2\n"
                              "Candidates      : m0 (1), n2 (2)\n"
                              "Standby         : priority 1, 1 takeover, "
                              "3.250 s without a master\n"));
  // A node whose master is gone says so.
  NodeStatus orphan = SampleNodeStatus("n3");
  orphan.set_term(2);
  orphan.set_master_id("m0");
  EXPECT_THAT(FormatStatusText(orphan, kOneMs),
              HasSubstr("Master          : m0, term 2 (none now: holding over)\n"
                        "Candidates      : none\n"));
  // The tree says the term at the master and lists the candidates.
  Topology topology;
  *topology.add_nodes()->mutable_status() = status;
  EXPECT_THAT(FormatTreeText(topology), HasSubstr("master, term 2"));
  EXPECT_THAT(FormatTreeText(topology),
              HasSubstr("candidates: m0 (1), n2 (2)\n"));
}

TEST(StatusTextTest, UnsyncedAndTooLargeSayWhatIsWrongFirst) {
  NodeStatus unsynced = SampleNodeStatus("n3");
  unsynced.set_state(SYNC_STATE_UNSYNCED);
  unsynced.clear_last_answer_age_ns();
  const std::string text = FormatStatusText(unsynced, kOneMs);
  EXPECT_THAT(text,
              StartsWith("State           : unsynchronized (no estimate yet)\n"
                         "Error bound     : - (no estimate)\n"
                         "Offset          : -\n"
                         "Drift           : -\n"));
  EXPECT_THAT(text, HasSubstr("Last answer     : never\n"));

  NodeStatus holdover = SampleNodeStatus("n3");
  holdover.set_state(SYNC_STATE_HOLDOVER);
  holdover.set_holdover(true);
  holdover.set_error_bound_ns(3 * kOneMs);
  const std::string held = FormatStatusText(holdover, kOneMs);
  EXPECT_THAT(held,
              StartsWith("State           : holdover (no answers from the "
                         "parent; the bound grows)\n"
                         "Error bound     : 3.000 ms (limit 1.000 ms: "
                         "EXCEEDED)\n"));
  EXPECT_THAT(held, HasSubstr("Holdover        : YES\n"));
}

TEST(StatusJsonTest, ParsesBackToTheSameStatus) {
  const NodeStatus original = SampleNodeStatus("n3");
  const std::string json = FormatStatusJson(original, kOneMs);
  EXPECT_EQ(json.find('\n'), std::string::npos);  // One line.
  const google::protobuf::Struct parsed = ParseJson(json);
  const auto& fields = parsed.fields();
  EXPECT_TRUE(fields.at("synchronized").bool_value());
  EXPECT_TRUE(fields.at("healthy").bool_value());
  EXPECT_EQ(fields.at("max_error_ns").string_value(), "1000000");
  EXPECT_EQ(fields.at("reason").string_value(),
            "synchronized, error bound 2.137 us <= 1.000 ms");
  // "status" is the NodeStatus in the proto3 JSON mapping: parse it back.
  std::string status_json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(fields.at("status"),
                                                          &status_json)
                  .ok());
  NodeStatus round_trip;
  ASSERT_TRUE(JsonStringToMessage(status_json, &round_trip).ok())
      << status_json;
  EXPECT_TRUE(MessageDifferencer::Equals(round_trip, original))
      << round_trip.DebugString();
  // 64-bit integers are strings (exact); names are the .proto's.
  EXPECT_EQ(fields.at("status")
                .struct_value()
                .fields()
                .at("error_bound_ns")
                .string_value(),
            "2137");
  EXPECT_EQ(
      fields.at("status").struct_value().fields().at("state").string_value(),
      "SYNC_STATE_SYNCED");
}

TEST(StatusJsonTest, UnhealthyAndEscaped) {
  NodeStatus status = SampleNodeStatus("n3");
  status.set_state(SYNC_STATE_UNSYNCED);
  status.set_last_inconsistency("quote \" backslash \\ newline \n tab \t");
  const google::protobuf::Struct parsed =
      ParseJson(FormatStatusJson(status, 5));
  EXPECT_FALSE(parsed.fields().at("synchronized").bool_value());
  EXPECT_FALSE(parsed.fields().at("healthy").bool_value());
  EXPECT_EQ(parsed.fields()
                .at("status")
                .struct_value()
                .fields()
                .at("last_inconsistency")
                .string_value(),
            "quote \" backslash \\ newline \n tab \t");
}

// --- watch --------------------------------------------------------------

TEST(WatchTest, OneLinePerUpdate) {
  const absl::Time received =
      absl::FromUnixSeconds(45'296) + absl::Milliseconds(789);
  EXPECT_EQ(
      FormatWatchLine(SampleNodeStatus("n3"), received, absl::UTCTimeZone()),
      "12:34:56.789  n3  synced      bound   2.137 us  offset -0.001234567 s"
      "  drift +12345.678 ppb  samples 2997  probes 3000/2998/1/1");
  EXPECT_EQ(FormatWatchLine(MasterStatus(), received, absl::UTCTimeZone()),
            "12:34:56.789  m0  synced      bound       0 ns");
  NodeStatus unsynced = SampleNodeStatus("n3");
  unsynced.set_state(SYNC_STATE_UNSYNCED);
  EXPECT_EQ(FormatWatchLine(unsynced, received, absl::UTCTimeZone()),
            "12:34:56.789  n3  unsynced    bound          -  offset -  drift -"
            "  samples 2997  probes 3000/2998/1/1");
  NodeStatus status;
  ASSERT_TRUE(
      JsonStringToMessage(FormatWatchJson(SampleNodeStatus("n3")), &status)
          .ok());
  EXPECT_TRUE(MessageDifferencer::Equals(status, SampleNodeStatus("n3")));
}

// --- tree ---------------------------------------------------------------

// a (master) -> b -> c, a -> d (unreachable); b's children cut off at c.
Topology SampleTopology() {
  Topology topology;
  auto add = [&](NodeStatus status, const std::string& parent,
                 const std::string& address) {
    TopologyNode* node = topology.add_nodes();
    status.set_grpc_address(address);
    *node->mutable_status() = status;
    node->set_parent_id(parent);
    if (!parent.empty())
      *node->mutable_ref() = ChildRef(status.node_id(), address);
    return node;
  };
  NodeStatus a = MasterStatus();
  a.set_node_id("a");
  add(a, "", "10.0.0.1:3191");
  NodeStatus b = SampleNodeStatus("b");
  b.set_depth(1);
  add(b, "a", "10.0.0.2:3191");
  NodeStatus c = SampleNodeStatus("c-long-name");
  c.set_state(SYNC_STATE_HOLDOVER);
  c.set_error_bound_ns(12'500'000);
  c.set_drift_ppb(-3.5);
  add(c, "b", "10.0.0.3:3191")->set_children_omitted(true);
  NodeStatus d;
  d.set_node_id("d");
  TopologyNode* dead = add(d, "a", "10.0.0.4:3191");
  dead->set_unreachable(true);
  dead->set_error("DEADLINE_EXCEEDED: Deadline Exceeded (10.0.0.4:3191)");
  topology.set_truncated(true);
  return topology;
}

TEST(TreeTest, IndentedBelowParentsWithAlignedColumns) {
  EXPECT_EQ(
      FormatTreeText(SampleTopology()),
      "a                    synced       bound 0 ns       master"
      "                10.0.0.1:3191\n"
      "|-- b                synced       bound 2.137 us   drift +12345.678 ppb"
      "  10.0.0.2:3191\n"
      "|   `-- c-long-name  holdover     bound 12.500 ms  drift -3.500 ppb"
      "      10.0.0.3:3191  (children not shown)\n"
      "`-- d                UNREACHABLE  DEADLINE_EXCEEDED: Deadline Exceeded"
      " (10.0.0.4:3191)\n"
      "(truncated: --max_nodes or --max_depth reached)\n");
}

TEST(TreeTest, JsonListsEachNodeOnceAndParsesBack) {
  const Topology original = SampleTopology();
  const std::string json = FormatTreeJson(original);
  EXPECT_THAT(json, StartsWith("{\"nodes\":["));
  const google::protobuf::Struct parsed = ParseJson(json);
  const auto& nodes = parsed.fields().at("nodes").list_value().values();
  ASSERT_EQ(nodes.size(), 4);
  absl::flat_hash_map<std::string, int> seen;
  for (const auto& node : nodes) {
    ++seen[node.struct_value()
               .fields()
               .at("status")
               .struct_value()
               .fields()
               .at("node_id")
               .string_value()];
  }
  EXPECT_EQ(seen, (absl::flat_hash_map<std::string, int>{
                      {"a", 1}, {"b", 1}, {"c-long-name", 1}, {"d", 1}}));
  Topology round_trip;
  ASSERT_TRUE(JsonStringToMessage(json, &round_trip).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(round_trip, original));
}

TEST(TreeTest, MalformedParentsStillPrintEachNodeOnce) {
  Topology topology;
  for (const auto& [id, parent] :
       std::vector<std::pair<std::string, std::string>>{
           {"x", "y"}, {"y", "x"}, {"z", "missing"}}) {
    TopologyNode* node = topology.add_nodes();
    node->mutable_status()->set_node_id(id);
    node->set_parent_id(parent);
  }
  const std::string text = FormatTreeText(topology);
  // z's parent is not listed: a root. x and y point at each other: drawn
  // after the roots, from the first of them; every node on one line.
  const std::vector<std::string> lines =
      absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << text;
  EXPECT_THAT(lines[0], StartsWith("z "));
  EXPECT_THAT(lines[1], StartsWith("x "));
  EXPECT_THAT(lines[2], StartsWith("`-- y "));
}

// --- sources ------------------------------------------------------------

// The metrics' clocksync_synchronized (metrics/exposition.h) is the same
// test as `status`'s, in every state.
TEST(MetricsTest, SynchronizedAgreesWithStatus) {
  for (const SyncState state :
       {SYNC_STATE_UNSPECIFIED, SYNC_STATE_UNSYNCED, SYNC_STATE_SYNCED,
        SYNC_STATE_RECOVERING, SYNC_STATE_HOLDOVER}) {
    NodeStatus status = SampleNodeStatus("n1");
    status.set_state(state);
    const std::string want = absl::StrCat(
        "clocksync_synchronized{node=\"n1\"} ", IsSynchronized(status) ? 1 : 0,
        "\n");
    EXPECT_THAT(metrics::FormatNodeMetrics(status), HasSubstr(want))
        << SyncState_Name(state);
  }
}

TEST(SourcesTest, NearestFirst) {
  EXPECT_EQ(FormatSourcesText(SampleNodeStatus("n3")),
            "Node n3, node, depth 2, 3 children\n"
            "  Depth  Node  Probe address  gRPC address\n"
            "  =====  ====  =============  ============\n"
            "  1      n1    10.0.0.1:3190  10.0.0.1:3191\n"
            "  0      m0    10.0.0.0:3190  10.0.0.0:3191\n");
  EXPECT_EQ(FormatSourcesText(MasterStatus()),
            "Node m0, master, depth 0, 2 children\n"
            "No sources: its clock defines global time.\n");
}

TEST(SourcesTest, JsonParses) {
  const google::protobuf::Struct parsed =
      ParseJson(FormatSourcesJson(SampleNodeStatus("n3")));
  EXPECT_EQ(parsed.fields().at("node_id").string_value(), "n3");
  EXPECT_EQ(parsed.fields().at("depth").number_value(), 2);
  EXPECT_EQ(parsed.fields().at("children_count").number_value(), 3);
  const auto& ancestors = parsed.fields().at("ancestors").list_value().values();
  ASSERT_EQ(ancestors.size(), 2);
  // Master first, as in NodeStatus.
  EXPECT_EQ(ancestors[0].struct_value().fields().at("node_id").string_value(),
            "m0");
  EXPECT_EQ(
      ancestors[1].struct_value().fields().at("grpc_address").string_value(),
      "10.0.0.1:3191");
}

}  // namespace
}  // namespace clocksync::ctl
