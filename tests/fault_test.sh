#!/usr/bin/env bash
# tests/fault_test.sh: runs the scenarios of tests/fault_test.py at once,
# each in a private network namespace (its own loopback, its own iptables
# rules), and fails if any fails. Needs root (network namespaces) and
# Debian's python3-grpcio, python3-protobuf and iptables (deploy/setup.sh).
#   FAULT_TEST_SCENARIOS="loss30 loss70 faults auth"  FAULT_TEST_LOSS_S=120
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
scenarios=(${FAULT_TEST_SCENARIOS:-loss30 loss70 faults auth})
seconds="${FAULT_TEST_LOSS_S:-120}"
namespaces=()
cleanup() {
  for ns in "${namespaces[@]}"; do
    # Whatever still runs in the namespace goes with it.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns delete "$ns" 2>/dev/null || true
  done
}
trap cleanup EXIT
declare -A jobs
for s in "${scenarios[@]}"; do
  ns="csfault-$$-$s"
  ip netns add "$ns"
  namespaces+=("$ns")
  ip -n "$ns" link set lo up
  mkdir -p "$TEST_TMPDIR/$s"
  ip netns exec "$ns" /usr/bin/python3 "$root/tests/fault_test.py" "$s" "$root" \
    "$root/deploy/local_cluster.sh" "$root/proto/clocksync.proto" "$TEST_TMPDIR/$s" \
    "$seconds" >"$TEST_TMPDIR/$s.out" 2>&1 &
  jobs[$s]=$!
done
status=0
for s in "${scenarios[@]}"; do
  if wait "${jobs[$s]}"; then result=PASS; else result=FAIL; status=1; fi
  echo "===== $s: $result"
  cat "$TEST_TMPDIR/$s.out"
done
exit $status
