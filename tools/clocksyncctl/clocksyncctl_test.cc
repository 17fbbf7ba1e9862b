// End-to-end tests of the clocksyncctl binary against in-process fake nodes
// (StatusServer over FakeNodeView): every command, flag checking and the
// exit codes a health check relies on. The outputs go to the test log.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clocksyncd/status_service.h"
#include "clocksyncd/status_service_testing.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace clocksync {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Quote(const std::string& arg) {
  std::string quoted = "'";
  for (const char c : arg)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs clocksyncctl (a data dependency) with `args`.
Result RunCtl(const std::vector<std::string>& args) {
  const std::string binary =
      absl::StrCat(getenv("TEST_SRCDIR"), "/", getenv("TEST_WORKSPACE"),
                   "/tools/clocksyncctl/clocksyncctl");
  const std::string err_path =
      absl::StrCat(getenv("TEST_TMPDIR"), "/stderr.", getpid(), ".txt");
  std::vector<std::string> words = {Quote(binary)};
  for (const std::string& arg : args) words.push_back(Quote(arg));
  const std::string command =
      absl::StrCat(absl::StrJoin(words, " "), " 2>", Quote(err_path));
  Result result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream err_text;
  err_text << err.rdbuf();
  result.err = err_text.str();
  std::cout << "$ clocksyncctl " << absl::StrJoin(args, " ") << "\n"
            << result.out << result.err << "(exit " << result.exit_code
            << ")\n\n";
  return result;
}

struct ServedNode {
  explicit ServedNode(const std::string& id) : view(SampleNodeStatus(id)) {
    const absl::Status started = server.Start("127.0.0.1:0", "", &view);
    EXPECT_TRUE(started.ok()) << started;
    target = absl::StrCat("--target=127.0.0.1:", server.tcp_port());
  }
  FakeNodeView view;
  StatusServer server;
  std::string target;  // The --target flag for this node.
};

google::protobuf::Struct ParseJson(const std::string& json) {
  google::protobuf::Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok())
      << json;
  return parsed;
}

