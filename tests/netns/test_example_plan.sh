#!/usr/bin/env bash
# The shipped example plan (scripts/examples/acceptance.toml) with isolation on names the slow
# node (issue 31: with the pair KPI of its all-pairs test every failing pair named both ends, every
# node was a suspect and isolation gave up). Four hosts on a switch, three planes (control, two
# data links), every link shaped to 100 Mbit/s, cn2's two data links to 25 (a quarter). The plan
# is the example as shipped with only its addresses mapped to the lab's, its times shortened to
# 2 s and `isolate = true` added. Its KPIs (2000 MB/s a node) fail everywhere here: isolation must
# still name cn2 alone, because it ranks nodes by how far below the median they are.
FABPERF=$1 TOP=$2
. "$(dirname "$0")/lib.sh"
require_root
TAG="ex$(( $$ % 100000 ))"
"$LAB" up "$TAG" --hosts 4 --links 3 --rate 100mbit >/dev/null
"$LAB" shape "$TAG" 4 1 25mbit
"$LAB" shape "$TAG" 4 2 25mbit
for h in 1 2 3 4; do start_agent "$h" "198.18.0.$h"; done

# nsd1, nsd2, cn1, cn2 -> lab hosts 1, 2, 3, 4 (10.P.0.1x / 10.P.0.2x -> 198.18.P.H).
python3 - "$TOP/scripts/examples/acceptance.toml" > "$WORK/acceptance.toml" <<'PY'
import re, sys
host = {"11": 1, "12": 2, "21": 3, "22": 4}
text = open(sys.argv[1]).read()
text = re.sub(r"\b10\.(\d)\.0\.(\d\d)\b", lambda m: f"198.18.{m[1]}.{host[m[2]]}", text)
text = re.sub(r"(?m)^time = \d+", "time = 2", text)
print("isolate = true\n" + text)
PY
grep -q '10\.' "$WORK/acceptance.toml" && { echo "FAIL: an address was not mapped"; grep -n '10\.' "$WORK/acceptance.toml"; exit 1; }
set +e
in_host 1 "$FABPERF" run "$WORK/acceptance.toml" "${KEYARGS[@]}" --no-preflight --results "$WORK/acc.jsonl" > "$WORK/out.txt" 2>&1
rc=$?
set -e
cat "$WORK/out.txt"
[ $rc -eq 1 ] || { echo "FAIL: exit $rc, expected 1 (the KPIs fail on this lab)"; exit 1; }
python3 - "$WORK/acc.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l for l in lines if l["type"] == "step"]
assert steps and all(s["status"] == "done" for s in steps), [(s["id"], s["status"]) for s in steps]
findings = [f for l in lines if l["type"] == "isolation" for f in l["findings"]]
for f in findings:
    print("finding:", f["text"])
slow = {f["node"] for f in findings if f["slow"]}
assert slow == {"cn2"}, slow
PY
"$FABPERF" report "$WORK/acc.jsonl" > "$WORK/report.txt" || true
grep -q "SLOW cn2" "$WORK/report.txt" || { echo "FAIL: fabperf report does not name cn2"; exit 1; }
echo PASS
