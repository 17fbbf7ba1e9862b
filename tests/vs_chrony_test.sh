#!/usr/bin/env bash
# Short form of deploy/vs_chrony.sh (the side-by-side benchmark against
# chrony): both sides synchronize over a veth pair between two network
# namespaces, every FIGURE line is printed, and clocksyncd's bound is never
# violated. The figures themselves are not judged here (a 10 s run on a
# shared machine says little); docs/FIGURES.md quotes the long runs.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
out="$TEST_TMPDIR/vs_chrony.out"
"$root/deploy/vs_chrony.sh" --no_build --bin_dir="$root" --link=veth \
  --duration=10 --warmup=10 | tee "$out"
for name in rms_ratio ours_rms_ns ours_bound_mean_ns ours_min_rtt_ns \
            xleave_rms_ns basic_rms_ns; do
  grep -q "^FIGURE vs_chrony_$name " "$out" ||
    { echo "FAIL: no FIGURE vs_chrony_$name" >&2; exit 1; }
done
violations=$(awk '$1 == "clocksyncd" { print $6 }' "$out")
[[ "$violations" == 0 ]] || { echo "FAIL: $violations bound violations" >&2; exit 1; }
echo PASS
