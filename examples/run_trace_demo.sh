#!/usr/bin/env bash
# The tracing demo: a local cluster of clocksyncd daemons on modeled clocks
# (deploy/local_cluster.sh), a traced program of several processes
# exchanging messages (examples/ping_pong), each process attached to a
# different daemon, and then `clocksync-trace compare` of the corrections
# (none, online, linear, spline, piecewise) against the ground truth.
#
#   examples/run_trace_demo.sh [--duration=150] [--ranks=4] [--nodes=7]
#                              [--timesync_every=10] [--warmup=20] [--keep]
#                              [--view=/tmp/clocksync-trace-demo-view]
#
# --ranks processes run for --duration seconds (>= 120 for a meaningful
# post-mortem comparison with wander); rank r attaches to node n(r+1) (so
# --nodes must exceed --ranks). Tracing starts --warmup seconds after the
# nodes report synchronized, so that their estimators have a few hundred
# samples. With wander, `compare` should show zero
# clock-condition violations for online, many for none, and the errors of
# linear and spline. It ends by writing the view of the run (`clocksync-trace
# view`, docs/VIEW.md) to VIEW.html and VIEW.svg (--view) and saying where.
# Every process it started is stopped on exit, Ctrl-C
# included; --keep leaves the traces and the daemons' logs (printed path).
# BAZEL (default "bazel") and BAZEL_BUILD_FLAGS choose the Bazel command,
# e.g. BAZEL="bazel --output_base=/tmp/ob" BAZEL_BUILD_FLAGS=--symlink_prefix=/.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=150 ranks=4 nodes=7 timesync=10 warmup=20 keep=0 base_port=31900
view=/tmp/clocksync-trace-demo-view
for arg in "$@"; do
  case "$arg" in
    --duration=*) duration="${arg#*=}" ;;
    --ranks=*) ranks="${arg#*=}" ;;
    --nodes=*) nodes="${arg#*=}" ;;
    --timesync_every=*) timesync="${arg#*=}" ;;
    --warmup=*) warmup="${arg#*=}" ;;
    --keep) keep=1 ;;
    --view=*) view="${arg#*=}" ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_trace_demo.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$ranks" =~ ^[0-9]+$ && "$ranks" -ge 2 ]] ||
  { echo "run_trace_demo.sh: --ranks must be >= 2, got '$ranks'" >&2; exit 2; }
[[ "$nodes" =~ ^[0-9]+$ && "$nodes" -gt "$ranks" ]] ||
  { echo "run_trace_demo.sh: --nodes must exceed --ranks ($ranks), got '$nodes'" >&2; exit 2; }
[[ "$duration" =~ ^[0-9]+$ && "$duration" -ge 1 ]] ||
  { echo "run_trace_demo.sh: --duration must be a whole number of seconds, got '$duration'" >&2; exit 2; }

BAZEL="${BAZEL:-bazel}"
read -r -a bazel_build_flags <<<"${BAZEL_BUILD_FLAGS:-}"
deploy/setup.sh >/dev/null
$BAZEL build -c opt "${bazel_build_flags[@]}" //clocksyncd:clocksyncd \
  //tools/cluster_monitor:cluster_monitor //tools/clocksyncctl:clocksyncctl //examples:ping_pong \
  //tools/trace:clocksync-trace >&2
bin="$($BAZEL info -c opt bazel-bin 2>/dev/null)"

work="$(mktemp -d /tmp/clocksync-trace-demo.XXXXXX)"
cleanup() {
  trap - EXIT INT TERM
  if [[ -f "$work/cluster/pids" ]]; then
    while read -r _ pid; do kill -TERM "$pid" 2>/dev/null || true; done <"$work/cluster/pids"
    while read -r _ pid; do
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    done <"$work/cluster/pids"
  fi
  if [[ $keep == 1 ]]; then echo "traces and logs kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== starting $nodes daemons (modeled clocks with wander) in $work/cluster" >&2
deploy/local_cluster.sh --detach --no_build --bin_dir="$bin" \
  --work_dir="$work/cluster" --nodes="$nodes" --base_port="$base_port"

shms=() ids=()
for ((r = 0; r < ranks; r++)); do
  node=$((r + 1))
  shms+=("$work/cluster/n$node.shm")
  ids+=("n$node")
  # Wait until the node is synchronized (its gRPC status on base_port+100+i).
  "$bin/tools/clocksyncctl/clocksyncctl" --target="127.0.0.1:$((base_port + 100 + node))" \
    wait --max_error_ns=100000 --wait_timeout=90s >/dev/null ||
    { echo "run_trace_demo.sh: node n$node did not synchronize" >&2; exit 1; }
done
echo "== nodes n1..n$ranks synchronized; warming up for ${warmup} s" >&2
sleep "$warmup"
echo "== tracing $ranks ranks for ${duration} s" >&2

"$bin/examples/ping_pong" --ranks="$ranks" --duration_s="$duration" \
  --trace_dir="$work/traces" --name=ping_pong \
  --shm="$(IFS=,; echo "${shms[*]}")" --node_ids="$(IFS=,; echo "${ids[*]}")" \
  --master_probe="127.0.0.1:$base_port" \
  --truth_master_shm="$work/cluster/master.shm" \
  --timesync_every_s="$timesync"

archives=()
for ((r = 0; r < ranks; r++)); do archives+=("$work/traces/ping_pong.r$r"); done
echo "== clocksync-trace compare ${archives[*]}" >&2
"$bin/tools/trace/clocksync-trace" compare "${archives[@]}"
echo "== clocksync-trace view (every correction; docs/VIEW.md)" >&2
"$bin/tools/trace/clocksync-trace" view --index_dir="$work/lod-index" \
  --out="$view.html" --svg="$view.svg" "${archives[@]}"
echo "== the run in a browser: $view.html (snapshot: $view.svg)" >&2
