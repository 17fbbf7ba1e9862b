#!/bin/bash
# End-to-end test of clocksync-trace on the synthetic two-process trace
# (trace/synthetic_trace.h): compare's known answers, a Chrome JSON export
# that parses with every flow start finished under the same id, a Perfetto
# export smaller than it, the view (HTML, SVG, index cache, --serve), a merged
# OTF2 archive otf2-print reads, merge's order, profile, exit codes.
set -euo pipefail

TOOL="$1"
MAKE="$2"
WORK="${TEST_TMPDIR:-$(mktemp -d)}/clocksync_trace_test"
rm -rf "$WORK"
mkdir -p "$WORK"

fail() { echo "FAIL: $*" >&2; exit 1; }

"$MAKE" "$WORK" > "$WORK/answers"
# shellcheck disable=SC1090
source "$WORK/answers"
[[ -n "$rank0" && -n "$rank1" ]] || fail "no answers"

# --- compare --json: known answers -------------------------------------------
"$TOOL" compare --json "$rank0" "$rank1" > "$WORK/compare.json"
python3 - "$WORK/compare.json" "$messages" "$reversed_none" "$events" \
    "$online_rms_error_ns" <<'PY'
import json, sys
path, messages, reversed_none, events, online_rms = sys.argv[1:]
data = json.load(open(path))
rows = {r["correction"]: r for r in data["corrections"]}
assert data["messages"] == int(messages), data
assert set(rows) == {"none", "online", "linear", "spline", "piecewise"}, rows
assert rows["none"]["violations"] == int(reversed_none), rows["none"]
assert rows["online"]["violations"] == 0, rows["online"]
assert abs(rows["online"]["max_abs_error_ns"] - 200) <= 1, rows["online"]
assert abs(rows["online"]["rms_error_ns"] - float(online_rms)) <= 1, rows["online"]
assert rows["online"]["truth_events"] == int(events), rows["online"]
for name in ("linear", "spline", "piecewise"):
    assert rows[name]["violations"] == 0, rows[name]
    assert rows[name]["max_abs_error_ns"] <= 3, rows[name]
print("compare ok")
PY
"$TOOL" compare "$rank0" "$rank1" | tee "$WORK/compare.txt"
grep -q "^online" "$WORK/compare.txt" || fail "compare table has no online row"

# --- compare --slow_fraction: the post-mortem fits use fewer exchanges -------
"$TOOL" compare --json --slow_fraction=0.5 "$rank0" "$rank1" > "$WORK/compare_half.json"
python3 - "$WORK/compare_half.json" <<'PY'
import json, sys
rows = {r["correction"]: r for r in json.load(open(sys.argv[1]))["corrections"]}
for name in ("linear", "spline", "piecewise"):
    assert rows[name]["violations"] == 0, rows[name]
    assert rows[name]["max_abs_error_ns"] <= 3, rows[name]
print("compare --slow_fraction ok")
PY

# --- export chrome: JSON parses, flows pair up ---------------------------------
"$TOOL" export --format=chrome --correction=spline --out="$WORK/trace.json" \
    "$rank0" "$rank1"
python3 - "$WORK/trace.json" "$messages" <<'PY'
import json, sys
from collections import Counter
data = json.load(open(sys.argv[1]))
events = data["traceEvents"]
starts = Counter(e["id"] for e in events if e["ph"] == "s")
finishes = Counter(e["id"] for e in events if e["ph"] == "f")
assert len(starts) == int(sys.argv[2]), (len(starts), sys.argv[2])
assert starts == finishes, "flow starts without finish or vice versa"
assert all(v == 1 for v in starts.values())
assert all(e.get("bp") == "e" for e in events if e["ph"] == "f")
by_id = {}
for e in events:
    if e["ph"] in "sf":
        by_id.setdefault(e["id"], {})[e["ph"]] = e
for pair in by_id.values():
    assert pair["s"]["ts"] <= pair["f"]["ts"], pair  # no reversed message
depth = Counter()
for e in events:
    if e["ph"] == "B": depth[(e["pid"], e["tid"])] += 1
    if e["ph"] == "E": depth[(e["pid"], e["tid"])] -= 1
assert all(v == 0 for v in depth.values()), depth
print("chrome ok:", len(events), "events")
PY

# --- export perfetto: a Trace of packets, several times smaller than JSON -----
"$TOOL" export --format=perfetto --correction=spline --out="$WORK/trace.pftrace" \
    "$rank0" "$rank1"
