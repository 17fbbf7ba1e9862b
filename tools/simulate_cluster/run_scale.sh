#!/bin/bash
# tools/simulate_cluster/run_scale.sh: the long forms of the cluster
# simulator behind docs/SCALE.md: error growth with depth at 1k/10k/100k
# nodes and fan-out 4/16/64, a churn run (1 % killed per minute, a rack
# failure, a partition), the loopback calibration and the probe-rate /
# window sweep; JSON reports in OUT, then the plots (plot_scale.py).
#
#   tools/simulate_cluster/run_scale.sh [--out=DIR] [--quick] [--only=NAME]
#
# --quick runs 1k and 10k only (minutes, not hours); --only runs one part:
# depth, churn, takeover, calibration, rate, perf. Every report also goes to
# OUT/NAME.txt, whose last lines are the FIGURE lines.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=/tmp/clocksync_scale
QUICK=0
ONLY=""
for arg in "$@"; do
  case "$arg" in
    --out=*) OUT="${arg#*=}" ;;
    --quick) QUICK=1 ;;
    --only=*) ONLY="${arg#*=}" ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "run_scale.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
# SIM=path runs that binary instead of building one.
if [[ -z "${SIM:-}" ]]; then
  bazel build -c opt //tools:simulate_cluster >&2
  SIM=bazel-bin/tools/simulate_cluster/simulate_cluster
fi

run() {  # NAME ARGS...
  local name="$1"; shift
  echo "== $name: $*" >&2
  /usr/bin/time -f "$name: %e s wall, %U s user, %M KB peak" \
    "$SIM" --json="$OUT/$name.json" "$@" > "$OUT/$name.txt" 2> "$OUT/$name.time" || {
      cat "$OUT/$name.time" >&2; return 1; }
  tail -3 "$OUT/$name.txt" >&2
  tail -1 "$OUT/$name.time" >&2
}

want() { [[ -z "$ONLY" || "$ONLY" == "$1" ]]; }

SIZES=(1000 10000 100000)
[[ $QUICK == 1 ]] && SIZES=(1000 10000)

if want depth; then
  for n in "${SIZES[@]}"; do
    for f in 4 16 64; do
      # 1k: 600 s, errors over the last 300 s (the 300-s window full);
      # 10k and 100k: 400 s, errors over the last 200 s. No clock steps
      # (the churn run has them).
      d=600 w=300
      [[ $n -ge 10000 ]] && d=400 w=200
      run "depth_n${n}_f${f}" --nodes=$n --fanout=$f --duration_s=$d --warmup_s=$w --seed=1 \
        --steps_per_node_hour=0
    done
  done
fi

if want churn; then
  n=1000
  run "churn_n${n}" --nodes=$n --fanout=16 --duration_s=900 --warmup_s=300 --seed=2 \
    --kill_pct_per_min=1 --restart_after_s=60 --rack_failure_at_s=420 \
    --partition_at_s=600 --partition_s=30 --series_bucket_s=5
fi

if want takeover; then
  # The master dies for good at 300 s; one of 3 standbys takes over.
  n=10000
  run "takeover_n${n}" --nodes=$n --fanout=16 --duration_s=900 --warmup_s=200 --seed=6 \
    --standbys=3 --master_failure_at_s=300 --steps_per_node_hour=0 --series_bucket_s=5
fi

if want calibration; then
  # The README's demo: 12 nodes under a master, 3 children each, loopback,
  # 10 probes/s, +-100 ppm and wander; errors over 60 s after 10 s.
  run calibration_loopback --nodes=12 --fanout=3 --duration_s=70 --warmup_s=10 \
    --probe_interval_s=0.1 --network=loopback --seed=3 --sine_ppb=0 --steps_per_node_hour=0
fi

if want rate; then
  # chrony's default network model: which probe rate and window keep the
  # deepest nodes within 10 us? 1,000 nodes at fan-out 4: depth 5-6, as
  # deep as 100k at fan-out 16.
  for p in 1 0.25; do
    for w in 300 60; do
      run "rate_p${p}_w${w}" --nodes=1000 --fanout=4 --duration_s=600 --warmup_s=300 \
        --probe_interval_s=$p --window_s=$w --network=chrony --seed=4
    done
  done
fi

if want perf; then
  run perf_n10000_p10 --nodes=10000 --fanout=16 --duration_s=600 --probe_interval_s=0.1 --seed=5
  [[ $QUICK == 1 ]] || run perf_n100000_p1 --nodes=100000 --fanout=16 --duration_s=3600 --seed=5
  [[ $QUICK == 1 ]] || run perf_n100000_p1_fixed --nodes=100000 --fanout=16 --duration_s=3600 \
    --window_levels=1 --seed=5
fi

/usr/bin/python3 tools/simulate_cluster/plot_scale.py --in="$OUT" --out=docs >&2 || true
