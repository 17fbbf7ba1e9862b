#!/usr/bin/env bash
# tests/startup_errors_test.sh: every start-up error is one line on stderr
# naming the flag and its value, with one exit status per class: 2 for an
# invalid configuration, 1 for a valid one that cannot start (a port in
# use, a file that cannot be written). No gRPC log lines before ours.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
daemon="$root/clocksyncd/clocksyncd"
work="$TEST_TMPDIR/startup"
mkdir -p "$work"
port=$((23500 + RANDOM % 400))
failures=0

# expect STATUS PATTERN ARGS...: the daemon exits with STATUS within 10 s
# and stderr is exactly one line matching PATTERN (grep -E).
expect() {
  local want_status="$1" pattern="$2"
  shift 2
  local status=0
  timeout 10 "$daemon" "$@" >"$work/out" 2>"$work/err" || status=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [[ $status -ne $want_status || $lines -ne 1 ]] || ! grep -Eq -- "$pattern" "$work/err"; then
    echo "FAIL: clocksyncd $*"
    echo "  want exit $want_status and one line matching: $pattern"
    echo "  got exit $status and $lines lines:"
    sed 's/^/    /' "$work/err"
    failures=$((failures + 1))
  else
    echo "ok: exit $status: $(cat "$work/err")"
  fi
}

common=(--shm_path="$work/a.shm" --listen="127.0.0.1:0")
expect 2 '^clocksyncd: bad flag --node_id: .*got "a b"$' --node_id="a b" --join=127.0.0.1:1 "${common[@]}"
expect 2 '^clocksyncd: bad flag --listen: .*got "nohost"$' --master --listen=nohost --shm_path="$work/a.shm"
expect 2 '^clocksyncd: bad flag --parent: .*got "bad"$' --node_id=n --parent=bad "${common[@]}"
expect 2 '^clocksyncd: bad flag --window: must be > 0, got "-1s"$' --master --window=-1s "${common[@]}"
expect 2 '^clocksyncd: bad flag --grpc_listen: ' --master --grpc_listen=127.0.0.1:99999 "${common[@]}"
expect 2 '^clocksyncd: bad flag --metrics_listen: .*got "nohost"$' --master --metrics_listen=nohost \
  --grpc_listen=127.0.0.1:0 "${common[@]}"
expect 1 '^clocksyncd: cannot start: --status_file=/sys/x: ' --master --status_file=/sys/x \
  --grpc_listen=127.0.0.1:0 "${common[@]}"

# A gRPC port in use: a first master holds it.
"$daemon" --master --listen="127.0.0.1:$port" --grpc_listen="127.0.0.1:$((port + 1))" \
  --shm_path="$work/first.shm" >"$work/first.log" 2>&1 &
first=$!
trap 'kill -KILL $first 2>/dev/null || true' EXIT
for _ in $(seq 50); do [[ -e "$work/first.shm" ]] && break; sleep 0.1; done
expect 1 "^clocksyncd: cannot start: --grpc_listen=127.0.0.1:$((port + 1)): address already in use" \
  --master --listen=127.0.0.1:0 --grpc_listen="127.0.0.1:$((port + 1))" --shm_path="$work/b.shm"
expect 1 "^clocksyncd: cannot start: --metrics_listen=127.0.0.1:$((port + 1)): address already in use" \
  --master --listen=127.0.0.1:0 --grpc_listen=127.0.0.1:0 --metrics_listen="127.0.0.1:$((port + 1))" \
  --shm_path="$work/d.shm"
expect 1 "^clocksyncd: cannot start: --listen=127.0.0.1:$port: " \
  --master --listen="127.0.0.1:$port" --grpc_listen=127.0.0.1:0 --shm_path="$work/c.shm"
kill -TERM $first; wait $first || true

if [[ $failures -ne 0 ]]; then echo "$failures failed"; exit 1; fi
echo PASS
