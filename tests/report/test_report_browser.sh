#!/usr/bin/env bash
# The HTML report in a real browser: headless Chromium (Debian package `chromium`) loads
# report.html from the e2e test, takes a screenshot and dumps the DOM. Passes when the page
# logged no errors and the charts are in the DOM. Exit 77 (ctest SKIP) when chromium is absent.
# usage: test_report_browser.sh OUTDIR
set -euo pipefail
out=$1
html="$out/report.html"
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "SKIP: chromium is not installed (scripts/install-deps --test installs it)"
  exit 77
fi
[ -s "$html" ] || { echo "FAIL: $html missing (the report.e2e test writes it)"; exit 1; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
       --disable-sync --no-first-run --user-data-dir="$profile" --enable-logging=stderr --v=0
       --hide-scrollbars --window-size=1280,2600)
rm -f "$out/screenshot.png"
timeout 60 "$chromium" "${flags[@]}" --screenshot="$out/screenshot.png" "file://$html" >"$out/chromium-shot.log" 2>&1 || {
  echo "FAIL: chromium --screenshot"; tail -20 "$out/chromium-shot.log"; exit 1; }
timeout 60 "$chromium" "${flags[@]}" --dump-dom "file://$html" >"$out/dom.html" 2>"$out/chromium-dom.log" || {
  echo "FAIL: chromium --dump-dom"; tail -20 "$out/chromium-dom.log"; exit 1; }
python3 - "$out" <<'PY'
import re, struct, sys
out = sys.argv[1]
logs = open(f"{out}/chromium-shot.log", errors="replace").read() + open(f"{out}/chromium-dom.log", errors="replace").read()
# Page messages: console output, uncaught errors, blocked loads (CSP) all come as CONSOLE lines.
bad = [l for l in logs.splitlines() if "CONSOLE" in l or "Uncaught" in l or "Refused to" in l]
assert not bad, "page logged:\n" + "\n".join(bad)
dom = open(f"{out}/dom.html").read()
def count(cls):
    return len(re.findall(r'class="[^"]*\b%s\b' % re.escape(cls), dom))
checks = {"heat-cell": count("heat-cell"), "bar": count("bar"), "kpi-line": count("kpi-line"),
          "timeseries": count("timeseries"), "histogram": count("histogram"), "verdict-table": count("verdict-table")}
print("DOM:", checks)
assert checks["heat-cell"] == 12 and checks["bar"] > 0 and checks["kpi-line"] > 0, checks
assert checks["timeseries"] > 0 and checks["histogram"] > 0 and checks["verdict-table"] == 1, checks
assert "<script" not in dom.lower()
png = open(f"{out}/screenshot.png", "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n", "screenshot is not a PNG"
w, h = struct.unpack(">II", png[16:24])
assert w >= 1000 and h >= 1000 and len(png) > 50_000, (w, h, len(png))
print(f"screenshot {out}/screenshot.png {w}x{h}, {len(png)} bytes")
PY
echo "PASS"
