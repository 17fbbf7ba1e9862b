#!/usr/bin/env bash
# deploy/fuzz.sh: builds the libFuzzer harnesses with clang (--config=fuzz,
# in an output base of its own so the gcc builds stay cached) and runs each
# for a while on a scratch copy of its seed corpus.
#
#   deploy/fuzz.sh [--seconds=60] [--jobs=1] [--keep_corpus] [NAME...]
#
# NAME is a harness (packet_fuzzer, segment_fuzzer, ...; all by default).
# Prints per harness `FIGURE fuzz_<name>_execs N execs` and
# `FIGURE fuzz_<name>_seconds S s`, and exits 1 if any found a crash, a
# leak or a timeout, printing the path of the input that caused it (kept
# in the scratch directory, with the fuzzer's log). --keep_corpus copies
# the inputs each run found interesting back into the repo's seeds
# (minimized with -merge=1), for a long run worth keeping.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60 jobs=1 keep=0 names=()
for arg in "$@"; do
  case "$arg" in
    --seconds=*) seconds="${arg#*=}" ;;
    --jobs=*) jobs="${arg#*=}" ;;
    --keep_corpus) keep=1 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown flag '$arg' (see --help)" >&2; exit 2 ;;
    *) names+=("$arg") ;;
  esac
done
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -ge 1 ]] || { echo "fuzz.sh: --seconds must be a positive integer, got '$seconds'" >&2; exit 2; }
[[ "$jobs" =~ ^[0-9]+$ && "$jobs" -ge 1 ]] || { echo "fuzz.sh: --jobs must be a positive integer, got '$jobs'" >&2; exit 2; }

# Every harness: its Bazel package and name (testing/fuzz.bzl).
declare -A package=(
  [packet_fuzzer]=probe
  [segment_fuzzer]=client
  [config_fuzzer]=clocksyncd
  [request_validation_fuzzer]=clocksyncd
  [http_request_fuzzer]=metrics
  [sidecar_fuzzer]=trace
  [event_file_fuzzer]=trace
  [packed_chunk_fuzzer]=trace
  [postmortem_csv_fuzzer]=tools/postmortem
  [replay_fuzzer]=tools/replay
)
((${#names[@]})) || names=(packet_fuzzer segment_fuzzer config_fuzzer request_validation_fuzzer
                           http_request_fuzzer sidecar_fuzzer event_file_fuzzer packed_chunk_fuzzer
                           postmortem_csv_fuzzer replay_fuzzer)
targets=()
for n in "${names[@]}"; do
  [[ -n "${package[$n]:-}" ]] || { echo "fuzz.sh: no harness '$n' (known: ${!package[*]})" >&2; exit 2; }
  targets+=("//${package[$n]}:${n}_fuzzer")
done

deploy/setup.sh >/dev/null
output_base="${HOME:-/root}/.cache/clocksync-fuzz-bazel"
# No convenience symlinks: the workspace's bazel-* links stay on the main
# build (pointed at this output base, `bazel test //...` would walk its
# external repositories through bazel-<directory>).
bazel --output_base="$output_base" build --config=fuzz --symlink_prefix=/ \
  "${targets[@]}" >&2
bin="$(bazel --output_base="$output_base" info --config=fuzz bazel-bin 2>/dev/null)"
work="$(mktemp -d /tmp/clocksync-fuzz.XXXXXX)"
echo "fuzz.sh: ${#names[@]} harnesses, $seconds s each, logs and findings in $work"

status=0
for n in "${names[@]}"; do
  seeds="${package[$n]}/testdata/fuzz/$n"
  corpus="$work/$n/corpus"
  mkdir -p "$corpus" "$work/$n/found"
  cp "$seeds"/* "$corpus"/
  started=$(date +%s)
  result=0
  (cd "$work/$n/found" && "$bin/${package[$n]}/${n}_fuzzer" "$corpus" \
    -max_total_time="$seconds" -jobs="$jobs" -workers="$jobs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/$n/found/" >"$work/$n/log" 2>&1) || result=$?
  elapsed=$(( $(date +%s) - started ))
  execs=$(grep -h "stat::number_of_executed_units" "$work/$n/log" "$work/$n/found"/fuzz-*.log 2>/dev/null |
          awk '{s += $2} END {print s + 0}')
  echo "FIGURE fuzz_${n}_execs $execs execs"
  echo "FIGURE fuzz_${n}_seconds $elapsed s"
  if [[ $result -ne 0 ]] || ls "$work/$n/found"/{crash,leak,timeout,oom}-* >/dev/null 2>&1; then
    echo "fuzz.sh: $n FOUND SOMETHING (exit $result): $(ls "$work/$n/found"/{crash,leak,timeout,oom}-* 2>/dev/null | tr '\n' ' ')"
    echo "  log: $work/$n/log"
    status=1
  fi
  if [[ $keep == 1 ]]; then
    mkdir -p "$work/$n/merged"
    "$bin/${package[$n]}/${n}_fuzzer" -merge=1 "$work/$n/merged" "$seeds" "$corpus" >/dev/null 2>&1 || true
    cp -n "$work/$n/merged"/* "$seeds"/ 2>/dev/null || true
  fi
done
[[ $status -eq 0 ]] && echo "fuzz.sh: nothing found"
exit $status
