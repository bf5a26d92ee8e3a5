# Shared helpers for namespace tests. Sourced; expects FABPERF and TOP set.
# Everything started is tracked by PID and stopped by PID; the lab is torn down on exit.
set -euo pipefail
LAB="$TOP/scripts/netns-lab"
PIDS=()
WORK=$(mktemp -d /tmp/fabperf-netns-XXXXXX)

require_root() {
  if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root to create network namespaces"; exit 77; fi
  if ! ip netns add "fp-probe-$$" 2>/dev/null; then echo "SKIP: cannot create network namespaces here"; exit 77; fi
  ip netns del "fp-probe-$$"
}

cleanup() {
  local rc=$?
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  [ -n "${TAG:-}" ] && "$LAB" down "$TAG" || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT

# A key when this build has authentication (agents without a key accept loopback only).
KEYARGS=()
if "$FABPERF" keygen "$WORK/key" >/dev/null 2>&1; then KEYARGS=(--key-file "$WORK/key"); fi

# start_agent HOST ADDR: agent inside the host's namespace, listening on ADDR:6668.
start_agent() {
  local h=$1 addr=$2 ready="$WORK/ready.$1.$RANDOM"
  ip netns exec "$("$LAB" ns "$TAG" "$h")" "$FABPERF" agent --listen "$addr:6668" --ready-fd 3 --log-level warn \
    "${KEYARGS[@]}" 3>"$ready" 2>>"$WORK/agent$h.log" &
  PIDS+=($!)
  for _ in $(seq 100); do grep -q LISTENING "$ready" 2>/dev/null && return 0; sleep 0.1; done
  echo "FAIL: agent on host $h did not start"; cat "$WORK/agent$h.log"; exit 1
}

# in_host HOST CMD...: run CMD in the host's namespace (coordinators run inside too: a 198.18
# address used from the root namespace would leave the machine).
in_host() { local h=$1; shift; ip netns exec "$("$LAB" ns "$TAG" "$h")" "$@"; }

counter() { in_host "$1" cat "/sys/class/net/$2/statistics/$3"; }

# two_host_lab PREFIX [netns-lab up options...]: hosts 1 and 2 joined directly by one link, an agent
# on each (198.18.0.1, 198.18.0.2); sets TAG.
two_host_lab() {
  TAG="$1$(( $$ % 100000 ))"
  shift
  "$LAB" up "$TAG" --direct "$@" >/dev/null
  start_agent 1 198.18.0.1
  start_agent 2 198.18.0.2
}

# two_link_lab PREFIX MTU RATE: hosts 1 and 2 joined directly by two links (MTU, shaped to RATE),
# an agent on each; sets TAG, SERVERS (host 2) and CLIENTS (host 1) with both link addresses.
two_link_lab() {
  TAG="$1$(( $$ % 100000 ))"
  "$LAB" up "$TAG" --direct --links 2 --mtu "$2" --rate "$3" >/dev/null
  start_agent 1 198.18.0.1
  start_agent 2 198.18.0.2
  SERVERS=198.18.0.2@198.18.0.2+198.18.1.2
  CLIENTS=198.18.0.1@198.18.0.1+198.18.1.1
}

# two_link_run SECONDS OUT.json [extra args]: host 1 loads host 2 over both links (stream, 2 flows);
# the result goes to $WORK/OUT.json.
two_link_run() {
  local secs=$1 out=$2; shift 2
  in_host 1 "$FABPERF" run --servers "$SERVERS" --clients "$CLIENTS" "${KEYARGS[@]}" --mode stream --parallel 2 \
    --time "$secs" --buffsize 256K --json "$WORK/$out" --quiet "$@"
}
