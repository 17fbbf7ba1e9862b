#!/usr/bin/env bash
# The local cluster demo: a master and clocksyncd daemons on loopback that
# arrange themselves in a tree (each started with only --join=<master>), each
# node on its own modeled clock (offsets of seconds, frequencies within
# ±100 ppm, random-walk wander), with a live table of the tree and every
# node's true error (its global time minus the master's at the same host
# instant), bound, drift and samples.
#
#   deploy/local_cluster.sh [--nodes=13] [--max_children=3] [--duration=S]
#                           [--json] [--static] [--auth] [--keep]
#                           [--inject_delay=min=20us,mean=10us]
#                           [--standby=N] [--kill_master_at=S]
#
# --nodes counts every daemon, the master included (2..50). --static pins a
# binary tree with --parent instead (no membership). --auth makes a random
# probe key (<work dir>/probe.key) and gives it to every daemon
# (--probe_key_file): every probe is authenticated. --standby=N makes
# n1..nN master candidates (--master_priority=i: n1 first);
# --kill_master_at=S kills the master (SIGKILL) S seconds after the start:
# a candidate takes over within seconds and the table goes on measuring
# every node against the dead master's last mapping, extrapolated (its
# segment stays behind), marking the new master with its term. Without
# --duration it runs until Ctrl-C; with it, it ends with a summary counted
# after the first 10 s (--json: {"nodes":[{"id","depth","rms_error_ns",
# "max_abs_error_ns","bound_violations","checks"}]}). Every process it
# started is stopped on exit, Ctrl-C included. --keep leaves the logs.
# While it runs: clocksyncctl --target=127.0.0.1:32003 status (node i
# answers on 32000 + i, the master on 32000).
# For tests: --no_build --bin_dir=DIR use prebuilt binaries; --detach
# --work_dir=DIR starts the daemons, writes DIR/pids and DIR/monitor_flags,
# and returns (the caller stops them).
set -euo pipefail
cd "$(dirname "$0")/.."

nodes=13 max_children=3 static=0 duration=0 json=0 delay="" keep=0 auth=0
interval="100ms" base_port=31900 build=1 bin="" work="" detach=0
standby=0 kill_master_at=0
for arg in "$@"; do
  case "$arg" in
    --nodes=*) nodes="${arg#*=}" ;;
    --max_children=*) max_children="${arg#*=}" ;;
    --static) static=1 ;;
    --auth) auth=1 ;;
    --duration=*) duration="${arg#*=}" ;;
    --json) json=1 ;;
    --inject_delay=*) delay="${arg#*=}" ;;
    --probe_interval=*) interval="${arg#*=}" ;;
    --base_port=*) base_port="${arg#*=}" ;;
    --keep) keep=1 ;;
    --no_build) build=0 ;;
    --bin_dir=*) bin="${arg#*=}" ;;
    --work_dir=*) work="${arg#*=}" ;;
    --detach) detach=1 ;;
    --standby=*) standby="${arg#*=}" ;;
    --kill_master_at=*) kill_master_at="${arg#*=}" ;;
    -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "local_cluster.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$nodes" =~ ^[0-9]+$ && "$nodes" -ge 2 && "$nodes" -le 50 ]] ||
  { echo "local_cluster.sh: --nodes must be 2..50, got '$nodes'" >&2; exit 2; }
[[ "$max_children" =~ ^[0-9]+$ && "$max_children" -ge 1 ]] ||
  { echo "local_cluster.sh: --max_children must be >= 1, got '$max_children'" >&2; exit 2; }
[[ "$standby" =~ ^[0-9]+$ && "$standby" -lt "$nodes" ]] ||
  { echo "local_cluster.sh: --standby must be 0..$((nodes - 1)) (candidates among the nodes), got '$standby'" >&2; exit 2; }
[[ "$kill_master_at" =~ ^[0-9]+$ ]] ||
  { echo "local_cluster.sh: --kill_master_at must be whole seconds, got '$kill_master_at'" >&2; exit 2; }
if [[ $kill_master_at != 0 ]]; then
  [[ $static == 0 && $standby -ge 1 ]] ||
    { echo "local_cluster.sh: --kill_master_at needs --standby=N (N >= 1) and no --static" >&2; exit 2; }
  [[ $detach == 0 ]] ||
    { echo "local_cluster.sh: --kill_master_at is for the live demo, not --detach" >&2; exit 2; }
fi
[[ $standby == 0 || $static == 0 ]] ||
  { echo "local_cluster.sh: --standby needs a self-arranging tree (no --static)" >&2; exit 2; }

if [[ $build == 1 ]]; then
  deploy/setup.sh >/dev/null
  bazel build -c opt //clocksyncd:clocksyncd //tools/cluster_monitor:cluster_monitor \
    //tools/clocksyncctl:clocksyncctl >&2
  bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
