#!/usr/bin/env bash
# Installs what the build needs (deploy/setup.sh), then runs every test:
#   0. tools/layout/check_layout.py           (the dependency rule, file sizes)
#   1. bazel test //...                       (all unit, scenario, integration;
#      the real-daemon tests side by side, each on loopback ports of its own:
#      tests/BUILD.bazel)
#   2. the libraries' own tests under AddressSanitizer (--config=asan: hull,
#      shm, probe, client, trace, tracer, collector, membership, metrics,
#      proto, and every fuzz harness's replay test; not the daemon's other
#      tests, the tools', the scenarios in tests/ nor those tagged
#      no_asan). The plain step builds and runs everything; this keeps CI
#      within its 45 minutes. Every test under ASan: CLOCKSYNC_FULL_ASAN=1.
#   3. concurrent code under ThreadSanitizer  (--config=tsan, tests tagged tsan)
#   1b. the Debian packages, installed and purged (tests/package_install_test.sh)
#   4. every libFuzzer harness for a few seconds  (deploy/fuzz.sh, clang)
# Exits non-zero when anything fails. Set CLOCKSYNC_SKIP_SANITIZERS=1 to run
# steps 1 and 1b only, CLOCKSYNC_SKIP_FUZZ=1 to skip step 4,
# CLOCKSYNC_SKIP_PACKAGE_TEST=1 to skip step 1b.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's heading says how long the run has taken so far (CI's budget).
step() { echo "== [$((SECONDS / 60)) min $((SECONDS % 60)) s] $*"; }
deploy/setup.sh

step "layout (docs/ARCHITECTURE.md, 'Layout rules')"
python3 tools/layout/check_layout.py

step "bazel test //..."
bazel test //...

# Right after the plain build: the packages reuse its outputs.
if [[ "${CLOCKSYNC_SKIP_PACKAGE_TEST:-0}" != 1 ]]; then
  step "tests/package_install_test.sh (packages: build, lintian, install, use, purge)"
  tests/package_install_test.sh
fi

if [[ "${CLOCKSYNC_SKIP_SANITIZERS:-0}" != 1 ]]; then
  step "bazel test --config=asan (the libraries' tests; not those tagged no_asan)"
  if [[ "${CLOCKSYNC_FULL_ASAN:-0}" == 1 ]]; then
    bazel test --config=asan --test_tag_filters=-no_asan //...
  else
    bazel test --config=asan --build_tests_only --test_tag_filters=-no_asan \
      //hull/... //shm/... //probe/... //client/... //trace/... //tracer/... \
      //collector/... //membership/... //metrics/... //proto/... \
      //clocksyncd:config_fuzzer //clocksyncd:request_validation_fuzzer \
      //tools/postmortem:postmortem_csv_fuzzer //tools/replay:replay_fuzzer
  fi
  step "bazel test --config=tsan (tests tagged tsan)"
  # tsan's shadow memory needs the classic address-space layout on kernels
  # with high mmap randomization.
  # (exit status 4 = no test carries the tag: nothing to run)
  status=0
  bazel test --config=tsan --test_tag_filters=tsan --build_tests_only \
    --run_under="setarch -R" //... ||
    status=$?
  if [[ $status -ne 0 && $status -ne 4 ]]; then exit "$status"; fi
fi
if [[ "${CLOCKSYNC_SKIP_SANITIZERS:-0}" != 1 && "${CLOCKSYNC_SKIP_FUZZ:-0}" != 1 ]]; then
  step "deploy/fuzz.sh --seconds=3 (the long run: deploy/fuzz.sh --seconds=600)"
  deploy/fuzz.sh --seconds=3
fi
step "all tests passed"
