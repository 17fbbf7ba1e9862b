#!/usr/bin/env bash
# tests/reload_test.sh: runs tests/reload_test.py (SIGHUP changes the probe
# key live; bad files change nothing) against the binaries Bazel built.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="$TEST_TMPDIR/reload"
mkdir -p "$work"
python3 "$root/tests/reload_test.py" "$root" "$work"
