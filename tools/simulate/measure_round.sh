#!/bin/bash
# tools/simulate/measure_round.sh: runs the accuracy tables an estimator
# change is judged on (docs/ACCURACY_LOG.md) into one directory, one file
# per run, two runs at a time; compare_rounds.py compares two such
# directories.
#
#   measure_round.sh [--set=core|more|kinds|all] [--jobs=2] \
#       [--accuracy_table=PATH] [--dry_run] OUTDIR
#
# Sets (file names: s = standard, v = variants, k = --kinds, r = --random=40;
# the number is the first seed, or the random seed, each over 10 seeds):
#   core   s0 s10 v0 v10 k0 k10 k20 k30 k80 k100 r1-r6   (~6 min, 2 cores)
#   more   s20-s50 k40 k50 r7-r11                          (~6 min)
#   kinds  k60 k70 k90 k110                                (~3 min)
#   all    the three
# The binary defaults to bazel-bin/tools/simulate/accuracy_table (build it
# with -c opt first); it is copied into OUTDIR, so that a rebuild during
# the run does not change what is measured.
set -euo pipefail

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit "${1:-0}"
}

set_name=core
jobs=2
binary=""
dry_run=0
out=""
for arg in "$@"; do
  case "$arg" in
    --set=*) set_name="${arg#--set=}" ;;
    --jobs=*) jobs="${arg#--jobs=}" ;;
    --accuracy_table=*) binary="${arg#--accuracy_table=}" ;;
    --dry_run) dry_run=1 ;;
    -h|--help) usage 0 ;;
    -*) echo "measure_round.sh: unknown flag '$arg'" >&2; usage 2 >&2 ;;
    *)
      if [[ -n "$out" ]]; then
        echo "measure_round.sh: one output directory only (got '$out' and '$arg')" >&2
        exit 2
      fi
      out="$arg" ;;
  esac
done
if [[ -z "$out" ]]; then
  echo "measure_round.sh: no output directory given" >&2
  usage 2 >&2
fi
if ! [[ "$jobs" =~ ^[1-9][0-9]*$ ]]; then
  echo "measure_round.sh: --jobs must be a positive integer, not '$jobs'" >&2
  exit 2
fi

# Each run: NAME and the accuracy_table flags.
runs=()
core() {
  runs+=("s0" "s10 --first_seed=10" "v0 --variants" "v10 --variants --first_seed=10")
  for f in 0 10 20 30 80 100; do runs+=("k$f --kinds --first_seed=$f"); done
  for r in 1 2 3 4 5 6; do runs+=("r$r --random=40 --random_seed=$r"); done
}
more() {
  for f in 20 30 40 50; do runs+=("s$f --first_seed=$f"); done
  for f in 40 50; do runs+=("k$f --kinds --first_seed=$f"); done
  for r in 7 8 9 10 11; do runs+=("r$r --random=40 --random_seed=$r"); done
}
kinds() {
  for f in 60 70 90 110; do runs+=("k$f --kinds --first_seed=$f"); done
}
case "$set_name" in
  core) core ;;
  more) more ;;
  kinds) kinds ;;
  all) core; more; kinds ;;
  *) echo "measure_round.sh: unknown --set '$set_name' (core, more, kinds, all)" >&2; exit 2 ;;
esac

if [[ "$dry_run" == 1 ]]; then
  for run in "${runs[@]}"; do
    read -r name flags <<<"$run"
    echo "$name: accuracy_table ${flags:-}"
  done
  exit 0
fi

if [[ -z "$binary" ]]; then
  binary="$(dirname "$0")/../../bazel-bin/tools/simulate/accuracy_table"
fi
if [[ ! -x "$binary" ]]; then
  echo "measure_round.sh: no accuracy_table at '$binary' (bazel build -c opt //tools/simulate:accuracy_table)" >&2
  exit 1
fi
mkdir -p "$out"
cp -f "$binary" "$out/accuracy_table"
table="$out/accuracy_table"

# One run; accuracy_table exits 1 when a target is missed (a result, not
# a failure), 2 and above on an error.
measure() {
  local name="$1" flags="$2" rc=0
  # shellcheck disable=SC2086  # flags are words
  "$table" $flags >"$out/$name.txt" 2>&1 || rc=$?
  if ((rc > 1)); then
    echo "measure_round.sh: $name (accuracy_table $flags) failed with exit code $rc; see $out/$name.txt" >&2
    return 1
  fi
}

start=$(date +%s)
running=0
failed=0
for run in "${runs[@]}"; do
  read -r name flags <<<"$run"
  measure "$name" "${flags:-}" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n || failed=$((failed + 1))
    running=$((running - 1))
  fi
done
while ((running > 0)); do
  wait -n || failed=$((failed + 1))
  running=$((running - 1))
done
echo "measure_round.sh: ${#runs[@]} runs into $out in $(($(date +%s) - start)) s"
if ((failed > 0)); then
  echo "measure_round.sh: $failed run(s) failed" >&2
  exit 1
fi
