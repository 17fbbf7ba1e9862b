// metrics/exposition_test.cc: the text format's rules (HELP and TYPE once
// per family before its samples, each series once, labels escaped),
// seconds written exactly, and Prometheus' own linter on the output.
#include "metrics/exposition.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace clocksync::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A node at depth 2 with every field set.
NodeStatus SampleNodeStatus(const std::string& node_id) {
  NodeStatus status;
  status.set_node_id(node_id);
  status.set_role(ROLE_NODE);
  status.set_depth(2);
  status.set_parent("10.0.0.1:3190");
  status.set_state(SYNC_STATE_SYNCED);
  status.set_offset_to_parent_ns(-1'234'567);
  status.set_drift_ppb(12'345.678);
  status.set_error_bound_ns(2'137);
  status.set_min_round_trip_ns(45'210);
  status.set_samples_in_window(2'997);
  status.set_lower_hull_size(12);
  status.set_upper_hull_size(14);
  status.set_probes_sent(3'000);
  status.set_probes_answered(2'998);
  status.set_probes_lost(1);
  status.set_probes_rejected(1);
  status.set_inconsistencies(1);
  status.set_uptime_ns(3'723'000'000'000);
  status.set_version("0.3.0");
  NodeAddress* master = status.add_ancestors();  // Root first.
  master->set_node_id("m0");
  NodeAddress* parent = status.add_ancestors();
  parent->set_node_id("n1");
  status.set_children_count(3);
  status.set_joins(2);
  status.set_parent_losses(1);
  (*status.mutable_dropped_on_probe_port())["rate_limited"] = 120;
  (*status.mutable_dropped_on_probe_port())["bad_mac"] = 4;
  (*status.mutable_dropped_from_parent())["late"] = 2;
  status.set_last_answer_age_ns(102'000'000);
  return status;
}

// A master "a", b below it, c (holding over) below b, and d unreachable.
Topology SampleTopology() {
  Topology topology;
  NodeStatus a;
  a.set_node_id("a");
  a.set_role(ROLE_MASTER);
  a.set_state(SYNC_STATE_SYNCED);
  a.set_children_count(2);
  a.set_uptime_ns(90'061'000'000'000);
  a.set_version("0.3.0");
  *topology.add_nodes()->mutable_status() = a;
  NodeStatus b = SampleNodeStatus("b");
  b.set_depth(1);
  *topology.add_nodes()->mutable_status() = b;
  NodeStatus c = SampleNodeStatus("c-long-name");
  c.set_state(SYNC_STATE_HOLDOVER);
  c.set_error_bound_ns(12'500'000);
  c.set_drift_ppb(-3.5);
  *topology.add_nodes()->mutable_status() = c;
  TopologyNode* d = topology.add_nodes();
  d->mutable_status()->set_node_id("d");
  d->set_unreachable(true);
  d->set_error("DEADLINE_EXCEEDED: Deadline Exceeded (10.0.0.4:3191)");
  return topology;
}

// Prometheus' own linter (Debian's promtool, installed by deploy/setup.sh)
// accepts the output: base units, counters ending in _total, no noise.
TEST(MetricsTest, PromtoolFindsNothingToLint) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/metrics.prom";
  {
    std::ofstream file(path);
    file << FormatMetrics(SampleTopology());
  }
  ASSERT_EQ(std::system("command -v promtool >/dev/null"), 0)
      << "promtool missing: run deploy/setup.sh";
  const std::string lint = path + ".lint";
  const int status = std::system(
      ("promtool check metrics <" + path + " >" + lint + " 2>&1").c_str());
  std::ifstream in(lint);
  const std::string report((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
  EXPECT_EQ(status, 0) << report;
  EXPECT_EQ(report, "") << report;
}

TEST(MetricsTest, SecondsAreWrittenExactly) {
  NodeStatus node = SampleNodeStatus("n1");
  node.set_uptime_ns(12'345'678'900);
  node.set_error_bound_ns(-1);
  node.set_offset_to_parent_ns(INT64_MIN);
  node.set_min_round_trip_ns(3'000'000'000);
  const std::string text = FormatNodeMetrics(node);
  EXPECT_THAT(text, HasSubstr("clocksync_uptime_seconds{node=\"n1\"} 12.3456789\n"));
  EXPECT_THAT(text,
              HasSubstr("clocksync_error_bound_seconds{node=\"n1\"} -0.000000001\n"));
  EXPECT_THAT(text, HasSubstr("clocksync_offset_to_parent_seconds{node=\"n1\"} "
                              "-9223372036.854775808\n"));
  EXPECT_THAT(text, HasSubstr("clocksync_min_round_trip_seconds{node=\"n1\"} 3\n"));
}

TEST(MetricsTest, MastershipIsCountedAndMasterlessTimeInSeconds) {
  NodeStatus node = SampleNodeStatus("n1");
  node.set_term(3);
  node.set_has_master(true);
  node.set_takeovers(2);
  node.set_masterless_ns(3'250'000'000);
  node.set_mapping_steps(1);
  const std::string text = FormatNodeMetrics(node);
  EXPECT_THAT(text, HasSubstr("clocksync_term{node=\"n1\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("clocksync_has_master{node=\"n1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("clocksync_takeovers_total{node=\"n1\"} 2\n"));
  EXPECT_THAT(text,
              HasSubstr("clocksync_masterless_seconds_total{node=\"n1\"} 3.25\n"));
  EXPECT_THAT(text, HasSubstr("clocksync_mapping_steps_total{node=\"n1\"} 1\n"));
}

TEST(MetricsTest, OneNodeIsATopologyOfOne) {
  const NodeStatus node = SampleNodeStatus("n1");
  Topology topology;
  *topology.add_nodes()->mutable_status() = node;
  EXPECT_EQ(FormatNodeMetrics(node), FormatMetrics(topology));
  EXPECT_THAT(FormatNodeMetrics(node), HasSubstr("clocksync_up{node=\"n1\"} 1\n"));
}

TEST(MetricsTest, DropsAreSortedByReason) {
  const std::string text = FormatNodeMetrics(SampleNodeStatus("n1"));
  const size_t bad_mac = text.find("reason=\"bad_mac\"");
  const size_t rate_limited = text.find("reason=\"rate_limited\"");
  ASSERT_NE(bad_mac, std::string::npos) << text;
  ASSERT_NE(rate_limited, std::string::npos) << text;
  EXPECT_LT(bad_mac, rate_limited);
  EXPECT_THAT(text, HasSubstr("clocksync_probe_drops_total{node=\"n1\","
                              "socket=\"to_parent\",reason=\"late\"} 2\n"));
}

TEST(MetricsTest, MasterHasNoLastAnswerAge) {
  const std::string text = FormatMetrics(SampleTopology());
  EXPECT_THAT(text, HasSubstr("clocksync_last_answer_age_seconds{node=\"b\"} 0.102\n"));
  EXPECT_THAT(text, Not(HasSubstr("clocksync_last_answer_age_seconds{node=\"a\"}")));
  EXPECT_THAT(text, HasSubstr("clocksync_info{node=\"a\",role=\"master\",parent=\"\","
                              "version=\"0.3.0\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("clocksync_info{node=\"b\",role=\"node\",parent=\"n1\","
                              "version=\"0.3.0\"} 1\n"));
}

// Every family's HELP and TYPE once and before its samples, every sample
// `name{labels} value` with a known family, each series once; an
// unreachable node has only clocksync_up 0.
TEST(MetricsTest, ExpositionFormatWithEverySeriesOnce) {
  Topology topology = SampleTopology();
  topology.mutable_nodes(2)->mutable_status()->set_holdover(true);
  // A node id that needs escaping, and a node listed twice.
  NodeStatus odd = SampleNodeStatus("we\"ird\\id\nx");
  odd.set_depth(2);
  *topology.add_nodes()->mutable_status() = odd;
  *topology.add_nodes() = topology.nodes(1);
  const std::string text = FormatMetrics(topology);

  absl::flat_hash_map<std::string, std::string> type_of;
  absl::flat_hash_map<std::string, int> series;
  absl::flat_hash_map<std::string, double> value_of;
  std::string family;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "# HELP ")) {
      std::vector<std::string> words = absl::StrSplit(line, ' ');
      family = words[2];
      EXPECT_FALSE(type_of.contains(family)) << "HELP twice: " << family;
      continue;
    }
    if (absl::StartsWith(line, "# TYPE ")) {
      std::vector<std::string> words = absl::StrSplit(line, ' ');
      ASSERT_EQ(words.size(), 4u) << line;
      EXPECT_EQ(words[2], family) << line;
      EXPECT_TRUE(words[3] == "gauge" || words[3] == "counter") << line;
      type_of[words[2]] = words[3];
      continue;
    }
    const size_t brace = line.find('{');
    const size_t close = line.rfind("} ");
    ASSERT_NE(brace, absl::string_view::npos) << line;
    ASSERT_NE(close, absl::string_view::npos) << line;
    const std::string name(line.substr(0, brace));
    EXPECT_EQ(name, family) << "sample outside its family: " << line;
    EXPECT_TRUE(absl::StartsWith(line.substr(brace), "{node=\"")) << line;
    double value = 0;
    EXPECT_TRUE(absl::SimpleAtod(line.substr(close + 2), &value)) << line;
    const std::string key(line.substr(0, close + 1));
    EXPECT_EQ(++series[key], 1) << "series twice: " << key;
    value_of[key] = value;
  }
  EXPECT_EQ(type_of["clocksync_probes_total"], "counter");
  EXPECT_EQ(type_of["clocksync_error_bound_seconds"], "gauge");
  EXPECT_EQ(value_of["clocksync_up{node=\"a\"}"], 1);
  EXPECT_EQ(value_of["clocksync_up{node=\"d\"}"], 0);
  EXPECT_FALSE(value_of.contains("clocksync_depth{node=\"d\"}"));
  EXPECT_EQ(value_of["clocksync_error_bound_seconds{node=\"c-long-name\"}"],
            0.0125);
  EXPECT_EQ(value_of["clocksync_holdover{node=\"c-long-name\"}"], 1);
  EXPECT_EQ(value_of["clocksync_state{node=\"c-long-name\",state=\"holdover\"}"],
            1);
  EXPECT_EQ(value_of["clocksync_state{node=\"c-long-name\",state=\"synced\"}"],
            0);
  EXPECT_DOUBLE_EQ(value_of["clocksync_drift_ratio{node=\"c-long-name\"}"],
                   -3.5e-9);
  EXPECT_EQ(value_of["clocksync_synchronized{node=\"b\"}"], 1);
  EXPECT_EQ(value_of["clocksync_depth{node=\"we\\\"ird\\\\id\\nx\"}"], 2);
  EXPECT_EQ(series["clocksync_up{node=\"b\"}"], 1);  // listed twice, once here
}

}  // namespace
}  // namespace clocksync::metrics
