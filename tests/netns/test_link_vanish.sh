#!/usr/bin/env bash
# An interface that disappears mid-test: 2 hosts x 2 links, eth1 deleted inside host 1's
# namespace 2 s into a 5 s test. The test completes (the coordinator gets every node's result),
# eth1 is reported with the samples taken before and flagged, eth0 keeps its full figures.
FABPERF=$1 TOP=$2
. "$(dirname "$0")/lib.sh"
require_root
TAG="lv$(( $$ % 100000 ))"
"$LAB" up "$TAG" --direct --links 2 --mtu 1500 --rate 200mbit >/dev/null
start_agent 1 198.18.0.1
start_agent 2 198.18.0.2
set +e
in_host 1 "$FABPERF" run --servers 198.18.0.2@198.18.0.2+198.18.1.2 --clients 198.18.0.1@198.18.0.1+198.18.1.1 \
  "${KEYARGS[@]}" --mode stream --parallel 2 --time 5 --interval 0.25 --buffsize 256K --json "$WORK/v.json" \
  >"$WORK/v.txt" 2>"$WORK/v.err" &
coord=$!
PIDS+=($coord)
sleep 2.5
in_host 1 ip link del eth1
wait $coord
rc=$?
set -e
cat "$WORK/v.txt" "$WORK/v.err"
# 0, or 1/3 would be wrong: the nodes all reported; flows on eth1 failing are findings.
[ $rc -eq 0 ] || { echo "FAIL: run exited $rc after a link vanished"; exit 1; }
grep -q "eth1 (gone)" "$WORK/v.txt" || { echo "FAIL: the text report does not mark eth1 as gone"; exit 1; }
python3 - "$WORK/v.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
client = next(n for n in doc["nodes"] if n["role"] == "client")
assert client["status"] == "ok", client["status"]
links = {l["link"]: l for l in client["links"]}
gone, ok = links["eth1"], links["eth0"]
print(f"eth1: vanished={gone['vanished']} window {gone['window_s']:.2f} s, {len(gone['intervals'])} intervals, "
      f"{gone['tx_mb_per_s']:.2f} MB/s; eth0: {ok['tx_mb_per_s']:.2f} MB/s over {ok['window_s']:.2f} s")
assert gone["vanished"] and not ok["vanished"]
assert gone["window_s"] > 0.5 and gone["tx_mb_per_s"] > 5, "eth1 keeps the samples taken before it vanished"
assert ok["window_s"] > gone["window_s"] and ok["tx_mb_per_s"] > 5
assert any("link eth1 on" in f and "disappeared during the test" in f for f in doc["findings"]), doc["findings"]
PY
echo PASS
