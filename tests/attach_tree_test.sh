#!/usr/bin/env bash
# tests/attach_tree_test.sh: dynamic spawning (docs/COLLECTOR.md, "Dynamic
# spawning") with examples/attach_tree: a tree of depth 2 and fan-out 2
# (1 + 2 + 4 processes), each process forking its children, handing them
# its attach contact string through a pipe and attaching them, streaming
# to clocksync-collector started for ONE process (the root). A master and
# one node on a modeled clock (seconds off): the even depths trace on the
# master's segment, depth 1 on the node's, so every message between a
# parent and its children crosses clocks.
#  1. Every one of the 7 ranks finished in the one archive; otf2-print
#     shows the 7 ranks and each group's two communicators with the right
#     members; clocksync-trace compare on the ranks' raw archives shows
#     zero clock-condition violations for the online correction (and many
#     without a correction).
#  2. A child that never connects: the root's attach fails after the
#     timeout naming its pid; the run ends with the root alone.
#  3. A child with a wrong token: refused by the collector (it falls back to
#     its local archive and says why); the attach fails naming its pid.
#  4. A child killed (SIGKILL) right after its attach: the collector tells
#     the others (the root prints the lost rank) and marks it lost.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
tree="$root/examples/attach_tree"
trace_tool="$root/tools/trace/clocksync-trace"
work="$TEST_TMPDIR/attach"
rm -rf "$work"
mkdir -p "$work/local"
port=$((21400 + RANDOM % 400))
source "$root/tests/lib/daemons.sh"
source "$root/tests/lib/collector.sh"

echo "== a master and a node on a modeled clock"
start_cluster "$port" 2
wait_synced "$port" 1

export CLOCKSYNC_TRACE_DIR="$work/local" CLOCKSYNC_MASTER_PROBE="127.0.0.1:$port"
export CLOCKSYNC_TRUTH_MASTER_SHM="$work/cluster/master.shm"
shm_flag="--shm_by_depth=$work/cluster/master.shm,$work/cluster/n1.shm"