TEST(ClocksyncctlTest, StatusOfAHealthyNodeExitsZero) {
  ServedNode node("n3");
  const Result result = RunCtl({node.target, "status"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out,
              StartsWith("State           : synchronized\n"
                         "Error bound     : 2.137 us (limit 1.000 ms: ok)\n"));
  EXPECT_THAT(result.out, HasSubstr("Uptime          : 1h 02m 03s\n"));
}

TEST(ClocksyncctlTest, StatusExitsOneWhenUnsyncedOrTheBoundIsTooLarge) {
  ServedNode node("n3");
  EXPECT_EQ(RunCtl({node.target, "--max_error_ns=2000", "status"}).exit_code,
            1);
  EXPECT_EQ(RunCtl({node.target, "--max_error_ns", "2137", "status"}).exit_code,
            0);
  NodeStatus unsynced = SampleNodeStatus("n3");
  unsynced.set_state(SYNC_STATE_UNSYNCED);
  node.view.SetStatus(unsynced);
  const Result result = RunCtl({node.target, "status", "--json"});
  EXPECT_EQ(result.exit_code, 1);
  const google::protobuf::Struct parsed = ParseJson(result.out);
  EXPECT_FALSE(parsed.fields().at("healthy").bool_value());
  EXPECT_THAT(parsed.fields().at("reason").string_value(),
              StartsWith("not synchronized"));
}

TEST(ClocksyncctlTest, UnreachableNodeExitsThreeNamingTheTarget) {
  // A port nobody listens on: bound and closed at once.
  StatusServer gone;
  FakeNodeView view(SampleNodeStatus("x"));
  ASSERT_TRUE(gone.Start("127.0.0.1:0", "", &view).ok());
  const std::string target = absl::StrCat("127.0.0.1:", gone.tcp_port());
  gone.Shutdown(absl::Now());
  for (const std::string command :
       {"status", "tree", "sources", "watch", "wait"}) {
    const absl::Time start = absl::Now();
    const Result result = RunCtl(
        {"--target=" + target, "--timeout=1s", "--wait_timeout=0s", command});
    EXPECT_EQ(result.exit_code, 3) << command;
    EXPECT_THAT(result.err, HasSubstr(target)) << command;
    EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << command;
  }
}

TEST(ClocksyncctlTest, UsageErrorsExitTwo) {
  ServedNode node("n3");
  const std::vector<std::vector<std::string>> bad = {
      {node.target},                              // no command
      {node.target, "stauts"},                    // unknown command
      {node.target, "status", "tree"},            // two commands
      {node.target, "--no_such_flag", "status"},  // unknown flag
      {node.target, "--timeout=soon", "status"},  // bad value
      {node.target, "--timeout"},                 // missing value
      {node.target, "--nojson=1", "status"},      // --noX takes no value
      {"--target=localhost", "status"},           // no port
      {"--target=unix:", "status"},               // no path
      {node.target, "--interval=10ms", "watch"},  // below 50 ms
      {node.target, "--max_error_ns=-1", "status"},
      {node.target, "--max_nodes=0", "tree"},
      {node.target, "--timeout=0s", "status"},
  };
  for (const auto& args : bad) {
    const Result result = RunCtl(args);
    EXPECT_EQ(result.exit_code, 2) << absl::StrJoin(args, " ");
    EXPECT_THAT(result.err, HasSubstr("usage: clocksyncctl"));
  }
  EXPECT_EQ(node.view.status_calls(), 0);  // Nothing was asked.
}

TEST(ClocksyncctlTest, HelpListsCommandsFlagsAndExitCodes) {
  const Result result = RunCtl({"--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const std::string word :
       {"status", "watch", "tree", "sources", "wait", "--target", "--json",
        "--max_error_ns", "--timeout", "--interval", "--wait_timeout",
        "exit codes", "--target (default 127.0.0.1:3191)"}) {
    EXPECT_THAT(result.out, HasSubstr(word));
  }
}

TEST(ClocksyncctlTest, WatchPrintsALinePerUpdate) {
  ServedNode node("n3");
  const Result result =
      RunCtl({node.target, "watch", "--interval=100ms", "--count=3"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> lines =
      absl::StrSplit(result.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  for (const std::string& line : lines) {
    EXPECT_THAT(line, HasSubstr("  n3  synced      bound   2.137 us"));
  }
  const Result json =
      RunCtl({node.target, "watch", "--interval=50ms", "--count=2", "--json"});
  EXPECT_EQ(json.exit_code, 0);
  for (const std::string& line : std::vector<std::string>(
           absl::StrSplit(json.out, '\n', absl::SkipEmpty()))) {
    EXPECT_EQ(ParseJson(line).fields().at("node_id").string_value(), "n3");
  }
}

TEST(ClocksyncctlTest, TreeOfAChainListsEachNodeOnce) {
  ServedNode a("a"), b("b"), c("c");
  NodeStatus master = SampleNodeStatus("a");
  master.set_role(ROLE_MASTER);
  master.set_depth(0);
  master.set_error_bound_ns(0);
  master.clear_ancestors();
  a.view.SetStatus(master);
  const std::string b_address = b.target.substr(sizeof("--target=") - 1);
  const std::string c_address = c.target.substr(sizeof("--target=") - 1);
  a.view.SetChildren({ChildRef("b", b_address), ChildRef("d", "127.0.0.1:1")});
  b.view.SetChildren({ChildRef("c", c_address)});
  const Result text = RunCtl({a.target, "tree"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  const std::vector<std::string> lines =
      absl::StrSplit(text.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << text.out;
  EXPECT_THAT(lines[0], StartsWith("a "));
  EXPECT_THAT(lines[1], StartsWith("|-- b "));
  EXPECT_THAT(lines[2], StartsWith("|   `-- c "));
  EXPECT_THAT(lines[3], StartsWith("`-- d "));
  EXPECT_THAT(lines[3], HasSubstr("UNREACHABLE"));

  const Result json = RunCtl({a.target, "tree", "--json"});
  EXPECT_EQ(json.exit_code, 0);
  const google::protobuf::Struct parsed = ParseJson(json.out);
  absl::flat_hash_map<std::string, int> seen;
  for (const auto& node : parsed.fields().at("nodes").list_value().values()) {
    ++seen[node.struct_value()
               .fields()
               .at("status")
               .struct_value()
               .fields()
               .at("node_id")
               .string_value()];
  }
  EXPECT_EQ(seen, (absl::flat_hash_map<std::string, int>{
                      {"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}}));
}

TEST(ClocksyncctlTest, MetricsOfTheNodeAndOfItsSubtree) {
  ServedNode a("a"), b("b");
  NodeStatus master = SampleNodeStatus("a");
  master.set_role(ROLE_MASTER);
  master.set_depth(0);
  master.clear_ancestors();
  a.view.SetStatus(master);
  const std::string b_address = b.target.substr(sizeof("--target=") - 1);
  a.view.SetChildren({ChildRef("b", b_address), ChildRef("d", "127.0.0.1:1")});

  const Result one = RunCtl({a.target, "metrics"});
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(one.out, HasSubstr("# TYPE clocksync_error_bound_seconds gauge\n"));
  EXPECT_THAT(one.out, HasSubstr("clocksync_up{node=\"a\"} 1\n"));
  EXPECT_THAT(one.out, Not(HasSubstr("node=\"b\"")));

  const Result tree = RunCtl({a.target, "metrics", "--tree"});
  EXPECT_EQ(tree.exit_code, 0) << tree.err;
  EXPECT_THAT(tree.out, HasSubstr("clocksync_up{node=\"b\"} 1\n"));
  EXPECT_THAT(tree.out, HasSubstr("clocksync_up{node=\"d\"} 0\n"));
  EXPECT_THAT(tree.out,
              HasSubstr("clocksync_probes_total{node=\"b\",result=\"sent\"}"));

  const Result unreachable = RunCtl({"--target=127.0.0.1:1", "metrics"});
  EXPECT_EQ(unreachable.exit_code, 3);
}

TEST(ClocksyncctlTest, SourcesOverAUnixSocket) {
  char pattern[] = "/tmp/clocksyncctl_test_XXXXXX";
  const std::string dir = mkdtemp(pattern);
  FakeNodeView view(SampleNodeStatus("n3"));
  StatusServer server;
  ASSERT_TRUE(server.Start("", dir + "/s.sock", &view).ok());
  const Result result = RunCtl({"--target=unix:" + dir + "/s.sock", "sources"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out,
              HasSubstr("  1      n1    10.0.0.1:3190  10.0.0.1:3191\n"));
  server.Shutdown(absl::Now());
  std::filesystem::remove_all(dir);
}

TEST(ClocksyncctlTest, WaitReturnsOnceSynchronizedOrGivesUp) {
  ServedNode node("n3");
  NodeStatus unsynced = SampleNodeStatus("n3");
  unsynced.set_state(SYNC_STATE_UNSYNCED);
  node.view.SetStatus(unsynced);
  const Result gave_up =
      RunCtl({node.target, "wait", "--interval=100ms", "--wait_timeout=300ms"});
  EXPECT_EQ(gave_up.exit_code, 1);
  EXPECT_THAT(gave_up.err, HasSubstr("gave up after --wait_timeout=300ms"));
  EXPECT_THAT(
      gave_up.out,
      HasSubstr("  n3  unsynced    bound          -  offset -  drift -"));
  EXPECT_GE(node.view.status_calls(), 2);

  std::thread synchronize([&node] {
    absl::SleepFor(absl::Milliseconds(500));
    node.view.SetStatus(SampleNodeStatus("n3"));
  });
  const Result waited =
      RunCtl({node.target, "wait", "--interval=100ms", "--wait_timeout=10s"});
  synchronize.join();
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_THAT(waited.out,
              HasSubstr("synchronized, error bound 2.137 us <= 1.000 ms"));
}

}  // namespace
}  // namespace clocksync
