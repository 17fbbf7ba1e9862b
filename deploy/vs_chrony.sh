#!/usr/bin/env bash
# clocksyncd beside chrony, on the same link, against the same truth.
#
#   deploy/vs_chrony.sh [--link=loopback|veth] [--duration=120] [--warmup=30]
#                       [--runs=1] [--probe_interval=62.5ms] [--no_build]
#                       [--bin_dir=DIR] [--keep]
#
# Everything runs in private network namespaces (root needed): a master
# and one node of ours, and a chrony server with two chrony clients, one in
# interleaved mode (xleave) and one in basic mode, all polling 1/interval.
# With --link=loopback they share one namespace's loopback; with
# --link=veth the servers sit in one namespace and the clients in another,
# joined by a veth pair. Every daemon reads the same host clock, so the true
# offset is 0 and each one's error is what it believes:
#   ours:   the node's global time minus the master's at the same raw instant
#           (tools/cluster_monitor reads both segments), bound = its
#           published half-width;
#   chrony: `chronyc tracking`'s System time (chronyd -x never touches the
#           clock), bound = root distance (root delay / 2 + root dispersion).
# Each is sampled once a second after --warmup seconds, for --duration
# seconds, --runs times. Prints a table and the FIGURE lines:
#   FIGURE vs_chrony_rms_ratio <ours / chrony-xleave> x
#   FIGURE vs_chrony_{ours,xleave,basic}_{rms,max,bound_mean,min_rtt}_ns
# and each one's bound violations. Exits 0 when everything ran (whatever
# the figures), 1 when something did not start, 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."

link=loopback duration=120 warmup=30 runs=1 interval=62.5ms build=1 bin="" keep=0
for arg in "$@"; do
  case "$arg" in
    --link=*) link="${arg#*=}" ;;
    --duration=*) duration="${arg#*=}" ;;
    --warmup=*) warmup="${arg#*=}" ;;
    --runs=*) runs="${arg#*=}" ;;
    --probe_interval=*) interval="${arg#*=}" ;;
    --no_build) build=0 ;;
    --bin_dir=*) bin="${arg#*=}" ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "vs_chrony.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$link" == loopback || "$link" == veth ]] ||
  { echo "vs_chrony.sh: --link must be loopback or veth, got '$link'" >&2; exit 2; }
for v in duration warmup runs; do
  [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] ||
    { echo "vs_chrony.sh: --$v must be a whole number >= 1, got '${!v}'" >&2; exit 2; }
