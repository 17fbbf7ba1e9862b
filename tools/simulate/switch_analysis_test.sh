#!/bin/bash
# tools/simulate/switch_analysis_test.sh: //tools/simulate:switch_analysis
# on two seeds of 102 and its wandering variant: the table has a row per
# switch time, a wandering clock costs more the later its wander is seen
# (the longest window is far worse there), and bad flags exit 2 naming
# the value.
set -euo pipefail
bin="${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/simulate/switch_analysis"
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$bin" --seeds=2 --switch_s=60,90 --detect_s=150,300,400)
echo "$out"
grep -q '^102-large-offset-linear: best fixed window' <<<"$out" ||
  fail "no line for the linear scenario"
grep -q '^102-large-offset-linear/wander=1: best fixed window' <<<"$out" ||
  fail "no line for the wandering scenario"
for t in 60 90; do
  row=$(grep "^| $t |" <<<"$out") || fail "no row for T = $t s"
  # | T | linear | D=150 | D=300 | D=400 |
  read -r lin d150 d300 d400 < <(awk -F'|' '{print $3, $4, $5, $6}' <<<"$row")
  awk -v a="$d150" -v b="$d300" -v c="$d400" 'BEGIN { exit !(a < b && b < c) }' ||
    fail "T = $t s: the wandering clock's ratio should grow with D: $d150 $d300 $d400"
  awk -v l="$lin" 'BEGIN { exit !(l > 0.5 && l < 3) }' ||
    fail "T = $t s: implausible ratio on the linear clock: $lin"
done

set +e
err=$("$bin" --seeds=0 2>&1); rc=$?
[[ $rc == 2 && $err == *"--seeds must be >= 1 (got 0)"* ]] ||
  fail "--seeds=0: rc $rc, '$err'"
err=$("$bin" --switch_s=60,x 2>&1); rc=$?
[[ $rc == 2 && $err == *"'x' is not a time in seconds"* ]] ||
  fail "--switch_s=60,x: rc $rc, '$err'"
err=$("$bin" --linear=no-such 2>&1); rc=$?
[[ $rc == 2 && $err == *"no scenario named 'no-such'"* ]] ||
  fail "--linear=no-such: rc $rc, '$err'"
echo PASS
