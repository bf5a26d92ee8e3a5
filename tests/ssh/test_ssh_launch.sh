#!/usr/bin/env bash
# `fabperf run --launch ssh` through a real OpenSSH server that this test starts on loopback
# (127.0.0.2 and 127.0.0.3 look like two hosts): a test runs, then the failure cases (refused,
# bad key, agent fails to start, one host of two fails, Ctrl-C, coordinator killed) each give a
# clear error naming the host, exit 3, and leave no process behind (checked by PID).
# Usage: test_ssh_launch.sh FABPERF_BIN
set -uo pipefail
BIN=$(readlink -f "$1")
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root (sshd with its own config logs in as root)"; exit 77; fi
for p in /usr/sbin/sshd ssh ssh-keygen; do
  command -v "$p" >/dev/null || { echo "SKIP: $p missing (apt-get install openssh-server openssh-client)"; exit 77; }
done
T=$(mktemp -d /tmp/fabperf-ssh.XXXXXX)
SSHD_PID=""
fails=0
cleanup() {
  [ -n "$SSHD_PID" ] && kill "$SSHD_PID" 2>/dev/null && wait "$SSHD_PID" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# A free port on 127.0.0.2.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.2",0)); print(s.getsockname()[1])')
ssh-keygen -q -t ed25519 -N '' -f "$T/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$T/id"
ssh-keygen -q -t ed25519 -N '' -f "$T/wrong_id"
cp "$T/id.pub" "$T/authorized_keys"
cat > "$T/sshd_config" <<CFG
Port $PORT
ListenAddress 127.0.0.2
ListenAddress 127.0.0.3
HostKey $T/host_key
PidFile $T/sshd.pid
AuthorizedKeysFile $T/authorized_keys
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
LogLevel ERROR
CFG
mkdir -p /run/sshd
/usr/sbin/sshd -D -f "$T/sshd_config" -E "$T/sshd.log" &
SSHD_PID=$!
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.2/$PORT") 2>/dev/null && break
  sleep 0.1
done

# Descendants of a PID (by PID, from /proc).
descendants() {
  ps -e -o pid=,ppid= | awk -v root="$1" '
    { parent[$1] = $2 }
    END { for (p in parent) { q = p; while (q in parent && q != root && q > 1) q = parent[q]; if (q == root && p != root) print p } }'
}
# Waits until no process descends from sshd (every session and agent gone), up to $1 seconds.
sessions_gone() {
  for _ in $(seq $(( $1 * 10 ))); do
    [ -z "$(descendants "$SSHD_PID")" ] && return 0
    sleep 0.1
  done
  return 1
}
# PIDs of fabperf agents under sshd.
agent_pids() {
  for p in $(descendants "$SSHD_PID"); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = fabperf ] && echo "$p"
  done
}

SSH=(--launch ssh --ssh-command "ssh -F /dev/null" "--ssh-option=-p$PORT" "--ssh-option=-i$T/id"
     "--ssh-option=-oUserKnownHostsFile=$T/known_hosts" "--ssh-option=-oStrictHostKeyChecking=accept-new"
     "--ssh-option=-lroot" --agent-path "$BIN")
TEST=(--time 2 --buffsize 64K --threads 1 --connect-timeout 5)

# 1. A real test through sshd: agents on 127.0.0.2 and 127.0.0.3, then all gone.
start=$(date +%s.%N)
"$BIN" run "${SSH[@]}" --servers 127.0.0.2 --clients 127.0.0.3 "${TEST[@]}" --json "$T/r.json" >"$T/out1" 2>"$T/err1" &
run_pid=$!
seen=""
for _ in $(seq 100); do
  seen=$(agent_pids)
  [ "$(echo "$seen" | wc -w)" -ge 2 ] && break
  sleep 0.1
done
# The key never appears on a command line.
for p in $seen; do
  tr '\0' ' ' < /proc/$p/cmdline > "$T/cmdline" 2>/dev/null
  grep -q -- '--key-stdin' "$T/cmdline" || fail "agent $p was not started with --key-stdin: $(cat "$T/cmdline")"
  grep -Eq '[0-9a-f]{32}' "$T/cmdline" && fail "agent $p has something key-like on its command line: $(cat "$T/cmdline")"
