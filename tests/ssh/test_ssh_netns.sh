#!/usr/bin/env bash
# `--launch ssh` across hosts that are really separate network stacks: a namespace lab of three
# hosts on a switch (198.18.0.1-3, scripts/netns-lab); h2 and h3 each run their own sshd (and
# their own host name, via a UTS namespace); the coordinator runs in h1. The agents started over
# ssh live in h2 and h3, listen on 198.18.0.2/.3 (the address ssh arrived at) and a test runs
# between them; afterwards nothing is left under either sshd.
# Usage: test_ssh_netns.sh FABPERF_BIN SOURCE_DIR
FABPERF=$(readlink -f "$1") TOP=$(readlink -f "$2")
. "$TOP/tests/netns/lib.sh"
require_root
command -v /usr/sbin/sshd >/dev/null || { echo "SKIP: sshd missing (apt-get install openssh-server)"; exit 77; }
TAG="ss$(( $$ % 100000 ))"
"$LAB" up "$TAG" --hosts 3 >/dev/null
ssh-keygen -q -t ed25519 -N '' -f "$WORK/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/id"
cp "$WORK/id.pub" "$WORK/authorized_keys"
mkdir -p /run/sshd
declare -A SSHD
for h in 2 3; do
  cat > "$WORK/sshd$h.conf" <<CFG
Port 22
ListenAddress 198.18.0.$h
HostKey $WORK/host_key
PidFile $WORK/sshd$h.pid
AuthorizedKeysFile $WORK/authorized_keys
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
LogLevel ERROR
CFG
  ip netns exec "$("$LAB" ns "$TAG" "$h")" unshare -u sh -c "hostname fabperf-h$h && exec /usr/sbin/sshd -D -f $WORK/sshd$h.conf -E $WORK/sshd$h.log" &
  SSHD[$h]=$!
  PIDS+=($!)
done
for h in 2 3; do
  for _ in $(seq 50); do in_host 1 bash -c "exec 3<>/dev/tcp/198.18.0.$h/22" 2>/dev/null && break; sleep 0.1; done
done
descendants() {
  ps -e -o pid=,ppid= | awk -v root="$1" '
    { parent[$1] = $2 }
    END { for (p in parent) { q = p; while (q in parent && q != root && q > 1) q = parent[q]; if (q == root && p != root) print p } }'
}
t0=$(date +%s.%N)
in_host 1 "$FABPERF" run --launch ssh --ssh-command "ssh -F /dev/null" "--ssh-option=-i$WORK/id" \
  "--ssh-option=-oUserKnownHostsFile=$WORK/known_hosts" "--ssh-option=-oStrictHostKeyChecking=accept-new" \
  "--ssh-option=-lroot" --agent-path "$FABPERF" --servers 198.18.0.2 --clients 198.18.0.3 \
  --time 2 --buffsize 64K --threads 1 --json "$WORK/r.json" >"$WORK/out" 2>"$WORK/err"
rc=$?
echo "launch over ssh between namespaces + 2 s test: $(echo "$(date +%s.%N) - $t0" | bc) s, exit $rc"
[ "$rc" -eq 0 ] || { echo "FAIL: exit $rc: $(cat "$WORK/err")"; exit 1; }
python3 - "$WORK/r.json" <<'PY' || { echo "FAIL: result not from agents in h2 and h3"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
s = json.dumps(d)
assert d["complete"], d.get("findings")
assert "198.18.0.2" in s and "198.18.0.3" in s
assert "fabperf-h2" in s and "fabperf-h3" in s, "agent host names are not the namespaces' own"
print("aggregate", round(d["aggregate"]["mb_per_s"]), "MB/s between", [n.get("hostname") for n in d["nodes"]])
PY
# Every session under each sshd ends (agents included), by PID.
for h in 2 3; do
  for _ in $(seq 50); do [ -z "$(descendants "${SSHD[$h]}")" ] && break; sleep 0.1; done
  left=$(descendants "${SSHD[$h]}")
  [ -z "$left" ] || { echo "FAIL: processes left under sshd in h$h: $left"; exit 1; }
done
echo "PASS"
