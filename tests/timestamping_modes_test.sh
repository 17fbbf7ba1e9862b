#!/usr/bin/env bash
# The daemon's timestamping modes on loopback, each with a real master:
#   kernel (default)  the node synchronizes, status says "kernel, interleaved";
#   hardware          loopback has no hardware timestamps: the node falls back
#                     to kernel stamps, synchronizes, and status and log say
#                     why ("hardware asked: lo: no hardware timestamps");
#   user              version-1 probes with user-space stamps, against a
#                     version-2 master: still synchronized (interoperation).
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
daemon="$root/clocksyncd/clocksyncd"
ctl="$root/tools/clocksyncctl/clocksyncctl"
work="$TEST_TMPDIR/modes"
mkdir -p "$work"
port=$((24200 + RANDOM % 400))
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done' EXIT

"$daemon" --master --node_id=m --listen="127.0.0.1:$port" \
  --grpc_listen="127.0.0.1:$((port + 1))" --shm_path="$work/m.shm" >"$work/m.log" 2>&1 &
pids+=($!)

check_mode() {  # MODE NODE_PORT EXPECTED_TEXT
  local mode="$1" p="$2" want="$3"
  "$daemon" --node_id="n-$mode" --parent="127.0.0.1:$port" --listen="127.0.0.1:$p" \
    --grpc_listen="127.0.0.1:$((p + 1))" --shm_path="$work/$mode.shm" \
    --probe_interval=50ms --timestamping="$mode" >"$work/$mode.log" 2>&1 &
  local pid=$!
  pids+=($pid)
  local json="" state=""
  for _ in $(seq 100); do
    json=$("$ctl" --target="127.0.0.1:$((p + 1))" status --json 2>/dev/null || true)
    state=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["status"].get("state",""))' \
      "${json:-{\}}" 2>/dev/null || true)
    [[ "$state" == SYNC_STATE_SYNCED ]] && break
    sleep 0.1
  done
  [[ "$state" == SYNC_STATE_SYNCED ]] ||
    { cat "$work/$mode.log"; echo "FAIL: $mode: not synchronized (state '$state')"; exit 1; }
  local ts
  ts=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["status"].get("timestamping",""))' "$json")
  echo "$mode: $ts"
  [[ "$ts" == *"$want"* ]] || { echo "FAIL: $mode: timestamping '$ts' lacks '$want'"; exit 1; }
  grep -q "timestamps: $want" "$work/$mode.log" ||
    grep -q "$want" "$work/$mode.log" ||
    { cat "$work/$mode.log"; echo "FAIL: $mode: the log does not say '$want'"; exit 1; }
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
}

for _ in $(seq 50); do [[ -e "$work/m.shm" ]] && break; sleep 0.1; done
check_mode kernel $((port + 10)) "kernel, interleaved"
check_mode hardware $((port + 20)) "hardware asked: lo: no hardware timestamps"
check_mode user $((port + 30)) "user (timestamping=user"
echo PASS
