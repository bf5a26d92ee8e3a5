#!/usr/bin/env bash
# Runs inside one VM-lab guest (scripts/vm-lab --modules bonding,...): real Linux bonds between
# network namespaces, every member shaped with tbf (BOND_RATE_MBIT), fabperf agents and
# coordinators inside the namespaces. One boot covers every variant:
#   texts:  /proc/net/bonding of active-backup, balance-xor, balance-rr, balance-tlb bonds (no
#           traffic; stored as parser test data in tests/data/bonding/);
#   lacp:   802.3ad layer3+4 on two direct veth pairs: inventory; 8 flows with --spread-ports
#           (shares 40-60%, >= 1.8x one member, members vs counters within 3%, the hash's member
#           per flow vs tc's per-port counters on each member);
#   down:   802.3ad again, one member set down mid-test: reported, traffic moved, test complete,
#           no connection reset; then `fabperf preflight` names the down member and the fix;
#   alb:    balance-alb through a bridge "switch" namespace, two address pairs in two subnets,
#           each client address ARPs its server address once both bonds have both members (the
#           server's rlb then answers each with another member's MAC): one pair -> one member
#           and fabperf says why; two pairs -> both members receive, and fabperf says which
#           member each address reaches.
# Counter agreement: a sampler in each namespace reads the members' sysfs counters every 0.2 s
# with its wall-clock time; check.py interpolates them at fabperf's own window edges (the JSON's
# nodes[].window_open_unix_s and window_s) and compares with fabperf's member figures.
# Usage: guest.sh FABPERF TESTS_BONDING_DIR. Results, the samples and the captured
# /proc/net/bonding texts go to $VMLAB_RESULTS; test_bonding.sh checks them on the host
# (check.py), where Python does not have to load over 9p in an emulated CPU.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
FABPERF=$1
HERE=$2  # tests/bonding (the lab runs a copy of this script from its results folder)
OUT=${VMLAB_RESULTS:?run me through scripts/vm-lab}
W=/tmp/bondtest
mkdir -p "$W"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
t0=$(date +%s.%N)
stamp() { echo "[$(echo "$(date +%s.%N) $t0" | awk '{printf "%6.1fs", $1 - $2}')] $*"; }
# The host root is shared over 9p without a page cache: every exec of a 49 MB binary reads it
# again. One stripped copy in the guest's own tmpfs.
cp "$FABPERF" "$W/fabperf"
strip --strip-debug "$W/fabperf" 2>/dev/null || true
FABPERF=$W/fabperf

KEYARGS=()
if "$FABPERF" keygen "$W/key" >/dev/null 2>&1; then KEYARGS=(--key-file "$W/key"); fi
# 3 Mbit/s per member: below what the emulated guest's CPU moves on a crowded host, so the
# members, not the CPU, are the limit (at 5 Mbit/s and host load 13 the guest moved only 0.84 of
# the members' 1.2 MB/s; 2.5 MB/s while a second VM ran). NOTES section 9's 200 Mbit/s needs an
# idle host.
RATE_MBIT=${BOND_RATE_MBIT:-3}
RATE=${RATE_MBIT}mbit
export BOND_RATE_MBIT=$RATE_MBIT
shape() {  # shape NS DEV...
  local ns=$1; shift
  for d in "$@"; do echo "qdisc replace dev $d root tbf rate $RATE burst 32kb latency 100ms"; done | ip netns exec "$ns" tc -b -
}

agent() {  # agent NS ADDR
  local ready="$W/ready.$1"
  ip netns exec "$1" "$FABPERF" agent --listen "$2:6668" --ready-fd 3 --log-level warn "${KEYARGS[@]}" \
    3>"$ready" 2>>"$OUT/agent-$1.log" &
  PIDS+=($!)
  for _ in $(seq 200); do grep -q LISTENING "$ready" 2>/dev/null && return 0; sleep 0.1; done
  cat "$OUT/agent-$1.log"; fail "agent in $1 did not start"
}

# --- 802.3ad: two direct wires (a bridge would swallow the LACPDUs) ---------------------------
stamp "setting up 802.3ad bonds"
# Batched: every process start is slow in an emulated guest.
for n in 1 2; do ip netns add L$n; done
printf 'link add m%s netns L1 type veth peer name m%s netns L2\n' 0 0 1 1 | ip -b -
for n in 1 2; do
  ip -n L$n -b - <<B
