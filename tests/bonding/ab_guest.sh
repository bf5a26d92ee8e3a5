#!/usr/bin/env bash
# The session behind docs/workflow-bond-modes.md, run inside one VM-lab guest (real bonds: the
# host kernel has no bonding driver):
#   scripts/vm-lab --modules bonding --timeout 900 --results DIR tests/bonding/ab_guest.sh FABPERF tests/bonding
# Two namespaces L1 and L2, each bond member shaped to BOND_RATE_MBIT
# (default 3 Mbit/s: below what the emulated CPU moves, so the members are the limit). An A/B
# plan switches both bonds between balance-alb and 802.3ad (layer3+4) with a hook run on the
# coordinator's side (L1), 5 rounds each, 8 flows with --spread-ports; then `fabperf compare`.
# Everything the workflow page shows is written to $VMLAB_RESULTS (session.txt).
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
FABPERF=$1
OUT=${VMLAB_RESULTS:?run me through scripts/vm-lab}
W=/tmp/abtest
mkdir -p "$W"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done' EXIT
cp "$FABPERF" "$W/fabperf"
strip --strip-debug "$W/fabperf" 2>/dev/null || true
FABPERF=$W/fabperf
RATE=${BOND_RATE_MBIT:-3}mbit
S="$OUT/session.txt"
: >"$S"
show() { echo "\$ $*" | tee -a "$S"; "$@" 2>&1 | tee -a "$S"; return "${PIPESTATUS[0]}"; }

# Two hosts L1, L2. A Linux bridge cannot carry LACP (it never forwards 01:80:c2:00:00:02) and
# balance-alb needs a switch (its receive balancing hands each peer another member's MAC), so
# the lab has both: members d0/d1 are direct wires (for 802.3ad; a real switch would get its
# port-channel configured), members s0/s1 go through a bridge "switch" namespace SW (for alb).
# The hook puts bond0 on the pair its mode needs. Every member is shaped on both ends.
ip netns add SW; ip -n SW link set lo up
ip -n SW link add br0 type bridge; ip -n SW link set br0 up
for n in 1 2; do ip netns add L$n; ip -n L$n link set lo up; done
printf 'link add d%s netns L1 type veth peer name d%s netns L2\n' 0 0 1 1 | ip -b -
for n in 1 2; do
  printf "link add s%s netns L$n type veth peer name w${n}s%s netns SW\n" 0 0 1 1 | ip -b -
  for p in 0 1; do ip -n SW link set w${n}s$p master br0; ip -n SW link set w${n}s$p up; done
done
for n in 1 2; do
  for d in d0 d1 s0 s1; do ip netns exec L$n tc qdisc replace dev $d root tbf rate "$RATE" burst 32kb latency 100ms; done
  for p in 0 1; do ip netns exec SW tc qdisc replace dev w${n}s$p root tbf rate "$RATE" burst 32kb latency 100ms; done
done

# The hook: what a site's own script does over ssh on both hosts (and on the switch). Here both
# "hosts" are namespaces of this guest.
cat >"$W/set-bond-mode" <<'HOOK'
#!/usr/bin/env bash
# set-bond-mode MODE: rebuild bond0 on L1 and L2 in MODE, wait until it carries traffic.
set -euo pipefail
mode=$1
if [ "$mode" = 802.3ad ]; then members="d0 d1" others="s0 s1"; else members="s0 s1" others="d0 d1"; fi
for n in 1 2; do
  ns=L$n
  ip -n $ns link del bond0 2>/dev/null || true
  if [ "$mode" = 802.3ad ]; then
    ip -n $ns link add bond0 type bond mode 802.3ad miimon 100 lacp_rate fast xmit_hash_policy layer3+4
  else
    ip -n $ns link add bond0 type bond mode "$mode" miimon 100
  fi
  for m in $others; do ip -n $ns link set $m down; done
  for m in $members; do ip -n $ns link set $m down; ip -n $ns link set $m master bond0; done
  ip -n $ns link set bond0 up
  ip -n $ns addr add 198.18.10.$n/24 dev bond0
  ip -n $ns neigh flush dev bond0 2>/dev/null || true
