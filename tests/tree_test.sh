#!/usr/bin/env bash
# Runs tests/tree_test.py (a self-arranging tree of real daemons) against the
# binaries Bazel built, stopping every daemon it started on exit.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="$TEST_TMPDIR/tree"
mkdir -p "$work"
stop_all() {
  [[ -f "$work/pids" ]] || return 0
  while read -r _ pid; do kill -KILL "$pid" 2>/dev/null || true; done <"$work/pids"
}
trap stop_all EXIT
python3 "$root/tests/tree_test.py" "$root" "$root/deploy/local_cluster.sh" "$work"
