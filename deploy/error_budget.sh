#!/usr/bin/env bash
# Where a live node's error comes from: timestamps, estimator, slewer,
# publication and read, with user-space and with kernel timestamps.
#
#   deploy/error_budget.sh [--link=loopback|veth] [--duration=60]
#                          [--warmup=20] [--probe_interval=62.5ms]
#                          [--modes=user,kernel] [--no_build] [--bin_dir=DIR]
#                          [--keep]
#
# For each mode a master and one node run in private network namespaces
# (root needed) on this host's clock, so the truth is the master's mapping.
# The node writes every answered probe to --sample_log with the true time
# (--truth_shm, a test feature), and tools/cluster_monitor reads both
# segments once a second. After --warmup seconds, over --duration:
#   timestamps   the sample's own offset, ((t2 − t1) + (t3 − t4)) / 2,
#                minus the truth: what the four stamps say, before any
#                estimation (mean = the stamps' asymmetry; rms; and over
#                the tenth of samples with the shortest round trips);
#   estimator    the node's estimate at each sample's t4 minus the truth
#                (live), and the same samples replayed through
#                //tools/replay with the daemon's estimator settings;
#   slewer       the published mapping at t4 minus the estimate;
#   published    the published mapping at t4 minus the truth;
#   read         what a client reads (cluster_monitor, once a second)
#                minus the truth: the end-to-end error;
#   ramp         the largest change of the estimator's error over any 20 s,
#                ns per s (ppb): a drift estimate held wrong.
# Prints one table row per mode (ns; ramp in ppb) and FIGURE
# error_budget_<mode>_<part> lines. Exits 0 when everything ran, 1 when
# something did not start, 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."

link=loopback duration=60 warmup=20 interval=62.5ms modes=user,kernel build=1 bin="" keep=0
for arg in "$@"; do
  case "$arg" in
    --link=*) link="${arg#*=}" ;;
    --duration=*) duration="${arg#*=}" ;;
    --warmup=*) warmup="${arg#*=}" ;;
    --probe_interval=*) interval="${arg#*=}" ;;
    --modes=*) modes="${arg#*=}" ;;
    --no_build) build=0 ;;
    --bin_dir=*) bin="${arg#*=}" ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error_budget.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$link" == loopback || "$link" == veth ]] ||
  { echo "error_budget.sh: --link must be loopback or veth, got '$link'" >&2; exit 2; }
for v in duration warmup; do
  [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] ||
    { echo "error_budget.sh: --$v must be a whole number >= 1, got '${!v}'" >&2; exit 2; }
done
IFS=, read -r -a mode_list <<<"$modes"
for m in "${mode_list[@]}"; do
  [[ "$m" == user || "$m" == kernel || "$m" == hardware ]] ||
    { echo "error_budget.sh: --modes takes user, kernel, hardware; got '$m'" >&2; exit 2; }
done
[[ $(id -u) -eq 0 ]] || { echo "error_budget.sh: needs root (network namespaces)" >&2; exit 2; }

if [[ $build == 1 ]]; then
  deploy/setup.sh >/dev/null
  bazel build -c opt //clocksyncd:clocksyncd //tools/cluster_monitor:cluster_monitor \
    //tools/replay:replay >&2
  bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
fi
daemon="$bin/clocksyncd/clocksyncd"
monitor="$bin/tools/cluster_monitor/cluster_monitor"
replay="$bin/tools/replay/replay"
for b in "$daemon" "$monitor" "$replay"; do
  [[ -x "$b" ]] || { echo "error_budget.sh: no $b (build it, or give --bin_dir)" >&2; exit 2; }
done

work="$(mktemp -d /tmp/clocksync-budget.XXXXXX)"
ns_server="csbg-s$$" ns_client="csbg-c$$"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  ip netns del "$ns_server" 2>/dev/null || true
  ip netns del "$ns_client" 2>/dev/null || true
  if [[ $keep == 1 ]]; then echo "error_budget.sh: files kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns_server"
ip -n "$ns_server" link set lo up
if [[ $link == veth ]]; then
  ip netns add "$ns_client"
  ip -n "$ns_client" link set lo up
  ip link add "csbg-a$$" netns "$ns_server" type veth peer name "csbg-b$$" netns "$ns_client"
  ip -n "$ns_server" addr add 10.198.0.1/24 dev "csbg-a$$"
  ip -n "$ns_client" addr add 10.198.0.2/24 dev "csbg-b$$"
  ip -n "$ns_server" link set "csbg-a$$" up
  ip -n "$ns_client" link set "csbg-b$$" up
  server_addr=10.198.0.1 client_addr=10.198.0.2
else
  ns_client="$ns_server"
  server_addr=127.0.0.1 client_addr=127.0.0.1
fi

printf '%-8s %12s %12s %12s %12s %12s %10s %12s %12s %10s %10s\n' mode stamps_mean stamps_rms \
  stamps_fast estimator replayed slewer published read min_rtt ramp_ppb >"$work/table"
