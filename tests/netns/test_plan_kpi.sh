#!/usr/bin/env bash
# A KPI set designed to fail on a shaped-down link fails on exactly that link:
#  3 hosts x 2 links through a switch at 400 Mbit/s; h2's second link shaped to 100 Mbit/s;
#  an all-pairs plan (stream writes, 2 connections per pair = one per link) with
#  min-link-mbps = 30: every link's best showing is ~48 MB/s except h2/eth1 (~12 MB/s).
#  Exit code 1, and the only failing check is min-link-mbps on h2/eth1. Pre-flight runs first.
FABPERF=$1 TOP=$2
. "$(dirname "$0")/lib.sh"
require_root
TAG="pk$(( $$ % 100000 ))"
"$LAB" up "$TAG" --hosts 3 --links 2 --rate 400mbit >/dev/null
"$LAB" shape "$TAG" 2 1 100mbit
for h in 1 2 3; do start_agent $h 198.18.0.$h; done
cat > "$WORK/plan.toml" <<TOML
name = "shaped"
$(for h in 1 2 3; do printf '[[hosts]]\nname = "h%s"\naddress = "198.18.0.%s"\nlinks = ["198.18.0.%s", "198.18.1.%s"]\n' $h $h $h $h; done)
[[tests]]
name = "matrix"
pattern = "all-pairs"
mode = "stream"
parallel = 2
time = 1
buffsize = "256K"
kpis = { min-link-mbps = 30 }
TOML
"$FABPERF" plan check "$WORK/plan.toml"
set +e
in_host 1 "$FABPERF" run "$WORK/plan.toml" "${KEYARGS[@]}" --results "$WORK/r.jsonl" > "$WORK/out.txt" 2>&1
rc=$?
set -e
cat "$WORK/out.txt"
[ $rc -eq 1 ] || { echo "FAIL: exit $rc, expected 1 (a KPI failed)"; exit 1; }
python3 - "$WORK/r.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [l for l in lines if l["type"] == "step"]
assert len(steps) == 6 and all(s["status"] == "done" for s in steps), [(s["id"], s["status"], s["error"]) for s in steps]
kpis = [l for l in lines if l["type"] == "kpi"]
for k in kpis:
    print(f'{k["kpi"]} {k["subject"]}: {k["value"]:.1f} {k["op"]} {k["threshold"]} -> {"pass" if k["pass"] else "FAIL"} ({k["detail"]})')
subjects = {k["subject"] for k in kpis}
assert subjects == {f"h{h}/eth{p}" for h in (1, 2, 3) for p in (0, 1)}, subjects
failed = [k["subject"] for k in kpis if not k["pass"]]
assert failed == ["h2/eth1"], failed
assert lines[-1]["type"] == "end" and lines[-1]["exit_code"] == 1 and not lines[-1]["passed"]
PY
grep -q "FAIL min-link-mbps.*h2/eth1" "$WORK/out.txt" || { echo "FAIL: verdict table does not name h2/eth1"; exit 1; }
grep -q "preflight: ok" "$WORK/out.txt" || { echo "FAIL: preflight did not pass"; exit 1; }
grep -q "every test interface has MTU 1500 (6 interfaces)" "$WORK/out.txt" || { echo "FAIL: preflight did not probe both links"; exit 1; }
# The lab shapes every host's interfaces with a root tbf: pre-flight names it (issue 31), and
# compares each node's probe with its links' nominal (shaped) rate.
grep -q "a shaping root qdisc (tbf, htb) holds it to 400 Mbit/s" "$WORK/out.txt" || { echo "FAIL: pre-flight did not see the tbf"; exit 1; }
grep -q "probe rate against each node's nominal link rate: " "$WORK/out.txt" || { echo "FAIL: no probe/nominal line"; exit 1; }
# htb keeps its rates on classes: the highest ceil of a top class is the link's limit.
NS3=$("$LAB" ns "$TAG" 3)
ip -n "$NS3" link show eth0 >/dev/null
tc -n "$NS3" qdisc replace dev eth0 root handle 1: htb default 10
tc -n "$NS3" class add dev eth0 parent 1: classid 1:10 htb rate 300mbit ceil 350mbit
in_host 1 "$FABPERF" links --json 198.18.0.3 "${KEYARGS[@]}" > "$WORK/links.json"
python3 - "$WORK/links.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
links = [l for h in doc["hosts"] for l in h["links"]]
eth0 = [l for l in links if l.get("name") == "eth0"]
assert eth0 and eth0[0]["shaped_mbps"] == 350, eth0
print("htb on h3/eth0: shaped_mbps", eth0[0]["shaped_mbps"])
PY
echo PASS
