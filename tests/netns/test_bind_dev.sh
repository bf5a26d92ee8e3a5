#!/usr/bin/env bash
# --bind-dev: SO_BINDTODEVICE on client flows, per link.
#  - `auto` on 2 hosts x 2 links: each link's flows leave by their own device (both carry data);
#  - one device for every flow (`--bind-dev eth1`): everything leaves host 1 by eth1, although
#    half the flows' source addresses belong to eth0 (the binding, not the address, decides), and
#    the report counts those flows on eth1;
#  - a device the host lacks: exit 3, the error names the device and the host;
#  - (while the lab is up) --socksize auto sizes the buffers from veth's 10000 Mb/s.
FABPERF=$1 TOP=$2
. "$(dirname "$0")/lib.sh"
require_root
two_link_lab bd 1500 200mbit
run() { two_link_run 2 "$@"; }  # run OUT.json [extra args]

tx() { counter 1 "$1" tx_bytes; }

a0=$(tx eth0) a1=$(tx eth1)
run auto.json --bind-dev auto
b0=$(tx eth0) b1=$(tx eth1)
python3 - "$WORK/auto.json" $((b0 - a0)) $((b1 - a1)) <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
d0, d1 = int(sys.argv[2]), int(sys.argv[3])
print(f"--bind-dev auto: eth0 sent {d0} B, eth1 sent {d1} B")
assert doc["complete"], doc["findings"]
assert d0 > 10e6 and d1 > 10e6, "both links must carry their own flows"
client = next(n for n in doc["nodes"] if n["role"] == "client")
links = {l["link"]: l["payload_tx_mb_per_s"] for l in client["links"]}
assert links.get("eth0", 0) > 5 and links.get("eth1", 0) > 5, links
PY

# No link addresses, every flow bound to eth1: the data goes to 198.18.0.2 (eth0's subnet) by eth1
# (the kernel treats the destination as on-link there), which only the binding can make happen.
in_host 1 "$FABPERF" run --servers 198.18.0.2 --clients 198.18.0.1 "${KEYARGS[@]}" --mode stream --parallel 2 \
  --time 2 --buffsize 256K --json "$WORK/one.json" --quiet --bind-dev eth1
c0=$(tx eth0) c1=$(tx eth1)
python3 - "$WORK/one.json" $((c0 - b0)) $((c1 - b1)) <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
d0, d1 = int(sys.argv[2]), int(sys.argv[3])
print(f"--bind-dev eth1: eth0 sent {d0} B, eth1 sent {d1} B")
assert doc["complete"], doc["findings"]
# The control connection still uses eth0: some kB of heartbeats and results.
assert d1 > 10e6 and d0 < d1 / 50, "every data flow must leave by eth1"
client = next(n for n in doc["nodes"] if n["role"] == "client")
links = {l["link"]: l["payload_tx_mb_per_s"] for l in client["links"]}
assert set(links) == {"eth1"} and links["eth1"] > 5, links
PY

# Per link, swapped: link 0's connection bound to eth1 cannot complete its handshake (the
# SYN-ACK comes back on eth0, which a socket bound to eth1 does not see): proof that each
# connection gets its own link's device.
set +e
run swapped.json --bind-dev eth1+eth0 2>"$WORK/swapped.err"
rc=$?
set -e
cat "$WORK/swapped.err"
[ $rc -eq 3 ] && grep -q "data connection to 198.18" "$WORK/swapped.err" ||
  { echo "FAIL: swapped devices should make the data connections fail (rc $rc)"; exit 1; }
sleep 2  # the agents release the aborted set-up asynchronously ("busy: still cleaning up")

# --socksize auto on veth (sysfs speed 10000 Mb/s): the size follows from that speed and the
# control connections' round trips, and is what the agents were given.
run auto-sock.json --socksize auto
python3 - "$WORK/auto-sock.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
a = doc["socksize_auto"]
print("socksize auto:", a["basis"])
assert a["socksize"] >= 256 * 1024 and a["socksize"] % 65536 == 0, a
assert doc["settings"]["socksize"] == a["socksize"], doc["settings"]
assert "10000 Mb/s" in a["basis"], a["basis"]
PY

set +e
run bad.json --bind-dev nosuch0 2>"$WORK/bad.err"
rc=$?
set -e
cat "$WORK/bad.err"
[ $rc -eq 3 ] || { echo "FAIL: --bind-dev nosuch0 exited $rc, expected 3"; exit 1; }
grep -q -- "--bind-dev nosuch0: no such network interface on" "$WORK/bad.err" || { echo "FAIL: error does not name the device"; exit 1; }
echo "PASS"