link set lo up
link add bond0 type bond mode 802.3ad miimon 100 lacp_rate fast xmit_hash_policy layer3+4
link set m0 master bond0
link set m1 master bond0
link set bond0 up
addr add 198.18.10.$n/24 dev bond0
B
  shape L$n m0 m1
done

# While LACP settles: the other modes' /proc/net/bonding texts (parser test data), no traffic.
ip netns add T
{
  echo "link set lo up"
  for b in ab xor rr tlb; do
    echo "link add ${b}0 type veth peer name ${b}0p"
    echo "link add ${b}1 type veth peer name ${b}1p"
  done
  echo "link add bab type bond mode active-backup miimon 100"
  echo "link add bxor type bond mode balance-xor miimon 100 xmit_hash_policy layer2+3"
  echo "link add brr type bond mode balance-rr miimon 100"
  echo "link add btlb type bond mode balance-tlb miimon 100"
  for b in ab xor rr tlb; do
    echo "link set ${b}0 master b$b"
    echo "link set ${b}1 master b$b"
    echo "link set ${b}0p up"
    echo "link set ${b}1p up"
    echo "link set b$b up"
  done
} | ip -n T -b -
sleep 1  # miimon sees the members up
ip netns exec T bash -c 'for b in bab bxor brr btlb; do echo "$(</proc/net/bonding/$b)" >"$1/proc-$b.txt"; done' sh "$OUT"
ip netns del T

lacp_ready() {
  local t
  t=$(ip netns exec "$1" cat /proc/net/bonding/bond0)
  grep -q "Number of ports: 2" <<<"$t" && ! grep -q "Partner Mac Address: 00:00:00:00:00:00" <<<"$t"
}
for _ in $(seq 150); do lacp_ready L1 && lacp_ready L2 && break; sleep 0.2; done
lacp_ready L1 && lacp_ready L2 || { ip netns exec L1 cat /proc/net/bonding/bond0; fail "LACP did not settle in 30 s"; }
stamp "LACP settled"
ip netns exec L1 cat /proc/net/bonding/bond0 >"$OUT/proc-8023ad-layer34.txt"
ip netns exec L1 "$FABPERF" links --json >"$OUT/lacp-links.json"
ip netns exec L1 "$FABPERF" links >"$OUT/lacp-links.txt"
cat "$OUT/lacp-links.txt"

agent L1 198.18.10.1
agent L2 198.18.10.2

# sampler NS OUTFILE DEV...: every 0.2 s one line "unix_time tx rx [tx rx]..." of the members'
# sysfs counters, from one bash process (builtins only: no process start per reading), until
# stop_samplers. The time is taken before the reads; a reading takes well under a millisecond.
SAMPLERS=()
mkfifo "$W/tick"
sampler() {
  local ns=$1 out=$2; shift 2
  ip netns exec "$ns" bash -c '
    out=$1; shift
    exec 3<>"$TICK"
    while :; do
      line=$EPOCHREALTIME
      for d in "$@"; do
        read -r t </sys/class/net/$d/statistics/tx_bytes
        read -r r </sys/class/net/$d/statistics/rx_bytes
        line+=" $t $r"
      done
      echo "$line" >>"$out"
      read -r -t 0.2 -u 3 _ || :
    done' sh "$out" "$@" &
  SAMPLERS+=($!)
  PIDS+=($!)
}
export TICK=$W/tick
stop_samplers() {
  for p in "${SAMPLERS[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  SAMPLERS=()
}

# wait_flows NS N: until N data connections (source ports 10000-32767: --spread-ports) are up.
wait_flows() {
  for _ in $(seq 200); do
    local c
    c=$(ip netns exec "$1" ss -Htn state established '( sport >= :10000 and sport <= :32767 )' | wc -l)
    [ "$c" -ge "$2" ] && return 0
    sleep 0.05
  done
  fail "the $2 data connections did not come up in $1"
}

