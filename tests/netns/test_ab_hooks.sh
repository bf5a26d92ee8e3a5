#!/usr/bin/env bash
# Unattended A/B through hooks on the coordinator's host, judged by `fabperf compare`:
#  two hosts joined directly by two links; hook A shapes both to 40 Mbit/s, hook B to 44 (+10%);
#  5 trials of each, alternating, 3.3 s windows of stream writes (4 s tests). compare must say B is faster at p < 0.05.
#  One port changed (issue 31): A 40/40, B 40 on eth0 and 100 on eth1, the plan stating
#  `expect = ["eth1=+150%"]`, `expect-rest = "unchanged"`: the plan itself ends with PASS (exit 0),
#  eth1 at about +150% as expected and eth0 "no difference"; the same results judged with the
#  wrong port expected fail (exit 1) on both links. A plan whose B hook fails stops there
#  with the hook's output shown, exit 3, and every finished step kept. A plan with hooks is
#  refused without --allow-hooks. Costs about 100 s.
#  Why 40/44 and not 400/440 Mbit/s: the shaper, not the CPU, must set every trial's rate, also
#  on a loaded 2-core host. At 400/440 with load 11 (parallel builds) this host delivered 45.9
#  MB/s (cv 2.3%) and 47.8 MB/s (cv 12.8%): the CPU capped 440, and compare rightly said "no
#  difference (±9.9%)". AB_MBIT=400 runs the full-rate variant on an idle host.
FABPERF=$1 TOP=$2
. "$(dirname "$0")/lib.sh"
require_root
TAG="ab$(( $$ % 100000 ))"
BASE=${AB_MBIT:-40}
HIGH=$((BASE * 11 / 10))
"$LAB" up "$TAG" --direct --links 2 --rate ${BASE}mbit >/dev/null
start_agent 1 198.18.0.1
start_agent 2 198.18.0.2

plan() {  # plan NAME HOOK_A HOOK_B ROUNDS [A-NAME B-NAME [EXPECTATIONS]]
  cat <<TOML
name = "$1"
repeat = $4
[ab]
a = "$2"
b = "$3"
a-name = "${5:-A}"
b-name = "${6:-B}"
hook-timeout = 30
${7:-}
[[hosts]]
name = "h1"
address = "198.18.0.1"
links = ["198.18.0.1", "198.18.1.1"]
[[hosts]]
name = "h2"
address = "198.18.0.2"
links = ["198.18.0.2", "198.18.1.2"]
[[tests]]
name = "link"
pattern = "pairs"
pairs = ["h1->h2"]
mode = "stream"
parallel = 2
buffsize = "64K"
socksize = "1M"
time = 4
warmup = 0.5
cooldown = 0.2
TOML
}
shape() { echo "$LAB shape $TAG 1 0 $1 && $LAB shape $TAG 1 1 ${2:-$1}"; }  # shape ETH0-RATE [ETH1-RATE]

# Refused without --allow-hooks, before anything runs.
plan refuse "$(shape ${BASE}mbit)" "$(shape ${HIGH}mbit)" 5 > "$WORK/refuse.toml"
set +e
in_host 1 "$FABPERF" run "$WORK/refuse.toml" "${KEYARGS[@]}" --results "$WORK/refused.jsonl" > "$WORK/out0.txt" 2>&1
rc=$?
set -e
cat "$WORK/out0.txt"
[ $rc -eq 2 ] || { echo "FAIL: exit $rc without --allow-hooks, expected 2"; exit 1; }
grep -q -- "--allow-hooks" "$WORK/out0.txt" || { echo "FAIL: the refusal does not name --allow-hooks"; exit 1; }
[ ! -e "$WORK/refused.jsonl" ] || { echo "FAIL: a refused plan wrote results"; exit 1; }

# BASE vs BASE+10% Mbit/s.
plan speed "$(shape ${BASE}mbit)" "$(shape ${HIGH}mbit)" 5 ${BASE}mbit ${HIGH}mbit > "$WORK/speed.toml"
in_host 1 "$FABPERF" run "$WORK/speed.toml" "${KEYARGS[@]}" --allow-hooks --no-preflight --results "$WORK/speed.jsonl"
set +e
"$FABPERF" compare "$WORK/speed.jsonl" --json "$WORK/speed-cmp.json" > "$WORK/cmp1.txt"
rc=$?
set -e
cat "$WORK/cmp1.txt"
[ $rc -eq 0 ] || { echo "FAIL: compare exit $rc, expected 0 (B faster)"; exit 1; }
python3 - "$WORK/speed-cmp.json" "$WORK/speed.jsonl" "${HIGH}mbit" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
for l in open(sys.argv[2]):
    r = json.loads(l)
    if r["type"] == "step":
        print(r["id"], round(r["result"]["aggregate"]["mb_per_s"], 2), "MB/s")