# run NAME FANOUT [FLAG...]: the collector for one process, then the tree
# of depth 2 (depth 1 for the faults: FLAGs given); sets tree_status.
run() {
  local name=$1 fanout=$2 depth=2
  shift 2
  (($# > 0)) && depth=1
  start_collector "$name" 1
  tree_status=0
  CLOCKSYNC_COLLECTOR=$contact "$tree" "$depth" "$fanout" \
    "$shm_flag" "$@" >"$work/$name.tree" 2>"$work/$name.tree.err" || tree_status=$?
  collector_status=0
  wait "$collector_pid" || collector_status=$?
}

echo "== 1. depth 2, fan-out 2: 7 processes in one archive"
export CLOCKSYNC_COLLECTOR_TIMEOUT_MS=20000
run tree 2
[[ $tree_status == 0 ]] || { cat "$work/tree.tree.err"; fail "the tree exited $tree_status"; }
grep -qx "processes 7" "$work/tree.tree" || fail "tree: $(cat "$work/tree.tree")"
[[ $collector_status == 0 ]] || { cat "$work/tree.err"; fail "collector exit $collector_status"; }
[[ $(grep -c '^rank [0-6] finished: ' "$work/tree.out") == 7 ]] ||
  { cat "$work/tree.out"; fail "not 7 ranks finished"; }
grep -q '^archive .*: 7 of 7 ranks, .* events, online correction' "$work/tree.out" ||
  { cat "$work/tree.out" "$work/tree.err"; fail "no archive line with 7 ranks"; }
for child in 1 2; do
  grep -q "^rank $child finished: .*attached by rank 0 (group r0.g0)" "$work/tree.out" ||
    fail "rank $child not attached by rank 0"
done
# The grandchildren: ranks 3..6, two groups of two under ranks 1 and 2.
grep -q "attached by rank 1 (group r1.g0)" "$work/tree.out" || fail "no group r1.g0"
grep -q "attached by rank 2 (group r2.g0)" "$work/tree.out" || fail "no group r2.g0"
[[ -z "$(ls -A "$work/local")" ]] || fail "tree: local archives written"

# otf2-print: every rank's events, every group's communicators.
/usr/bin/otf2-print -A "$work/tree.otf2/traces.otf2" >"$work/tree.print" ||
  fail "otf2-print"
python3 - "$work/tree.print" "$work/tree.out" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
summary = open(sys.argv[2]).read()
groups = set(re.findall(r'^LOCATION_GROUP\s+\d+\s+Name: "rank (\d+)"', text, re.M))
assert groups == {str(r) for r in range(7)}, f"location groups {sorted(groups)}"
# Each communicator's members (the ranks of its COMM_GROUP).
members = {}
for m in re.finditer(r'^GROUP\s+\d+\s+Name: "([^"]*)" <\d+>, Type: COMM_GROUP,.*?Members?: (.*)$',
                     text, re.M):
    members[m.group(1)] = sorted(int(r) for r in re.findall(r'(\d+) \("', m.group(2)))
comms = set(re.findall(r'^COMM\s+\d+\s+Name: "([^"]*)"', text, re.M))
# Who attached whom, from the collector's summary.
children = {}
for line in summary.splitlines():
    m = re.match(r'rank (\d+) finished: .*attached by rank (\d+) \(group (r(\d+)\.g\d+)\)', line)
    if m:
        children.setdefault(m.group(3), []).append(int(m.group(1)))
assert sorted(children) == ["r0.g0", "r1.g0", "r2.g0"], f"groups {sorted(children)}"
for group, kids in children.items():
    parent = int(group[1:group.index(".")])
    for name, want in ((f"attach {group}", sorted([parent] + kids)),
                       (f"attach {group} children", sorted(kids))):
        assert name in comms, f"no communicator {name}; have {sorted(comms)}"
        assert members.get(name) == want, f"{name}: members {members.get(name)}, want {want}"
# Collectives recorded in the groups' communicators: each group's
# broadcast (parent and 2 children) and its children's barrier.
ends = re.findall(r'^MPI_COLLECTIVE_END .*Operation: (\w+), Communicator: "([^"]*)"', text, re.M)
for group in children:
    bcasts = sum(1 for op, c in ends if op == "BCAST" and c == f"attach {group}")
    barriers = sum(1 for op, c in ends if op == "BARRIER" and c == f"attach {group} children")
    assert (bcasts, barriers) == (3, 2), f"{group}: {bcasts} broadcasts, {barriers} barriers"
print(f"otf2-print: 7 ranks; groups {sorted(children)} with their 2 communicators each "
      f"and their members; {len(ends)} collectives")
PY

# compare on the raw archives: zero violations online, many without.
"$trace_tool" compare "$work"/tree.otf2.raw/rank.* >"$work/compare.out" 2>"$work/compare.err" ||
  { cat "$work/compare.err"; fail "clocksync-trace compare"; }
cat "$work/compare.out"
online=$(awk '$1 == "online" {print $2, $3}' "$work/compare.out")
none=$(awk '$1 == "none" {print $2, $3}' "$work/compare.out")
read -r messages violations <<<"$online"
# 3 groups: 2 broadcast messages and 2 barrier arrivals each.
[[ "$messages" == 12 ]] || fail "compare: $messages messages matched (want 12)"
[[ "$violations" == 0 ]] || fail "compare: $violations violations online"
read -r _ none_violations <<<"$none"
[[ "$none_violations" -gt 0 ]] || fail "compare: no violation without a correction (clocks not apart?)"
echo "compare: $messages messages, 0 violations online, $none_violations without a correction"

echo "== 2. a child that never connects"
# Long enough for a good child on a busy machine.
export CLOCKSYNC_COLLECTOR_TIMEOUT_MS=5000
run never 2 --fault=never
grep -Eq '^attach failed: .*attach group r0\.g0: 1 of 2 children never connected within [0-9]+ ms: pid [0-9]+$' \
  "$work/never.tree" || { cat "$work/never.tree" "$work/never.tree.err"; fail "never: no attach error naming the pid"; }
grep -q '^archive .*: 1 of 1 ranks' "$work/never.out" || fail "never: not the root alone"
echo "never: $(cat "$work/never.tree")"

echo "== 3. a child with a wrong token"
rm -rf "$work/local"/*
run token 2 --fault=token
grep -Eq '^attach failed: .*1 of 2 children never connected within [0-9]+ ms: pid [0-9]+$' \
  "$work/token.tree" || { cat "$work/token.tree" "$work/token.tree.err"; fail "token: no attach error"; }
grep -q 'not the token of attach group r0.g0' "$work/token.tree.err" ||
  { cat "$work/token.tree.err"; fail "token: the child did not say why it was refused"; }
grep -q 'refused a stream .*not the token of attach group r0.g0' "$work/token.err" ||
  { cat "$work/token.err"; fail "token: the collector did not log the refusal"; }
echo "token: refused, $(cat "$work/token.tree")"

echo "== 4. a child killed right after its attach"
export CLOCKSYNC_COLLECTOR_TIMEOUT_MS=20000
run kill 2 --fault=kill
grep -qx 'lost rank 2' "$work/kill.tree" ||
  { cat "$work/kill.tree" "$work/kill.tree.err"; fail "kill: the root was not told rank 2 was lost"; }
grep -q '^rank 2 lost: .*attached by rank 0' "$work/kill.out" || { cat "$work/kill.out"; fail "kill: rank 2 not lost"; }
grep -q '^rank 1 finished: ' "$work/kill.out" || fail "kill: rank 1 did not finish"
[[ $collector_status == 3 ]] || fail "kill: collector exit $collector_status (want 3)"
echo "PASS"
