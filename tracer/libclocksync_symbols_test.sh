#!/usr/bin/env bash
# tracer/libclocksync_symbols_test.sh: libclocksync.so.1 exports exactly the
# functions its public C headers declare (no C++ internals, no Abseil), all
# at version CLOCKSYNC_1, and its soname is libclocksync.so.1.
#   libclocksync_symbols_test.sh LIB HEADER...
set -euo pipefail
lib=$1
shift
fail=0

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [[ "$soname" != libclocksync.so.1 ]]; then
  echo "soname is '$soname', want libclocksync.so.1"; fail=1
fi

# Defined dynamic symbols, without the version node itself.
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' |
  grep -v '^CLOCKSYNC_1$' | sed 's/@@*CLOCKSYNC_1$//' | sort -u)
# Function names the headers declare: identifiers before '(' at the start
# of a declaration line.
declared=$(cat "$@" | grep -oE '^[a-z_][a-z0-9_ *]*[ *](clocksync|cs_trace)_[a-z0-9_]+\(' |
  grep -oE '(clocksync|cs_trace)_[a-z0-9_]+\($' | tr -d '(' | sort -u)

[[ -n "$declared" ]] || { echo "no declarations found in $*"; exit 1; }
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
if [[ -n "$extra" ]]; then
  echo "exported but not in the public headers:"; echo "$extra" | head -20; fail=1
fi
if [[ -n "$missing" ]]; then
  echo "declared but not exported:"; echo "$missing"; fail=1
fi
unversioned=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '@' | grep -v '^CLOCKSYNC_1$' || true)
if [[ -n "$unversioned" ]]; then
  echo "exported without the CLOCKSYNC_1 version:"; echo "$unversioned"; fail=1
fi
count=$(echo "$exported" | wc -l)
if [[ $fail -eq 0 ]]; then echo "ok: $count functions exported, soname $soname"; fi
exit $fail
