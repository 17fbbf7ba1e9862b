#!/usr/bin/env bash
# The main demo: installs what the build needs, builds the tools, and shows
# the two-hull estimator's accuracy against a known truth:
#   1. the bundled sample (tools/replay/testdata/chrony_default_10min.csv) through
#      //tools/replay:replay, as anyone would replay their own recorded samples;
#   2. every standard scenario (hull/sim/scenarios.cc) simulated and replayed.
# Usage: deploy/demo.sh [--window_s=300]
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/setup.sh >/dev/null
bazel build -c opt //tools/replay:replay //tools/simulate:simulate 2>/dev/null ||
  bazel build -c opt //tools/replay:replay //tools/simulate:simulate
bin="$(bazel info -c opt bazel-bin 2>/dev/null)/tools"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== bundled sample: tools/replay/testdata/chrony_default_10min.csv"
"$bin/replay/replay" --input=tools/replay/testdata/chrony_default_10min.csv \
  --output="$work/out.csv" "$@"
echo "   (rows t4,estimate_ns,earliest_ns,latest_ns; last three:)"
tail -3 "$work/out.csv" | sed 's/^/   /'
echo
echo "== standard scenarios (error of the estimate against the truth, after 60 s)"
"$bin/simulate/simulate" --list | while read -r name description; do
  "$bin/simulate/simulate" --scenario="$name" --output="$work/s.csv"
  summary=$("$bin/replay/replay" --input="$work/s.csv" --output=/dev/null "$@" 2>&1 |
    grep '^accuracy' | sed 's/^accuracy after [0-9]* s: //')
  printf '%-26s %s\n' "$name" "$summary"
  printf '%-26s   (%s)\n' "" "$description"
done
