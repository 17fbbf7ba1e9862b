#!/usr/bin/env bash
# lttng/plugin_symbols_test.sh: libclocksync-lttng.so exports exactly
# lttng_ust_clock_plugin_init, NEEDs no LTTng library (its references to
# LTTng-UST's clock functions are weak, resolved from the process that loads
# it), and loads into a process without LTTng (dlopen) without failing.
set -euo pipefail
so="${TEST_SRCDIR}/${TEST_WORKSPACE}/lttng/libclocksync-lttng.so"
[[ -f "$so" ]] || { echo "FAIL: $so missing"; exit 1; }

exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TW]$/ {print $3}' | sort)
echo "exported: $exported"
[[ "$exported" == "lttng_ust_clock_plugin_init" ]] ||
  { echo "FAIL: exports more or less than lttng_ust_clock_plugin_init"; exit 1; }

needed=$(readelf -d "$so" | awk '/NEEDED/ {print $5}')
echo "needed: $(echo $needed)"
if [[ "$needed" == *lttng* ]]; then
  echo "FAIL: NEEDs an LTTng library"; exit 1
fi

undefined=$(nm -D --undefined-only "$so")
for f in lttng_ust_trace_clock_set_read64_cb lttng_ust_trace_clock_set_freq_cb \
    lttng_ust_trace_clock_set_uuid_cb lttng_ust_trace_clock_set_name_cb \
    lttng_ust_trace_clock_set_description_cb lttng_ust_enable_trace_clock_override; do
  line=$(grep -w "$f" <<<"$undefined" || true)
  [[ "$line" == *" w "* ]] || { echo "FAIL: $f is not a weak reference: '$line'"; exit 1; }
done

# Loaded and initialized in a process without LTTng-UST: says so, no crash.
out=$(python3 - "$so" <<'PY' 2>&1
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.lttng_ust_clock_plugin_init()
print("returned")
PY
)
echo "$out"
[[ "$out" == *"without LTTng-UST"* && "$out" == *returned* ]] ||
  { echo "FAIL: loading without LTTng-UST"; exit 1; }
echo PASS
