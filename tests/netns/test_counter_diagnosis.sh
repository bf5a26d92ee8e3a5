#!/usr/bin/env bash
# What the wire saw, with real counters: two hosts through a switch, host 1 streams to host 2 at
# 200 Mbit/s. Mid-test, for one second, a link is squeezed to 1 Mbit/s with a tiny tbf queue:
#  1. host 1's own eth0: its root qdisc drops; the diagnosis of h1/eth0 must name qdisc.drops in
#     an interval that overlaps the squeeze, and no dip outside it may name it;
#  2. the switch port towards host 2: packets are lost in the network, host 1's TCP resends;
#     the diagnosis of h1/eth0 must name a TCP retransmit or RTO counter in an interval that
#     overlaps the squeeze.
# veth's driver statistics come through the real ethtool ioctl: eth0's peer_ifindex in the result
# must be the peer's index as the kernel gives it (iflink).
FABPERF=$1 TOP=$2
. "$(dirname "$0")/lib.sh"
require_root
TAG="cd$(( $$ % 100000 ))"
"$LAB" up "$TAG" --hosts 2 --rate 200mbit >/dev/null
start_agent 1 198.18.0.1
start_agent 2 198.18.0.2
SW="fp-$TAG-sw"

# squeeze NS DEV: 1 Mbit/s, one packet of burst, a 3000-byte queue, for one second; then the
# lab's shaping again. Prints the phase's wall-clock edges (ns).
squeeze() {
  local ns=$1 dev=$2 t0 t1
  t0=$(date +%s%N)
  ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate 1mbit burst 1600 limit 3000
  sleep 1
  ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate 200mbit burst 256kb latency 50ms
  t1=$(date +%s%N)
  echo "$t0 $t1"
}

run_with_squeeze() {
  local out=$1 ns=$2 dev=$3
  in_host 1 "$FABPERF" run --servers 198.18.0.2 --clients 198.18.0.1 "${KEYARGS[@]}" --test write --mode stream \
    --time 8 --warmup 1 --interval 0.5 --parallel 4 --json "$WORK/$out.json" >"$WORK/$out.txt" &
  local pid=$!
  PIDS+=($pid)
  # The window opens about a second after the start (set-up, then the 1 s warm-up); squeeze in
  # its middle. Where the phase fell in the window is computed from the agent's own clock.
  sleep 4
  squeeze "$ns" "$dev" >"$WORK/$out.phase"
  wait "$pid"
}

run_with_squeeze local "$("$LAB" ns "$TAG" 1)" eth0
run_with_squeeze network "$SW" h2p0
IFLINK=$(in_host 1 cat /sys/class/net/eth0/iflink)

python3 - "$WORK" "$IFLINK" <<'PY'
import json, sys
work, iflink = sys.argv[1], int(sys.argv[2])

def check(name, want):
    doc = json.load(open(f"{work}/{name}.json"))
    t0, t1 = (int(x) / 1e9 for x in open(f"{work}/{name}.phase").read().split())
    n1 = next(n for n in doc["nodes"] if n["node"].startswith("198.18.0.1"))
    open_s = n1["window_open_unix_s"]
    p0, p1 = t0 - open_s, t1 - open_s
    print(f"{name}: squeeze at {p0:.2f}..{p1:.2f} s of the window")
    for n in doc["nodes"]:
        for d in n["counters"]["dips"]:
            print(f"  {n['node']} {d['text']}")
    assert doc["complete"], doc["findings"]
    dips = [d for d in n1["counters"]["dips"] if d["subject"] == "eth0"]
    named = [d for d in dips if any(m["name"] in want for m in d["rose"])]
    # Interval edges are stamped when sampled: allow the sampling's own spread (50 ms).
    inside = [d for d in named if d["t1_s"] > p0 - 0.05 and d["t0_s"] < p1 + 0.05]
    assert inside, f"no dip on h1/eth0 overlapping the squeeze {p0:.2f}..{p1:.2f} names any of {want}: {[d['text'] for d in dips]}"
    cats = n1["counters"]["categories"]
    return doc, n1, cats, named, p0, p1

doc, n1, cats, named, p0, p1 = check("local", {"qdisc.drops"})
assert cats["discard"] > 0, cats
# The qdisc drops only while its queue is tiny: no dip before the squeeze or later than the
# interval that holds its end names them (TCP's recovery after it may dip without drops).
for d in named:
    assert d["t1_s"] > p0 - 0.05 and d["t0_s"] < p1 + 0.05, f"dip {d['text']} names qdisc drops outside the squeeze {p0:.2f}..{p1:.2f}"
eth0 = next(s for s in n1["counters"]["series"] if s["source"] == "eth0")
assert eth0["first"].get("peer_ifindex") == iflink, f"peer_ifindex {eth0['first'].get('peer_ifindex')} != iflink {iflink}"
assert "rx_queue_0_drops" in eth0["first"], sorted(eth0["first"])
assert "qdisc.drops" in eth0["moved"], sorted(eth0["moved"])
print(f"veth statistics through the ioctl: {len([k for k in eth0['first'] if '.' not in k])} counters, "
      f"peer_ifindex {iflink}; qdisc.drops over the window {sum(eth0['moved']['qdisc.drops'])}")
doc, n1, cats, named, p0, p1 = check("network", {"Tcp.RetransSegs", "TcpExt.TCPLostRetransmit", "TcpExt.TCPTimeouts",
                                  "TcpExt.TCPFastRetrans", "TcpExt.TCPSlowStartRetrans"})
assert cats["retransmit"] > 0, cats
PY
echo "text report of the second run:"
sed -n '/^Counters/,/^$/p' "$WORK/network.txt"
echo "PASS"
