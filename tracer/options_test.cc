// tracer/options_test.cc: the CLOCKSYNC_* table: each variable's documented
// default is TracerOptions' default, out-of-range and malformed values are
// refused naming the variable and the value, the docs table has a row per
// variable (//docs:tracer_env_table_test checks docs/TRACER.md holds it).

#include "tracer/options.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tracer/tracer.h"

namespace clocksync {
namespace tracer {
namespace {

using ::testing::HasSubstr;

void ExpectSameOptions(const TracerOptions& a, const TracerOptions& b,
                       const std::string& context) {
  EXPECT_EQ(a.trace_dir, b.trace_dir) << context;
  EXPECT_EQ(a.name, b.name) << context;
  EXPECT_EQ(a.rank, b.rank) << context;
  EXPECT_EQ(a.world_size, b.world_size) << context;
  EXPECT_EQ(a.shm_path, b.shm_path) << context;
  EXPECT_EQ(a.node_id, b.node_id) << context;
  EXPECT_EQ(a.clock_model_file, b.clock_model_file) << context;
  EXPECT_EQ(a.truth_master_shm, b.truth_master_shm) << context;
  EXPECT_EQ(a.master_probe, b.master_probe) << context;
  EXPECT_EQ(a.probe_key_file, b.probe_key_file) << context;
  EXPECT_EQ(a.sync_max_messages, b.sync_max_messages) << context;
  EXPECT_EQ(a.sync_max_duration_ns, b.sync_max_duration_ns) << context;
  EXPECT_EQ(a.sync_reply_timeout_ns, b.sync_reply_timeout_ns) << context;
  EXPECT_EQ(a.sync_period_ns, b.sync_period_ns) << context;
  EXPECT_EQ(a.buffer_events, b.buffer_events) << context;
  EXPECT_EQ(a.install_signal_handlers, b.install_signal_handlers) << context;
  EXPECT_EQ(a.tsc, b.tsc) << context;
  EXPECT_EQ(a.collector, b.collector) << context;
  EXPECT_EQ(a.collector_timeout_ns, b.collector_timeout_ns) << context;
  EXPECT_EQ(a.collector_tls_ca_file, b.collector_tls_ca_file) << context;
  EXPECT_EQ(a.read_environment, b.read_environment) << context;
}

TEST(TracerOptionsTest, EachDocumentedDefaultIsTheDefault) {
  const TracerOptions defaults;
  EXPECT_TRUE(ValidateOptions(defaults).ok());
  for (const EnvVariable& v : EnvVariables()) {
    ASSERT_NE(v.set_string == nullptr, v.set_integer == nullptr) << v.name;
    setenv(v.name, v.default_value, 1);
    TracerOptions options;
    const absl::Status status = ApplyTracerEnvironment(&options);
    EXPECT_TRUE(status.ok()) << v.name << ": " << status;
    ExpectSameOptions(options, defaults, v.name);
    unsetenv(v.name);
  }
}

TEST(TracerOptionsTest, IntegersOutsideTheirRangeNameTheVariableAndValue) {
  for (const EnvVariable& v : EnvVariables()) {
    if (v.set_integer == nullptr) continue;
    for (const std::string& bad :
         {absl::StrCat(v.min - 1), absl::StrCat(v.max + 1), std::string("x1"),
          std::string("1.5"), std::string("")}) {
      setenv(v.name, bad.c_str(), 1);
      TracerOptions options;
      const absl::Status status = ApplyTracerEnvironment(&options);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
          << v.name << "=" << bad;
      EXPECT_THAT(std::string(status.message()),
                  HasSubstr(absl::StrCat(v.name, ": expected an integer in ",
                                         v.min, "..", v.max, ", got '", bad,
                                         "'")));
    }
    // Both ends are accepted.
    for (const int64_t good : {v.min, v.max}) {
      setenv(v.name, absl::StrCat(good).c_str(), 1);
      TracerOptions options;
      EXPECT_TRUE(ApplyTracerEnvironment(&options).ok()) << v.name << good;
    }
    unsetenv(v.name);
  }
}

TEST(TracerOptionsTest, StringsAreTakenAsTheyAre) {
  setenv("CLOCKSYNC_SHM", "/tmp/x.shm", 1);
  setenv("CLOCKSYNC_NODE_ID", "node 7", 1);
  TracerOptions options;
  ASSERT_TRUE(ApplyTracerEnvironment(&options).ok());
  EXPECT_EQ(options.shm_path, "/tmp/x.shm");
  EXPECT_EQ(options.node_id, "node 7");
  unsetenv("CLOCKSYNC_SHM");
  unsetenv("CLOCKSYNC_NODE_ID");
}

TEST(TracerOptionsTest, TscIsAutoOrOff) {
  for (const char* good : {"auto", "off"}) {
    setenv("CLOCKSYNC_TSC", good, 1);
    TracerOptions options;
    ASSERT_TRUE(ApplyTracerEnvironment(&options).ok());
    EXPECT_EQ(options.tsc, good);
    EXPECT_TRUE(ValidateOptions(options).ok()) << good;
  }
  setenv("CLOCKSYNC_TSC", "on", 1);
  TracerOptions options;
  ASSERT_TRUE(ApplyTracerEnvironment(&options).ok());
  const absl::Status status = ValidateOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("tsc 'on' is neither auto nor off (CLOCKSYNC_TSC)"));
  unsetenv("CLOCKSYNC_TSC");
}

TEST(TracerOptionsTest, CollectorContactIsCheckedNamingTheVariable) {
  TracerOptions options;
  options.collector = "0123456789abcdef0123456789abcdef@127.0.0.1:4242";
  EXPECT_TRUE(ValidateOptions(options).ok());
  options.collector = "nonsense@127.0.0.1:4242";
  const absl::Status status = ValidateOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("CLOCKSYNC_COLLECTOR (collector): the token must be"));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("\"nonsense@127.0.0.1:4242\""));
}

TEST(TracerOptionsTest, TheDocsTableHasOneRowPerVariable) {
  const std::string table = EnvVariablesMarkdownTable();
  for (const EnvVariable& v : EnvVariables()) {
    EXPECT_THAT(table, HasSubstr(absl::StrCat("\n| `", v.name, "` | ")));
  }
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'),
            static_cast<long>(EnvVariables().size()) + 2);
}

}  // namespace
}  // namespace tracer
}  // namespace clocksync
