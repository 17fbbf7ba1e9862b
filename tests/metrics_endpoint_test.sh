#!/usr/bin/env bash
# tests/metrics_endpoint_test.sh: runs tests/metrics_endpoint_test.py (a
# master and a node with --metrics_listen, scraped over HTTP and linted by
# promtool) against the binaries Bazel built, stopping the daemons on exit.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="$TEST_TMPDIR/metrics"
mkdir -p "$work"
stop_all() {
  [[ -f "$work/pids" ]] || return 0
  while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done <"$work/pids"
}
trap stop_all EXIT
command -v promtool >/dev/null || { echo "promtool missing: run deploy/setup.sh"; exit 1; }
python3 "$root/tests/metrics_endpoint_test.py" "$root" "$work"