done
# chrony polls in powers of two seconds: the interval must be one.
poll=$(python3 -c '
import math, re, sys
m = re.fullmatch(r"([0-9.]+)(ms|s)", sys.argv[1])
if not m: sys.exit(1)
s = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
p = round(math.log2(s))
sys.exit(1) if abs(2 ** p - s) > 1e-9 or p < -6 else print(p)' "$interval") ||
  { echo "vs_chrony.sh: --probe_interval must be a power of two seconds (62.5ms, 125ms, 1s; >= 15.625ms), got '$interval'" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "vs_chrony.sh: needs root (network namespaces)" >&2; exit 2; }
command -v chronyd >/dev/null && command -v chronyc >/dev/null ||
  { echo "vs_chrony.sh: chrony is missing (deploy/setup.sh installs it)" >&2; exit 1; }

if [[ $build == 1 ]]; then
  deploy/setup.sh >/dev/null
  bazel build -c opt //clocksyncd:clocksyncd //tools/cluster_monitor:cluster_monitor \
    //tools/clocksyncctl:clocksyncctl >&2
  bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
fi
daemon="$bin/clocksyncd/clocksyncd"
monitor="$bin/tools/cluster_monitor/cluster_monitor"
ctl="$bin/tools/clocksyncctl/clocksyncctl"
for b in "$daemon" "$monitor" "$ctl"; do
  [[ -x "$b" ]] || { echo "vs_chrony.sh: no $b (build it, or give --bin_dir)" >&2; exit 2; }
done

work="$(mktemp -d /tmp/clocksync-vs-chrony.XXXXXX)"
# chronyd refuses a command socket in a directory others may enter.
sockets="$work/sockets"
mkdir -m 0700 "$sockets"
ns_server="csvs-s$$" ns_client="csvs-c$$"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  ip netns del "$ns_server" 2>/dev/null || true
  ip netns del "$ns_client" 2>/dev/null || true
  if [[ $keep == 1 ]]; then echo "vs_chrony.sh: logs kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns_server"
ip -n "$ns_server" link set lo up
if [[ $link == veth ]]; then
  ip netns add "$ns_client"
  ip -n "$ns_client" link set lo up
  ip link add "csvs-a$$" netns "$ns_server" type veth peer name "csvs-b$$" netns "$ns_client"
  ip -n "$ns_server" addr add 10.199.0.1/24 dev "csvs-a$$"
  ip -n "$ns_client" addr add 10.199.0.2/24 dev "csvs-b$$"
  ip -n "$ns_server" link set "csvs-a$$" up
  ip -n "$ns_client" link set "csvs-b$$" up
  server_addr=10.199.0.1 client_addr=10.199.0.2
else
  ns_client="$ns_server"
  server_addr=127.0.0.1 client_addr=127.0.0.1
fi
# (Background daemons are started with `ip netns exec` itself, not through
# these functions, so that $! is the daemon and cleanup stops it.)
in_server() { ip netns exec "$ns_server" "$@"; }
in_client() { ip netns exec "$ns_client" "$@"; }

# chronyd: -x never touches the clock, -d stays in the foreground and logs
# to stderr, -u root keeps its files in our directory.
start_chrony() {  # NAME NETNS CONFIG_LINES...
  local name="$1" ns="$2"; shift 2
  printf '%s\n' "$@" "cmdport 0" "bindcmdaddress $sockets/$name.sock" \
    "pidfile $work/$name.pid" >"$work/$name.conf"
  ip netns exec "$ns" chronyd -x -d -u root -f "$work/$name.conf" \
    >"$work/$name.log" 2>&1 &
  pids+=($!)
}

summarize() {  # FILE (lines "error_ns bound_ns rtt_ns") -> "rms max bound_mean min_rtt violations n"
  awk '{ n++; s += $1 * $1; a = $1 < 0 ? -$1 : $1; if (a > m) m = a; b += $2;
         if ($3 > 0 && (r == 0 || $3 < r)) r = $3; if (a > $2) v++ }
       END { if (n == 0) { print "nan nan nan nan 0 0"; exit }
             printf "%.0f %.0f %.0f %.0f %d %d\n", sqrt(s / n), m, b / n, r, v, n }' "$1"
}

