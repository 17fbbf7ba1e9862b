#!/usr/bin/env bash
# TLS between traced processes and clocksync-collector (docs/COLLECTOR.md,
# Security): a CA and a server certificate for 127.0.0.1 made with openssl;
#  1. ping_pong's 2 processes with CLOCKSYNC_COLLECTOR_TLS_CA stream to a
#     collector serving --tls_cert/--tls_key: both finish, one archive;
#  2. processes without the CA (plaintext against TLS) are not let in: each
#     warns and writes its local archive; the collector saw nobody (exit 3);
#  3. unreadable certificate files are a usage error naming the flag.
# No daemon: the tracer warns that there is no mapping, and the archive is
# written with the `none` correction.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
ping_pong="$root/examples/ping_pong"
work="$TEST_TMPDIR/tls"
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$root/tests/lib/collector.sh"
export CLOCKSYNC_SHM="$work/no-daemon.shm"

openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=clocksync test CA" \
  -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
  -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$work/san.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
  -CAcreateserial -days 1 -extfile "$work/san.ext" -out "$work/server.pem" 2>/dev/null

# start NAME [FLAG...]: start_collector NAME 2 (tests/lib/collector.sh)
# serving TLS; sets collector_pid, contact.
start() {
  local name=$1
  shift
  start_collector "$name" 2 --tls_cert="$work/server.pem" --tls_key="$work/server.key" "$@"
}

echo "== 1. TLS"
start t1
CLOCKSYNC_COLLECTOR="$contact" CLOCKSYNC_COLLECTOR_TLS_CA="$work/ca.pem" \
  "$ping_pong" --ranks=2 --duration_s=2 --trace_dir="$work/t1" 2>"$work/t1.pp.err" ||
  { cat "$work/t1.pp.err"; fail "ping_pong over TLS"; }
status=0
wait "$collector_pid" || status=$?
cat "$work/t1.out"
[[ $status == 0 ]] || { cat "$work/t1.err"; fail "collector exit $status"; }
[[ $(grep -c '^rank [01] finished: [1-9]' "$work/t1.out") == 2 ]] || fail "not both ranks finished"
grep -q 'lost\|local archive' "$work/t1.pp.err" && fail "a process fell back over TLS"
compgen -G "$work/t1/ping_pong.r*" >/dev/null && fail "local archives over TLS"

echo "== 2. plaintext against TLS"
start t2 --wait_timeout_s=8
CLOCKSYNC_COLLECTOR="$contact" CLOCKSYNC_COLLECTOR_TIMEOUT_MS=2000 \
  "$ping_pong" --ranks=2 --duration_s=1 --trace_dir="$work/t2" 2>"$work/t2.pp.err" ||
  { cat "$work/t2.pp.err"; fail "ping_pong without the CA"; }
[[ $(grep -c 'no collector (.*): writing the local archive instead' "$work/t2.pp.err") == 2 ]] ||
  { cat "$work/t2.pp.err"; fail "the processes did not say they write locally"; }
[[ -d "$work/t2/ping_pong.r0" && -d "$work/t2/ping_pong.r1" ]] || fail "no local archives"
status=0
wait "$collector_pid" || status=$?
[[ $status == 3 ]] || fail "collector exit $status, want 3"
grep -q 'no process joined' "$work/t2.err" || fail "the collector saw someone"

echo "== 3. unreadable certificate"
status=0
"$collector" --processes=1 --output="$work/t3.otf2" --listen=127.0.0.1:0 \
  --tls_cert="$work/missing.pem" --tls_key="$work/server.key" 2>"$work/t3.err" || status=$?
[[ $status == 1 ]] || fail "exit $status for a missing certificate, want 1"
grep -q -- "--tls_cert: cannot read $work/missing.pem" "$work/t3.err" || { cat "$work/t3.err"; fail "message"; }
echo PASS