fi
daemon="$bin/clocksyncd/clocksyncd" monitor="$bin/tools/cluster_monitor/cluster_monitor"
[[ -x "$daemon" && -x "$monitor" ]] ||
  { echo "local_cluster.sh: no clocksyncd/clocksyncd or tools/cluster_monitor/cluster_monitor under '$bin'" >&2; exit 2; }
if [[ -z "$work" ]]; then
  work="$(mktemp -d /tmp/clocksync-cluster.XXXXXX)"
else
  mkdir -p "$work"
fi
pids=()
killer=""
cleanup() {
  trap - EXIT INT TERM
  [[ -n "$killer" ]] && { kill "$killer" 2>/dev/null || true; }
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ $keep == 1 ]]; then echo "logs kept in $work" >&2; else rm -rf "$work"; fi
}
if [[ $detach == 0 ]]; then
  trap cleanup EXIT
  trap 'exit 130' INT TERM
fi

delay_flags=()
[[ -n "$delay" ]] && delay_flags=(--inject_delay="$delay")
auth_flags=()
if [[ $auth == 1 ]]; then
  (umask 077 && od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$work/probe.key")
  auth_flags=(--probe_key_file="$work/probe.key")
fi
# Probes on base_port + i, gRPC status (clocksyncctl) on base_port + 100 + i.
"$daemon" --master --node_id=master --listen="127.0.0.1:$base_port" \
  --grpc_listen="127.0.0.1:$((base_port + 100))" --max_children="$max_children" \
  --shm_path="$work/master.shm" --status_file="$work/master.status" \
  --probe_interval="$interval" "${auth_flags[@]}" >"$work/master.log" 2>&1 &
pids+=($!)
echo "master $!" >"$work/pids"
specs=()
sleep 0.2
for ((i = 1; i < nodes; i++)); do
  if [[ $static == 1 ]]; then
    # A binary tree: node i under node (i-1)/2 (0 is the master).
    parent=$(( (i - 1) / 2 ))
    depth=0; for ((k = i + 1; k > 1; k /= 2)); do depth=$((depth + 1)); done
    place=(--parent="127.0.0.1:$((base_port + parent))")
  else
    # Only the master's address: the tree arranges itself.
    depth=1  # Until the status file says where the node landed.
    place=(--join="127.0.0.1:$((base_port + 100))" --max_children="$max_children")
    # The first --standby nodes are master candidates, n1 the first choice.
    [[ $i -le $standby ]] && place+=(--master_priority="$i")
  fi
  # Offsets within ±2.5 s, frequencies within ±100 ppm, 1 ppb/sqrt(s) wander.
  offset_ms=$(( (i * 1370) % 5000 - 2500 ))
  freq_ppm=$(( (i * 37) % 200 - 100 ))
  "$daemon" --node_id="n$i" "${place[@]}" \
    --listen="127.0.0.1:$((base_port + i))" --shm_path="$work/n$i.shm" \
    --grpc_listen="127.0.0.1:$((base_port + 100 + i))" \
    --status_file="$work/n$i.status" --probe_interval="$interval" \
    --enable_test_features \
    --clock_model="offset=${offset_ms}ms,frequency_ppm=$freq_ppm,wander=1,seed=$i" \
    "${delay_flags[@]}" "${auth_flags[@]}" >"$work/n$i.log" 2>&1 &
  pids+=($!)
  echo "n$i $!" >>"$work/pids"
  specs+=("n$i:$depth:$work/n$i.shm:$work/n$i.status")
  # Arrivals spread a little, as on a real cluster.
  [[ $static == 1 ]] || sleep 0.05
done
# A daemon that cannot start (a port in use, say) exits at once: say why.
sleep 0.5
while read -r name pid; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "local_cluster.sh: daemon $name exited at start:" >&2
    sed 's/^/  /' "$work/$name.log" >&2
    [[ $detach == 1 ]] && cleanup
    exit 1
  fi
done <"$work/pids"
monitor_flags=(--master="$work/master.shm" --nodes="$(IFS=,; echo "${specs[*]}")")
if [[ $detach == 1 ]]; then
  printf '%s\n' "${monitor_flags[@]}" >"$work/monitor_flags"
  exit 0
fi
[[ "$duration" != 0 ]] && monitor_flags+=(--duration_s="$duration")
[[ $json == 1 ]] && monitor_flags+=(--json)
if [[ $kill_master_at != 0 ]]; then
  master_pid=$(awk '$1 == "master" {print $2}' "$work/pids")
  # Its death is the point: no "Killed" report from this shell.
  disown "$master_pid" 2>/dev/null || true
  (
    sleep "$kill_master_at"
    kill -KILL "$master_pid" 2>/dev/null &&
      echo "local_cluster.sh: killed the master (pid $master_pid, SIGKILL) at ${kill_master_at} s; errors stay measured against its last mapping" >&2
  ) &
  killer=$!
fi
"$monitor" "${monitor_flags[@]}"