# Per-port egress counters on each member (tc clsact + u32, one filter per source port): which
# member really carried each flow.
port_filters() {  # port_filters NS DEV...
  local ns=$1; shift
  local ports
  ports=$(ip netns exec "$ns" ss -Htn state established '( sport >= :10000 and sport <= :32767 )' | awk '{print $3}' | sed 's/.*://' | sort -u)
  for d in "$@"; do
    echo "qdisc replace dev $d clsact"
    local prio=1
    for p in $ports; do
      echo "filter add dev $d egress prio $prio protocol ip u32 match ip sport $p 0xffff action ok"
      prio=$((prio + 1))
    done
  done | ip netns exec "$ns" tc -b -
  echo "$ports" >"$W/ports.$ns"
}
port_counts() {  # port_counts NS OUTFILE DEV...: "dev port bytes" lines (one tc per member)
  local ns=$1 out=$2; shift 2
  : >"$out"
  for d in "$@"; do
    # Filter `pref N` counts port number N of the list; its first "Sent" line is its own.
    ip netns exec "$ns" tc -s filter show dev "$d" egress | tee "$OUT/tc-filters-$ns-$d.txt" |
      awk -v d="$d" -v ports="$(tr '\n' ' ' <"$W/ports.$ns")" '
        BEGIN { n = split(ports, p, " ") }
        match($0, /pref [0-9]+/) { cur = substr($0, RSTART + 5, RLENGTH - 5) + 0 }
        /Sent/ && cur > 0 && !(cur in seen) { seen[cur] = $2 }
        END { for (i = 1; i <= n; i++) print d, p[i], (i in seen) ? seen[i] : 0 }' >>"$out"
  done
}

# Long enough that the slow emulated guest installs its per-port tc counters while the flows
# still run; the window excludes the first 6 s.
RUN=(--mode stream --buffsize 64K --time 16 --warmup 6 --cooldown 1 --interval 1 "${KEYARGS[@]}")

stamp "802.3ad: 8 flows with --spread-ports"
sampler L1 "$OUT/lacp8.samples" m0 m1
sampler L2 "$OUT/lacp8.server-samples" m0 m1
ip netns exec L1 "$FABPERF" run --servers 198.18.10.2 --clients 198.18.10.1 --parallel 8 --spread-ports "${RUN[@]}" \
  --json "$OUT/lacp8.json" >"$OUT/lacp8.out" 2>&1 &
run_pid=$!
wait_flows L1 8
port_filters L1 m0 m1
wait $run_pid || { cat "$OUT/lacp8.out"; fail "fabperf run (802.3ad, 8 flows) exited $?"; }
stop_samplers
port_counts L1 "$W/lacp8.ports" m0 m1
cp "$W/lacp8.ports" "$OUT/lacp8.ports"

# --- 802.3ad: a member goes down mid-test ---------------------------------------------------
stamp "802.3ad: member m1 down mid-test"
# The member goes down through an `ip` that is already running (a process start takes seconds in
# a busy emulated guest): 8 s after the flows are up, inside the window of a 24 s test (6..23 s).
mkfifo "$W/down"
ip -n L1 -b "$W/down" &
down_pid=$!
ip netns exec L1 "$FABPERF" run --servers 198.18.10.2 --clients 198.18.10.1 --parallel 8 --spread-ports \
  --mode stream --buffsize 64K --time 24 --warmup 6 --cooldown 1 --interval 1 "${KEYARGS[@]}" \
  --json "$OUT/lacpdown.json" >"$OUT/lacpdown.out" 2>&1 &
run_pid=$!
wait_flows L1 8
read -r -t 8 _ <>"$TICK" || :
echo "link set m1 down" >"$W/down"
wait $down_pid
stamp "m1 set down"
set +e
wait $run_pid
rc=$?
set -e
cat "$OUT/lacpdown.out"
[ $rc -eq 0 ] || [ $rc -eq 1 ] || fail "fabperf run (member down) exited $rc"
ip netns exec L1 cat /proc/net/bonding/bond0 >"$OUT/proc-8023ad-member-down.txt"
# Pre-flight on the degraded bonds: both agents' bond findings, each with the node and the fix.
stamp "preflight with m1 down"
set +e
ip netns exec L1 "$FABPERF" preflight --hosts 198.18.10.1,198.18.10.2 "${KEYARGS[@]}" >"$OUT/preflight-down.out" 2>&1
echo "exit $?" >>"$OUT/preflight-down.out"
set -e
cat "$OUT/preflight-down.out"
for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
PIDS=()

