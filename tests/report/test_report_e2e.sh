#!/usr/bin/env bash
# `fabperf report` end to end: four real 4-agent loopback runs, assembled into a plan results
# file (make_results.py), rendered in every format by the real binary and checked with parsers
# (python3 json, csv, xml.etree). Leaves report.html in OUTDIR for the browser test.
# usage: test_report_e2e.sh FABPERF OUTDIR
set -euo pipefail
bin=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out"
mkdir -p "$out"
cd "$out"

t0=$(date +%s.%N)
for i in 1 2 3 4; do
  "$bin" run --local 4 --time 1.2 --interval 0.2 --json run$i.json --quiet >/dev/null 2>run$i.err ||
    { echo "FAIL: fabperf run $i"; cat run$i.err; exit 1; }
done
echo "4 runs took $(echo "$(date +%s.%N) - $t0" | bc) s"
expect=$(python3 "$here/make_results.py" results.jsonl run1.json run2.json run3.json run4.json)
echo "fixture: $expect"

for f in text json csv junit html; do
  "$bin" report results.jsonl --format $f -o report.$f
done
"$bin" report results.jsonl --format text >report.stdout.txt
cmp report.text report.stdout.txt
for t in pairs links kpis; do "$bin" report results.jsonl --format csv --table $t -o report.$t.csv; done

python3 - "$expect" <<'PY'
import csv, json, sys, xml.etree.ElementTree as ET
exp = json.loads(sys.argv[1])
steps = [json.loads(l) for l in open("results.jsonl") if '"type": "step"' in l]
j = json.load(open("report.json"))
verdict = "FAIL" if exp["failed"] else "PASS"
assert j["verdict"] == verdict, (j["verdict"], verdict)
assert j["kpi_failed"] == exp["failed"] and j["kpi_passed"] + j["kpi_failed"] == exp["kpis"], j
assert len(j["steps"]) == 4 and j["finished"]
m = j["matrices"][0]
assert m["nodes"] == ["n1", "n2", "n3", "n4"] and m["cells"] == 12, m
for i in range(4):
    assert m["mb_per_s"][i][i] is None
# The matrix holds the measured pair rates (the last step wins for a pair measured twice).
last = {}
for s, js in zip(steps, j["steps"]):
    assert [p["mb_per_s"] for p in js["pairs"]] == [p["mb_per_s"] for p in s["result"]["pairs"]]
    for p in js["pairs"]:
        last[(p["client"], p["server"])] = p["mb_per_s"]
assert len(last) == 12
for (c, sv), v in last.items():
    assert m["mb_per_s"][m["nodes"].index(c)][m["nodes"].index(sv)] == v
# Aggregate per step = the measured aggregate.
for s, js in zip(steps, j["steps"]):
    assert abs(js["mb_per_s"] - s["result"]["aggregate"]["mb_per_s"]) < 1e-6

text = open("report.text").read()
assert text.splitlines()[3].startswith("VERDICT: " + verdict), text[:300]

def table(path, key):
    rows = list(csv.reader(open(path, newline="")))
    assert len({len(r) for r in rows}) == 1, (path, {len(r) for r in rows})
    assert rows[0][0] == key, rows[0]
    return rows
rows = table("report.csv", "step_index")
assert len(rows) == 1 + sum(len(s["result"]["nodes"]) for s in steps), len(rows)
rows = table("report.pairs.csv", "step_index")
assert len(rows) == 1 + sum(len(s["result"]["pairs"]) for s in steps)
table("report.links.csv", "step_index")
rows = table("report.kpis.csv", "test")
assert len(rows) == 1 + exp["kpis"]

x = ET.parse("report.junit").getroot()
assert x.tag == "testsuites"
cases = x.findall(".//testcase")
assert len(cases) == 4 + exp["kpis"], len(cases)
fails = x.findall(".//testcase/failure")
assert len(fails) == exp["failed"] == int(x.get("failures")), (len(fails), exp)
assert all(f.get("message") for f in fails)

