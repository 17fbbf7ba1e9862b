#!/usr/bin/env bash
# tests/soak_short_test.sh: deploy/soak.py in its short form (90 s: one
# churn step, hostile traffic throughout) against the binaries Bazel built.
# The hour-long run is deploy/soak.sh.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="$TEST_TMPDIR/soak"
mkdir -p "$work"
stop_all() {
  pkill -KILL -f -- "--shm_path=$work/" 2>/dev/null || true
}
trap stop_all EXIT
/usr/bin/python3 "$root/deploy/soak.py" --bin_dir="$root" --cluster="$root/deploy/local_cluster.sh" \
  --proto="$root/proto/clocksync.proto" --work_dir="$work" --minutes=1.5 --nodes=9 --seed=$RANDOM \
  --base_port=$((22800 + RANDOM % 400))