python3 - "$WORK/trace.pftrace" "$WORK/trace.json" <<'PY'
import os, sys
data = open(sys.argv[1], "rb").read()
assert data[:1] == b"\x0a", data[:4]  # Trace.packet, length-delimited
ratio = os.path.getsize(sys.argv[2]) / len(data)
assert ratio > 3, ratio
print("perfetto ok: %d bytes, JSON/perfetto %.1f" % (len(data), ratio))
PY
set +e
"$TOOL" export --format=protobuf --out="$WORK/x" "$rank0" > /dev/null 2> "$WORK/err"; code=$?
set -e
[[ $code == 1 ]] && grep -q -- "--format: 'protobuf'" "$WORK/err" || fail "bad format: exit $code"

# --- export otf2: otf2-print reads it ------------------------------------------
"$TOOL" export --format=otf2 --correction=linear --out="$WORK/merged" \
    "$rank0" "$rank1"
if [[ -x /usr/bin/otf2-print ]]; then
  /usr/bin/otf2-print "$WORK/merged/traces.otf2" > "$WORK/merged.txt"
  lines=$(grep -c -E "^(ENTER|LEAVE|MPI_SEND|MPI_RECV|MPI_COLLECTIVE_BEGIN|MPI_COLLECTIVE_END) " "$WORK/merged.txt")
  [[ "$lines" == "$events" ]] || fail "otf2-print shows $lines events, want $events"
else
  echo "skipping otf2-print check: /usr/bin/otf2-print is not installed"
fi

# --- merge: one line per event, in global order --------------------------------
"$TOOL" merge --correction=online --out="$WORK/merged.tsv" "$rank0" "$rank1"
[[ "$(wc -l < "$WORK/merged.tsv")" == "$events" ]] || fail "merge line count"
sort -n -c -k1,1 "$WORK/merged.tsv" || fail "merge output not in global order"

# --- profile -------------------------------------------------------------------
"$TOOL" profile --json "$rank0" "$rank1" > "$WORK/profile.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert any(r['region']=='work' and r['rank']==1 for r in d['regions']), d" "$WORK/profile.json"

# --- lod: a line per thread; JSON levels whose bins add up ---------------------
"$TOOL" lod --bins=40 "$rank0" "$rank1" > "$WORK/lod.txt"
[[ "$(grep -c '^rank .*|$' "$WORK/lod.txt")" == 3 ]] || fail "lod: want 3 rows: $(cat "$WORK/lod.txt")"
grep -q " work " "$WORK/lod.txt" || fail "lod legend lacks region work"
"$TOOL" lod --json --bins=40 --levels=3 "$rank0" "$rank1" > "$WORK/lod.json"
python3 - "$WORK/lod.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
levels = d["levels"]
assert [l["bins"] for l in levels] == [40, 20, 10], [l["bins"] for l in levels]
for row in range(len(d["rows"])):
    busy = [sum(b["busy_ns"] for b in l["rows"][row]) for l in levels]
    events = [sum(b["events"] for b in l["rows"][row]) for l in levels]
    assert len(set(busy)) == 1 and len(set(events)) == 1, (busy, events)
    assert events[0] > 0
print("lod ok")
PY

# --- view: one HTML file with every correction, an SVG, a cached index -------
"$TOOL" view --index_dir="$WORK/idx" --out="$WORK/run.html" --svg="$WORK/run.svg" \
    "$rank0" "$rank1" 2> "$WORK/view.err"
grep -q "online: index .*(built in [0-9.]* s, written in [0-9.]* s)" "$WORK/view.err" || fail "view: no index built: $(cat "$WORK/view.err")"
[[ "$(ls "$WORK/idx" | grep -c '\.lodidx$')" == 5 ]] || fail "view: want 5 indexes: $(ls "$WORK/idx")"
python3 - "$WORK/run.html" "$WORK/run.svg" <<'PY'
import json, re, sys
html = open(sys.argv[1]).read()
assert "<script src" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', ""), "not self-contained"
model = json.loads(re.search(r'<script id="model" type="application/json">(.*?)</script>', html, re.S).group(1))
assert set(model["corrections"]) == {"none", "online", "linear", "spline", "piecewise"}
for name, c in model["corrections"].items():
    assert c["available"], name
    assert len(c["rows"]) == 3 and "work" in c["regions"], c["rows"]
    top = c["levels"][0]
    assert top["f"] and top["m"] and top["c"], name
    # No message line goes backwards except under none (rank 1 is 3 ms ahead).
    back = sum(1 for m in top["m"] if m[3] < m[2])
    assert (back > 0) == (name == "none"), (name, back)
