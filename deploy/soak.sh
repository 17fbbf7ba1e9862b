#!/usr/bin/env bash
# deploy/soak.sh: the demo tree (13 daemons, a shared key) for an hour under
# churn (a node killed, one leaving, one frozen, one a minute, each started
# again) and low-rate hostile traffic (garbage datagrams, untagged
# membership calls, watch streams, topology requests), with every daemon's
# memory, threads and file descriptors sampled each minute. Ends with FIGURE
# lines and fails when they are not flat or a bound was violated
# (deploy/soak.py says exactly what).
#
#   deploy/soak.sh [--minutes=60] [--nodes=13] [--work_dir=DIR] [--no_build --bin_dir=DIR]
#
# The samples stay in the work directory (samples.csv) with every log.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=60 nodes=13 work="" build=1 bin=""
for arg in "$@"; do
  case "$arg" in
    --minutes=*) minutes="${arg#*=}" ;;
    --nodes=*) nodes="${arg#*=}" ;;
    --work_dir=*) work="${arg#*=}" ;;
    --no_build) build=0 ;;
    --bin_dir=*) bin="${arg#*=}" ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$minutes" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "soak.sh: --minutes must be a number, got '$minutes'" >&2; exit 2; }
if [[ $build == 1 ]]; then
  deploy/setup.sh >/dev/null
  bazel build -c opt //clocksyncd:clocksyncd //tools/cluster_monitor:cluster_monitor >&2
  bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
fi
[[ -n "$bin" ]] || { echo "soak.sh: --no_build needs --bin_dir" >&2; exit 2; }
[[ -n "$work" ]] || work="$(mktemp -d /tmp/clocksync-soak.XXXXXX)"
mkdir -p "$work"
stop_all() {
  [[ -f "$work/pids" ]] || return 0
  while read -r _ pid; do kill -CONT "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true; done <"$work/pids"
  pkill -TERM -f -- "--shm_path=$work/" 2>/dev/null || true
}
trap stop_all EXIT
echo "soak.sh: $minutes minutes, $nodes daemons, logs and samples in $work"
/usr/bin/python3 deploy/soak.py --bin_dir="$bin" --cluster="$PWD/deploy/local_cluster.sh" \
  --proto="$PWD/proto/clocksync.proto" --work_dir="$work" --minutes="$minutes" --nodes="$nodes"
