#!/usr/bin/env bash
# Integration test of trace collection (docs/COLLECTOR.md): a local cluster
# on loopback (a master and 4 daemons, each node on its own modeled clock),
# the traced ping_pong program (4 processes, each on its own node's
# daemon) streaming to clocksync-collector through CLOCKSYNC_COLLECTOR.
#  1. A normal run: data arrives while the program runs, every rank
#     finishes, the collector exits 0 with one OTF2 archive that otf2-print
#     reads with every rank's events, zero clock-condition violations for
#     the online correction; no local archive; clocksync-trace reads the
#     raw archives the collector kept.
#  2. SIGKILL of one process mid-run: the others are told by the collector
#     which rank was lost (PeerLost, Tracer::LostPeers) and finish, the
#     collector writes the archive, marks the killed rank lost with the
#     time of its last event, and exits 3.
#  3. SIGKILL of the collector mid-run: every process falls back to its
#     local archive and says so; the collector's raw archives joined with
#     the local ones (clocksync-collector --recover_raw_dir) hold every
#     event the processes recorded, with zero violations.
#  4. SIGTERM to the collector and every process at once (Ctrl-C on the
#     whole run): the processes complete their traces at the collector
#     within its grace period; every rank finished, exit 0.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
ping_pong="$root/examples/ping_pong"
trace_tool="$root/tools/trace/clocksync-trace"
work="$TEST_TMPDIR/collector"
rm -rf "$work"
mkdir -p "$work"
port=$((20700 + RANDOM % 400))
source "$root/tests/lib/daemons.sh"
source "$root/tests/lib/collector.sh"

echo "== a master and 4 daemons on modeled clocks"
start_cluster "$port" 5
wait_synced "$port" 1 2 3 4
shms=() ids=()
for node in 1 2 3 4; do
  shms+=("$work/cluster/n$node.shm")
  ids+=("n$node")
done
sleep 8  # a few hundred samples in every estimator

# Small buffers: many batches stream while the program runs.
export CLOCKSYNC_TRACE_BUFFER_EVENTS=4096
pp_flags=(--ranks=4 --name=ping_pong --timesync_every_s=4
  "--shm=$(IFS=,; echo "${shms[*]}")" "--node_ids=$(IFS=,; echo "${ids[*]}")"
  "--master_probe=127.0.0.1:$port" "--truth_master_shm=$work/cluster/master.shm")

# start NAME: start_collector NAME 4 (tests/lib/collector.sh), its contact
# string and the first line of its stdout checked.
start() {
  start_collector "$1" 4
  [[ "$contact" =~ ^[0-9a-f]{32}@127\.0\.0\.1:[0-9]+$ ]] || fail "$1: contact '$contact'"
  [[ "$(head -1 "$work/$1.out")" == "contact $contact" ]] || fail "$1: first line of stdout"
}

# otf2_events ARCHIVE: "<events> <ranks with events>" as otf2-print sees them.
otf2_events() {
  /usr/bin/otf2-print "$1/traces.otf2" >"$1.print" || fail "otf2-print $1"
  python3 - "$1.print" <<'PY'
import re, sys
events = 0
ranks = set()
for line in open(sys.argv[1]):
    m = re.match(r"^(ENTER|LEAVE|MPI_SEND|MPI_RECV|MPI_COLLECTIVE_BEGIN|MPI_COLLECTIVE_END)\s+(\d+)\s", line)
    if m:
        events += 1
        ranks.add(int(m.group(2)) >> 32)
print(events, len(ranks))
PY
}

# online_violations FILE: the violations column of the online row.
online_violations() {
  awk '$1 == "online" { print $3 }' "$1"
}

echo "== 1. a normal run"
start p1
CLOCKSYNC_COLLECTOR="$contact" "$ping_pong" "${pp_flags[@]}" --duration_s=12 \
  --trace_dir="$work/p1" 2>"$work/p1.pp.err" &
pp=$!
pids+=("$pp")
sleep 6
streamed=$({ cat "$work"/p1.otf2.raw/rank.*/events.*.raw 2>/dev/null || true; } | wc -c)
echo "after 6 s of 12: $streamed event bytes at the collector"
((streamed > 0)) || fail "nothing arrived while the program ran"
wait "$pp" || { cat "$work/p1.pp.err"; fail "ping_pong failed"; }
status=0
wait "$collector_pid" || status=$?
cat "$work/p1.out"
[[ $status == 0 ]] || { cat "$work/p1.err"; fail "collector exit $status, want 0"; }
[[ $(grep -c '^rank [0-3] finished: ' "$work/p1.out") == 4 ]] || fail "not 4 ranks finished"
events=$(sed -n 's/^archive .*: 4 of 4 ranks, \([0-9]*\) events, online correction.*/\1/p' "$work/p1.out")
[[ -n "$events" ]] || fail "no archive line"
read -r printed ranks < <(otf2_events "$work/p1.otf2")
echo "otf2-print: $printed events of $ranks ranks (collector: $events)"
[[ "$printed" == "$events" && "$ranks" == 4 ]] || fail "otf2-print shows $printed events of $ranks ranks"
violations=$(online_violations "$work/p1.out")
[[ "$violations" == 0 ]] || fail "online: $violations clock-condition violations"
messages=$(awk '$1 == "online" { print $2 }' "$work/p1.out")
((messages > 1000)) || fail "only $messages messages"
compgen -G "$work/p1/ping_pong.r*" >/dev/null && fail "local archives written with a collector"
"$trace_tool" compare "$work"/p1.otf2.raw/rank.* >"$work/p1.compare" ||
  fail "clocksync-trace cannot read the raw archives"
