#!/bin/bash
# tools/simulate_cluster/simulate_cluster_smoke_test.sh: 1,000 nodes for
# 120 simulated seconds with a rack failure: the run ends with the three
# FIGURE lines, a JSON report, every node synchronized within its bound.
set -euo pipefail
bin="$1"
out="${TEST_TMPDIR:-/tmp}/sim.json"
log="${TEST_TMPDIR:-/tmp}/sim.txt"
"$bin" --nodes=1000 --fanout=16 --duration_s=120 --warmup_s=60 --seed=3 \
  --rack_failure_at_s=70 --json="$out" | tee "$log"
for f in sim_node_seconds_per_wall_second sim_bytes_per_node sim_rms_error_ns_deepest; do
  grep -q "^FIGURE $f [0-9.]* " "$log" || { echo "missing FIGURE $f"; exit 1; }
done
python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["options"]["nodes"] == 1000, r["options"]
assert r["overall"]["coverage"] >= 0.999, r["overall"]
assert r["tree"]["max_depth"] <= r["tree"]["depth_limit"], r["tree"]
assert r["events"] and r["events"][0]["kind"] == "rack", r["events"]
assert r["events"][0]["not_rejoined"] == 0, r["events"]
assert len(r["series"]) >= 10, len(r["series"])
print("smoke ok:", r["overall"]["rms_ns"], "ns RMS over", r["overall"]["samples"], "samples")
PY
