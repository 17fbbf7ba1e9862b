#!/usr/bin/env bash
# tests/lttng_merge_test.sh: runs lttng_merge_test.py (two processes on two
# clocksyncd nodes traced with LTTng, each node with its own lttng-sessiond
# in a mount namespace of its own, merged with babeltrace2, with and without
# libclocksync-lttng.so) inside a private mount namespace, so that nothing
# it mounts is seen outside. Skips, saying why, where LTTng or the
# namespaces it needs are missing.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="$TEST_TMPDIR/lttng_merge"

skip() { echo "SKIPPED: $*"; exit 0; }
[[ $(id -u) -eq 0 ]] || skip "needs root (mount namespaces for private lttng-sessionds, time namespaces)"
for tool in lttng lttng-sessiond babeltrace2 unshare; do
  command -v "$tool" >/dev/null || skip "$tool not found (deploy/setup.sh installs lttng-tools and babeltrace2)"
done
unshare --time --monotonic=2 true 2>/dev/null ||
  skip "no time namespaces here (unshare --time: kernel without CONFIG_TIME_NS, or not permitted)"
unshare --mount --propagation private true 2>/dev/null || skip "no mount namespaces here"

mkdir -p "$work"
# /run/lttng must exist to be mounted over (created empty if absent).
exec unshare --mount --propagation private bash -c '
  set -e
  mkdir -p /run/lttng
  exec python3 "$1" "$2" "$3"' _ "$root/tests/lttng_merge_test.py" "$root" "$work"