done
wait "$run_pid"; rc=$?
echo "launch+run took $(echo "$(date +%s.%N) - $start" | bc) s"
if [ "$rc" -ne 0 ]; then fail "run through ssh exited $rc: $(cat "$T/err1")"; fi
[ "$(echo "$seen" | wc -w)" -ge 2 ] || fail "did not see two agents under sshd (saw '$seen')"
python3 - "$T/r.json" <<'PY' || fail "result JSON is not a complete 2-node test with traffic"
import json, sys
d = json.load(open(sys.argv[1]))
s = json.dumps(d)
assert d.get("complete", True) is not False, "incomplete"
nodes = d.get("nodes") or d.get("run", {}).get("nodes")
assert nodes and len(nodes) == 2, f"nodes: {nodes!r}"[:200]
assert "127.0.0.2" in s and "127.0.0.3" in s
PY
grep -q "MB/s\|Gb/s\|MiB/s" "$T/out1" || fail "no throughput in the text report: $(head -5 "$T/out1")"
sessions_gone 5 || fail "processes left under sshd after a normal run: $(descendants "$SSHD_PID")"
for p in $seen; do kill -0 "$p" 2>/dev/null && fail "agent $p still running after the run"; done
[ "$fails" -eq 0 ] && ok "test through ssh, agents $(echo $seen) started and gone"

# Expect exit 3, a message naming HOST and containing TEXT, and nothing left under sshd.
expect_failure() {
  local name=$1 host=$2 text=$3
  shift 3
  local t0 rc
  t0=$(date +%s.%N)
  "$BIN" run "$@" "${TEST[@]}" >"$T/out" 2>"$T/err"
  rc=$?
  local took
  took=$(echo "$(date +%s.%N) - $t0" | bc)
  [ "$rc" -eq 3 ] || fail "$name: exit $rc, expected 3 ($(cat "$T/err"))"
  grep -q -- "$host" "$T/err" || fail "$name: error does not name $host: $(cat "$T/err")"
  grep -qi -- "$text" "$T/err" || fail "$name: error lacks '$text': $(cat "$T/err")"
  sessions_gone 5 || fail "$name: processes left under sshd: $(descendants "$SSHD_PID")"
  echo "ok: $name (${took} s): $(grep -v '^could not start' "$T/err" | head -2 | tr '\n' ' ')"
}

# 2. Connection refused: nothing listens on 127.0.0.4.
expect_failure "connection refused" "127.0.0.4" "Connection refused" \
  "${SSH[@]}" --servers 127.0.0.4 --clients 127.0.0.3
# 3. A key sshd does not accept.
expect_failure "bad key" "127.0.0.2" "Permission denied" \
  --launch ssh --ssh-command "ssh -F /dev/null" "--ssh-option=-p$PORT" "--ssh-option=-i$T/wrong_id" \
  "--ssh-option=-oUserKnownHostsFile=$T/known_hosts" "--ssh-option=-oStrictHostKeyChecking=accept-new" \
  "--ssh-option=-lroot" --agent-path "$BIN" --servers 127.0.0.2 --clients 127.0.0.3
# 4. The agent does not start (wrong path): the shell's own error, and the other host's agent stopped.
expect_failure "agent fails to start" "127.0.0.2" "/nonexistent/fabperf" \
  "${SSH[@]:0:9}" --agent-path /nonexistent/fabperf --servers 127.0.0.2 --clients 127.0.0.3
# 5. One host of two fails: the agent already started on the other is stopped.
expect_failure "one host refused, the other stopped" "127.0.0.5" "Connection refused" \
  "${SSH[@]}" --servers 127.0.0.2 --clients 127.0.0.5

