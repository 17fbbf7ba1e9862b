// clocksyncd's configuration: defaults, the file, flags over it, and every
// validation error naming its flag (or file, line and key) and the value.

#include "clocksyncd/config.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "clocksyncd/config_schema.h"
#include "gtest/gtest.h"
#include "shm/shm_layout.h"

namespace clocksync {
namespace {

using Args = std::vector<std::string>;

// The command line read and validated, as main() does.
absl::StatusOr<DaemonConfig> Load(const Args& args) {
  absl::StatusOr<CommandLine> line = ParseCommandLine(args);
  if (!line.ok()) return line.status();
  return ValidateConfig(line->config, line->origins);
}

// The error message of loading `args`, "" when they are valid.
std::string Error(const Args& args) {
  const absl::StatusOr<DaemonConfig> config = Load(args);
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigSchemaTest, EveryKeyIsDocumentedAndEveryRangeParses) {
  ASSERT_EQ(ConfigKeys().size(), 39u);
  for (const ConfigKey* key : ConfigKeys()) {
    EXPECT_FALSE(key->options().GetExtension(config::doc).empty()) << key->name();
    const absl::StatusOr<std::optional<ValueRange>> range = RangeOf(key);
    EXPECT_TRUE(range.ok()) << range.status();
  }
}

TEST(ConfigTest, DefaultsAreTheDocumentedOnes) {
  const absl::StatusOr<DaemonConfig> c = Load({"--master"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->node_id, "master");
  EXPECT_TRUE(c->master);
  EXPECT_TRUE(c->join.empty());
  EXPECT_EQ(c->parent, "");
  EXPECT_EQ(c->max_children, 16);
  EXPECT_EQ(c->advertise_host, "");
  EXPECT_EQ(c->heartbeat_interval_ns, 200'000'000);
  EXPECT_EQ(c->lease_ns, 3'000'000'000);
  EXPECT_EQ(c->missed_probes_for_loss, 10);
  EXPECT_EQ(c->leave_grace_ns, 5'000'000'000);
  EXPECT_EQ(c->listen, "0.0.0.0:3190");
  EXPECT_EQ(c->grpc_listen, "0.0.0.0:3191");
  EXPECT_EQ(c->admin_socket, "");
  EXPECT_EQ(c->metrics_listen, "");  // Off unless asked for.
  EXPECT_EQ(c->shm_path, CLOCKSYNC_DEFAULT_SHM_PATH);
  EXPECT_EQ(c->status_file, "");
  EXPECT_EQ(c->probe_interval_ns, 100'000'000);
  EXPECT_EQ(c->probe_jitter, 0.1);
  EXPECT_EQ(c->estimator.base.window_ns, 300'000'000'000);
  EXPECT_EQ(c->estimator.levels, 4);
  EXPECT_EQ(c->estimator.base.wander_ppb_per_sqrt_s, 1.0);
  EXPECT_EQ(c->estimator.base.max_round_trip_ns, 1'000'000'000);
  EXPECT_EQ(c->slew.max_slew_ppm, 500);
  EXPECT_EQ(c->slew.slew_time_ns, 1'000'000'000);
  EXPECT_EQ(c->slew.step_threshold_ns, 1'000'000);
  EXPECT_EQ(c->holdover_after_ns, 1'000'000'000);
  EXPECT_EQ(c->log_interval_ns, 10'000'000'000);
  EXPECT_FALSE(c->enable_test_features);
  EXPECT_EQ(c->clock_model, "");
  EXPECT_EQ(c->inject_delay, "");
  EXPECT_EQ(c->probe_key_file, "");
}

TEST(ConfigTest, FlagsAsScriptsWriteThem) {
  const absl::StatusOr<DaemonConfig> c = Load(
      {"--node_id=n1", "--join=127.0.0.1:32100,127.0.0.1:32101",
       "--max_children=3", "--listen=127.0.0.1:32001", "--shm_path=/tmp/n1.shm",
       "--grpc_listen=127.0.0.1:32101", "--status_file=/tmp/n1.status",
       "--metrics_listen=[::1]:9100",
       "--probe_interval=20ms", "--window=1.5m", "--enable_test_features",
       "--clock_model=offset=10ms,frequency_ppm=-40,wander=1,seed=1",
       "--inject_delay=min=20us,mean=10us"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->node_id, "n1");
  EXPECT_EQ(c->join, (std::vector<std::string>{"127.0.0.1:32100", "127.0.0.1:32101"}));
  EXPECT_EQ(c->max_children, 3);
  EXPECT_EQ(c->metrics_listen, "[::1]:9100");
  // Another host on the gRPC port, or port 0 on both, is fine.
  EXPECT_TRUE(Load({"--master", "--grpc_listen=127.0.0.1:0",
                    "--metrics_listen=127.0.0.1:0"}).ok());
  EXPECT_TRUE(Load({"--master", "--grpc_listen=127.0.0.1:9000",
                    "--metrics_listen=127.0.0.2:9000"}).ok());
  EXPECT_EQ(c->probe_interval_ns, 20'000'000);
  EXPECT_EQ(c->estimator.base.window_ns, 90'000'000'000);
  EXPECT_TRUE(c->enable_test_features);
  EXPECT_EQ(c->inject_delay, "min=20us,mean=10us");
}

TEST(ConfigTest, FlagSyntaxes) {
  // --key value, -key=value, --nokey, --key=false.
  absl::StatusOr<DaemonConfig> c =
      Load({"-node_id=n", "--parent", "h:1", "--master", "--nomaster",
            "--probe_interval", "1s", "--holdover_after=2h"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->master);
  EXPECT_EQ(c->parent, "h:1");
  EXPECT_EQ(c->probe_interval_ns, 1'000'000'000);
}

TEST(ConfigTest, BooleanValues) {
  EXPECT_TRUE(Load({"--master=true"})->master);
  EXPECT_EQ(Error({"--node_id=n", "--master=false"}),
            "bad flag --join: required unless --master or --parent (a static tree)");
  EXPECT_EQ(Error({"--master=maybe"}),
            "bad flag --master: not a boolean (true or false), got \"maybe\"");
}

TEST(ConfigTest, Durations) {
  const absl::StatusOr<DaemonConfig> c =
      Load({"--master", "--probe_interval=1.5s", "--holdover_after=1m30s",
            "--step_threshold=0", "--leave_grace=250us"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->probe_interval_ns, 1'500'000'000);
  EXPECT_EQ(c->holdover_after_ns, 90'000'000'000);
  EXPECT_EQ(c->slew.step_threshold_ns, 0);
  EXPECT_EQ(c->leave_grace_ns, 250'000);
  EXPECT_EQ(Error({"--master", "--probe_interval=100"}),
            "bad flag --probe_interval: not a duration (e.g. 100ms, 1.5s), "
            "got \"100\"");
}

TEST(ConfigTest, Lists) {
  absl::StatusOr<DaemonConfig> c = Load({"--node_id=n", "--join=a:1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->join, (std::vector<std::string>{"a:1"}));
  // A later flag replaces the list.
  c = Load({"--node_id=n", "--join=a:1,b:2", "--join=c:3"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->join, (std::vector<std::string>{"c:3"}));
  EXPECT_EQ(Error({"--node_id=n", "--join=a:1,,b:2"}).rfind("bad flag --join: ", 0), 0u);
}

TEST(ConfigTest, File) {
  const std::string path = WriteFile("file.conf",
                                     "# a node\n"
                                     "node_id: \"n7\"\n"
                                     "join: \"10.0.0.1:3191\"\n"
                                     "join: \"10.0.0.2:3191\"\n"
                                     "max_children: 4\n"
                                     "probe_interval: \"50ms\"\n"
                                     "wander_ppb_per_sqrt_s: 0.5\n"
                                     "enable_test_features: true\n");
  const absl::StatusOr<DaemonConfig> c = Load({absl::StrCat("--config=", path)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->node_id, "n7");
  EXPECT_EQ(c->join, (std::vector<std::string>{"10.0.0.1:3191", "10.0.0.2:3191"}));
  EXPECT_EQ(c->max_children, 4);
  EXPECT_EQ(c->probe_interval_ns, 50'000'000);
  EXPECT_EQ(c->estimator.base.wander_ppb_per_sqrt_s, 0.5);
  EXPECT_TRUE(c->enable_test_features);
  EXPECT_EQ(c->listen, "0.0.0.0:3190") << "a key not in the file keeps its default";
}

TEST(ConfigTest, FileListSyntax) {
  const std::string path =
      WriteFile("list.conf", "node_id: \"n\"\njoin: [\"a:1\", \"b:2\"]\n");
  const absl::StatusOr<DaemonConfig> c = Load({"--config", path});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->join, (std::vector<std::string>{"a:1", "b:2"}));
}

TEST(ConfigTest, FlagsOverrideTheFileWhereverTheyStand) {
  const std::string path = WriteFile(
      "override.conf",
      "node_id: \"n7\"\njoin: [\"a:1\", \"b:2\"]\nprobe_interval: \"50ms\"\n");
  const absl::StatusOr<DaemonConfig> c =
      Load({"--probe_interval=20ms", absl::StrCat("--config=", path), "--join=c:3",
            "--nomaster"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->node_id, "n7");
  EXPECT_EQ(c->probe_interval_ns, 20'000'000);
  EXPECT_EQ(c->join, (std::vector<std::string>{"c:3"}));
}

TEST(ConfigTest, ErrorsNameTheFileLineAndKey) {
  const std::string bad_value = WriteFile(
      "bad_value.conf", "node_id: \"n\"\njoin: \"a:1\"\n\nprobe_interval: \"-5ms\"\n");
  EXPECT_EQ(Error({absl::StrCat("--config=", bad_value)}),
            absl::StrCat("bad config ", bad_value,
                         ":4: probe_interval: must be between 1ms and 60s, "
                         "got \"-5ms\""));
  // The same value from a flag over the file names the flag.
  EXPECT_EQ(Error({absl::StrCat("--config=", bad_value), "--probe_interval=0"}),
            "bad flag --probe_interval: must be between 1ms and 60s, got \"0\"");

  const std::string unknown =
      WriteFile("unknown.conf", "master: true\nprobe_intervall: \"5ms\"\n");
  EXPECT_EQ(Error({absl::StrCat("--config=", unknown)}),
            absl::StrCat("bad config ", unknown,
                         ":2: probe_intervall: unknown key (clocksyncd --help "
                         "lists them)"));

  const std::string wrong_type =
      WriteFile("wrong_type.conf", "master: true\n\nmax_children: \"x\"\n");
  const std::string message = Error({absl::StrCat("--config=", wrong_type)});
  EXPECT_TRUE(absl::StartsWith(
      message, absl::StrCat("bad config ", wrong_type, ":3: max_children: ")))
      << message;

  const std::string syntax =
      WriteFile("syntax.conf", "master: true\nlisten \"0.0.0.0:1\"\n");
  EXPECT_TRUE(absl::StartsWith(Error({absl::StrCat("--config=", syntax)}),
                               absl::StrCat("bad config ", syntax, ":2: listen: ")))
      << Error({absl::StrCat("--config=", syntax)});

  const std::string twice = WriteFile("twice.conf", "master: true\nmaster: false\n");
  EXPECT_TRUE(absl::StartsWith(Error({absl::StrCat("--config=", twice)}),
                               absl::StrCat("bad config ", twice, ":2: master: ")));

  EXPECT_TRUE(absl::StartsWith(Error({"--config=/nonexistent/clocksyncd.conf"}),
                               "bad flag --config: cannot read "
                               "/nonexistent/clocksyncd.conf: "));
  EXPECT_EQ(Error({"--config=a", "--config=b"}), "bad flag --config: given twice");
}

TEST(ConfigTest, CommandLineErrors) {
  EXPECT_EQ(Error({"--master", "--frobnicate=1"}),
            "bad flag --frobnicate: unknown flag (clocksyncd --help lists them)");
  EXPECT_EQ(Error({"--nolisten"}),
            "bad flag --nolisten: unknown flag (clocksyncd --help lists them)");
  EXPECT_EQ(Error({"--master", "stray"}),
            "bad argument \"stray\": clocksyncd takes flags only (clocksyncd "
            "--help lists them)");
  EXPECT_EQ(Error({"--master", "--node_id"}), "bad flag --node_id: missing value");
  EXPECT_EQ(Error({"--max_children=abc"}),
            "bad flag --max_children: not an integer, got \"abc\"");
  EXPECT_EQ(Error({"--max_slew_ppm=fast"}),
            "bad flag --max_slew_ppm: not a number, got \"fast\"");
}

TEST(ConfigTest, HelpAndVersion) {
  EXPECT_EQ(ParseCommandLine({"--master", "--help"})->action,
            CommandLine::Action::kHelp);
  EXPECT_EQ(ParseCommandLine({"--version"})->action, CommandLine::Action::kVersion);
  const std::string help = ConfigHelpText("usage\n");
  for (const ConfigKey* key : ConfigKeys()) {
    EXPECT_TRUE(absl::StrContains(help, absl::StrCat("--", key->name())))
        << key->name();
  }
  EXPECT_TRUE(absl::StrContains(help, "--probe_interval=DURATION  (default: 100ms; "
                                      "between 1ms and 60s)"));
}

// Each rule: the arguments that break it and the message, which names the
// flag, the reason and the value.
TEST(ConfigTest, EveryValidationErrorNamesItsFlag) {
  const std::string key_file = WriteFile("missing.key", "");
  const struct {
    Args args;
    std::string error;
  } cases[] = {
      {{"--join=a:1"}, "bad flag --node_id: must not be empty"},
      {{"--node_id=n"},
       "bad flag --join: required unless --master or --parent (a static tree)"},
      {{"--master", "--parent=a:1"},
       "bad flag --parent: a master has no parent, got \"a:1\""},
      {{"--node_id=n", "--parent=a:1", "--master_priority=3"},
       "bad flag --master_priority: a candidate needs join (a pinned node "
       "cannot move to take over), got 3"},
      {{"--node_id=n", "--join=a:1", "--master_priority=256"},
       "bad flag --master_priority: must be between 0 and 255, got 256"},
      {{"--node_id=n", "--join=a:1", "--takeover_after=10ms"},
       "bad flag --takeover_after: "},
      {{"--node_id=n", "--join=a:1", "--parent=b:2"},
       "bad flag --join: give --join or --parent, not both"},
      {{"--node_id=n", "--join=a:1", "--parent_grpc=b:2"},
       "bad flag --parent_grpc: needs --parent (the pinned parent's probe address)"},
      {{"--node_id=n", "--join=nohost"}, "bad flag --join: "},
      {{"--node_id=a b", "--join=a:1"},
       "bad flag --node_id: only letters, digits, '.', '_' and '-' allowed, got \"a b\""},
      {{"--node_id=" + std::string(65, 'x'), "--join=a:1"},
       "bad flag --node_id: at most 64 bytes, got 65"},
      {{"--master", "--listen=nohost"}, "bad flag --listen: missing ':port'"},
      {{"--node_id=n", "--parent=bad"}, "bad flag --parent: missing ':port'"},
      {{"--master", "--grpc_listen=h:99999"}, "bad flag --grpc_listen: "},
      {{"--master", "--metrics_listen=9100"},
       "bad flag --metrics_listen: missing ':port' (want HOST:PORT), got \"9100\""},
      {{"--master", "--metrics_listen=h:65536"},
       "bad flag --metrics_listen: port must be 0..65535"},
      {{"--master", "--metrics_listen=127.0.0.1:3191"},
       "bad flag --metrics_listen: must not share grpc_listen's port "
       "(0.0.0.0:3191), got \"127.0.0.1:3191\""},
      {{"--master", "--grpc_listen=[::1]:9000", "--metrics_listen=[::1]:9000"},
       "bad flag --metrics_listen: must not share grpc_listen's port"},
      {{"--master", "--window=-1s"}, "bad flag --window: must be > 0, got \"-1s\""},
      {{"--node_id=n", "--parent=a:1", "--parent_grpc=a:99999"},
       "bad flag --parent_grpc: "},
      {{"--master", "--grpc_listen="},
       "bad flag --grpc_listen: required for tree membership"},
      {{"--master", "--max_children=0"},
       "bad flag --max_children: must be between 1 and 10000, got 0"},
      {{"--master", "--missed_probes_for_loss=0"},
       "bad flag --missed_probes_for_loss: must be >= 1, got 0"},
      {{"--master", "--leave_grace=-1s"},
       "bad flag --leave_grace: must be >= 0, got \"-1s\""},
      {{"--master", "--listen="}, "bad flag --listen: must not be empty"},
      {{"--master", "--shm_path="}, "bad flag --shm_path: must not be empty"},
      {{"--master", "--probe_interval=-5ms"},
       "bad flag --probe_interval: must be between 1ms and 60s, got \"-5ms\""},
      {{"--master", "--probe_interval=2m"},
       "bad flag --probe_interval: must be between 1ms and 60s, got \"2m\""},
      {{"--master", "--heartbeat_interval=5ms"},
       "bad flag --heartbeat_interval: must be >= 10ms, got \"5ms\""},
      {{"--master", "--lease=500ms"},
       "bad flag --lease: must be at least 4 heartbeat intervals"},
      {{"--master", "--window=0"}, "bad flag --window: must be > 0, got \"0\""},
      {{"--master", "--window_levels=9"},
       "bad flag --window_levels: must be between 1 and 8, got 9"},
      {{"--master", "--window=4s"},
       "bad flag --window_levels: the shortest window (window / "
       "2^(window_levels-1)) must be at least 1s, got window \"4s\" and "
       "window_levels 4"},
      {{"--master", "--wander_ppb_per_sqrt_s=-1"},
       "bad flag --wander_ppb_per_sqrt_s: must be >= 0, got -1"},
      {{"--master", "--wander_ppb_per_sqrt_s=inf"},
       "bad flag --wander_ppb_per_sqrt_s: must be a finite number, got inf"},
      {{"--master", "--max_drift_ppm=0"},
       "bad flag --max_drift_ppm: must be > 0 and <= 100000, got 0"},
      {{"--master", "--max_drift_ppm=200000"},
       "bad flag --max_drift_ppm: must be > 0 and <= 100000, got 200000"},
      {{"--master", "--max_round_trip=0"},
       "bad flag --max_round_trip: must be > 0, got \"0\""},
      {{"--master", "--max_slew_ppm=0"},
       "bad flag --max_slew_ppm: must be > 0 and <= 10000, got 0"},
      {{"--master", "--max_slew_ppm=20000"},
       "bad flag --max_slew_ppm: must be > 0 and <= 10000, got 20000"},
      {{"--master", "--slew_time=0"}, "bad flag --slew_time: must be > 0, got \"0\""},
      {{"--master", "--step_threshold=-1ms"},
       "bad flag --step_threshold: must be >= 0, got \"-1ms\""},
      {{"--master", "--holdover_after=10ms"},
       "bad flag --holdover_after: must be at least probe_interval (100ms), got "
       "\"10ms\""},
      {{"--master", "--log_interval=soon"},
       "bad flag --log_interval: not a duration (e.g. 100ms, 1.5s), got \"soon\""},
      {{"--master", "--clock_model=offset=1s"},
       "bad flag --clock_model: a test feature; refused without "
       "--enable_test_features"},
      {{"--master", "--inject_delay=min=1us"},
       "bad flag --inject_delay: a test feature; refused without "
       "--enable_test_features"},
      {{"--master", "--enable_test_features", "--clock_model=bogus=1"},
       "bad flag --clock_model: "},
      {{"--master", "--enable_test_features", "--inject_delay=bogus"},
       "bad flag --inject_delay: "},
      {{"--master", absl::StrCat("--probe_key_file=", key_file)},
       "bad flag --probe_key_file: "},
      {{"--master", "--tsc=on"},
       "bad flag --tsc: must be auto or off, got \"on\""},
      {{"--master", "--timestamping=ptp"},
       "bad flag --timestamping: must be kernel, hardware or user, got "
       "\"ptp\""},
      {{"--master", "--sample_log=/tmp/s.csv", "--truth_shm=/tmp/m.shm"},
       "bad flag --truth_shm: a test feature; refused without "
       "--enable_test_features"},
      {{"--master", "--enable_test_features", "--truth_shm=/tmp/m.shm"},
       "bad flag --truth_shm: only meaningful with sample_log"},
      {{"--master", "--enable_test_features", "--sample_log=/tmp/s.csv",
        "--truth_shm=/tmp/m.shm", "--clock_model=offset=1s"},
       "bad flag --truth_shm: needs the host's clock: refused with "
       "clock_model"},
  };
  for (const auto& c : cases) {
    const std::string error = Error(c.args);
    EXPECT_TRUE(absl::StartsWith(error, c.error))
        << "args " << absl::StrJoin(c.args, " ") << "\n  got:  " << error
        << "\n  want: " << c.error;
  }
}

TEST(ConfigTest, AStaticNodeNeedsNoGrpc) {
  const absl::StatusOr<DaemonConfig> c =
      Load({"--node_id=n", "--parent=127.0.0.1:3190", "--grpc_listen="});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->grpc_listen, "");
}

}  // namespace
}  // namespace clocksync