# --- balance-alb: a bridge "switch" in a third namespace ------------------------------------
stamp "setting up balance-alb bonds behind a bridge"
ip netns add AS; ip -n AS link set lo up
ip -n AS link add br0 type bridge
ip -n AS link set br0 up
for n in 1 2; do
  ip netns add A$n; ip -n A$n link set lo up
  printf "link add m%s netns A$n type veth peer name s${n}m%s netns AS\n" 0 0 1 1 | ip -b -
  ip -n AS -b - <<B
link set s${n}m0 master br0
link set s${n}m1 master br0
link set s${n}m0 up
link set s${n}m1 up
B
  ip -n A$n -b - <<B
link add bond0 type bond mode balance-alb miimon 100
link set m0 master bond0
link set m1 master bond0
B
  shape A$n m0 m1
  shape AS s${n}m0 s${n}m1
  # The first pair has the 802.3ad pair's addresses (the results compare node by node); the second
  # pair is in its own subnet, so every ARP for it leaves from its own address (a neighbour
  # re-probe picks the source in the target's subnet): the server's rlb keys members by client address.
  ip -n A$n -b - <<B
link set bond0 up
addr add 198.18.10.$n/24 dev bond0
addr add 198.18.11.$n/24 dev bond0
B
done
# ALB receive balancing (rlb): the server answers each client address's ARP with the next member's
# MAC, so each client address must ARP the server only now that both bonds have both members,
# one after the other, and from its own address.
sleep 0.5
for pair in 10 11; do
  for _ in $(seq 50); do
    ip netns exec A1 /bin/busybox ping -c1 -W1 -I 198.18.$pair.1 198.18.$pair.2 >/dev/null 2>&1 && break
    sleep 0.2
  done
done
ip netns exec A1 /bin/busybox ping -c1 -W2 -I 198.18.11.1 198.18.11.2 >/dev/null || fail "no path through the bridge between the ALB bonds"
stamp "ALB ready"
ip -n A1 neigh show dev bond0 | tee "$OUT/alb-neigh.txt"
ip -n A2 -d link show m0 >"$OUT/alb-server-members.txt"; ip -n A2 -d link show m1 >>"$OUT/alb-server-members.txt"
ip netns exec A1 cat /proc/net/bonding/bond0 >"$OUT/proc-balance-alb.txt"
ip netns exec A1 "$FABPERF" links --json >"$OUT/alb-links.json"
agent A1 198.18.10.1
agent A2 198.18.10.2

stamp "balance-alb: one address pair"
sampler A1 "$OUT/alb1.samples" m0 m1
sampler A2 "$OUT/alb1.server-samples" m0 m1
ip netns exec A1 "$FABPERF" run --servers 198.18.10.2 --clients 198.18.10.1 --parallel 8 "${RUN[@]}" \
  --json "$OUT/alb1.json" >"$OUT/alb1.out" 2>&1 || { cat "$OUT/alb1.out"; fail "fabperf run (alb, one pair) exited $?"; }
stop_samplers

stamp "balance-alb: two address pairs"
sampler A1 "$OUT/alb2.samples" m0 m1
sampler A2 "$OUT/alb2.server-samples" m0 m1
ip netns exec A1 "$FABPERF" run --servers 198.18.10.2@198.18.10.2+198.18.11.2 --clients 198.18.10.1@198.18.10.1+198.18.11.1 \
  --parallel 8 "${RUN[@]}" --json "$OUT/alb2.json" >"$OUT/alb2.out" 2>&1 || { cat "$OUT/alb2.out"; fail "fabperf run (alb, two pairs) exited $?"; }
stop_samplers
ip -n A1 neigh show dev bond0 >"$OUT/alb-neigh-after.txt"

# The comparison workflow: the same test on both bonds, side by side.
for v in alb1 alb2; do
  "$FABPERF" compare "$OUT/lacp8.json" "$OUT/$v.json" --json "$OUT/compare-$v.json" >"$OUT/compare-$v.txt" 2>&1 || true
done
stamp "all variants ran; the host checks the results (check.py)"
