# tests/lib/collector.sh: clocksync-collector started in the background
# for a shell test, and its contact string. Sourced after `set -euo
# pipefail` with `root` (the runfiles root) and `work` set and `fail`
# defined (tests/lib/daemons.sh defines one); the test's BUILD target lists
# this file and //tools/collector:clocksync-collector as data.
#   collector  the binary
#   start_collector NAME PROCESSES [FLAG...]
#              a collector for PROCESSES processes on a free loopback
#              port writing $work/NAME.otf2 (stdout $work/NAME.out, stderr
#              $work/NAME.err), FLAGs added; waits 10 s at most for its
#              contact file $work/NAME.contact, else fails showing its
#              stderr. Sets collector_pid and contact (TOKEN@HOST:PORT) and
#              adds the pid to `pids` (tests/lib/daemons.sh kills those on
#              exit).

collector="$root/tools/collector/clocksync-collector"

start_collector() {
  local name=$1 processes=$2
  shift 2
  "$collector" --processes="$processes" --output="$work/$name.otf2" --listen=127.0.0.1:0 \
    --contact_file="$work/$name.contact" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  collector_pid=$!
  pids+=("$collector_pid")
  for _ in $(seq 100); do [[ -s "$work/$name.contact" ]] && break; sleep 0.1; done
  [[ -s "$work/$name.contact" ]] || { cat "$work/$name.err" >&2; fail "$name: no contact file"; }
  contact=$(cat "$work/$name.contact")
}
