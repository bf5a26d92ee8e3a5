#!/usr/bin/env bash
# Two hosts joined by a veth pair (MTU 9000): fabperf's byte counts must agree with the
# interfaces' own counters within 3% (headers and control traffic are the difference).
FABPERF=$1 TOP=$2
. "$(dirname "$0")/lib.sh"
require_root
two_host_lab vc --mtu 9000

check() {
  local test=$1 mode=$2
  local tx0 rx0 tx1 rx1
  tx0=$(counter 1 eth0 tx_bytes); rx0=$(counter 1 eth0 rx_bytes)
  in_host 1 "$FABPERF" run --servers 198.18.0.2 --clients 198.18.0.1 "${KEYARGS[@]}" --test "$test" --mode "$mode" \
    --time 3 --buffsize 1M --parallel 2 --json "$WORK/$test.json" --quiet
  tx1=$(counter 1 eth0 tx_bytes); rx1=$(counter 1 eth0 rx_bytes)
  python3 - "$WORK/$test.json" "$test" "$mode" $((tx1 - tx0)) $((rx1 - rx0)) <<'PY'
import json, sys
doc = json.load(open(sys.argv[1])); test, mode = sys.argv[2], sys.argv[3]
if_tx, if_rx = int(sys.argv[4]), int(sys.argv[5])
cli_tx = sum(c["tx_bytes_total"] for c in doc["connections"] if c["role"] == "client")
cli_rx = sum(c["rx_bytes_total"] for c in doc["connections"] if c["role"] == "client")
app, wire = (cli_tx, if_tx) if test == "write" else (cli_rx, if_rx)
dev = abs(wire - app) / app
print(f"{test}/{mode}: fabperf counted {app} B, eth0 counted {wire} B ({dev*100:.2f}% apart), "
      f"aggregate {doc['aggregate']['mb_per_s']:.0f} MB/s")
assert doc["complete"], doc["findings"]
assert app > 50e6, "too little traffic to compare"
assert wire >= app, "the interface cannot carry less than the payload"
assert dev < 0.03, f"interface and fabperf disagree by {dev*100:.2f}%"
# Every client connection runs at jumbo size on this path.
mss = [c["tcp"]["snd_mss"] for c in doc["connections"] if c["role"] == "client" and c["tcp"]]
assert mss and min(mss) > 8000, f"expected jumbo MSS on an MTU 9000 path, got {mss}"
PY
}
check write stream
check read rpc
echo "PASS"
