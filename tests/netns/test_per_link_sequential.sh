#!/usr/bin/env bash
# --per-link sequential on 2 hosts x 2 links shaped differently (400 and 280 Mbit/s, MTU 9000):
# one step per link, each step's per-link payload within 5% of the best TCP goodput for that
# link's rate, only that link carrying the step, and the per_link record naming the slower link.
FABPERF=$1 TOP=$2
. "$(dirname "$0")/lib.sh"
require_root
TAG="sq$(( $$ % 100000 ))"
"$LAB" up "$TAG" --direct --links 2 --mtu 9000 --rate 400mbit >/dev/null
"$LAB" shape "$TAG" 1 1 280mbit
start_agent 1 198.18.0.1
start_agent 2 198.18.0.2
in_host 1 "$FABPERF" run --servers 198.18.0.2@198.18.0.2+198.18.1.2 --clients 198.18.0.1@198.18.0.1+198.18.1.1 \
  "${KEYARGS[@]}" --mode stream --parallel 2 --time 4 --buffsize 256K --per-link sequential --no-preflight \
  --results "$WORK/seq.jsonl" | tee "$WORK/seq.txt"
grep -q "step 1/2 bipartite/0/link0 " "$WORK/seq.txt"
grep -q "step 2/2 bipartite/0/link1 " "$WORK/seq.txt"
grep -q "per-link sequential, test bipartite: one link at a time" "$WORK/seq.txt"
python3 - "$WORK/seq.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l for l in lines if l["type"] == "step"]
assert [s["id"] for s in steps] == ["bipartite/0/link0", "bipartite/0/link1"], [s["id"] for s in steps]
rates = {"eth0": 400e6, "eth1": 280e6}
for i, (step, want) in enumerate(zip(steps, ["eth0", "eth1"])):
    assert step["status"] == "done" and step["result"]["complete"], step["error"]
    client = next(n for n in step["result"]["nodes"] if n["role"] == "client")
    links = {l["link"]: l for l in client["links"]}
    assert set(links) == {want}, f"step {i}: flows on {set(links)}, expected only {want}"
    best = rates[want] / 8 * (9000 - 52) / (9000 + 38) / 1e6
    mb = links[want]["payload_tx_mb_per_s"]
    print(f"step {i}: {want} {mb:.2f} MB/s vs best goodput {best:.2f} ({100 * mb / best:.1f}%)")
    assert abs(mb / best - 1) < 0.05, f"step {i}: {mb:.2f} MB/s not within 5% of {best:.2f}"
sweep = next(l for l in lines if l["type"] == "per_link")
s = sweep["links"]
assert [r["interface"] for r in s] == ["eth0", "eth1"], s
assert abs(s[1]["pct_of_best_step"] - 70) < 5, s
assert any("link 1 (198.18.1.1 eth1)" in f and "below the best link" in f for f in sweep["findings"]), sweep
print("findings:", sweep["findings"])
assert lines[-1]["type"] == "end" and lines[-1]["exit_code"] == 0, lines[-1]
PY
# The results file reads back (fabperf report knows the per_link record).
"$FABPERF" report "$WORK/seq.jsonl" > "$WORK/report.txt"
echo PASS
