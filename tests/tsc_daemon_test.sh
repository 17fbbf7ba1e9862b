#!/usr/bin/env bash
# tests/tsc_daemon_test.sh: clocksyncd publishes the TSC section end to end.
# With --tsc=auto (the default) and an invariant TSC (x86-64, constant_tsc
# and nonstop_tsc) a master's segment is layout version 2 and, within a few
# seconds, holds a valid TSC mapping whose error the status file reports;
# without an invariant TSC the section stays invalid (tsc_error_ns=-1).
# With --tsc=off the segment is layout version 1: 128 bytes, no TSC section.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
daemon="$root/clocksyncd/clocksyncd"
work="$TEST_TMPDIR/tsc"
mkdir -p "$work"
port=$((24900 + RANDOM % 400))
pid=""
trap '[[ -n "$pid" ]] && kill -KILL "$pid" 2>/dev/null || true' EXIT

start_master() {  # PORT TSC
  "$daemon" --master --node_id=m --listen="127.0.0.1:$1" \
    --grpc_listen="127.0.0.1:$(( $1 + 100 ))" --shm_path="$work/clocksync.shm" \
    --status_file="$work/status" --tsc="$2" >>"$work/log" 2>&1 &
  pid=$!
}
stop_master() {
  kill -TERM "$pid"; wait "$pid" || true; pid=""
  rm -f "$work/status"
}
status_tsc_error_ns() {
  sed -n 's/.*tsc_error_ns=\(-\?[0-9]*\).*/\1/p' "$work/status" 2>/dev/null || true
}
# Prints "version size max_ticks error_ns" of the segment.
read_segment() {
  python3 - "$work/clocksync.shm" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
magic, version, size = struct.unpack_from("<QII", data, 0)
assert magic == 0x4D434E59534B4C43, hex(magic)
max_ticks, error_ns = (0, -1)
if len(data) >= 192:
    max_ticks, error_ns = struct.unpack_from("<Qq", data, 128 + 32)
print(version, len(data), max_ticks, error_ns)
PY
}

invariant=0
if [[ "$(uname -m)" == x86_64 ]] && grep -qw constant_tsc /proc/cpuinfo &&
   grep -qw nonstop_tsc /proc/cpuinfo; then
  invariant=1
fi

start_master "$port" auto
error=""
for _ in $(seq 80); do
  error=$(status_tsc_error_ns)
  [[ -n "$error" && ( "$error" -gt 0 || $invariant -eq 0 ) ]] && break
  sleep 0.1
done
read -r version size max_ticks segment_error < <(read_segment)
echo "tsc=auto: invariant TSC $invariant, status tsc_error_ns=$error," \
     "segment version $version, $size bytes, max_ticks $max_ticks, error_ns $segment_error"
[[ "$version" == 2 && "$size" == 192 ]] || { cat "$work/log"; echo "FAIL: not a version-2 segment"; exit 1; }
if [[ $invariant -eq 1 ]]; then
  [[ "$error" -gt 0 && "$error" -lt 1000 ]] ||
    { cat "$work/log"; echo "FAIL: no TSC mapping within 8 s (tsc_error_ns=$error)"; exit 1; }
  [[ "$max_ticks" -gt 0 && "$segment_error" -gt 0 ]] ||
    { echo "FAIL: the segment's TSC section is invalid"; exit 1; }
  grep -q "TSC mapping published for clients" "$work/log" ||
    { cat "$work/log"; echo "FAIL: the log does not say so"; exit 1; }
else
  [[ "$error" == -1 && "$max_ticks" == 0 ]] ||
    { echo "FAIL: a TSC mapping without an invariant TSC"; exit 1; }
fi
stop_master

start_master "$((port + 1))" off
for _ in $(seq 50); do [[ -s "$work/status" ]] && break; sleep 0.1; done
read -r version size max_ticks segment_error < <(read_segment)
echo "tsc=off: status tsc_error_ns=$(status_tsc_error_ns), segment version $version, $size bytes"
[[ "$version" == 1 && "$size" == 128 && "$(status_tsc_error_ns)" == -1 ]] ||
  { cat "$work/log"; echo "FAIL: --tsc=off must write a version-1 segment without TSC"; exit 1; }
stop_master
echo PASS