# 6. Ctrl-C (SIGINT) during the test: partial results, exit 3, agents gone.
"$BIN" run "${SSH[@]}" --servers 127.0.0.2 --clients 127.0.0.3 --time 30 --buffsize 64K --threads 1 >"$T/out6" 2>"$T/err6" &
run_pid=$!
for _ in $(seq 100); do sleep 0.1; [ "$(agent_pids | wc -w)" -ge 2 ] && break; done
seen=$(agent_pids)
sleep 2
kill -INT "$run_pid"
t0=$(date +%s.%N)
wait "$run_pid"; rc=$?
[ "$rc" -eq 3 ] || [ "$rc" -eq 0 ] || fail "SIGINT: exit $rc ($(tail -3 "$T/err6"))"
sessions_gone 5 || fail "SIGINT: processes left under sshd: $(descendants "$SSHD_PID")"
echo "ok: SIGINT mid-test: exit $rc after $(echo "$(date +%s.%N) - $t0" | bc) s, agents $(echo $seen) gone"

# 7. SIGKILL of the coordinator: ssh dies with it (PDEATHSIG), the agents see stdin close and exit.
"$BIN" run "${SSH[@]}" --servers 127.0.0.2 --clients 127.0.0.3 --time 30 --buffsize 64K --threads 1 >/dev/null 2>&1 &
run_pid=$!
for _ in $(seq 100); do sleep 0.1; [ "$(agent_pids | wc -w)" -ge 2 ] && break; done
seen=$(agent_pids)
[ "$(echo "$seen" | wc -w)" -ge 2 ] || fail "SIGKILL case: agents did not start"
sleep 1
kill -KILL "$run_pid"
wait "$run_pid" 2>/dev/null
t0=$(date +%s.%N)
sessions_gone 8 || fail "SIGKILL of the coordinator: processes left under sshd: $(descendants "$SSHD_PID")"
echo "ok: coordinator SIGKILLed: agents $(echo $seen) gone after $(echo "$(date +%s.%N) - $t0" | bc) s"

# 8. SIGINT while ssh is still connecting (a port that accepts and never speaks ssh): the
# launch gives up at once, exit 3, and the ssh it had started is gone (by PID).
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.6", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
conns = []
t = time.time()
while time.time() - t < 60:
    s.settimeout(1)
    try: conns.append(s.accept()[0])
    except socket.timeout: pass
' > "$T/mute.port" &
mute_pid=$!
for _ in $(seq 50); do [ -s "$T/mute.port" ] && break; sleep 0.1; done
MUTE=$(cat "$T/mute.port")
"$BIN" run --launch ssh --ssh-command "ssh -F /dev/null" "--ssh-option=-p$MUTE" "--ssh-option=-i$T/id" \
  "--ssh-option=-oUserKnownHostsFile=$T/known_hosts" --agent-path "$BIN" --servers 127.0.0.6 --clients 127.0.0.7 \
  --launch-timeout 30 "${TEST[@]}" >"$T/out8" 2>"$T/err8" &
run_pid=$!
kids=""
for _ in $(seq 50); do kids=$(ps -o pid= --ppid "$run_pid" | tr -d ' '); [ -n "$kids" ] && break; sleep 0.1; done
sleep 1
t0=$(date +%s.%N)
kill -INT "$run_pid"
wait "$run_pid"; rc=$?
took=$(echo "$(date +%s.%N) - $t0" | bc)
kill "$mute_pid" 2>/dev/null; wait "$mute_pid" 2>/dev/null
[ "$rc" -eq 3 ] || fail "SIGINT during the launch: exit $rc ($(cat "$T/err8"))"
grep -q "interrupted while starting agents" "$T/err8" || fail "SIGINT during the launch: $(cat "$T/err8")"
[ -n "$kids" ] || fail "SIGINT during the launch: no ssh process was seen"
[ "$(echo "$took < 3" | bc)" -eq 1 ] || fail "SIGINT during the launch: took $took s to exit"
for p in $kids; do kill -0 "$p" 2>/dev/null && fail "SIGINT during the launch: ssh $p still running"; done
echo "ok: SIGINT while ssh connects: exit $rc after $took s, ssh $(echo $kids) gone"

if [ "$fails" -ne 0 ]; then
  echo "sshd log:"; cat "$T/sshd.log"
  exit 1
fi
echo "PASS"