for mode in "${mode_list[@]}"; do
  echo "== $mode timestamps: $link, 1 probe per $interval, ${warmup} s warm-up, ${duration} s measured" >&2
  port=$((20000 + RANDOM % 20000))
  ip netns exec "$ns_server" "$daemon" --master --node_id=master \
    --listen="$server_addr:$port" --grpc_listen="$server_addr:$((port + 1))" \
    --shm_path="$work/master.shm" \
    --timestamping="$mode" >"$work/master-$mode.log" 2>&1 &
  pids+=($!)
  sleep 0.5
  ip netns exec "$ns_client" "$daemon" --node_id=n1 --parent="$server_addr:$port" \
    --listen="$client_addr:$((port + 2))" --grpc_listen= --shm_path="$work/n1.shm" \
    --probe_interval="$interval" --timestamping="$mode" --enable_test_features \
    --sample_log="$work/samples-$mode.csv" --truth_shm="$work/master.shm" \
    >"$work/n1-$mode.log" 2>&1 &
  pids+=($!)
  sleep 1
  [[ -e "$work/n1.shm" && -e "$work/samples-$mode.csv" ]] ||
    { echo "error_budget.sh: clocksyncd did not start" >&2; cat "$work"/*-"$mode".log >&2; exit 1; }
  "$monitor" --master="$work/master.shm" --nodes="n1:1:$work/n1.shm" --json \
    --duration_s=$((warmup + duration)) --warmup_s="$warmup" >"$work/monitor-$mode.json"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
  # The daemon's default estimator (window 300 s, 4 levels), as it ran live.
  "$replay" --input="$work/samples-$mode.csv" --output="$work/replayed-$mode.csv" \
    --window_s=300 --levels=4 >"$work/replay-$mode.txt" 2>&1 || true
  python3 - "$mode" "$work/samples-$mode.csv" "$work/replayed-$mode.csv" \
    "$work/monitor-$mode.json" "$warmup" >>"$work/table" <<'PY'
import csv, json, math, sys
mode, samples_path, replayed_path, monitor_path, warmup_s = sys.argv[1:6]
rows = list(csv.DictReader(open(samples_path)))
replayed = {r["t4"]: r for r in csv.DictReader(open(replayed_path))}
start = int(rows[0]["t4"]) + int(warmup_s) * 10**9
stamps, rtts, est, rep, slew, pub = [], [], [], [], [], []
for r in rows:
    t1, t2, t3, t4, truth = (int(r[k]) for k in ("t1", "t2", "t3", "t4", "truth_ns"))
    if t4 < start:
        continue
    theta = truth - t4  # global − local at t4 (the master's rate is 1)
    # One-way delays as integers first: global and local times are ~1e18
    # apart, beyond a double's ns resolution.
    forward, backward = t2 - t1 - theta, t4 - t3 + theta
    stamps.append((forward - backward) / 2)
    rtts.append((t4 - t1) - (t3 - t2))
    if r["estimate_ns"]:
        est.append(int(r["estimate_ns"]) - truth)
        if r["published_ns"]:
            slew.append(int(r["published_ns"]) - int(r["estimate_ns"]))
    if r["published_ns"]:
        pub.append(int(r["published_ns"]) - truth)
    p = replayed.get(r["t4"])
    if p and p["estimate_ns"]:
        rep.append(int(p["estimate_ns"]) - truth)
def rms(v):
    return math.sqrt(sum(x * x for x in v) / len(v)) if v else float("nan")
fast = [s for _, s in sorted(zip(rtts, stamps))[: max(1, len(stamps) // 10)]]
# Ramp: the largest change of the live estimator's error over any 20 s, in
# ns per s (ppb): a drift estimate held wrong shows here.
times = [int(r["t4"]) for r in rows if int(r["t4"]) >= start and r["estimate_ns"]]
ramp, j = 0.0, 0
for i in range(len(est)):
    while j < len(est) and times[j] < times[i] + 20 * 10**9:
        j += 1
    if j == len(est):
        break
    ramp = max(ramp, abs(est[j] - est[i]) / ((times[j] - times[i]) / 1e9))
node = json.load(open(monitor_path))["nodes"][0]
vals = [sum(stamps) / len(stamps), rms(stamps), rms(fast), rms(est), rms(rep),
        rms(slew), rms(pub), node["rms_error_ns"], min(rtts), ramp]
print("%-8s %12.0f %12.0f %12.0f %12.0f %12.0f %10.0f %12.0f %12.0f %10.0f %10.1f"
      % ((mode,) + tuple(vals)))
names = ["stamps_mean_ns", "stamps_rms_ns", "stamps_fast_rms_ns", "estimator_rms_ns",
         "replayed_rms_ns", "slewer_rms_ns", "published_rms_ns", "read_rms_ns",
         "min_rtt_ns", "estimator_ramp_ppb"]
with open(samples_path + ".figures", "w") as f:
    for n, v in zip(names, vals):
        f.write("FIGURE error_budget_%s_%s %.1f %s\n"
                % (mode, n, v, "ppb" if n.endswith("ppb") else "ns"))
PY
done
echo
cat "$work/table"
echo
cat "$work"/samples-*.csv.figures
