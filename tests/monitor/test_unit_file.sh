#!/usr/bin/env bash
# The monitor's systemd unit, checked offline: no capability, private devices, a state folder of
# its own, and systemd-analyze's exposure score at most 2.0. Exit 77 (skip) without
# systemd-analyze. Well under a second.
#   usage: test_unit_file.sh UNIT_FILE
set -euo pipefail
unit="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }
grep -qx 'CapabilityBoundingSet=' "$unit" || fail "capability bounding set is not empty"
grep -qx 'AmbientCapabilities=' "$unit" || fail "ambient capabilities are not empty"
grep -qx 'PrivateDevices=yes' "$unit" || fail "PrivateDevices=yes missing (the monitor needs no device)"
grep -qx 'StateDirectory=fabperf-monitor' "$unit" || fail "StateDirectory=fabperf-monitor missing (the baselines' folder)"
grep -q '^ExecStart=/usr/bin/fabperf monitor ' "$unit" || fail "ExecStart does not run fabperf monitor"
command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze"; exit 77; }
systemd-analyze security --offline=yes --threshold=20 "$unit" >/dev/null 2>&1 \
  || fail "systemd-analyze security exposure above 2.0: $(systemd-analyze security --offline=yes "$unit" 2>&1 | tail -1)"
echo "OK: $(systemd-analyze security --offline=yes "$unit" 2>&1 | tail -1)"
