#!/usr/bin/env bash
# Integration test: the 7-node local cluster (a master and a binary tree of
# depth 2) on loopback, every node on its own modeled clock, every probe
# authenticated with a shared key (--auth: the daemons' --probe_key_file).
#  1. 60 s: after the first 10 s every depth-1 node within 20 us of the
#     master and every depth-2 node within 50 us at every check; no bound
#     violation; every node synchronized.
#  2. A depth-1 daemon is killed (SIGKILL): for 20 s its children hold over,
#     their bounds still contain the master's time, and they say holdover.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
monitor="$root/tools/cluster_monitor/cluster_monitor"
work="$TEST_TMPDIR/cluster"
port=$((20000 + RANDOM % 400))
cluster="$work"
source "$root/tests/lib/daemons.sh"

start_cluster "$port" 7 --auth
mapfile -t flags <"$work/monitor_flags"

echo "== phase 1: 60 s, all nodes"
"$monitor" "${flags[@]}" --duration_s=60 --warmup_s=10 --json \
  >"$work/phase1.json"
cat "$work/phase1.json"
python3 - "$work/phase1.json" <<'PY'
import json, sys
nodes = json.load(open(sys.argv[1]))["nodes"]
assert len(nodes) == 6, nodes
bad = []
for n in nodes:
    limit = 20_000 if n["depth"] == 1 else 50_000
    if n["checks"] < 40: bad.append(f'{n["id"]}: only {n["checks"]} checks')
    if n["unsynced_checks"]: bad.append(f'{n["id"]}: {n["unsynced_checks"]} unsynchronized checks')
    if n["max_abs_error_ns"] > limit: bad.append(f'{n["id"]}: max error {n["max_abs_error_ns"]} ns > {limit}')
    if n["bound_violations"]: bad.append(f'{n["id"]}: {n["bound_violations"]} bound violations')
if bad:
    sys.exit("phase 1 failed:\n  " + "\n  ".join(bad))
print("phase 1 ok")
PY
# Every daemon authenticated its probes, and none was dropped as malformed
# or for its MAC (late or duplicate replies under load are not malformed).
malformed='dropped probe.*(truncated|oversized|bad_magic|unsupported_version|bad_type|nonzero|request_with_reply_fields|bad_parent_state|negative_bound|unauthenticated|bad_mac|unexpected_mac|stray_previous_stamp)'
for log in "$work"/master.log "$work"/n?.log; do
  grep -q "probes authenticated with the key" "$log" ||
    { echo "phase 1 failed: $log: probes not authenticated"; exit 1; }
  if grep -Eq "$malformed" "$log"; then
    echo "phase 1 failed: $log: $(grep -E "$malformed" "$log")"; exit 1
  fi
done
echo "authentication ok"

echo "== phase 2: kill n1 (depth 1); n3 and n4 hold over"
n1_pid=$(awk '$1 == "n1" {print $2}' "$work/pids")
kill -KILL "$n1_pid"
children="n3:2:$work/n3.shm:$work/n3.status,n4:2:$work/n4.shm:$work/n4.status"
"$monitor" --master="$work/master.shm" --nodes="$children" \
  --duration_s=20 --warmup_s=2 --json >"$work/phase2.json"
cat "$work/phase2.json"
for n in n3 n4; do
  grep -q "state=holdover" "$work/$n.status" ||
    { echo "phase 2 failed: $n is not in holdover: $(cat "$work/$n.status")"; exit 1; }
done
python3 - "$work/phase2.json" <<'PY'
import json, sys
nodes = json.load(open(sys.argv[1]))["nodes"]
bad = [f'{n["id"]}: {n["bound_violations"]} bound violations of {n["checks"]}'
       for n in nodes if n["bound_violations"] or n["checks"] < 10]
if bad:
    sys.exit("phase 2 failed:\n  " + "\n  ".join(bad))
print("phase 2 ok")
PY
