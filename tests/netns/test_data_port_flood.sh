#!/usr/bin/env bash
# A stranger floods a server's data port while it waits for its clients (issue 28): runs
# DataHandshakes.AFloodFromOneAddressHoldsAtMostItsShare inside a namespace of its own, with the
# server on one address and the stranger on another (loopback is exempt from the per-address
# limit, so 127/8 cannot show it). Nothing leaves the namespace.
FABPERF=$1
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root to create a network namespace"; exit 77; fi
tests=$(dirname "$FABPERF")/../tests/fabperf_integration_tests
[ -x "$tests" ] || { echo "FAIL: $tests not built"; exit 1; }
ns=fp-flood-$$
ip netns add "$ns" 2>/dev/null || { echo "SKIP: cannot create network namespaces here"; exit 77; }
trap 'ip netns del "$ns"' EXIT
ip -n "$ns" link set lo up
ip -n "$ns" addr add 198.18.0.1/32 dev lo
ip -n "$ns" addr add 198.18.0.3/32 dev lo
ip netns exec "$ns" env FABPERF_FLOOD_ADDRS="198.18.0.1 198.18.0.3" "$tests" \
  --gtest_filter=DataHandshakes.AFloodFromOneAddressHoldsAtMostItsShare
