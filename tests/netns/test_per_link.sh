#!/usr/bin/env bash
# Per-link measurement and the speed-change workflow on a shaped two-link lab:
#  - 2 hosts x 2 links at 400 Mbit/s: each link within 5% of the best TCP goodput for that rate
#    and MTU, and the per-link sum within 3% of the aggregate;
#  - links reshaped to 560 Mbit/s: `compare --expect-gain 40` says +40% +-5%, "improved as expected";
#  - one link back at 400: compare names it "no change" and exits 1;
#  - MTU 9000 on one end and 1500 on the other: the jumbo check flags that link.
FABPERF=$1 TOP=$2
. "$(dirname "$0")/lib.sh"
require_root
two_link_lab pl 9000 400mbit
run() { two_link_run 5 "$@"; }  # run OUT.json [extra args]

run before.json
python3 - "$WORK/before.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["complete"], doc["findings"]
client = next(n for n in doc["nodes"] if n["role"] == "client")
links = {l["link"]: l for l in client["links"]}
assert set(links) == {"eth0", "eth1"}, links.keys()
# Best TCP goodput at 400 Mbit/s, MTU 9000: rate * (MTU - 52) / (MTU + 38).
best = 400e6 / 8 * (9000 - 52) / (9000 + 38) / 1e6
total = 0
for name, l in sorted(links.items()):
    mb = l["payload_tx_mb_per_s"]
    total += mb
    print(f"{name}: {mb:.2f} MB/s payload, {l['tx_mb_per_s']:.2f} MB/s on the wire; best goodput {best:.2f} "
          f"({100 * mb / best:.1f}%)")
    assert abs(mb / best - 1) < 0.05, f"{name}: {mb:.2f} MB/s is not within 5% of {best:.2f}"
agg = doc["aggregate"]["mb_per_s"]
print(f"per-link sum {total:.2f} MB/s vs aggregate {agg:.2f} MB/s")
assert abs(total / agg - 1) < 0.03
PY

for p in 0 1; do "$LAB" shape "$TAG" 1 $p 560mbit; done
run after.json
set +e
"$FABPERF" compare "$WORK/before.json" "$WORK/after.json" --expect-gain 40 --json "$WORK/cmp1.json" > "$WORK/cmp1.txt"
rc=$?
set -e
cat "$WORK/cmp1.txt"
[ $rc -eq 0 ] || { echo "FAIL: compare exited $rc after both links went 400 -> 560"; exit 1; }
python3 - "$WORK/cmp1.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
links = [l for l in c["links"] if l["node"].startswith("198.18.0.1")]
assert len(links) == 2, c["links"]
for l in links:
    assert l["verdict"] == "improved as expected", l
    assert abs(l["change_pct"] - 40) <= 5, l
PY

"$LAB" shape "$TAG" 1 1 400mbit
run after2.json
set +e
"$FABPERF" compare "$WORK/before.json" "$WORK/after2.json" --expect-gain 40 --json "$WORK/cmp2.json" > "$WORK/cmp2.txt"
rc=$?
set -e
cat "$WORK/cmp2.txt"
[ $rc -eq 1 ] || { echo "FAIL: compare exited $rc although eth1 stayed at 400 Mbit/s"; exit 1; }
python3 - "$WORK/cmp2.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
v = {l["link"]: l["verdict"] for l in c["links"] if l["node"].startswith("198.18.0.1")}
assert v == {"eth0": "improved as expected", "eth1": "no change"}, v
PY

# Jumbo check: the server's end of link 1 drops to MTU 1500.
"$LAB" mtu "$TAG" 2 1 1500
run mtu.json --time 2
python3 - "$WORK/mtu.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
client = next(n for n in doc["nodes"] if n["role"] == "client")
flags = {l["link"]: l["jumbo_mismatch"] for l in client["links"]}
print("jumbo mismatch per link:", flags)
assert flags == {"eth0": False, "eth1": True}, flags
assert any("jumbo frames not in use" in f and "eth1" in f for f in doc["findings"]), doc["findings"]
PY
echo PASS