agg = [m for m in c["metrics"] if m["kind"] == "aggregate"]
assert len(agg) == 1, agg
m = agg[0]
assert m["n_a"] == 5 and m["n_b"] == 5, m
assert m["direction"] == "faster" and m["mann_whitney"]["p"] < 0.05, m
# The shaper's +10%, as the receivers counted it (+9.9% here; the senders' count once read +7.8%
# while the interfaces said +10.0%: docs/methodology.md, "The one figure").
assert 8 < m["change_pct"] < 12, m
assert m["verdict"].startswith(sys.argv[3] + " is ") and "faster (p < 0.0" in m["verdict"] and "5 vs 5 trials" in m["verdict"], m["verdict"]
lines = [json.loads(l) for l in open(sys.argv[2])]
hooks = [l for l in lines if l["type"] == "hook"]
assert [h["config"] for h in hooks] == ["A", "B"] * 5, [h["config"] for h in hooks]
assert all(h["exit_code"] == 0 and "shape" in h["command"] and h["duration_s"] >= 0 for h in hooks), hooks
steps = [l for l in lines if l["type"] == "step"]
assert [s["config"] for s in steps] == ["A", "B"] * 5
print("verdict:", m["verdict"])
PY

# One port of two changed, as the plan expects: the plan's own verdict passes.
ONE=$((BASE * 5 / 2))
plan oneport "$(shape ${BASE}mbit)" "$(shape ${BASE}mbit ${ONE}mbit)" 5 before after \
  'expect = ["eth1=+150%"]
expect-rest = "unchanged"' > "$WORK/one.toml"
in_host 1 "$FABPERF" run "$WORK/one.toml" "${KEYARGS[@]}" --allow-hooks --no-preflight --results "$WORK/one.jsonl" > "$WORK/out2.txt" 2>&1 || {
  cat "$WORK/out2.txt"; echo "FAIL: the one-port plan did not pass"; exit 1; }
cat "$WORK/out2.txt"
grep -q "^result: PASS" "$WORK/out2.txt" || { echo "FAIL: the plan printed no PASS verdict"; exit 1; }
# The wrong port expected: both links fail, from the same results.
set +e
"$FABPERF" compare "$WORK/one.jsonl" --expect eth0=+150% --expect-rest unchanged --json "$WORK/one-wrong.json" > "$WORK/cmp2.txt"
rc=$?
set -e
cat "$WORK/cmp2.txt"
[ $rc -eq 1 ] || { echo "FAIL: compare with the wrong port expected: exit $rc, expected 1"; exit 1; }
"$FABPERF" compare "$WORK/one.jsonl" --json "$WORK/one-right.json" > /dev/null
python3 - "$WORK/one-right.json" "$WORK/one-wrong.json" <<'PY'
import json, sys
right, wrong = (json.load(open(f)) for f in sys.argv[1:3])
def links(c):
    return {m["subject"]: m for m in c["metrics"] if m["kind"] == "link"}
r, w = links(right), links(wrong)
assert set(r) == {"h1/eth0", "h1/eth1", "h2/eth0", "h2/eth1"}, sorted(r)
for node in ("h1", "h2"):
    e0, e1 = r[node + "/eth0"], r[node + "/eth1"]
    print(node, "eth0", round(e0["change_pct"], 1), e0["verdict"], "| eth1", round(e1["change_pct"], 1), e1["verdict"])
    assert not e0["fails"] and not e1["fails"], (e0, e1)
    assert e1["expected_pct"] == 150 and 130 < e1["change_pct"] < 170, e1
    assert e0["expected_pct"] == 0 and abs(e0["change_pct"]) < 5, e0
    assert w[node + "/eth0"]["fails"] and w[node + "/eth1"]["fails"], (w[node + "/eth0"], w[node + "/eth1"])
assert not right["failed"] and wrong["failed"]
PY

# A failing hook stops the plan, shows its output, keeps what was measured.
plan broken "$(shape ${BASE}mbit)" "echo switch refused the port change >&2; exit 3" 2 > "$WORK/broken.toml"
set +e
in_host 1 "$FABPERF" run "$WORK/broken.toml" "${KEYARGS[@]}" --allow-hooks --no-preflight --results "$WORK/broken.jsonl" > "$WORK/out3.txt" 2>&1
rc=$?
set -e
cat "$WORK/out3.txt"
[ $rc -eq 3 ] || { echo "FAIL: exit $rc after a failing hook, expected 3"; exit 1; }
grep -q "switch refused the port change" "$WORK/out3.txt" || { echo "FAIL: the hook's output is not shown"; exit 1; }
python3 - "$WORK/broken.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
hooks = [l for l in lines if l["type"] == "hook"]
assert [(h["config"], h["exit_code"]) for h in hooks] == [("A", 0), ("B", 3)], hooks
assert "switch refused the port change" in hooks[1]["output_tail"]
steps = [l for l in lines if l["type"] == "step"]
assert [(s["id"], s["status"]) for s in steps] == [("link/0@A1", "done")], steps
assert "result" in steps[0] and steps[0]["result"]["aggregate"]["mb_per_s"] > 0
assert lines[-1]["type"] == "end" and lines[-1]["exit_code"] == 3
PY
echo PASS
