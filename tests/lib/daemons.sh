# tests/lib/daemons.sh: a local cluster of daemons for the shell tests
# (deploy/local_cluster.sh on loopback, every node on its own modeled
# clock), stopped on exit. Sourced by a test after `set -euo pipefail`
# with `root` (the runfiles root) set; the test's BUILD target lists this
# file, //deploy:local_cluster.sh and //clocksyncd:clocksyncd as data
# (and //tools/clocksyncctl:clocksyncctl for wait_synced).
#   cluster   the cluster's folder (default "$work/cluster"): its pids,
#             n<i>.shm, master.shm, monitor_flags
#   pids      processes the test started itself: killed (SIGKILL) on exit
#   fail MESSAGE...           FAIL: MESSAGE on stderr, exit 1
#   start_cluster PORT NODES [FLAG...]
#                             a master (probe port PORT, gRPC PORT + 100)
#                             and NODES - 1 nodes n1… (gRPC PORT + 100 + i),
#                             static placement, detached; FLAGs go to
#                             local_cluster.sh
#   wait_synced PORT NODE...  each node n<NODE> within 100 us of the
#                             master in 60 s, else fail

cluster="${cluster:-$work/cluster}"
ctl="$root/tools/clocksyncctl/clocksyncctl"
pids=()

fail() { echo "FAIL: $*" >&2; exit 1; }

stop_all() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  if [[ -f "$cluster/pids" ]]; then
    while read -r _ pid; do kill -TERM "$pid" 2>/dev/null || true; done <"$cluster/pids"
    while read -r _ pid; do wait "$pid" 2>/dev/null || true; done <"$cluster/pids"
  fi
}
trap stop_all EXIT

start_cluster() {
  local port=$1 nodes=$2
  shift 2
  "$root/deploy/local_cluster.sh" --no_build --bin_dir="$root" --work_dir="$cluster" \
    --detach --base_port="$port" --static --nodes="$nodes" "$@"
}

wait_synced() {
  local port=$1 node
  shift
  for node in "$@"; do
    "$ctl" --target="127.0.0.1:$((port + 100 + node))" wait --max_error_ns=100000 \
      --wait_timeout=60s >/dev/null || fail "node n$node did not synchronize"
  done
}
