#!/bin/bash
# The view end to end on a synthetic run of any size (default 100 M events
# on 64 ranks; tools/trace/make_large_trace.cc writes trace/synthetic_run.h's
# run, the one trace/lod_benchmark.cc indexes, as raw archives). A manual run, not a
# test (it takes minutes and several GB of disk and memory):
#
#   tools/trace/view_large_run.sh [WORK_DIR] [EVENTS] [RANKS]
#   REUSE=1 tools/trace/view_large_run.sh WORK_DIR   (its archives again)
#
# Measures: writing the archives; `view --out` with an empty index cache
# (every index built: the tool prints each one's build and write time, the
# page's size and write time), its wall and CPU time and peak memory; the
# same again with the indexes cached; `view --serve` and one /lod query
# of the whole run and one of 1/1000 of it, with their sizes and times.
# Prints FIGURE lines (docs/FIGURES.md, docs/VIEW.md).
set -euo pipefail

WORK="${1:-/tmp/clocksync-view-large}"
EVENTS="${2:-100000000}"
RANKS="${3:-64}"
cd "$(dirname "$0")/../.."
bazel build ${BAZEL_FLAGS:-} -c opt //tools/trace:clocksync-trace //tools/trace:make_large_trace >&2
TOOL="$PWD/bazel-bin/tools/trace/clocksync-trace"
MAKE="$PWD/bazel-bin/tools/trace/make_large_trace"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
if [[ "${REUSE:-}" == 1 && -s "$WORK/archives" ]]; then
  # REUSE=1: the archives of an earlier run, a new index cache.
  rm -rf "$WORK/idx"
else
  rm -rf "$WORK"
  mkdir -p "$WORK"
  start=$(date +%s.%N)
  "$MAKE" "$WORK" --events="$EVENTS" --ranks="$RANKS" > "$WORK/archives"
  gen_s=$(echo "$(date +%s.%N) - $start" | bc)
  echo "archives: $(wc -l < "$WORK/archives") written in ${gen_s} s, $(du -sb "$WORK" | cut -f1) bytes"
fi
mapfile -t ARCHIVES < "$WORK/archives"

run_view() {  # $1: label; the rest: flags
  local label="$1"
  shift
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/$label.time" \
    "$TOOL" view --index_dir="$WORK/idx" "$@" "${ARCHIVES[@]}" 2> "$WORK/$label.err"
  read -r wall user sys rss_kb < "$WORK/$label.time"
  echo "$label: ${wall} s wall, $(echo "$user + $sys" | bc) s CPU, peak ${rss_kb} KB"
  sed 's/^/  /' "$WORK/$label.err"
}

run_view first --out="$WORK/run.html"
first_wall=$wall
run_view cached --out="$WORK/run.html"
cached_wall=$wall
html_bytes=$(stat -c %s "$WORK/run.html")
index_bytes=$(du -cb "$WORK"/idx/*.lodidx | tail -1 | cut -f1)
build_s=$(grep -o "online: index .*(built in [0-9.]* s" "$WORK/first.err" | grep -o "[0-9.]* s$" | cut -d' ' -f1)
html_s=$(grep -o "run.html ([0-9]* bytes in [0-9.]* s" "$WORK/cached.err" | grep -o "[0-9.]* s$" | cut -d' ' -f1)

# --serve on a free port; one query of the whole run, one of 1/1000 of it.
"$TOOL" view --index_dir="$WORK/idx" --serve=127.0.0.1:0 "${ARCHIVES[@]}" 2> "$WORK/serve.err" &
server=$!
trap 'kill "$server" 2> /dev/null || true' EXIT
for _ in $(seq 2400); do  # reading 100 M events takes minutes
  grep -q "serving http" "$WORK/serve.err" && break
  sleep 0.5
done
url=$(grep -o "http://[0-9.:]*/" "$WORK/serve.err")
span=$(python3 -c "
import json, re
page = open('$WORK/run.html').read()
m = json.loads(re.search(r'<script id=\"model\" type=\"application/json\">(.*?)</script>', page, re.S).group(1))
print(m['corrections']['online']['span_ns'])")
query() {  # $1 t0, $2 t1
  curl -s -o "$WORK/lod.json" -w "%{time_total} %{size_download}" \
    "${url}lod?t0=$1&t1=$2&px=1600&correction=online"
  echo
}
read -r whole_s whole_bytes < <(query 0 "$span")
read -r zoom_s zoom_bytes < <(query $((span / 2)) $((span / 2 + span / 1000)))
kill "$server"
wait "$server" 2> /dev/null || true
trap - EXIT
echo "serve: the whole run's /lod ${whole_bytes} bytes in ${whole_s} s, 1/1000 of it ${zoom_bytes} bytes in ${zoom_s} s"

echo "FIGURE view_100m_first_s ${first_wall} s"
echo "FIGURE view_100m_cached_s ${cached_wall} s"
echo "FIGURE view_100m_index_build_s ${build_s} s"
echo "FIGURE view_100m_html_write_s ${html_s} s"
echo "FIGURE view_100m_html_bytes ${html_bytes} bytes"
echo "FIGURE view_100m_index_bytes ${index_bytes} bytes"
echo "FIGURE view_100m_lod_query_whole_s ${whole_s} s"
echo "FIGURE view_100m_lod_query_zoom_s ${zoom_s} s"
