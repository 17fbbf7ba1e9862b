#!/usr/bin/env bash
# An LTTng-UST event stamped by libclocksync-lttng.so beside one stamped by
# LTTng's default clock, side by side in one run (lttng/event_benchmark).
#
#   deploy/lttng_benchmark.sh [--rounds=100] [--events=50000] [--no_build]
#                             [--bin_dir=DIR] [--keep]
#
# In a private mount namespace (root needed; its own /run/lttng and
# /dev/shm, so no other lttng-sessiond is disturbed): a clocksyncd master
# (its segment synchronized at once; the benchmark waits up to 15 s for its
# TSC mapping, the plugin's fast path where the TSC is invariant), an
# lttng-sessiond that loads the plugin, and a flight-recorder session
# (snapshot mode, overwrite channels, per-process buffers): every event is
# written to the ring buffer and none is discarded or read while timed.
# Then event_benchmark's two workers, one per clock, record --events events
# per round in turn, --rounds rounds after 3 warm-up ones, and it prints
#   FIGURE lttng_event_default_clock_ns <v> ns
#   FIGURE lttng_event_plugin_ns <v> ns
#   FIGURE lttng_event_plugin_vs_default_ratio <v> x
# Exits 0 when it ran, 1 when something did not start, 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=100 events=50000 build=1 bin="" keep=0
for arg in "$@"; do
  case "$arg" in
    --rounds=*) rounds="${arg#*=}" ;;
    --events=*) events="${arg#*=}" ;;
    --no_build) build=0 ;;
    --bin_dir=*) bin="${arg#*=}" ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "lttng_benchmark.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
for v in rounds events; do
  [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] ||
    { echo "lttng_benchmark.sh: --$v must be a whole number >= 1, got '${!v}'" >&2; exit 2; }
done
[[ $(id -u) -eq 0 ]] || { echo "lttng_benchmark.sh: needs root (a mount namespace)" >&2; exit 2; }
for tool in lttng lttng-sessiond unshare; do
  command -v "$tool" >/dev/null ||
    { echo "lttng_benchmark.sh: $tool is missing (deploy/setup.sh installs lttng-tools)" >&2; exit 1; }
done

if [[ $build == 1 ]]; then
  deploy/setup.sh >/dev/null
  bazel build -c opt //clocksyncd:clocksyncd //lttng:libclocksync-lttng.so \
    //lttng:event_benchmark >&2
  bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
fi
daemon="$bin/clocksyncd/clocksyncd"
plugin="$bin/lttng/libclocksync-lttng.so"
benchmark="$bin/lttng/event_benchmark"
for b in "$daemon" "$plugin" "$benchmark"; do
  [[ -e "$b" ]] || { echo "lttng_benchmark.sh: no $b (build it, or give --bin_dir)" >&2; exit 2; }
done

work="$(mktemp -d /tmp/clocksync-lttng-bench.XXXXXX)"
if [[ $keep == 0 ]]; then trap 'rm -rf "$work"' EXIT; else echo "work dir: $work" >&2; fi

# Everything below runs in the private mount namespace; its processes are
# ended by their ids when it returns.
unshare --mount --propagation private bash -s -- "$work" "$daemon" "$plugin" \
    "$benchmark" "$rounds" "$events" <<'INNER'
set -euo pipefail
work=$1 daemon=$2 plugin=$3 benchmark=$4 rounds=$5 events=$6
mkdir -p /run/lttng
mount -t tmpfs -o mode=0755 clocksync-lttng-bench /run/lttng
mount -t tmpfs -o mode=1777 clocksync-lttng-bench /dev/shm
export LTTNG_HOME="$work/home" CLOCKSYNC_SHM="$work/m.shm"
mkdir -p "$LTTNG_HOME"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

port=$((38000 + RANDOM % 1500))
"$daemon" --master --node_id=bench --listen="127.0.0.1:$port" \
  --grpc_listen="127.0.0.1:$((port + 1))" --shm_path="$CLOCKSYNC_SHM" >"$work/daemon.log" 2>&1 &
pids+=($!)
# Synchronized (state 2 at byte 108), then the TSC mapping (max_ticks at
# byte 160 non-zero) where the daemon publishes one.
tsc=no
for _ in $(seq 150); do
  read -r state max_ticks < <(python3 -c '
import struct, sys
try:
    b = open(sys.argv[1], "rb").read(192)
    print(struct.unpack_from("<H", b, 108)[0] & 0xFF, struct.unpack_from("<Q", b, 160)[0])
except Exception:
    print(0, 0)' "$CLOCKSYNC_SHM")
  if [[ "$state" == 2 && "$max_ticks" != 0 ]]; then tsc=yes; break; fi
  sleep 0.1
done
[[ "$state" == 2 ]] || { cat "$work/daemon.log"; echo "lttng_benchmark.sh: the master did not synchronize" >&2; exit 1; }
echo "daemon: synchronized; TSC mapping published: $tsc"

LTTNG_UST_CLOCK_PLUGIN="$plugin" lttng-sessiond --no-kernel >"$work/sessiond.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do lttng --no-sessiond list >/dev/null 2>&1 && break; sleep 0.1; done
lttng --no-sessiond list >/dev/null 2>&1 ||
  { cat "$work/sessiond.log"; echo "lttng_benchmark.sh: lttng-sessiond did not start" >&2; exit 1; }
lttng --no-sessiond create bench --snapshot >/dev/null
lttng --no-sessiond enable-channel --userspace --buffers-pid --overwrite \
  --subbuf-size=1M --num-subbuf=4 ch >/dev/null
lttng --no-sessiond enable-event --userspace --channel=ch 'clocksync_bench:*' >/dev/null
lttng --no-sessiond start >/dev/null
status=0
"$benchmark" --plugin="$plugin" --rounds="$rounds" --events="$events" || status=$?
lttng --no-sessiond stop >/dev/null || true
lttng --no-sessiond destroy >/dev/null || true
exit $status
INNER
