#!/bin/bash
# tools/simulate/selection_timeline_test.sh: //tools/simulate:selection_timeline
# on two scenarios whose choices are known: 102 (a linear clock) ends
# answering from the longest window, 103 (loopback, wandering as the
# allowance says) from the shortest; a row per interval, 102's lean
# towards the longest level before its verdict, the whole run's
# line (the accuracy table's figures for that seed), a random scenario by
# index, and bad flags exit 2 naming the value.
set -euo pipefail
bin="${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/simulate/selection_timeline"
table="${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/simulate/accuracy_table"
fail() { echo "FAIL: $*" >&2; exit 1; }

# | until s | 37.5 s | 75 s | 150 s | 300 s | 600 s | adaptive | / best |
# answers | home | ...
field() { awk -F'|' -v f="$2" '{gsub(/ /, "", $f); print $f}' <<<"$1"; }

out=$("$bin" --scenario=102-large-offset-linear --every_s=60)
echo "$out"
rows=$(grep -c '^| [0-9]' <<<"$out")
# The first minute is not counted (kAccuracyWarmupNs): no row.
[[ $rows == 9 ]] || fail "102 (600 s) in 60 s rows: $rows rows, not 9"
last=$(grep '^| 600 |' <<<"$out") || fail "102: no row until 600 s"
[[ $(field "$last" 10) == 600 && $(field "$last" 11) == 600 ]] ||
  fail "102: the linear clock should end on the 600 s window: $last"
grep -q '^after the first minute: 37.5 s [0-9.]* 75 s .* adaptive [0-9.]* ns$' \
  <<<"$out" || fail "102: no whole-run line"
# Before the verdict its short home leans towards the longest level (the
# samples' probability of a linear clock, strictly between 0 and 1);
# once the longest window is the home there is nothing to lean towards.
grep -q '^| 120 |.*| lean 0\.[0-9][0-9] |$' <<<"$out" ||
  fail "102: the home should lean towards the longest level at 120 s"
[[ $last == *'| - |' ]] || fail "102: no lean once the home is the longest: $last"
# The whole run's figures are the accuracy table's for that seed.
read -r w600 adaptive < <(sed -n 's/^after the first minute:.* 600 s \([0-9.]*\) adaptive \([0-9.]*\) ns$/\1 \2/p' <<<"$out")
# (The table exits 1: 102 misses its target.)
table_out=$("$table" --seeds=1 --scenarios=102-large-offset-linear || true)
row=$(grep '^| 102-large-offset-linear |' <<<"$table_out") ||
  fail "no table row for 102: $table_out"
table_600=$(field "$row" 7 | tr -d '*')
table_adaptive=$(field "$row" 8)
awk -v a="$w600" -v b="$table_600" -v c="$adaptive" -v d="$table_adaptive" \
  'BEGIN { r = (a < 10) ? 10 : 1; exit !(int(a * r + 0.5) == int(b * r + 0.5) && int(c * r + 0.5) == int(d * r + 0.5)) }' ||
  fail "102: 600 s $w600 and adaptive $adaptive ns, the table $table_600 and $table_adaptive"

out=$("$bin" --scenario=103-loopback-10hz --every_s=300)
echo "$out"
last=$(grep '^| [0-9]' <<<"$out" | tail -1)
[[ $(field "$last" 10) == 37.5 ]] ||
  fail "103: the wandering loopback clock should end on the 37.5 s level: $last"
# Over the run the adaptive estimator is far better than the 600 s window.
read -r w600 adaptive < <(sed -n 's/^after the first minute:.* 600 s \([0-9.]*\) adaptive \([0-9.]*\) ns$/\1 \2/p' <<<"$out")
awk -v a="$adaptive" -v l="$w600" 'BEGIN { exit !(a > 0 && a < l / 3) }' ||
  fail "103: adaptive $adaptive ns against 600 s $w600 ns"

# A random scenario by its index, as accuracy_table --random=40 draws it.
out=$("$bin" --scenario=r11 --random_seed=3 --every_s=300)
grep -q '^r11 w=[0-9.]* .*, seed 0: RMS error' <<<"$out" ||
  fail "r11 of random seed 3: no title line: $out"

set +e
err=$("$bin" --scenario=r40 --random_seed=3 2>&1); rc=$?
[[ $rc == 2 && $err == *"no scenario named 'r40' among the random ones"* ]] ||
  fail "--scenario=r40 --random_seed=3: rc $rc, '$err'"
err=$("$bin" --seed=-1 2>&1); rc=$?
[[ $rc == 2 && $err == *"--seed must be >= 0 (got -1)"* ]] ||
  fail "--seed=-1: rc $rc, '$err'"
err=$("$bin" --every_s=0 2>&1); rc=$?
[[ $rc == 2 && $err == *"--every_s must be >= 1 (got 0)"* ]] ||
  fail "--every_s=0: rc $rc, '$err'"
err=$("$bin" --scenario=no-such 2>&1); rc=$?
[[ $rc == 2 && $err == *"no scenario named 'no-such'"* ]] ||
  fail "--scenario=no-such: rc $rc, '$err'"
echo PASS
