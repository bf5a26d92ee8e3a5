#!/usr/bin/env bash
# scripts/netns-lab --multipath: one route to the peer's 198.19.0.H over a nexthop group of both
# links with L4 hashing. 16 flows to that single address spread over both links (the chance that
# a fair L4 hash puts all 16 on one link is 2^-15); without L4 hashing they would all share one.
FABPERF=$1 TOP=$2
. "$(dirname "$0")/lib.sh"
require_root
TAG="mp$(( $$ % 100000 ))"
"$LAB" up "$TAG" --direct --links 2 --mtu 1500 --rate 200mbit --multipath | tee "$WORK/up.txt"
[ "$(in_host 1 sysctl -n net.ipv4.fib_multipath_hash_policy)" = 1 ]
in_host 1 ip route show 198.19.0.2
A1=$("$LAB" addr "$TAG" 1 mp) A2=$("$LAB" addr "$TAG" 2 mp)
start_agent 1 "$A1"
start_agent 2 "$A2"
a0=$(counter 1 eth0 tx_bytes) a1=$(counter 1 eth1 tx_bytes)
in_host 1 "$FABPERF" run --servers "$A2" --clients "$A1" "${KEYARGS[@]}" --mode stream --parallel 16 --time 3 \
  --buffsize 64K --quiet
d0=$(( $(counter 1 eth0 tx_bytes) - a0 )) d1=$(( $(counter 1 eth1 tx_bytes) - a1 ))
echo "multipath: eth0 sent $d0 B, eth1 sent $d1 B"
python3 -c "
import sys
d0, d1 = $d0, $d1
share = min(d0, d1) / (d0 + d1)
print(f'smaller link carried {100 * share:.1f}% of the bytes')
# Both shaped links are saturated when each carries some flows: about half each.
assert share > 0.3, 'flows did not spread over both links'
"
echo PASS
