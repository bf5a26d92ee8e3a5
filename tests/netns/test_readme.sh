#!/usr/bin/env bash
# The README's first-use commands, as written there (issue 31: the first one used to exit 2),
# on four hosts of a namespace lab behind one switch. Taken from README.md's second sh block at
# run time, so a change to the README is tested as it reads. The only substitutions: the key's
# path (under this test's folder: /etc is the host's), the names h1..h4 (the lab's addresses),
# `fabperf` (this build), and `--time 2` appended to each run (the default 10 s would cost 30 s
# more and test nothing more). Each command runs where the README says: the agents in their
# host's namespace, the runs in host 1's.
FABPERF=$(realpath "$1") TOP=$(realpath "$2")
. "$(dirname "$0")/lib.sh"
require_root
TAG="rd$(( $$ % 100000 ))"
"$LAB" up "$TAG" --hosts 4 >/dev/null

mapfile -t CMDS < <(python3 - "$TOP/README.md" "$WORK" <<'PY'
import re, sys
blocks = re.findall(r"```sh\n(.*?)```", open(sys.argv[1]).read(), re.S)
assert len(blocks) >= 2, "README.md has no second sh block"
for line in blocks[1].splitlines():
    cmd = line.split("#", 1)[0].strip()
    if not cmd:
        continue
    cmd = cmd.replace("/etc/fabperf/key", sys.argv[2] + "/etc/fabperf/key")
    cmd = re.sub(r"\bh([1-4])\b", r"198.18.0.\1", cmd)
    print(cmd)
PY
)
printf 'README: %s\n' "${CMDS[@]}"
[ "${#CMDS[@]}" -ge 5 ] || { echo "FAIL: expected keygen, agent, export and runs in the README"; exit 1; }

run_in=1
cd "$WORK"  # the README writes result.json where it runs
for cmd in "${CMDS[@]}"; do
  read -r -a argv <<<"$cmd"
  case "${argv[0]}" in
    export)
      export "${argv[1]}"
      ;;
    fabperf)
      argv[0]=$FABPERF
      case "${argv[1]}" in
        keygen)
          "${argv[@]}" || { echo "FAIL: '$cmd' exited $?"; exit 1; }
          ;;
        agent)
          for h in 1 2 3 4; do
            # ip netns exec execs the agent: $! is the agent's own PID, for cleanup.
            ip netns exec "$("$LAB" ns "$TAG" "$h")" "${argv[@]}" >>"$WORK/agent$h.log" 2>&1 &
            PIDS+=($!)
          done
          for h in 1 2 3 4; do
            for _ in $(seq 100); do
              in_host "$h" ss -Hltn 'sport = :6668' | grep -q . && break
              kill -0 "${PIDS[-1]}" 2>/dev/null || { echo "FAIL: '$cmd' exited"; cat "$WORK/agent$h.log"; exit 1; }
              sleep 0.1
            done
            in_host "$h" ss -Hltn 'sport = :6668' | grep -q . || { echo "FAIL: no agent listening on host $h"; exit 1; }
          done
          ;;
        run)
          set +e
          in_host "$run_in" "${argv[@]}" --time 2 > "$WORK/run.out" 2>&1
          rc=$?
          set -e
          cat "$WORK/run.out"
          [ $rc -eq 0 ] || { echo "FAIL: '$cmd' exited $rc"; exit 1; }
          grep -Eq "^[0-9]+-[0-9]+ (write|read|rw) [0-9.]+ MB/sec" "$WORK/run.out" ||
            { echo "FAIL: '$cmd' printed no nsdperf result line"; exit 1; }
          ;;
        *) echo "FAIL: the test does not know how to run '$cmd'"; exit 1 ;;
      esac
      ;;
    *) echo "FAIL: the test does not know how to run '$cmd'"; exit 1 ;;
  esac
done
for f in "$WORK"/*.json; do
  [ -e "$f" ] || continue
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["aggregate"]["mb_per_s"] > 0, d["aggregate"]' "$f"
done
echo PASS
