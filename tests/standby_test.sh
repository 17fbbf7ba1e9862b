#!/usr/bin/env bash
# Runs one scenario of tests/standby_test.py (standby masters with real
# daemons: takeover, handover, partition) against the binaries Bazel built,
# stopping every daemon it started on exit. The partition scenario needs
# root (network namespaces, iptables).
#   standby_test.sh SCENARIO
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="$TEST_TMPDIR/standby-$1"
mkdir -p "$work"
stop_all() {
  [[ -f "$work/pids" ]] || return 0
  while read -r _ pid; do kill -KILL "$pid" 2>/dev/null || true; done <"$work/pids"
}
trap stop_all EXIT
python3 "$root/tests/standby_test.py" "$1" "$root" "$root/deploy/local_cluster.sh" "$work"
