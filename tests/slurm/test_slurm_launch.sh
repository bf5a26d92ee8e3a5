#!/usr/bin/env bash
# `fabperf run --launch slurm` in a real Slurm cluster that this test brings up on this host:
# munged, slurmctld and three slurmd emulating nodes n1..n3 on 127.0.0.11-13 (Debian's slurmd
# supports several per host), all with a private config under a temp folder, started and stopped
# by PID. An sbatch job (scripts/slurm/fabperf.sbatch) launches agents with srun and runs a test.
# Usage: test_slurm_launch.sh FABPERF_BIN SOURCE_DIR
set -uo pipefail
BIN=$(readlink -f "$1")
SRC=$(readlink -f "$2")
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root (slurmd runs jobs as root here)"; exit 77; fi
for p in munged slurmctld slurmd sbatch srun scontrol sinfo; do
  command -v "$p" >/dev/null || { echo "SKIP: $p missing (apt-get install slurmctld slurmd slurm-client munge)"; exit 77; }
done
T=$(mktemp -d /tmp/fabperf-slurm.XXXXXX)
chmod 755 "$T"
PIDS=()
cleanup() {
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill "${PIDS[i]}" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  rm -rf "$T"
}
trap cleanup EXIT
t_start=$(date +%s.%N)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# munge: own key and socket.
mkdir -p "$T/munge" && chmod 755 "$T/munge"
dd if=/dev/urandom of="$T/munge.key" bs=1024 count=1 status=none && chmod 600 "$T/munge.key"
munged --foreground --force --key-file="$T/munge.key" --socket="$T/munge/munge.socket" \
  --pid-file="$T/munged.pid" --log-file="$T/munged.log" --seed-file="$T/munge.seed" >"$T/munged.out" 2>&1 &
PIDS+=($!)

CTLD_PORT=$(free_port)
BASE=$(( 20000 + RANDOM % 20000 ))
mkdir -p "$T/state" "$T/spool"
cat > "$T/slurm.conf" <<CFG
ClusterName=fabperftest
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/munge.socket
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool/%n
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.%n.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/builtin
NodeName=n[1-3] NodeHostname=localhost NodeAddr=127.0.0.[11-13] Port=[$BASE-$((BASE + 2))] CPUs=4 State=UNKNOWN
PartitionName=debug Nodes=n[1-3] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CFG
export SLURM_CONF=$T/slurm.conf
for _ in $(seq 50); do [ -S "$T/munge/munge.socket" ] && break; sleep 0.1; done
slurmctld -D -i -f "$SLURM_CONF" >"$T/slurmctld.out" 2>&1 &
PIDS+=($!)
for n in n1 n2 n3; do
  slurmd -D -N "$n" -f "$SLURM_CONF" >"$T/slurmd.$n.out" 2>&1 &
  PIDS+=($!)
done
up=0
for _ in $(seq 150); do
  if [ "$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -eq 3 ]; then up=1; break; fi
  sleep 0.1
done
if [ "$up" -ne 1 ]; then
  echo "FAIL: the Slurm cluster did not come up: $(sinfo -N 2>&1 | tail -4)"
  tail -n 5 "$T"/slurmctld.log "$T"/slurmd.*.log "$T"/*.out 2>/dev/null
  exit 1
fi
echo "cluster up after $(echo "$(date +%s.%N) - $t_start" | bc) s"

# The job: sbatch the example script; it runs `fabperf run --launch slurm` on n1.
cd "$T"
t0=$(date +%s.%N)
FABPERF=$BIN timeout 90 sbatch --wait -N 3 -o "$T/job.out" "$SRC/scripts/slurm/fabperf.sbatch" \
  --time 2 --buffsize 64K --threads 1 --json "$T/r.json" >"$T/sbatch.out" 2>&1
rc=$?
echo "sbatch job took $(echo "$(date +%s.%N) - $t0" | bc) s"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
jobid=$(grep -o '[0-9]\+' "$T/sbatch.out" | head -1)
[ "$rc" -eq 0 ] || fail "sbatch job exited $rc: $(cat "$T/sbatch.out"); job output: $(cat "$T/job.out" 2>/dev/null)"
python3 - "$T/r.json" <<'PY' || fail "result is not a 3-node test on n1..n3's addresses: $(head -c 400 "$T/r.json" 2>/dev/null)"
import json, sys
d = json.load(open(sys.argv[1]))
s = json.dumps(d)
for a in ("127.0.0.11", "127.0.0.12", "127.0.0.13"):
    assert a in s, a
PY
grep -q "MB/s\|Gb/s\|MiB/s" "$T/job.out" || fail "no throughput in the job output: $(cat "$T/job.out")"
# No agent of this job is left (by PID: every process whose environment names the job).
left=""
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  [ "$(cat "$d/comm" 2>/dev/null)" = fabperf ] || continue
  tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qx "SLURM_JOB_ID=$jobid" && left="$left $p"
done
[ -z "$left" ] || fail "agents of job $jobid still running: $left"

# The agent fails to start on the nodes (wrong path): the job fails with exit 3 and the shell's
# own words, and nothing of it is left.
t0=$(date +%s.%N)
timeout 60 sbatch --wait -N 2 -o "$T/bad.out" --wrap "$BIN run --launch slurm --agent-path /nonexistent/fabperf --time 1 --launch-timeout 20" \
  >"$T/sbatch2.out" 2>&1
rc=$?
jobid2=$(grep -o '[0-9]\+' "$T/sbatch2.out" | head -1)
echo "failing job took $(echo "$(date +%s.%N) - $t0" | bc) s: $(grep fabperf: "$T/bad.out" | head -2 | tr '\n' ' ')"
[ "$rc" -ne 0 ] || fail "a job with a wrong agent path succeeded"
grep -q "exit code 3\|ExitCode=3" "$T/sbatch2.out" 2>/dev/null || [ "$(scontrol show job "$jobid2" 2>/dev/null | grep -o 'ExitCode=[0-9]*' | head -1)" = "ExitCode=3" ] ||
  fail "wrong agent path: job exit is not 3: $(scontrol show job "$jobid2" 2>/dev/null | grep -o 'ExitCode=[0-9:]*')"
grep -q "/nonexistent/fabperf" "$T/bad.out" || fail "wrong agent path: the error does not say so: $(cat "$T/bad.out")"
for d in /proc/[0-9]*; do
  [ "$(cat "$d/comm" 2>/dev/null)" = srun ] || continue
  tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qx "SLURM_JOB_ID=$jobid2" && fail "srun ${d#/proc/} of the failed job still running"
done

# Outside an allocation: a clear usage error.
env -u SLURM_JOB_NODELIST "$BIN" run --launch slurm --time 1 >"$T/o" 2>"$T/e"
rc=$?
[ "$rc" -eq 2 ] && grep -q "not inside a Slurm allocation" "$T/e" || fail "outside an allocation: exit $rc: $(cat "$T/e")"

echo "--- job output"; cat "$T/job.out"
if [ "$fails" -ne 0 ]; then
  tail -n 20 "$T/slurmctld.log" "$T"/slurmd.n1.log
  exit 1
fi
echo "PASS (total $(echo "$(date +%s.%N) - $t_start" | bc) s)"
