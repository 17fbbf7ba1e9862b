// clocksyncd/config_docs_main.cc: prints the texts generated from the
// configuration schema (proto/config.proto), to regenerate the checked-in
// copies that //clocksyncd:config_docs_test compares:
//   bazel run //clocksyncd:config_docs -- markdown > docs/CONFIG.md
//   bazel run //clocksyncd:config_docs -- example > deploy/clocksyncd.conf

#include <iostream>
#include <string>

#include "clocksyncd/config_schema.h"

int main(int argc, char** argv) {
  const std::string mode = argc == 2 ? argv[1] : "";
  if (mode == "markdown") {
    std::cout << clocksync::ConfigMarkdown();
  } else if (mode == "example") {
    std::cout << clocksync::ExampleConfigFile();
  } else {
    std::cerr << "usage: config_docs markdown|example\n";
    return 2;
  }
  return 0;
}
