#!/usr/bin/env bash
# A slow link and big socket buffers: when a stream test stops, the senders' kernels still hold
# more data than the link moves in the 3 s no-progress grace (what a bond that lost a member does
# to the flows it moves). The test must still end normally: every connection drains and closes,
# no reset, no "peer stalled", and every byte a client sent reached its server. Then rpc blocks that
# take longer than the grace to cross: a tester still writing its block after the end moves the
# deadline on with every byte, so it is slow, not stalled (it used to fail "peer stalled").
FABPERF=$1 TOP=$2
. "$(dirname "$0")/lib.sh"
require_root
two_host_lab dr --rate 4mbit

t0=$(date +%s.%N)
in_host 1 "$FABPERF" run --servers 198.18.0.2 --clients 198.18.0.1 "${KEYARGS[@]}" --mode stream --parallel 8 \
  --socksize 256K --buffsize 64K --time 3 --warmup 0.5 --cooldown 0.5 --json "$WORK/drain.json" --quiet
t1=$(date +%s.%N)
python3 - "$WORK/drain.json" "$t0" "$t1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
conns = [c for c in doc["connections"] if c["op"] == "write"]
errors = [f"{c['role']} {c['local']} -> {c['remote']}: {c['error']}" for c in conns if c["error"]]
assert not errors, f"connections failed at the end of a normal test: {errors}"
assert doc["complete"], doc["findings"]
sent = {(c["local"], c["remote"]): c["tx_bytes_total"] for c in conns if c["role"] == "client"}
got = {(c["remote"], c["local"]): c["rx_bytes_total"] for c in conns if c["role"] == "server"}
assert len(sent) == 8 and sent.keys() == got.keys(), (sent, got)
lost = {k: sent[k] - got[k] for k in sent if sent[k] != got[k]}
assert not lost, f"bytes sent but never received (connection cut while draining): {lost}"
total = sum(sent.values())
# The drain really was longer than the old fixed 3 s grace: this test would have cut connections.
over = wall - 3.0
print(f"8 flows over 4 Mbit/s: {total} B sent, all received; run took {wall:.1f} s for a 3 s test "
      f"({over:.1f} s after the stop, set-up included)")
assert over > 4.0, f"the senders' queues drained in {over:.1f} s: not the slow drain this test is about"
PY
# rpc: one tester, 4 MiB blocks over 4 Mbit/s (about 8 s a block) and small socket buffers, so the
# block in flight at the end is still being written for longer than the 3 s grace.
t0=$(date +%s.%N)
in_host 1 "$FABPERF" run --servers 198.18.0.2 --clients 198.18.0.1 "${KEYARGS[@]}" --mode rpc --threads 1 \
  --socksize 128K --buffsize 4M --time 3 --warmup 0.5 --cooldown 0.5 --json "$WORK/rpc.json" --quiet || true
t1=$(date +%s.%N)
python3 - "$WORK/rpc.json" "$t0" "$t1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
errors = [f"{c['role']} {c['local']} -> {c['remote']}: {c['error']}" for c in doc["connections"] if c["error"]]
assert not errors, f"a slow rpc block was cut as stalled: {errors}"
sent = sum(c["tx_bytes_total"] for c in doc["connections"] if c["role"] == "client")
got = sum(c["rx_bytes_total"] for c in doc["connections"] if c["role"] == "server")
assert sent == got and sent > 0, (sent, got)
print(f"rpc, 4 MiB blocks over 4 Mbit/s: {sent} B sent, all received; run took {wall:.1f} s for a 3 s test")
assert wall - 3.0 > 4.0, f"the block in flight finished {wall - 3.0:.1f} s after the stop: not longer than the grace"
PY
echo "PASS"