: >"$work/ours.samples"; : >"$work/xleave.samples"; : >"$work/basic.samples"
for ((run = 1; run <= runs; ++run)); do
  echo "== run $run of $runs: $link, 1 probe per $interval, ${warmup} s warm-up, ${duration} s measured" >&2
  port=$((20000 + RANDOM % 20000))
  ip netns exec "$ns_server" "$daemon" --master --node_id=master --listen="$server_addr:$port" \
    --grpc_listen="$server_addr:$((port + 1))" --shm_path="$work/master.shm" \
    >"$work/master.log" 2>&1 &
  pids+=($!)
  ip netns exec "$ns_client" "$daemon" --node_id=n1 --parent="$server_addr:$port" \
    --listen="$client_addr:$((port + 2))" --grpc_listen="$client_addr:$((port + 3))" \
    --shm_path="$work/n1.shm" --probe_interval="$interval" >"$work/n1.log" 2>&1 &
  pids+=($!)
  start_chrony server "$ns_server" "local stratum 1" "allow all" "port $((port + 4))" \
    "bindaddress $server_addr"
  start_chrony xleave "$ns_client" "port 0" \
    "server $server_addr port $((port + 4)) minpoll $poll maxpoll $poll iburst xleave"
  start_chrony basic "$ns_client" "port 0" \
    "server $server_addr port $((port + 4)) minpoll $poll maxpoll $poll iburst"
  sleep 2
  [[ -e "$work/master.shm" && -e "$work/n1.shm" ]] ||
    { echo "vs_chrony.sh: clocksyncd did not start (see --keep logs)" >&2; cat "$work"/*.log >&2; exit 1; }

  # chrony, sampled once a second during the measured part.
  (
    sleep "$warmup"
    for ((i = 0; i < duration; ++i)); do
      for mode in xleave basic; do
        # tracking CSV: 5 system time (s), 11 root delay (s), 12 root dispersion (s)
        line=$(chronyc -c -h "$sockets/$mode.sock" tracking 2>/dev/null || true)
        delay=$(chronyc -h "$sockets/$mode.sock" ntpdata "$server_addr" 2>/dev/null |
                awk -F': *' '/^Peer delay/ { print $2 + 0 }' || true)
        [[ -n "$line" ]] && echo "$line" | awk -F, -v d="${delay:-0}" \
          'NF >= 12 { printf "%.0f %.0f %.0f\n", $5 * 1e9, ($11 / 2 + $12) * 1e9, d * 1e9 }' \
          >>"$work/$mode.samples"
      done
      sleep 1
    done
  ) &
  sampler=$!
  "$monitor" --master="$work/master.shm" --nodes="n1:1:$work/n1.shm" --json \
    --duration_s=$((warmup + duration)) --warmup_s="$warmup" >"$work/ours.json"
  wait "$sampler" || true
  rtt=$(in_client "$ctl" --target="$client_addr:$((port + 3))" status --json 2>/dev/null |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["status"].get("min_round_trip_ns", 0))' || echo 0)
  python3 - "$work/ours.json" "$rtt" >>"$work/ours.runs" <<'EOF'
import json, sys
n = json.load(open(sys.argv[1]))["nodes"][0]
print(n["rms_error_ns"], n["max_abs_error_ns"], n["mean_bound_ns"], sys.argv[2],
      n["bound_violations"], n["checks"])
EOF
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
  rm -f "$sockets"/*.sock "$work"/*.pid
done

# Ours over all runs: RMS of the per-run RMS weighted by checks.
read -r o_rms o_max o_bound o_rtt o_viol o_n < <(awk '
  { n += $6; s += $1 * $1 * $6; if ($2 > m) m = $2; b += $3 * $6; v += $5;
    if ($4 > 0 && (r == 0 || $4 < r)) r = $4 }
  END { printf "%.0f %.0f %.0f %.0f %d %d\n", n ? sqrt(s / n) : 0, m, n ? b / n : 0, r, v, n }' \
  "$work/ours.runs")
read -r x_rms x_max x_bound x_rtt x_viol x_n < <(summarize "$work/xleave.samples")
read -r b_rms b_max b_bound b_rtt b_viol b_n < <(summarize "$work/basic.samples")

printf '\n%-18s %10s %10s %14s %12s %11s %8s\n' "" rms_ns max_ns bound_mean_ns min_rtt_ns violations samples
printf '%-18s %10s %10s %14s %12s %11s %8s\n' clocksyncd "$o_rms" "$o_max" "$o_bound" "$o_rtt" "$o_viol" "$o_n"
printf '%-18s %10s %10s %14s %12s %11s %8s\n' "chrony (xleave)" "$x_rms" "$x_max" "$x_bound" "$x_rtt" "$x_viol" "$x_n"
printf '%-18s %10s %10s %14s %12s %11s %8s\n' "chrony (basic)" "$b_rms" "$b_max" "$b_bound" "$b_rtt" "$b_viol" "$b_n"
echo
if [[ "$x_n" -gt 0 && "$x_rms" != 0 && "$o_n" -gt 0 ]]; then
  awk -v o="$o_rms" -v x="$x_rms" 'BEGIN { printf "FIGURE vs_chrony_rms_ratio %.3f x\n", o / x }'
else
  echo "vs_chrony.sh: no samples from one side (chrony synchronized? see --keep logs)" >&2
  exit 1
fi
for who in ours:o xleave:x basic:b; do
  name="${who%%:*}" p="${who##*:}"
  for f in rms max bound rtt; do
    v="${p}_${f}"
    label=$f; [[ $f == bound ]] && label=bound_mean; [[ $f == rtt ]] && label=min_rtt
    echo "FIGURE vs_chrony_${name}_${label}_ns ${!v} ns"
  done
done
