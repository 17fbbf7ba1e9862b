#!/usr/bin/env bash
# docs/tracer_env_table_test.sh: docs/TRACER.md lists exactly the tracer's
# CLOCKSYNC_* variables: its "Environment variables" section holds the table
# that //tracer:env_table prints from tracer/options.cc, and no other row.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
doc="$root/docs/TRACER.md"
table="$("$root/tracer/env_table")"

# The section: from its heading to the next one.
section="$(awk '/^## /{inside = ($0 == "## Environment variables")} inside' "$doc")"
if [[ "$section" != *"$table"* ]]; then
  echo "docs/TRACER.md must hold the table generated from tracer/options.cc"
  echo "(bazel run //tracer:env_table); paste this:"
  echo "$table"
  exit 1
fi
documented="$(grep -o '^| `CLOCKSYNC_[A-Z0-9_]*`' <<<"$section" | sort)"
expected="$(grep -o '^| `CLOCKSYNC_[A-Z0-9_]*`' <<<"$table" | sort)"
if [[ "$documented" != "$expected" ]]; then
  echo "rows of docs/TRACER.md's section:"; echo "$documented"
  echo "variables of tracer/options.cc:"; echo "$expected"
  exit 1
fi
echo "1 passed, 0 failed"
