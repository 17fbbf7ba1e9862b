#!/usr/bin/env bash
# The three start-up modes of trace collection (docs/COLLECTOR.md) with the
# C example examples/collector_modes (3 processes, no daemon: the archives
# are in local time):
#  1. the collector first: clocksync-collector prints its contact string,
#     the processes get it in CLOCKSYNC_COLLECTOR;
#  2. server-init: the launcher is rank 0 and the collector
#     (cs_trace_server_init), the others get its contact string through
#     pipes, its finalize writes the run's archive;
#  3. the reverse start-up: every process listens (cs_trace_client_listen),
#     clocksync-collector is started with their contact strings and dials
#     them (the i-th string is rank i).
# Each run: every rank finished, one archive otf2-print reads with 3 ranks
# and every event.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
modes="$root/examples/collector_modes"
work="$TEST_TMPDIR/modes"
rm -rf "$work"
mkdir -p "$work/local"
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$root/tests/lib/collector.sh"

export CLOCKSYNC_SHM="$work/no-daemon.shm" CLOCKSYNC_TRACE_DIR="$work/local"
export CLOCKSYNC_COLLECTOR_LISTEN=127.0.0.1:0 CLOCKSYNC_COLLECTOR_TIMEOUT_MS=20000
# 3 ranks x (500 Enter/Leave pairs + 1 send).
want_events=3003

# check NAME SUMMARY ARCHIVE: 3 ranks finished, otf2-print sees them all.
check() {
  [[ $(grep -c '^rank [0-2] finished: 1001 events, ' "$2") == 3 ]] ||
    { cat "$2"; fail "$1: not 3 ranks finished"; }
  grep -q "^archive $3: 3 of 3 ranks, $want_events events" "$2" ||
    fail "$1: no archive line"
  /usr/bin/otf2-print "$3/traces.otf2" >"$3.print" || fail "$1: otf2-print"
  local printed
  printed=$(grep -cE '^(ENTER|LEAVE|MPI_SEND) ' "$3.print" || true)
  [[ "$printed" == "$want_events" ]] || fail "$1: otf2-print shows $printed events"
  echo "$1: 3 ranks finished, $printed events in $3"
  [[ -z "$(ls -A "$work/local")" ]] || fail "$1: local archives written"
}

echo "== 1. the collector first"
start_collector first 3
CLOCKSYNC_COLLECTOR=$contact "$modes" first 3 2>"$work/first.modes.err" ||
  { cat "$work/first.modes.err"; fail "first: the processes failed"; }
wait "$collector_pid" || { cat "$work/first.err"; fail "first: collector exit $?"; }
check first "$work/first.out" "$work/first.otf2"

echo "== 2. server-init"
CLOCKSYNC_COLLECTOR_OUTPUT="$work/server.otf2" "$modes" server 3 \
  >"$work/server.out" 2>"$work/server.err" ||
  { cat "$work/server.err"; fail "server: exit $?"; }
grep -q '^server contact [0-9a-f]\{32\}@127\.0\.0\.1:[0-9]*$' "$work/server.out" ||
  fail "server: no contact string"
check server "$work/server.err" "$work/server.otf2"
grep -q '^rank 0 finished: .*pid '"$(sed -n 's/^rank 0 .* pid \([0-9]*\).*/\1/p' "$work/server.err")" \
  "$work/server.otf2/clocksync.collection" || fail "server: no summary in the archive"

echo "== 3. the reverse start-up (the collector dials the processes)"
"$modes" listen 3 "$collector" --output="$work/listen.otf2" --listen=127.0.0.1:0 \
  >"$work/listen.out" 2>"$work/listen.err" ||
  { cat "$work/listen.err"; fail "listen: exit $?"; }
check listen "$work/listen.out" "$work/listen.otf2"
# Rank i is the i-th contact string: the i-th process forked.
by_rank=$(sed -n 's/^rank [0-2] finished: .* pid \([0-9]*\).*/\1/p' "$work/listen.out" | tr '\n' ' ')
[[ "$by_rank" == "$(echo "$by_rank" | tr ' ' '\n' | grep . | sort -n | tr '\n' ' ')" ]] ||
  fail "listen: ranks not in the order of the contact strings (pids $by_rank)"
# A contact string nobody listens on: its rank is given up, the run ends.
"$collector" --output="$work/gone.otf2" --listen=127.0.0.1:0 --dial_timeout_s=1 \
  "00000000000000000000000000000000@127.0.0.1:1" >"$work/gone.out" 2>"$work/gone.err" &&
  fail "gone: exit 0 with a rank never dialed"
grep -q 'cannot dial: process 127.0.0.1:1 (rank 0)' "$work/gone.err" ||
  { cat "$work/gone.err"; fail "gone: no dial error"; }
echo "PASS"
