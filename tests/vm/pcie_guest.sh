#!/usr/bin/env bash
# Runs inside one VM-lab guest booted by tests/vm/test_pcie_lab.sh: a q35 machine with two NUMA
# nodes (CPU 0 / CPU 1), a second PCIe root bus (pxb-pcie) on node 1 with a root port narrowed to
# x4 at 8 GT/s (pcie-root-port x-width=4,x-speed=8), and on it one two-function "card": two
# virtio-net functions that report 56000 Mb/s each. A third virtio-net NIC on a root port of the
# main bus (node 0, 1000 Mb/s) is the peer. The three NICs share one qemu hub.
#   ens1f0, ens1f1  the card's ports (root namespace; only ens1f0 carries an address)
#   ens2            the peer, in namespace `peer`
# ens1f0's interrupts are pinned to CPU 0, outside the card's node. Then: `fabperf links` (text and
# JSON, and through the agent from the peer), and `fabperf preflight` across the two agents. The
# outputs go to $VMLAB_RESULTS; test_pcie_lab.sh checks them on the host.
# Usage: pcie_guest.sh FABPERF
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
FABPERF=$1
OUT=${VMLAB_RESULTS:?run me through scripts/vm-lab}
W=/tmp/pcietest
mkdir -p "$W"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
trap 'echo "FAIL: pcie_guest.sh line $LINENO: $BASH_COMMAND exited $?"' ERR
fail() { echo "FAIL: $*"; exit 1; }
# What the guest sees of the host (issue 28: it used to read the whole /): /usr, a copy of /etc
# without its secrets, the checkout; not the shadow file, not root's home.
[ -d /usr/bin ] && [ -r /etc/passwd ] || fail "the guest lacks /usr or /etc"
[ ! -e /etc/shadow ] || fail "the guest sees the host's /etc/shadow"
[ -z "$(ls -A /root)" ] || fail "the guest sees the host's /root: $(ls -A /root | head -3 | tr '\n' ' ')"
echo "host view: /usr and /etc present, /etc/shadow absent, /root empty"
# The host root is shared over 9p without a page cache: one stripped copy in the guest's tmpfs.
cp "$FABPERF" "$W/fabperf"
strip --strip-debug "$W/fabperf" 2>/dev/null || true
FABPERF=$W/fabperf
"$FABPERF" keygen "$W/key" >/dev/null

# The NICs by the MACs test_pcie_lab.sh gave them (probe order is not theirs to rely on).
by_mac() { for d in /sys/class/net/*; do if [ "$(cat "$d/address")" = "$1" ]; then basename "$d"; fi; done; }
a=$(by_mac 52:54:00:fc:01:00) b=$(by_mac 52:54:00:fc:01:01) c=$(by_mac 52:54:00:fc:02:00)
[ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] || { ip -br link; fail "the three NICs are not all there"; }
ip -b - <<B
link set $a name ens1f0
link set $b name ens1f1
link set $c name ens2
netns add peer
link set ens2 netns peer
addr add 198.18.0.1/24 dev ens1f0
link set ens1f0 up
link set ens1f1 up
B
ip -n peer -b - <<B
link set lo up
addr add 198.18.0.2/24 dev ens2
link set ens2 up
B
fn=$(basename "$(readlink -f /sys/class/net/ens1f0/device/..)")
echo "ens1f0 is PCI function $fn"
for irq in $(ls "/sys/bus/pci/devices/$fn/msi_irqs"); do echo 0 >"/proc/irq/$irq/smp_affinity_list"; done
for _ in $(seq 50); do [ "$(cat /sys/class/net/ens1f0/operstate)" = up ] && break; sleep 0.1; done

agent() {  # agent NS ADDR (NS "-" = the root namespace)
  local ready="$W/ready.$2" pre=()
  [ "$1" = - ] || pre=(ip netns exec "$1")
  "${pre[@]}" "$FABPERF" agent --listen "$2:6668" --ready-fd 3 --log-level warn --key-file "$W/key" \
    3>"$ready" 2>>"$OUT/agent-$2.log" &
  PIDS+=($!)
  for _ in $(seq 200); do grep -q LISTENING "$ready" 2>/dev/null && return 0; sleep 0.1; done
  cat "$OUT/agent-$2.log"; fail "agent on $2 did not start"
}
agent - 198.18.0.1
agent peer 198.18.0.2

"$FABPERF" links >"$OUT/links.txt"
"$FABPERF" links --json >"$OUT/links.json"
cat "$OUT/links.txt"
# Through the agent: the LINKS message carries the same facts.
ip netns exec peer "$FABPERF" links --json --key-file "$W/key" 198.18.0.1 >"$OUT/links-remote.json"
set +e
ip netns exec peer "$FABPERF" preflight --hosts 198.18.0.1,198.18.0.2 --key-file "$W/key" >"$OUT/preflight.out" 2>&1
echo $? >"$OUT/preflight.rc"
set -e
cat "$OUT/preflight.out"
echo "preflight exit $(cat "$OUT/preflight.rc")"
grep -h "" /proc/interrupts | grep -E "CPU0|virtio" >"$OUT/interrupts.txt"

# PCIE_CAPTURE=1: the sysfs and procfs files the readers use, for tests/data/pcie/vm-q35 (the
# layout as this kernel writes it: the virtio device between interface and PCI function).
if [ "${PCIE_CAPTURE:-0}" = 1 ]; then
  T=$OUT/tree
  port=$(readlink -f /sys/class/net/ens1f0/device/../..)
  irqs=()
  for d in "$port" "$port"/0000:*; do
    mkdir -p "$T$d"
    for f in current_link_speed current_link_width max_link_speed max_link_width numa_node local_cpulist class vendor device config irq; do
      [ -r "$d/$f" ] && cat "$d/$f" >"$T$d/$f"
    done
    if [ -d "$d/msi_irqs" ]; then
      mkdir -p "$T$d/msi_irqs"
      for i in $(ls "$d/msi_irqs"); do cat "$d/msi_irqs/$i" >"$T$d/msi_irqs/$i"; irqs+=("$i"); done
    fi
  done
  mkdir -p "$T/sys/class/net" "$T/proc"
  for ifc in ens1f0 ens1f1; do
    real=$(readlink -f "/sys/class/net/$ifc")
    mkdir -p "$T$real/statistics"
    for f in speed mtu operstate address type duplex; do cat "$real/$f" >"$T$real/$f" 2>/dev/null || true; done
    for f in tx_bytes rx_bytes tx_packets rx_packets tx_errors rx_errors tx_dropped rx_dropped; do cat "$real/statistics/$f" >"$T$real/statistics/$f"; done
    ln -s "$(realpath --relative-to=/sys/class/net "$real")" "$T/sys/class/net/$ifc"
    ln -s "$(realpath --relative-to="$real" "$(readlink -f "$real/device")")" "$T$real/device"
  done
  grep -E "^ +CPU0|virtio" /proc/interrupts >"$T/proc/interrupts"
  for i in "${irqs[@]}"; do
    mkdir -p "$T/proc/irq/$i"
    for f in smp_affinity_list effective_affinity_list; do cat "/proc/irq/$i/$f" >"$T/proc/irq/$i/$f"; done
  done
  echo "captured into $T"
fi
