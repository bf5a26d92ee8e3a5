#!/usr/bin/env bash
# ctest label rdma: boots two scripts/vm-lab guests joined by a wire, with Soft-RoCE, and runs
# every RDMA check in that one boot (tests/vm/rdma_pair_guest.sh: write/nwrite/read across the
# wire with the default and the --rdma-cm set-up, then tests/vm/rdma_guest.sh's single-guest
# checks in guest 0). Skips (77) visibly when this build has no RDMA engine, or the lab cannot
# run here (not root, no qemu, no kernel).
FABPERF=$1 TOP=$2 FORGE=${3:-}  # FORGE: tests/vm/cm_forge.cpp, a hostile rdma_cm client
QPFORGE=${4:-}                  # tests/vm/qp_forge.cpp, a queue pair without the test token
if ! "$FABPERF" version 2>/dev/null | grep -q "rdma-core found"; then echo "SKIP: fabperf was built without RDMA support"; exit 77; fi
RES=$(mktemp -d /tmp/fabperf-rdma-lab.XXXXXX)
trap '[ "${KEEP:-0}" = 1 ] || rm -rf "$RES"' EXIT
"$FABPERF" keygen "$RES/key" >/dev/null || exit 3
t0=$(date +%s)
"$TOP/scripts/vm-lab" --quiet --guests 2 --timeout 660 --modules rdma,sch_netem --results "$RES" --env "FABPERF=$FABPERF" \
  --env "KEY=$RES/key" --env "VMTESTS=$TOP/tests/vm" --env "FORGE=$FORGE" --env "QPFORGE=$QPFORGE" "$TOP/tests/vm/rdma_pair_guest.sh"
rc=$?
t1=$(date +%s)
[ -f "$RES/summary-wire.txt" ] && cat "$RES/summary-wire.txt"
[ -f "$RES/summary.txt" ] && cat "$RES/summary.txt"
[ -s "$RES/wire-g0/loss.counters.txt" ] && { echo "text report of the run under netem loss:"; cat "$RES/wire-g0/loss.counters.txt"; }
[ $rc -eq 77 ] && { echo "SKIP: the VM lab cannot run here (see above)"; exit 77; }
[ $rc -ne 0 ] && [ -f "$RES/guest-0.log" ] && tail -40 "$RES/guest-0.log"
echo "vm-lab rdma stage: $((t1 - t0)) s wall, exit $rc"
exit $rc