html = open("report.html").read()
assert "<script" not in html.lower()
assert html.count('class="heat-cell"') == 12, html.count('class="heat-cell"')
assert html.count('class="kpi-line"') >= 4
assert 'class="chart timeseries"' in html and 'class="chart histogram"' in html
assert html.count('class="pct"') == 2 * html.count('class="chart histogram"')  # p50 and p99 on each
print("formats ok: verdict", verdict, "kpis", exp["kpis"], "failed", exp["failed"])
PY

# A single run's JSON is accepted as it is.
"$bin" report run1.json --format text | grep "VERDICT: NO KPI" >/dev/null
"$bin" report run1.json --format junit | python3 -c 'import sys, xml.etree.ElementTree as E; assert len(E.parse(sys.stdin).getroot().findall(".//testcase")) == 1'

# A plan that stopped: no "end"; its steps are still reported.
python3 "$here/make_results.py" stopped.jsonl --no-end run1.json run2.json run3.json run4.json >/dev/null
"$bin" report stopped.jsonl | grep "did not finish" >/dev/null
"$bin" report stopped.jsonl --format junit | grep 'name="plan finished"' >/dev/null

# Malformed input: FILE:LINE and exit 2.
sed '3s/.*/{"type": "step", "index": oops}/' results.jsonl >bad.jsonl
set +e
"$bin" report bad.jsonl 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] || { echo "FAIL: malformed line gave exit $rc"; exit 1; }
grep -q "bad.jsonl:3: not valid JSON" err.txt || { echo "FAIL: message"; cat err.txt; exit 1; }
set +e
"$bin" report results.jsonl --format pdf 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] && grep -q -- "--format 'pdf'" err.txt || { echo "FAIL: --format pdf gave $rc"; exit 1; }
"$bin" report results.jsonl --exit-code -o /dev/null && rc=0 || rc=$?
want=0; [ "$(python3 -c 'import json,sys; print(json.load(open("report.json"))["kpi_failed"])')" != 0 ] && want=1
[ $rc -eq $want ] || { echo "FAIL: --exit-code gave $rc, want $want"; exit 1; }

# The real plan runner, when this build has it (`fabperf run --pattern`, the plans work): an
# all-pairs plan on 4 local agents writes its own results file, which every format must render.
if "$bin" run --help 2>/dev/null | grep -- "--pattern" >/dev/null; then
  "$bin" run --local 4 --pattern all-pairs --concurrent-pairs 2 --time 1 --interval 0.2 \
    --kpi min-node-mbps=1 --results plan.jsonl --quiet >plan.out 2>&1 || true
  [ -s plan.jsonl ] || { echo "FAIL: the plan runner wrote no results"; cat plan.out; exit 1; }
  for f in text json csv junit html; do "$bin" report plan.jsonl --format $f -o plan.$f; done
  python3 - <<'PY'
import json, xml.etree.ElementTree as ET
recs = [json.loads(l) for l in open("plan.jsonl")]
steps = {r["id"]: r for r in recs if r["type"] == "step"}
kpis = [r for r in recs if r["type"] == "kpi"]
j = json.load(open("plan.json"))
assert len(j["steps"]) == len(steps) == j["steps_total"], (len(j["steps"]), len(steps))
assert j["matrices"] and j["matrices"][0]["cells"] == 12, j["matrices"]
assert sorted(j["matrices"][0]["nodes"]) == ["n1", "n2", "n3", "n4"]
x = ET.parse("plan.junit").getroot()
assert len(x.findall(".//testcase")) == len(steps) + len(kpis)
assert open("plan.html").read().count('class="heat-cell"') == 12
print("plan runner results rendered:", len(steps), "steps,", len(kpis), "KPI checks, verdict", j["verdict"])
PY
else
  echo "NOTE: this build has no plan runner (fabperf run --pattern): only the assembled results were checked"
fi
echo "PASS"