awk '$1 == "linear" && $3 != "" { found = 1 } END { exit !found }' "$work/p1.compare" ||
  fail "no linear correction from the raw archives"

echo "== 2. SIGKILL of one process"
start p2
CLOCKSYNC_COLLECTOR="$contact" "$ping_pong" "${pp_flags[@]}" --duration_s=12 \
  --trace_dir="$work/p2" 2>"$work/p2.pp.err" &
pp=$!
pids+=("$pp")
sleep 5
victim=$(pgrep -P "$pp" | sort -n | sed -n 3p)  # the third child: rank 2
[[ -n "$victim" ]] || fail "no rank 2 process"
kill -KILL "$victim"
wait "$pp" && fail "ping_pong succeeded with a rank killed"
status=0
wait "$collector_pid" || status=$?
cat "$work/p2.out"
[[ $status == 3 ]] || { cat "$work/p2.err"; fail "collector exit $status, want 3"; }
grep -q '^rank 2 lost: [1-9][0-9]* events, .*, last event at [0-9]*\.[0-9]\{9\} (online); the stream' \
  "$work/p2.out" || fail "rank 2 not reported lost with its last event"
[[ $(grep -c '^rank [013] finished: ' "$work/p2.out") == 3 ]] || fail "the others did not finish"
told=$(grep -c '^rank [013]: the collector says rank(s) 2 lost$' "$work/p2.pp.err" || true)
echo "$told of 3 surviving ranks were told that rank 2 was lost"
[[ "$told" == 3 ]] || { cat "$work/p2.pp.err"; fail "the others were not told of rank 2"; }
events=$(sed -n 's/^archive .*: 4 of 4 ranks, \([0-9]*\) events.*/\1/p' "$work/p2.out")
read -r printed ranks < <(otf2_events "$work/p2.otf2")
[[ "$printed" == "$events" && "$ranks" == 4 ]] || fail "otf2-print shows $printed events of $ranks ranks, want $events of 4"

echo "== 3. SIGKILL of the collector"
start p3
CLOCKSYNC_COLLECTOR="$contact" "$ping_pong" "${pp_flags[@]}" --duration_s=10 \
  --trace_dir="$work/p3" 2>"$work/p3.pp.err" &
pp=$!
pids+=("$pp")
sleep 4
kill -KILL "$collector_pid"
wait "$pp" || { cat "$work/p3.pp.err"; fail "ping_pong failed after the collector died"; }
cat "$work/p3.pp.err"
[[ $(grep -c 'clocksync tracer: collector 127.0.0.1:[0-9]* lost (.*): the [0-9]* events it did not acknowledge and all later ones go to the local archive' \
  "$work/p3.pp.err") == 4 ]] || fail "not every process said it fell back"
recorded=0
for rank in 0 1 2 3; do
  [[ -d "$work/p3/ping_pong.r$rank" ]] || fail "no local archive of rank $rank"
  n=$(sed -n "s/^rank $rank: [0-9]* iterations, \([0-9]*\) events,.*/\1/p" "$work/p3.pp.err")
  recorded=$((recorded + n))
done
"$collector" --recover_raw_dir="$work/p3.otf2.raw" --output="$work/p3r.otf2" \
  "$work"/p3/ping_pong.r* >"$work/p3r.out" 2>"$work/p3r.err" ||
  { cat "$work/p3r.err"; fail "recovery failed"; }
cat "$work/p3r.out"
events=$(sed -n 's/^archive .*: 4 ranks, \([0-9]*\) events, online correction.*/\1/p' "$work/p3r.out")
echo "recorded by the processes: $recorded events; recovered: $events"
[[ "$events" == "$recorded" ]] || fail "recovered $events events of $recorded"
read -r printed ranks < <(otf2_events "$work/p3r.otf2")
[[ "$printed" == "$events" && "$ranks" == 4 ]] || fail "otf2-print shows $printed events of $ranks ranks"
violations=$(online_violations "$work/p3r.out")
[[ "$violations" == 0 ]] || fail "online after recovery: $violations violations"
echo "== 4. SIGTERM on the whole run (as Ctrl-C)"
start p4
CLOCKSYNC_COLLECTOR="$contact" "$ping_pong" "${pp_flags[@]}" --duration_s=30 \
  --trace_dir="$work/p4" 2>"$work/p4.pp.err" &
pp=$!
pids+=("$pp")
sleep 4
# Background jobs of a script ignore SIGINT; SIGTERM takes the same path in
# the tracer (complete the trace, then die) and in the collector.
kill -TERM "$collector_pid" $(pgrep -P "$pp")
status=0
wait "$collector_pid" || status=$?
wait "$pp" || true
cat "$work/p4.out"
[[ $status == 0 ]] || { cat "$work/p4.err"; fail "collector exit $status after SIGTERM, want 0"; }
[[ $(grep -c '^rank [0-3] finished: [1-9]' "$work/p4.out") == 4 ]] ||
  fail "not every interrupted rank finished its trace at the collector"
compgen -G "$work/p4/ping_pong.r*" >/dev/null && fail "local archives after SIGTERM"
echo "PASS"
