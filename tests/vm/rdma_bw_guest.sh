#!/usr/bin/env bash
# Runs inside a scripts/vm-lab guest: fabperf's RDMA write stream against perftest's ib_write_bw
# on the same rxe0 in one guest, like with like (64 KiB writes, 128 in flight, a completion every
# 100 posts: ib_write_bw's defaults), alternating the tools round by round so host load hits both
# alike. Guest CPU (/proc/stat) and fabperf's busiest thread are recorded for every run. Not part
# of ctest (minutes of emulation): docs/rdma.md says how it is used.
#   scripts/vm-lab --results DIR --env FABPERF=build/src/fabperf [--env FABPERF_B=/path/old/fabperf] \
#     [--env FP_ARGS=--rdma-events] [--env ROUNDS=3] [--env SECS=4] [--env CAPTURE=1] tests/vm/rdma_bw_guest.sh
# Writes DIR/bw.txt (one line per run, then the ratios); CAPTURE=1 also copies rxe0's sysfs files
# (the first 8 GID entries) to DIR/sysfs for tests/data/rdma.
set -uo pipefail
FABPERF=${FABPERF:?}
# A path that does not run would only show as "no result" rounds after minutes of emulation.
"$FABPERF" --version >/dev/null 2>&1 || { echo "rdma_bw_guest: FABPERF=$FABPERF does not run in the guest" >&2; exit 2; }
FABPERF_B=${FABPERF_B:-}
FP_ARGS=${FP_ARGS:-}  # extra `fabperf run` options for every fabperf round, e.g. --rdma-events
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-4}
OUT=${VMLAB_RESULTS:?}
W="$OUT/bw"
mkdir -p "$W"
SUM="$OUT/bw.txt"
: >"$SUM"
say() { echo "$*" | tee -a "$SUM"; }
PIDS=()
stop_pids() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done; for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done; PIDS=(); }
trap stop_pids EXIT

/usr/bin/ip addr add 127.0.0.2/8 dev lo
/usr/bin/ip addr add 127.0.0.3/8 dev lo
rdma link add rxe0 type rxe netdev lo || { say "FAIL rdma link add rxe0"; exit 1; }
for _ in $(seq 50); do grep -q 7f00:0003 /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null && break; sleep 0.1; done

