#!/usr/bin/env bash
# tests/lttng_merge_test.sh: runs lttng_merge_test.py (two processes on two
# clocksyncd nodes traced with LTTng, merged with babeltrace2, with and
# without libclocksync-lttng.so) in a private mount namespace with its own
# /run/lttng and /dev/shm, so that its lttng-sessiond meets no other.
# Skips, saying why, where LTTng or the namespaces it needs are missing.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="$TEST_TMPDIR/lttng_merge"

skip() { echo "SKIPPED: $*"; exit 0; }
[[ $(id -u) -eq 0 ]] || skip "needs root (a mount namespace for a private lttng-sessiond, time namespaces)"
for tool in lttng lttng-sessiond babeltrace2 unshare; do
  command -v "$tool" >/dev/null || skip "$tool not found (deploy/setup.sh installs lttng-tools and babeltrace2)"
done
unshare --time --monotonic=2 true 2>/dev/null ||
  skip "no time namespaces here (unshare --time: kernel without CONFIG_TIME_NS, or not permitted)"
unshare --mount --propagation private true 2>/dev/null || skip "no mount namespaces here"

mkdir -p "$work"
# In the namespace: tmpfs over /run/lttng (created empty on the host if
# absent) and /dev/shm, then the test.
exec unshare --mount --propagation private bash -c '
  set -e
  mkdir -p /run/lttng
  mount -t tmpfs -o mode=0755 clocksync-lttng-test /run/lttng
  mount -t tmpfs -o mode=1777 clocksync-lttng-test /dev/shm
  exec python3 "$1" "$2" "$3"' _ "$root/tests/lttng_merge_test.py" "$root" "$work"
