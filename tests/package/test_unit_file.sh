#!/usr/bin/env bash
# The systemd unit's security settings (docs/security.md "systemd"), checked offline: no
# capability, the RDMA devices allowed instead of PrivateDevices hiding them, TasksMax set, and
# systemd-analyze's exposure score at most 2.0. It cannot start the unit (no systemd as PID 1
# here). Exit 77 (skip) without systemd-analyze. Costs well under a second.
#   usage: test_unit_file.sh UNIT_FILE
set -euo pipefail
unit="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }
grep -qx 'CapabilityBoundingSet=' "$unit" || fail "capability bounding set is not empty"
grep -qx 'AmbientCapabilities=' "$unit" || fail "ambient capabilities are not empty"
grep -q 'CAP_NET_ADMIN$' <(grep -E '^(Capability|Ambient)' "$unit") && fail "CAP_NET_ADMIN granted"
grep -qx 'PrivateDevices=no' "$unit" || fail "PrivateDevices must be off (it hides /dev/infiniband)"
grep -qx 'DevicePolicy=closed' "$unit" || fail "DevicePolicy=closed missing"
grep -qx 'DeviceAllow=char-infiniband_verbs rw' "$unit" || fail "verbs devices not allowed"
grep -qx 'DeviceAllow=/dev/infiniband/rdma_cm rw' "$unit" || fail "rdma_cm not allowed"
grep -qE '^TasksMax=[0-9]+$' "$unit" || fail "TasksMax not set"
tasks=$(sed -n 's/^TasksMax=//p' "$unit")
(( tasks > 10000 )) || fail "TasksMax=$tasks leaves no room for the agent's 10,000 data threads"
command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze"; exit 77; }
# --threshold=20: fails when the exposure level is above 2.0.
systemd-analyze security --offline=yes --threshold=20 "$unit" >/dev/null 2>&1 \
  || fail "systemd-analyze security exposure above 2.0: $(systemd-analyze security --offline=yes "$unit" 2>&1 | tail -1)"
echo "OK: $(systemd-analyze security --offline=yes "$unit" 2>&1 | tail -1)"
