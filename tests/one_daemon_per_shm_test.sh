#!/usr/bin/env bash
# Two daemons given one --shm_path: the second refuses to start (exit 1,
# naming the path and the first one's pid) and the first keeps its segment;
# once the first is gone (even killed), the path is free again.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
daemon="$root/clocksyncd/clocksyncd"
work="$TEST_TMPDIR/shm"
mkdir -p "$work"
port=$((22100 + RANDOM % 400))
start_master() {  # PORT
  exec "$daemon" --master --node_id=m --listen="127.0.0.1:$1" --grpc_listen="127.0.0.1:$(( $1 + 100 ))" \
    --shm_path="$work/clocksync.shm" 2>>"$work/log"
}
start_master "$port" & first=$!
trap 'kill -KILL $first 2>/dev/null || true' EXIT
for _ in $(seq 50); do [[ -e "$work/clocksync.shm" ]] && break; sleep 0.1; done
[[ -e "$work/clocksync.shm" ]] || { cat "$work/log"; echo "FAIL: first did not start"; exit 1; }
inode=$(stat -c %i "$work/clocksync.shm")

status=0
timeout 10 "$daemon" --master --node_id=m2 --listen="127.0.0.1:$((port + 1))" \
  --grpc_listen="127.0.0.1:$((port + 101))" --shm_path="$work/clocksync.shm" 2>"$work/second.err" || status=$?
cat "$work/second.err"
[[ $status -ne 0 && $status -ne 124 ]] || { echo "FAIL: second daemon ran (status $status)"; exit 1; }
grep -q "clocksync.shm is in use by another clocksyncd (pid $first)" "$work/second.err" ||
  { echo "FAIL: the error does not name the path and pid $first"; exit 1; }
[[ "$(stat -c %i "$work/clocksync.shm")" == "$inode" ]] ||
  { echo "FAIL: the first daemon's segment was replaced"; exit 1; }
kill -0 "$first" || { echo "FAIL: the first daemon died"; exit 1; }

kill -KILL "$first"; wait "$first" 2>/dev/null || true
start_master "$((port + 2))" & second=$!
trap 'kill -KILL $second 2>/dev/null || true' EXIT
sleep 1
kill -0 "$second" || { cat "$work/log"; echo "FAIL: the path stayed locked after a SIGKILL"; exit 1; }
kill -TERM "$second"; wait "$second" || true
[[ ! -e "$work/clocksync.shm.lock" ]] || { echo "FAIL: lock file left after a clean stop"; exit 1; }
echo PASS
