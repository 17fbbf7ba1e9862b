#!/bin/bash
# The view in a real browser: headless Chromium (Debian's `chromium`) loads
# `clocksync-trace view`'s page of the synthetic two-process trace.
#   1. --dump-dom of a zoom step given in the URL hash (correction none, the
#      first 20 ms): the drawn <svg> says the correction, the range and a
#      level finer than the whole run's; three rows; function bars inside
#      the plot; message lines, red ones among them (rank 1's clock is 3 ms
#      ahead without a correction); the legend and the profile table.
#   2. --screenshot of the whole run under online: a PNG of the window's
#      size whose drawing has the three rows as bands of colour across the
#      plot, and whose lower part is blank page.
#   3. `view --png` (which runs chromium itself) under none: the same
#      picture, its window --width x --png_height, with red (backward)
#      message lines in it; the temporary page it wrote is gone.
# Before all: `view --png` with a Chromium that does not exist fails with
# exit 1 and says to install chromium (this part runs without chromium).
# Without chromium the rest skips (exit 0) with a message, except under
# CI=true, where it fails: deploy/setup.sh installs chromium.
set -euo pipefail

TOOL="$1"
MAKE="$2"
WORK="${TEST_TMPDIR:-$(mktemp -d)}/view_browser_test"
rm -rf "$WORK"
mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$MAKE" "$WORK" > "$WORK/answers"
# shellcheck disable=SC1090
source "$WORK/answers"

# --- 0. --png without Chromium: a clear error, before anything is built -------
set +e
"$TOOL" view --index_dir="$WORK/idx" --png="$WORK/none.png" --chromium="$WORK/no-chromium" \
  "$rank0" "$rank1" 2> "$WORK/nochromium.err"
code=$?
set -e
[[ $code -eq 1 ]] || fail "--png with a missing chromium: exit $code, want 1"
grep -q "bad flag --png: .*no-chromium not found.*apt-get install chromium" "$WORK/nochromium.err" ||
  fail "--png with a missing chromium: $(cat "$WORK/nochromium.err")"
[[ ! -e "$WORK/none.png" && ! -e "$WORK/idx" ]] || fail "--png without chromium built or wrote something"

CHROMIUM="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "$CHROMIUM" ]]; then
  if [[ "${CI:-}" == "true" ]]; then
    fail "chromium is not installed (deploy/setup.sh installs it)"
  fi
  echo "SKIP: chromium is not installed (apt-get install chromium); the view was not tested in a browser"
  exit 0
fi

"$TOOL" view --index_dir="$WORK/idx" --out="$WORK/run.html" "$rank0" "$rank1" 2> "$WORK/view.err" ||
  fail "view: $(cat "$WORK/view.err")"

# Headless, no GPU, no sandbox (root in CI), its own profile, no D-Bus.
browse() {
  DBUS_SESSION_BUS_ADDRESS=disabled: HOME="$WORK/home" timeout 60 "$CHROMIUM" \
    --headless --disable-gpu --no-sandbox --no-first-run --disable-extensions \
    --user-data-dir="$WORK/profile" --window-size=1400,900 "$@" 2> "$WORK/chromium.err"
}

# --- 1. a zoom step through the URL hash: the DOM -----------------------------
browse --dump-dom "file://$WORK/run.html#c=none&t0=0&t1=20000000" > "$WORK/zoom.html" ||
  fail "chromium --dump-dom: $(tail -3 "$WORK/chromium.err")"
