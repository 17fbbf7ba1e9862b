#!/usr/bin/env bash
# tests/service_notify_test.sh: runs tests/service_notify_test.py (watchdog
# pings and STATUS= over a NOTIFY_SOCKET of its own) against the binaries
# Bazel built.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="$TEST_TMPDIR/notify"
mkdir -p "$work"
python3 "$root/tests/service_notify_test.py" "$root" "$work"