done
sleep 0.5  # both bonds have both members before the first ARP (alb's receive balancing)
t0=$SECONDS
while [ $((SECONDS - t0)) -lt 120 ]; do
  ok=1
  if [ "$mode" = 802.3ad ]; then
    for n in 1 2; do
      t=$(ip netns exec L$n cat /proc/net/bonding/bond0)
      grep -q "Number of ports: 2" <<<"$t" && ! grep -q "Partner Mac Address: 00:00:00:00:00:00" <<<"$t" || ok=0
    done
    [ $ok = 1 ] || { echo "$((SECONDS - t0)) s: LACP not settled"; sleep 1; continue; }
  fi
  ip netns exec L1 /bin/busybox ping -c1 -W2 198.18.10.2 >/dev/null 2>&1 && { echo "bond0: $mode on $members, ready after $((SECONDS - t0)) s"; exit 0; }
  echo "$((SECONDS - t0)) s: no ping reply yet"
  sleep 0.5
done
echo "bond0 did not come up in $mode within 120 s" >&2
ip netns exec L1 cat /proc/net/bonding/bond0 >&2
exit 1
HOOK
chmod +x "$W/set-bond-mode"
# Both modes once before the agents start: how long each takes here (the hook timeout).
for m in 802.3ad balance-alb; do
  s0=$SECONDS
  "$W/set-bond-mode" $m >"$OUT/hook-check-$m.txt" 2>&1 || { cat "$OUT/hook-check-$m.txt"; echo "FAIL: set-bond-mode $m"; exit 1; }
  echo "set-bond-mode $m: $((SECONDS - s0)) s" | tee -a "$OUT/hook-times.txt"
done

KEYARGS=()
if "$FABPERF" keygen "$W/key" >/dev/null 2>&1; then KEYARGS=(--key-file "$W/key"); fi
for n in 1 2; do
  ip netns exec L$n "$FABPERF" agent --listen "198.18.10.$n:6668" --ready-fd 3 --log-level warn "${KEYARGS[@]}" 3>"$W/ready$n" 2>>"$OUT/agent$n.log" &
  PIDS+=($!)
  for _ in $(seq 200); do grep -q LISTENING "$W/ready$n" 2>/dev/null && break; sleep 0.1; done
done

cat >"$W/bond-modes.toml" <<TOML
name = "bond-modes"
repeat = 5

[ab]
a = "$W/set-bond-mode balance-alb"
b = "$W/set-bond-mode 802.3ad"
a-name = "balance-alb"
b-name = "802.3ad"
hook-timeout = 200

[[hosts]]
name = "l1"
address = "198.18.10.1"

[[hosts]]
name = "l2"
address = "198.18.10.2"

[[tests]]
name = "bond"
pattern = "pairs"
pairs = ["l1->l2"]
mode = "stream"
parallel = 8
spread-ports = true
buffsize = "64K"
time = 8
warmup = 2
cooldown = 1
TOML
cp "$W/bond-modes.toml" "$OUT/"
cd "$W"
show cat bond-modes.toml
show ip netns exec L1 "$FABPERF" plan check bond-modes.toml
set +e
show ip netns exec L1 "$FABPERF" run bond-modes.toml "${KEYARGS[@]}" --results bond-modes.jsonl
echo "(exit $?)" | tee -a "$S"
show ip netns exec L1 "$FABPERF" run bond-modes.toml "${KEYARGS[@]}" --allow-hooks --connect-timeout 30 --results bond-modes.jsonl
echo "(exit $?)" | tee -a "$S"
show "$FABPERF" compare bond-modes.jsonl --json compare.json
echo "(exit $?)" | tee -a "$S"
set -e
cp bond-modes.jsonl compare.json "$OUT/"
