// tracer/env_table_main.cc: prints the tracer's CLOCKSYNC_* table as
// Markdown, the copy docs/TRACER.md holds (`bazel run //tracer:env_table`;
// //docs:tracer_env_table_test compares the two).

#include <cstdio>
#include <string>

#include "tracer/options.h"

int main() {
  const std::string table = clocksync::tracer::EnvVariablesMarkdownTable();
  std::fputs(table.c_str(), stdout);
  return 0;
}