python3 - "$WORK/run.html" "$WORK/zoom.html" <<'PY'
import json, re, sys
page, dom = open(sys.argv[1]).read(), open(sys.argv[2]).read()
model = json.loads(re.search(r'<script id="model" type="application/json">(.*?)</script>', page, re.S).group(1))
whole_level = model["corrections"]["none"]["levels"][0]["level"]
svg = re.search(r'<svg id="timeline"[^>]*>', dom)
assert svg, "no drawn <svg id=timeline> in the DOM: the script did not run"
attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', svg.group(0)))
assert attrs["data-correction"] == "none", attrs
assert (attrs["data-t0"], attrs["data-t1"]) == ("0", "20000000"), attrs
level = int(attrs["data-level"])
assert level < whole_level, ("the zoom did not read a finer level", level, whole_level)
rows = re.findall(r'<g class="row" data-row="(\d+)"', dom)
assert rows == ["0", "1", "2"], rows
labels = re.findall(r'<text x="4" y="\d+">(rank [^<]*)</text>', dom)
assert labels == ["rank 0 main", "rank 1 main", "rank 1 worker"], labels
width = int(attrs["width"])
bars = [(float(x), float(w)) for x, w in re.findall(r'<rect class="fn" data-k="\d+" x="([-\d.]+)" y="\d+" width="([\d.]+)"', dom)]
assert len(bars) >= 3, len(bars)
plot = (170, width - 4)
assert all(x + w > plot[0] and x < plot[1] for x, w in bars), "a bar outside the view"
assert len(bars) < 3 * 60, ("more bars than a 20 ms view of 3 rows holds", len(bars))
lines = re.findall(r'<line class="msg( back)?"', dom)
backward = sum(1 for b in lines if b)
# A message every 10 ms each way (5 ms apart): 2 to 5 in 20 ms, the
# replies of rank 1 (3 ms ahead) backward.
assert 2 <= len(lines) <= 5 and backward > 0, ("message lines", len(lines), backward)
info = re.search(r'<span id="info">([^<]*)</span>', dom).group(1)
assert info.startswith("none · level %d" % level), info
assert "work" in re.search(r'<div id="legend">(.*?)</div>', dom, re.S).group(1)
table = re.search(r'<table id="profile">.*?<tbody>(.*?)</tbody>', dom, re.S).group(1)
assert len(re.findall(r"<tr><td>", table)) == len(model["profile"]) > 0
print("DOM ok: level %d (whole run %d), %d bars, %d message lines (%d backward)"
      % (level, whole_level, len(bars), len(lines), backward))
PY

# --- 2. the whole run: a screenshot's structure --------------------------------
rm -f "$WORK/shot.png"
(cd "$WORK" && browse --screenshot="$WORK/shot.png" "file://$WORK/run.html#c=online") ||
  fail "chromium --screenshot: $(tail -3 "$WORK/chromium.err")"
[[ -s "$WORK/shot.png" ]] || fail "no screenshot"
cat > "$WORK/check_png.py" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, header = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR": header = struct.unpack(">IIBBBBB", body)
    if kind == b"IDAT": idat += body
    pos += 12 + n
w, h, depth, color = header[:4]
assert (w, h) == (1400, 900), (w, h)
assert depth == 8 and color in (2, 6), header
bpp = 3 if color == 2 else 4
raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    prev = line
def backward(line, x):  # a red message line
    r, g, b = line[x * bpp:x * bpp + 3]
    return r > 180 and g < 60 and b < 60
def saturated(line, x):
    r, g, b = line[x * bpp:x * bpp + 3]
    return max(r, g, b) - min(r, g, b) > 80 and not backward(line, x)
# Rows of the drawing: horizontal bands where most of the plot is colour.
counts = [sum(saturated(rows[y], x) for x in range(0, w, 2)) for y in range(h)]
bands, start = [], None
for y, n in enumerate(counts + [0]):
    if n > 0.5 * (w // 2) and start is None: start = y
    if n <= 0.5 * (w // 2) and start is not None: bands.append((start, y)); start = None
bands = [(a, b) for a, b in bands if b - a >= 6]
assert len(bands) == 3, ("want three rows drawn across the plot", bands)
assert all(b - a <= 24 for a, b in bands), bands
# Below the profile table the page is blank.
low = rows[int(h * 0.75):]
blank = sum(1 for line in low for x in range(0, w, 7) if min(line[x * bpp:x * bpp + 3]) > 240)
assert blank > 0.98 * len(low) * len(range(0, w, 7)), "the bottom of the page is not blank"
# Message lines received before sent: pure red pixels in the plot.
red = sum(1 for y in range(bands[0][0], bands[-1][1]) for x in range(w) if backward(rows[y], x))
want_red = sys.argv[2] == "red"
assert (red > 50) == want_red, ("red pixels in the rows", red, sys.argv[2])
print("%s ok: %dx%d, rows at y %s, %d red pixels" % (sys.argv[1], w, h, bands, red))
PY
python3 "$WORK/check_png.py" "$WORK/shot.png" no-red

# --- 3. view --png: chromium run by the tool ------------------------------------
"$TOOL" view --index_dir="$WORK/idx" --correction=none --width=1400 --png_height=900 \
  --png="$WORK/view.png" "$rank0" "$rank1" 2> "$WORK/png.err" ||
  fail "view --png: $(cat "$WORK/png.err")"
grep -q "wrote $WORK/view.png" "$WORK/png.err" || fail "view --png: $(cat "$WORK/png.err")"
python3 "$WORK/check_png.py" "$WORK/view.png" red
ls "$WORK"/view.png.*.html 2> /dev/null && fail "view --png left its page behind"
echo "PASS"