assert any(r["region"] == "work" for r in model["profile"])
svg = open(sys.argv[2]).read()
assert svg.startswith("<svg") and svg.count("<rect") > 50 and "<line" in svg
print("view ok:", len(html), "bytes of HTML")
PY
"$TOOL" view --index_dir="$WORK/idx" --out="$WORK/run2.html" "$rank0" "$rank1" 2> "$WORK/view.err"
grep -q "online: index .*(cached)" "$WORK/view.err" || fail "view: index not reused: $(cat "$WORK/view.err")"
# A damaged index is rebuilt, not trusted.
for f in "$WORK"/idx/*-online.lodidx; do printf 'XXXXXXXX' | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null; done
"$TOOL" view --index_dir="$WORK/idx" --out="$WORK/run2.html" "$rank0" "$rank1" 2> "$WORK/view.err"
grep -q "online: index .*(rebuilt: .*checksum" "$WORK/view.err" || fail "view: damaged index: $(cat "$WORK/view.err")"

# --- view --serve: the page and live /lod answers --------------------------------
"$TOOL" view --index_dir="$WORK/idx" --serve=127.0.0.1:0 "$rank0" "$rank1" 2> "$WORK/serve.err" &
server=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's|.*serving http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$WORK/serve.err")
  [[ -n "$port" ]] && break
  sleep 0.1
done
[[ -n "$port" ]] || { kill "$server"; fail "view --serve did not start: $(cat "$WORK/serve.err")"; }
python3 - "$port" <<'PY' || { kill "$server"; fail "view --serve answers"; }
import json, sys, urllib.request
base = "http://127.0.0.1:%s/" % sys.argv[1]
page = urllib.request.urlopen(base).read().decode()
assert '"serve":true' in page
whole = json.load(urllib.request.urlopen(base + "lod?t0=0&t1=11000000000&px=800&correction=online"))
zoom = json.load(urllib.request.urlopen(base + "lod?t0=0&t1=20000000&px=800&correction=none"))
assert whole["f"] and whole["level"] > zoom["level"], (whole["level"], zoom["level"])
assert all(f[1] < 20000000 and f[2] > 0 for f in zoom["f"]), "a function outside the zoom"
bad = json.load(urllib.request.urlopen(base + "lod?t0=5&t1=1&px=800"))
assert "error" in bad, bad
print("serve ok: levels", whole["level"], zoom["level"])
PY
kill -TERM "$server"
wait "$server" || fail "view --serve did not stop cleanly on SIGTERM"

# --- exit codes ----------------------------------------------------------------
help=$("$TOOL" --help) || fail "--help exits non-zero"
grep -q "Usage:" <<<"$help" || fail "--help"
set +e
"$TOOL" compare > /dev/null 2> "$WORK/err"; code=$?
[[ $code == 1 ]] || fail "no archive: exit $code"
"$TOOL" merge --correction=cubic "$rank0" > /dev/null 2> "$WORK/err"; code=$?
[[ $code == 1 ]] && grep -q -- "--correction" "$WORK/err" || fail "bad correction: exit $code $(cat "$WORK/err")"
"$TOOL" compare --slow_fraction=1.5 "$rank0" > /dev/null 2> "$WORK/err"; code=$?
[[ $code == 1 ]] && grep -q -- "--slow_fraction: 1.5" "$WORK/err" || fail "bad slow_fraction: exit $code $(cat "$WORK/err")"
"$TOOL" lod --bins=0 "$rank0" > /dev/null 2> "$WORK/err"; code=$?
[[ $code == 1 ]] && grep -q -- "--bins" "$WORK/err" || fail "bad bins: exit $code $(cat "$WORK/err")"
"$TOOL" frobnicate "$rank0" > /dev/null 2>&1; code=$?
[[ $code == 1 ]] || fail "unknown command: exit $code"
"$TOOL" compare "$WORK/nonexistent" > /dev/null 2> "$WORK/err"; code=$?
[[ $code == 2 ]] && grep -q "nonexistent" "$WORK/err" || fail "unreadable: exit $code"
set -e
echo "PASS"
