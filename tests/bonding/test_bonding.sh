#!/usr/bin/env bash
# ctest label `bonding`: real Linux bonds (802.3ad and balance-alb) in one VM-lab guest
# (scripts/vm-lab, Debian's kernel under qemu: the host kernel has no bonding driver). Every check
# is in tests/bonding/guest.sh and check.py; this driver boots the guest once and reports.
# SKIP (77) when not root or when the VM lab cannot run here (no qemu, no kernel).
set -uo pipefail
FABPERF=$1 TOP=$2
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: the VM lab needs root"; exit 77; fi
RES=$(mktemp -d /tmp/fabperf-bonding.XXXXXX)
start=$(date +%s)
# sch_ingress/cls_u32/act_gact: the per-port tc counters that say which member carried each flow.
"$TOP/scripts/vm-lab" --modules bonding,sch_ingress,cls_u32,act_gact --timeout "${FABPERF_BONDING_TIMEOUT:-420}" \
  --env BOND_RATE_MBIT="${BOND_RATE_MBIT:-3}" --results "$RES" --quiet "$TOP/tests/bonding/guest.sh" "$FABPERF" "$TOP/tests/bonding"
rc=$?
[ -f "$RES/guest-0.log" ] && cat "$RES/guest-0.log"
vm_s=$(( $(date +%s) - start ))
if [ $rc -eq 0 ]; then
  # The checks run here, on the guest's results (Python in the emulated guest is slow).
  chk() { python3 "$TOP/tests/bonding/check.py" "$@" || rc=1; }
  export BOND_RATE_MBIT=${BOND_RATE_MBIT:-3}
  chk inventory-lacp "$RES/lacp-links.json"
  chk lacp8 "$RES/lacp8.json" "$RES/lacp8.samples" "$RES/lacp8.ports"
  chk lacpdown "$RES/lacpdown.json"
  chk preflight "$RES/preflight-down.out"
  chk inventory-alb "$RES/alb-links.json"
  chk alb1 "$RES/alb1.json" "$RES"
  chk alb2 "$RES/alb2.json" "$RES"
  chk compare "$RES/compare-alb1.json" "$RES/compare-alb2.json"
fi
echo "bonding VM: $vm_s s for the guest (boot + every variant)"
echo "bonding VM stage: $(( $(date +%s) - start )) s wall, exit $rc (results: $RES)"
if [ $rc -eq 0 ] && [ -z "${FABPERF_KEEP_RESULTS:-}" ]; then rm -rf "$RES"; fi
exit $rc
