#!/usr/bin/env bash
# ctest label `pcie`: the PCIe, NUMA and interrupt facts of a real kernel's sysfs, in one short
# VM-lab guest (tests/vm/pcie_guest.sh): q35, two NUMA nodes, a pxb-pcie root bus on node 1 with
# a root port narrowed to x4 8 GT/s and a two-function virtio-net "card" (2 x 56000 Mb/s) on it.
# Checks on the host: `fabperf links` (text, JSON, through an agent) shows the link, the slot's
# capability, the node, the ports sharing the link, the usable bandwidth against their 112 Gbit/s
# and the interrupts pinned off the node; `fabperf preflight` names the short slot and the
# interrupts. SKIP (77) when not root or when the VM lab cannot run here.
set -uo pipefail
FABPERF=$1 TOP=$2
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: the VM lab needs root"; exit 77; fi
RES=$(mktemp -d /tmp/fabperf-pcie-lab.XXXXXX)
start=$(date +%s)
q=()
qa() { for a in "$@"; do q+=(--qemu-arg "$a"); done; }
qa -object memory-backend-ram,id=m0,size=512M -object memory-backend-ram,id=m1,size=512M
qa -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1
qa -device pxb-pcie,id=pxb1,bus_nr=0x80,numa_node=1,bus=pcie.0
qa -device pcie-root-port,id=rp1,bus=pxb1,chassis=1,x-speed=8,x-width=4
qa -device pcie-root-port,id=rp2,bus=pcie.0,chassis=2
# romfile=: no iPXE option ROMs (the kernel is booted directly; they only cost boot time).
qa -netdev hubport,id=p0,hubid=0 -netdev hubport,id=p1,hubid=0 -netdev hubport,id=p2,hubid=0
qa -device virtio-net-pci,netdev=p0,bus=rp1,addr=0.0,multifunction=on,speed=56000,duplex=full,romfile=,mac=52:54:00:fc:01:00
qa -device virtio-net-pci,netdev=p1,bus=rp1,addr=0.1,speed=56000,duplex=full,romfile=,mac=52:54:00:fc:01:01
qa -device virtio-net-pci,netdev=p2,bus=rp2,speed=1000,duplex=full,romfile=,mac=52:54:00:fc:02:00
"$TOP/scripts/vm-lab" --modules none --machine q35 --mem 1024 --smp 2 "${q[@]}" --timeout "${FABPERF_PCIE_TIMEOUT:-300}" \
  --env "PCIE_CAPTURE=${PCIE_CAPTURE:-0}" --results "$RES" --quiet "$TOP/tests/vm/pcie_guest.sh" "$FABPERF"
rc=$?
[ -f "$RES/guest-0.log" ] && cat "$RES/guest-0.log"
vm_s=$(( $(date +%s) - start ))
if [ $rc -eq 0 ]; then
  python3 "$TOP/tests/vm/check_pcie.py" "$RES" || rc=1
fi
echo "pcie VM stage: $vm_s s wall, exit $rc (results: $RES)"
if [ $rc -eq 0 ] && [ -z "${FABPERF_KEEP_RESULTS:-}" ]; then rm -rf "$RES"; fi
exit $rc
