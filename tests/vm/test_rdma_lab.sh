#!/usr/bin/env bash
# ctest label rdma: boots one scripts/vm-lab guest with Soft-RoCE and runs every RDMA check in it
# (tests/vm/rdma_guest.sh). Skips (77) visibly when this build has no RDMA engine, or the lab
# cannot run here (not root, no qemu, no kernel).
FABPERF=$1 TOP=$2
if ! "$FABPERF" version 2>/dev/null | grep -q "rdma-core found"; then echo "SKIP: fabperf was built without RDMA support"; exit 77; fi
RES=$(mktemp -d /tmp/fabperf-rdma-lab.XXXXXX)
trap '[ "${KEEP:-0}" = 1 ] || rm -rf "$RES"' EXIT
t0=$(date +%s)
"$TOP/scripts/vm-lab" --quiet --timeout 570 --modules rdma --results "$RES" --env "FABPERF=$FABPERF" "$TOP/tests/vm/rdma_guest.sh"
rc=$?
t1=$(date +%s)
[ -f "$RES/summary.txt" ] && cat "$RES/summary.txt"
[ $rc -eq 77 ] && { echo "SKIP: the VM lab cannot run here (see above)"; exit 77; }
[ $rc -ne 0 ] && [ -f "$RES/guest-0.log" ] && tail -40 "$RES/guest-0.log"
echo "vm-lab rdma stage: $((t1 - t0)) s wall, exit $rc"
exit $rc
