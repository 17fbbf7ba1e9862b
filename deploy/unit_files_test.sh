#!/usr/bin/env bash
# deploy/unit_files_test.sh: the systemd units are valid and clocksyncd's
# stays hardened.
#   - `systemd-analyze verify` passes, silently (an unknown or misspelled
#     directive is only a warning there: here it fails), for
#     clocksyncd.service, clocksync-wait.service, clocksync-metrics.service
#     and .timer. verify wants every ExecStart= binary to exist: the units
#     are checked as copies whose /usr/sbin/clocksyncd and
#     /usr/bin/clocksyncctl are the binaries Bazel built, and as they are
#     when those paths are installed. Man pages are not checked (--man=no):
#     the package installs them.
#   - The binaries are where the Debian package puts them (no /usr/local).
#   - clocksyncd.service's exposure (`systemd-analyze security --offline`)
#     is at most 1.5.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
max_exposure=1.5
units=(clocksyncd.service clocksync-wait.service clocksync-metrics.service
       clocksync-metrics.timer)
command -v systemd-analyze >/dev/null ||
  { echo "FAIL: no systemd-analyze (Debian package systemd; deploy/setup.sh installs it)"; exit 1; }
systemd-analyze --version | head -1

if grep -n '/usr/local' "${units[@]/#/$root/deploy/}"; then
  echo "FAIL: a unit still names /usr/local (the package installs to /usr)"
  exit 1
fi
grep -q '^ExecStart=/usr/sbin/clocksyncd ' "$root/deploy/clocksyncd.service" ||
  { echo "FAIL: clocksyncd.service does not run /usr/sbin/clocksyncd"; exit 1; }
grep -q '^ExecStart=/usr/bin/clocksyncctl .* wait$' "$root/deploy/clocksync-wait.service" ||
  { echo "FAIL: clocksync-wait.service does not run /usr/bin/clocksyncctl ... wait"; exit 1; }

# verify DIR: every unit in DIR, no output allowed.
verify() {
  local out status=0
  out=$(cd "$1" && systemd-analyze verify --man=no "${units[@]}" 2>&1) || status=$?
  if [[ $status -ne 0 || -n "$out" ]]; then
    echo "FAIL: systemd-analyze verify in $1 (exit $status):"
    echo "$out"
    exit 1
  fi
  echo "ok: systemd-analyze verify ${units[*]} ($1)"
}
work="$TEST_TMPDIR/units"
mkdir -p "$work"
for unit in "${units[@]}"; do
  sed -e "s#/usr/sbin/clocksyncd#$root/clocksyncd/clocksyncd#g" \
      -e "s#/usr/bin/clocksyncctl#$root/tools/clocksyncctl/clocksyncctl#g" \
      "$root/deploy/$unit" >"$work/$unit"
done
verify "$work"
if [[ -x /usr/sbin/clocksyncd && -x /usr/bin/clocksyncctl ]]; then
  verify "$root/deploy"
else
  echo "(not installed in /usr: the units as they are were not verified)"
fi

# The exposure, as systemd's own threshold check and as a number.
report=$(systemd-analyze security --offline=yes "$root/deploy/clocksyncd.service" 2>&1) || true
exposure=$(sed -n 's/.*Overall exposure level for clocksyncd.service: \([0-9.]*\).*/\1/p' <<<"$report")
[[ -n "$exposure" ]] || { echo "FAIL: no exposure level in:"; echo "$report"; exit 1; }
echo "clocksyncd.service exposure: $exposure (at most $max_exposure)"
threshold=$(awk -v m="$max_exposure" 'BEGIN { printf "%d", m * 10 + 0.5 }')
if ! systemd-analyze security --offline=yes --threshold="$threshold" \
       "$root/deploy/clocksyncd.service" >/dev/null 2>&1 ||
   awk -v e="$exposure" -v m="$max_exposure" 'BEGIN { exit !(e > m) }'; then
  echo "FAIL: exposure $exposure is above $max_exposure; what is open:"
  grep '✗' <<<"$report"
  exit 1
fi
echo PASS
