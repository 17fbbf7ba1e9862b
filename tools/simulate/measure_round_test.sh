#!/bin/bash
# Tests measure_round.sh (with a stand-in accuracy_table that writes a
# fixed table) and compare_rounds.py on two such directories.
set -euo pipefail

measure="$TEST_SRCDIR/$TEST_WORKSPACE/tools/simulate/measure_round.sh"
compare="$TEST_SRCDIR/$TEST_WORKSPACE/tools/simulate/compare_rounds.py"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; exit 1; }

# The runs of each set, by name.
"$measure" --dry_run --set=core "$tmp/unused" >"$tmp/core.txt"
[[ $(wc -l <"$tmp/core.txt") == 16 ]] || fail "core set: $(cat "$tmp/core.txt")"
grep -qx 'r6: accuracy_table --random=40 --random_seed=6' "$tmp/core.txt" ||
  fail "core set lacks r6"
"$measure" --dry_run --set=all "$tmp/unused" >"$tmp/all.txt"
[[ $(wc -l <"$tmp/all.txt") == 31 ]] || fail "all set: $(wc -l <"$tmp/all.txt") runs"

# Bad arguments name what is wrong.
for args in "--set=nosuch $tmp/x" "--jobs=0 $tmp/x" "--frobnicate $tmp/x" ""; do
  # shellcheck disable=SC2086
  if "$measure" $args >/dev/null 2>"$tmp/err.txt"; then
    fail "measure_round.sh $args succeeded"
  fi
done
"$measure" --set=nosuch "$tmp/x" 2>"$tmp/err.txt" || true
grep -q "unknown --set 'nosuch'" "$tmp/err.txt" || fail "no message for a bad --set"
"$measure" --accuracy_table="$tmp/none" "$tmp/x" 2>"$tmp/err.txt" || true
grep -q "no accuracy_table at '$tmp/none'" "$tmp/err.txt" ||
  fail "no message for a missing binary"

# A stand-in accuracy_table: one table whose 102 row depends on NEW, and
# exit 1 (a missed target: a result, not a failure).
fake() {
  cat >"$1" <<EOF
#!/bin/bash
echo "RMS error ns after the first minute, pooled over 10 seed(s) from 0 (\$*)"
echo
echo "| scenario | 37.5 s | 75 s | 150 s | 300 s | 600 s | adaptive | daemon | adaptive / best | adaptive / 300 s | daemon / best | daemon / 300 s | adaptive viol | target |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
echo "| 101-chrony-default | 6022 | 3000 | 1534 | **997** | 1642 | 989 | 990 | 0.992 | 0.992 | 0.993 | 0.993 | 0 | holds |"
echo "| 102-large-offset-linear | 121 | 54 | 35 | 28 | **26** | $2 | 38 | $3 | $4 | 1.479 | 1.338 | 0 | $5 |"
exit 1
EOF
  chmod +x "$1"
}
fake "$tmp/base_table" 34 1.329 1.203 MISSED
fake "$tmp/new_table" 27 1.030 0.964 holds
"$measure" --set=kinds --jobs=3 --accuracy_table="$tmp/base_table" "$tmp/base" >"$tmp/log.txt" ||
  fail "measure_round.sh failed: $(cat "$tmp/log.txt")"
grep -q "4 runs into $tmp/base" "$tmp/log.txt" || fail "no summary: $(cat "$tmp/log.txt")"
for run in k60 k70 k90 k110; do
  grep -q -- "--first_seed=${run#k})" "$tmp/base/$run.txt" || fail "$run ran with the wrong flags"
done
[[ -x "$tmp/base/accuracy_table" ]] || fail "the binary measured is not kept"
"$measure" --set=kinds --accuracy_table="$tmp/new_table" "$tmp/new" >/dev/null

"$compare" "$tmp/base" "$tmp/new" >"$tmp/cmp.txt"
grep -q '^k60   holds   1 ->   2 of   2   geometric mean 1.1482 -> 1.0108$' "$tmp/cmp.txt" ||
  fail "compare: $(cat "$tmp/cmp.txt")"
grep -q '102-large-offset-linear .* 1.329/1.203 -> 1.030/0.964  MISSED -> holds' "$tmp/cmp.txt" ||
  fail "compare does not list 102: $(cat "$tmp/cmp.txt")"
grep -q '101-chrony-default' "$tmp/cmp.txt" && fail "compare lists a row that did not move"
grep -q '^totals:  kinds 4 -> 8 of 8$' "$tmp/cmp.txt" || fail "totals: $(cat "$tmp/cmp.txt")"
"$compare" --column=daemon "$tmp/base" "$tmp/new" >"$tmp/cmp.txt"
grep -q '^totals:  kinds 4 -> 4 of 8$' "$tmp/cmp.txt" || fail "daemon totals: $(cat "$tmp/cmp.txt")"
if "$compare" "$tmp/base" "$tmp/nosuch" 2>"$tmp/err.txt"; then fail "compare of a missing directory succeeded"; fi
grep -q "not a directory: $tmp/nosuch" "$tmp/err.txt" || fail "compare: $(cat "$tmp/err.txt")"
echo PASS