if [ "${CAPTURE:-0}" = 1 ]; then
  CAP="$OUT/sysfs"
  cap() { local v; v=$(cat "$1" 2>/dev/null) || return 0; mkdir -p "$CAP/$(dirname "${1#/}")"; printf '%s\n' "$v" >"$CAP/${1#/}"; }
  B=/sys/class/infiniband/rxe0
  for f in "$B"/*; do [ -f "$f" ] && [ ! -L "$f" ] && cap "$f"; done
  P=$B/ports/1
  for f in "$P"/*; do [ -f "$f" ] && cap "$f"; done
  for i in 0 1 2 3 4 5 6 7; do cap "$P/gids/$i"; cap "$P/gid_attrs/types/$i"; cap "$P/gid_attrs/ndevs/$i"; done
  for f in "$P"/hw_counters/* "$P"/counters/*; do [ -f "$f" ] && cap "$f"; done
  cap /sys/class/net/lo/mtu
  say "captured $(find "$CAP" -type f | wc -l) sysfs files"
  "$FABPERF" links --all >"$OUT/links.txt" 2>&1
  "$FABPERF" links --json >"$OUT/links.json" 2>&1
fi

# Guest CPU over a run: user, system, softirq, idle shares of both vCPUs (from /proc/stat).
cpu_snap() { awk '/^cpu /{print $2+$3, $4, $7+$8, $5+$6, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
cpu_diff() {  # "before" "after" -> "usr X% sys Y% sirq Z% idle W%"
  echo "$1 $2" | awk '{t=$10-$5; if (t<=0) t=1; printf "usr %.0f%% sys %.0f%% sirq %.0f%% idle %.0f%%", 100*($6-$1)/t, 100*($7-$2)/t, 100*($8-$3)/t, 100*($9-$4)/t}'
}

declare -A PT
pt_run() {  # LABEL QDEPTH CQMOD
  local label=$1 qd=$2 cq=$3 srv before after mib
  timeout -k 5 120 ib_write_bw -d rxe0 -x 1 -s 65536 -t "$qd" -Q "$cq" -D "$SECS" -F >"$W/pt-srv.out" 2>&1 &
  srv=$!
  for _ in $(seq 30); do
    sleep 1
    before=$(cpu_snap)
    timeout -k 5 120 ib_write_bw -d rxe0 -x 1 -s 65536 -t "$qd" -Q "$cq" -D "$SECS" -F 127.0.0.1 >"$W/pt-cli.out" 2>&1 && break
    grep -q "Couldn't connect" "$W/pt-cli.out" && kill -0 $srv 2>/dev/null || break
  done
  after=$(cpu_snap)
  wait $srv
  mib=$(awk '/^ *65536 /{print $4}' "$W/pt-cli.out" | tail -1)
  if ! awk -v v="${mib:-0}" 'BEGIN{exit !(v > 0)}'; then say "round $round ib_write_bw $label: no result ($(tail -2 "$W/pt-cli.out" | tr -s ' \t' ' '))"; return; fi
  local mb; mb=$(awk -v p="$mib" 'BEGIN{printf "%.2f", p*1.048576}')
  PT[$label]="${PT[$label]:-} $mb"
  say "round $round ib_write_bw $label -t $qd -Q $cq: $mb MB/s ($mib MiB/s)   guest CPU $(cpu_diff "$before" "$after")"
}

declare -A FP
fp_run() {  # LABEL BINARY QDEPTH CQMOD
  local label=$1 bin=$2 qd=$3 cq=$4 a b before after
  "$bin" agent --listen 127.0.0.2:6668 --ready-fd 3 --log-level warn 3>"$W/ready.a" 2>>"$W/agent.log" &
  a=$!
  "$bin" agent --listen 127.0.0.3:6668 --ready-fd 3 --log-level warn 3>"$W/ready.b" 2>>"$W/agent.log" &
  b=$!
  PIDS=($a $b)
  for _ in $(seq 200); do grep -q LISTENING "$W/ready.a" 2>/dev/null && grep -q LISTENING "$W/ready.b" 2>/dev/null && break; sleep 0.1; done
  before=$(cpu_snap)
  timeout -k 5 120 "$bin" run --transport rdma --servers 127.0.0.2 --clients 127.0.0.3 --test write --mode stream \
    --time "$SECS" --warmup 1 --buffsize 64K --qdepth "$qd" --cq-mod "$cq" $FP_ARGS --json "$W/fp.$label.json" --quiet >"$W/fp.out" 2>&1
  after=$(cpu_snap)
  stop_pids
  rm -f "$W/ready.a" "$W/ready.b"
  local line
  line=$(python3 - "$W/fp.$label.json" <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
th = "; ".join(f"{n['node']}: {n['busiest_thread']} {n['busiest_thread_pct']:.0f}%, process {n['process_cpu_s']:.2f} s" for n in d["nodes"])
print(f"{d['aggregate']['mb_per_s']:.2f} | {th}")
PY
)
  local mb=${line%% |*}
  if ! [[ "$mb" =~ ^[0-9.]+$ ]] || ! awk -v v="$mb" 'BEGIN{exit !(v > 0)}'; then say "round $round fabperf $label: no result ($line; $(tail -2 "$W/fp.out"))"; return; fi
  FP[$label]="${FP[$label]:-} $mb"
  say "round $round fabperf $label -q $qd -Q $cq: $mb MB/s   guest CPU $(cpu_diff "$before" "$after")   threads: ${line#*| }"
}

for round in $(seq 1 "$ROUNDS"); do
  pt_run q128 128 100
  fp_run q128 "$FABPERF" 128 100
  [ -n "$FABPERF_B" ] && fp_run q128-old "$FABPERF_B" 128 100
  pt_run q16 16 1
  fp_run q16 "$FABPERF" 16 1
  [ -n "$FABPERF_B" ] && fp_run q16-old "$FABPERF_B" 16 1
done

mean() { echo "$@" | awk '{s=0; for (i=1;i<=NF;i++) s+=$i; if (NF) printf "%.2f", s/NF}'; }
# Each fabperf variant against ib_write_bw at the same depth and moderation (label up to "-old").
for label in $(echo "${!FP[@]}" | tr ' ' '\n' | sort); do
  m=$(mean ${FP[$label]})
  ptm=$(mean ${PT[${label%-old}]:-})
  say "fabperf $label mean $m MB/s (${FP[$label]# }) vs ib_write_bw ${label%-old} mean ${ptm:-?} MB/s (${PT[${label%-old}]# }): ratio $(awk -v f="$m" -v p="${ptm:-0}" 'BEGIN{if (p>0) printf "%.2f", f/p; else printf "?"}')"
done
exit 0
