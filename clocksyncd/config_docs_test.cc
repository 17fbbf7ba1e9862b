// The checked-in docs/CONFIG.md and deploy/clocksyncd.conf are what the
// schema generates, and the example file, uncommented, parses to the
// defaults.

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "clocksyncd/config.h"
#include "clocksyncd/config_schema.h"
#include "gtest/gtest.h"

namespace clocksync {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ConfigDocsTest, ConfigMdIsGenerated) {
  EXPECT_TRUE(Read("docs/CONFIG.md") == ConfigMarkdown())
      << "docs/CONFIG.md differs from proto/config.proto; regenerate it:\n"
         "  bazel run //clocksyncd:config_docs -- markdown > docs/CONFIG.md";
}

TEST(ConfigDocsTest, ExampleConfigIsGenerated) {
  EXPECT_TRUE(Read("deploy/clocksyncd.conf") == ExampleConfigFile())
      << "deploy/clocksyncd.conf differs from proto/config.proto; "
         "regenerate it:\n"
         "  bazel run //clocksyncd:config_docs -- example > "
         "deploy/clocksyncd.conf";
}

// Every "#key: default" line of the example, uncommented, is a valid line
// that sets the key's default.
TEST(ConfigDocsTest, ExampleUncommentedGivesTheDefaults) {
  std::vector<std::string> lines;
  int keys = 0;
  for (absl::string_view line : absl::StrSplit(ExampleConfigFile(), '\n')) {
    if (line.size() > 1 && line[0] == '#' && line[1] != ' ' && line[1] != '#') {
      lines.emplace_back(line.substr(1));
      ++keys;
    }
  }
  EXPECT_EQ(keys, static_cast<int>(ConfigKeys().size()));
  config::DaemonConfig parsed;
  ConfigOrigins origins;
  ASSERT_TRUE(ParseConfigText(absl::StrJoin(lines, "\n"), "example", &parsed,
                              &origins)
                  .ok());
  const config::DaemonConfig defaults;
  for (const ConfigKey* key : ConfigKeys()) {
    EXPECT_EQ(FlagText(parsed, key), FlagText(defaults, key)) << key->name();
  }
}

}  // namespace
}  // namespace clocksync
