// clocksyncd/config_reload_test.cc: a reload finds every changed key and
// whether it is live, applies only the live ones, re-reads the file, the
// flags and the key file, and refuses an invalid configuration whole.

#include "clocksyncd/config_reload.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "clocksyncd/config.h"
#include "clocksyncd/config_schema.h"
#include "gtest/gtest.h"

namespace clocksync {
namespace {

using google::protobuf::FieldDescriptor;

constexpr int64_t kS = 1'000'000'000;
constexpr char kKeyA[] = "000102030405060708090a0b0c0d0e0f";
constexpr char kKeyB[] = "f0e0d0c0b0a090807060504030201000";

std::string WriteFile(const std::string& name, const std::string& text,
                      mode_t mode = 0600) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
  std::ofstream(path, std::ios::trunc) << text;
  chmod(path.c_str(), mode);
  return path;
}

// `config` with `key` set to a value different from its current one.
config::DaemonConfig Changed(config::DaemonConfig config, const ConfigKey* key) {
  const google::protobuf::Reflection* r = config.GetReflection();
  if (key->is_repeated()) {
    r->AddString(&config, key, "changed.example:1");
  } else if (IsDurationKey(key)) {
    r->SetString(&config, key, FlagText(config, key) == "7777ms" ? "8s" : "7777ms");
  } else if (key->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) {
    r->SetBool(&config, key, !r->GetBool(config, key));
  } else if (key->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
    r->SetInt32(&config, key, r->GetInt32(config, key) + 1);
  } else if (key->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
    r->SetDouble(&config, key, r->GetDouble(config, key) * 2 + 1);
  } else {
    r->SetString(&config, key, FlagText(config, key) + "x");
  }
  return config;
}

std::set<std::string> Keys(const std::vector<ConfigChange>& changes) {
  std::set<std::string> keys;
  for (const ConfigChange& c : changes) keys.insert(c.key);
  return keys;
}

TEST(ConfigReloadTest, LiveKeysAreSchemaKeys) {
  int count = 0;
  for (const char* key : kLiveKeys) {
    EXPECT_NE(FindConfigKey(key), nullptr) << key;
    EXPECT_TRUE(IsLiveKey(key));
    ++count;
  }
  EXPECT_EQ(count, 7);
  // The ones that shape sockets, the segment, the window or the tree are not.
  for (const char* key : {"node_id", "master", "join", "parent", "listen",
                          "grpc_listen", "admin_socket", "shm_path",
                          "probe_interval", "window", "timestamping", "tsc",
                          "enable_test_features", "clock_model"}) {
    EXPECT_NE(FindConfigKey(key), nullptr) << key;
    EXPECT_FALSE(IsLiveKey(key)) << key;
  }
}

TEST(ConfigReloadTest, FindsEveryChangedKeyAndWhetherItIsLive) {
  config::DaemonConfig base;
  base.set_node_id("n1");
  base.add_join("10.0.0.1:3191");
  for (const ConfigKey* key : ConfigKeys()) {
    const std::vector<ConfigChange> changes = DiffConfig(base, Changed(base, key));
    ASSERT_EQ(changes.size(), 1u) << key->name();
    EXPECT_EQ(changes[0].key, key->name());
    EXPECT_EQ(changes[0].live, IsLiveKey(key->name())) << key->name();
    EXPECT_NE(changes[0].before, changes[0].after) << key->name();
  }
  EXPECT_TRUE(DiffConfig(base, base).empty());
}

TEST(ConfigReloadTest, ComparesMeaningsNotSpellings) {
  config::DaemonConfig a;
  config::DaemonConfig b;
  a.set_log_interval("1s");
  b.set_log_interval("1000ms");
  a.set_holdover_after("1s");  // The default, written out.
  a.set_max_slew_ppm(500);
  EXPECT_TRUE(DiffConfig(a, b).empty());
  b.set_log_interval("1001ms");
  EXPECT_EQ(Keys(DiffConfig(a, b)), std::set<std::string>{"log_interval"});
}

TEST(ConfigReloadTest, MergeTakesTheLiveKeysOnly) {
  config::DaemonConfig running;
  running.set_node_id("n1");
  running.add_join("10.0.0.1:3191");
  config::DaemonConfig next = running;
  for (const ConfigKey* key : ConfigKeys()) next = Changed(next, key);
  const config::DaemonConfig merged = MergeLiveKeys(running, next);
  std::set<std::string> live, restart;
  for (const ConfigKey* key : ConfigKeys()) {
    (IsLiveKey(key->name()) ? live : restart).insert(key->name());
  }
  EXPECT_EQ(Keys(DiffConfig(running, merged)), live);
  EXPECT_EQ(Keys(DiffConfig(merged, next)), restart);
  // A live key back at its default in the new file is back at the default.
  config::DaemonConfig set = running;
  set.set_log_interval("3s");
  EXPECT_FALSE(MergeLiveKeys(set, running).has_log_interval());
}

TEST(ConfigReloadTest, PlansFromTheFileAndTheSameFlags) {
  const std::string key = WriteFile("plan.key", absl::StrCat(kKeyA, "\n"));
  const std::string file = WriteFile(
      "plan.conf", absl::StrCat("master: true\nnode_id: \"m1\"\nlog_interval: \"10s\"\n"
                                "slew_time: \"2s\"\nprobe_key_file: \"", key, "\"\n"));
  const std::vector<std::string> args = {"--config=" + file, "--max_slew_ppm=100"};
  const absl::StatusOr<CommandLine> started = ParseCommandLine(args);
  ASSERT_TRUE(started.ok()) << started.status();

  // Unchanged: nothing to do, the keys read again.
  absl::StatusOr<ReloadPlan> plan = PlanReload(args, started->config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->changes.empty());
  ASSERT_TRUE(plan->probe_keys.has_value());
  EXPECT_EQ(plan->probe_keys->signing, *probe::ParseProbeKey(kKeyA));

  // Live and restart keys changed, a flag still over the file, a new key.
  WriteFile("plan.conf",
            absl::StrCat("master: true\nnode_id: \"m2\"\nlog_interval: \"5s\"\n"
                         "slew_time: \"2s\"\nmax_slew_ppm: 300\nlisten: \"127.0.0.1:4000\"\n"
                         "probe_key_file: \"", key, "\"\n"));
  WriteFile("plan.key", absl::StrCat(kKeyB, "\n", kKeyA, "\n"));
  plan = PlanReload(args, started->config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(DescribeChanges(plan->changes),
            (std::vector<std::string>{
                "node_id changed (\"m1\" -> \"m2\"): needs a restart, keeping \"m1\"",
                "listen changed (\"0.0.0.0:3190\" -> \"127.0.0.1:4000\"): needs a "
                "restart, keeping \"0.0.0.0:3190\"",
                "log_interval changed (\"10s\" -> \"5s\"): applied",
            }));
  EXPECT_EQ(plan->daemon_config.node_id, "m1");
  EXPECT_EQ(plan->daemon_config.listen, "0.0.0.0:3190");
  EXPECT_EQ(plan->daemon_config.log_interval_ns, 5 * kS);
  EXPECT_EQ(plan->daemon_config.slew.slew_time_ns, 2 * kS);
  EXPECT_EQ(plan->daemon_config.slew.max_slew_ppm, 100);  // The flag's.
  EXPECT_EQ(plan->config.node_id(), "m1");
  EXPECT_EQ(plan->config.log_interval(), "5s");
  ASSERT_TRUE(plan->probe_keys.has_value());
  EXPECT_EQ(plan->probe_keys->signing, *probe::ParseProbeKey(kKeyB));
  EXPECT_EQ(plan->probe_keys->other, *probe::ParseProbeKey(kKeyA));

  // The next reload compares with what runs: node_id is still pending.
  const absl::StatusOr<ReloadPlan> again = PlanReload(args, plan->config);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Keys(again->changes), (std::set<std::string>{"node_id", "listen"}));
}

TEST(ConfigReloadTest, RefusesAnInvalidConfigurationWhole) {
  const std::string file = WriteFile("bad.conf", "master: true\nlog_interval: \"5s\"\n");
  const std::vector<std::string> args = {"--config=" + file};
  const absl::StatusOr<CommandLine> started = ParseCommandLine(args);
  ASSERT_TRUE(started.ok()) << started.status();

  // A syntax error, a bad value, a bad key (even of a restart key) or a
  // missing file: an error naming it, nothing planned.
  WriteFile("bad.conf", "master: true\nlog_interval: \"3s\"\nlisten \"x\"\n");
  absl::StatusOr<ReloadPlan> plan = PlanReload(args, started->config);
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::StrContains(plan.status().message(), file + ":3")) << plan.status();
  WriteFile("bad.conf", "master: true\nlog_interval: \"3 s\"\n");
  plan = PlanReload(args, started->config);
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "log_interval")) << plan.status();
  WriteFile("bad.conf", "master: true\nprobe_interval: \"0s\"\n");
  plan = PlanReload(args, started->config);
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "probe_interval")) << plan.status();
  EXPECT_FALSE(PlanReload({"--config=" + file + ".missing"}, started->config).ok());

  // A key file others may read, or without a key.
  const std::string key = WriteFile("bad.key", absl::StrCat(kKeyA, "\n"), 0644);
  WriteFile("bad.conf", absl::StrCat("master: true\nprobe_key_file: \"", key, "\"\n"));
  plan = PlanReload(args, started->config);
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "probe_key_file")) << plan.status();
  WriteFile("bad.key", "not a key\n", 0600);
  plan = PlanReload(args, started->config);
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::StrContains(plan.status().message(), key)) << plan.status();
}

TEST(ConfigReloadTest, RefusesLiveValuesThatDoNotFitTheRunningOnes) {
  // holdover_after (live) must be at least probe_interval (restart): valid
  // together in the new file, not beside the running probe_interval.
  const std::string file = WriteFile("fit.conf", "master: true\n");
  const std::vector<std::string> args = {"--config=" + file};
  const absl::StatusOr<CommandLine> started = ParseCommandLine(args);
  ASSERT_TRUE(started.ok()) << started.status();
  WriteFile("fit.conf",
            "master: true\nprobe_interval: \"50ms\"\nholdover_after: \"60ms\"\n");
  const absl::StatusOr<ReloadPlan> plan = PlanReload(args, started->config);
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "do not fit")) << plan.status();
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "holdover_after")) << plan.status();
}

}  // namespace
}  // namespace clocksync
