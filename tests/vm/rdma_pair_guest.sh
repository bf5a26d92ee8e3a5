#!/usr/bin/env bash
# Runs in both guests of a two-guest scripts/vm-lab boot (root, Soft-RoCE modules loaded), joined
# by one wire (eth0: 198.18.100.1 in guest 0, .2 in guest 1). One boot for the whole rdma label:
#  - guest 1 adds rxe on its wire end, runs an agent and waits until guest 0 is done with it;
#  - guest 0 adds rxe on its end, runs an agent and the coordinator: write/nwrite across the wire
#    with the queue pairs exchanged through the coordinator (the default) and with --rdma-cm
#    (after a hostile rdma_cm client, tests/vm/cm_forge.cpp, had its requests refused, and a
#    forged queue pair without the test token, tests/vm/qp_forge.cpp, got no RDMA WRITE from
#    guest 1's agent), bytes checked on both ends, MB/s and set-up times in
#    RESULTS/summary-wire.txt; a write stream with netem loss on guest 0's eth0 for 1.5 s, whose
#    diagnosis must name an rxe hw counter in an interval overlapping the loss; then it removes
#    that rxe device and runs every single-guest check (tests/vm/rdma_guest.sh, Soft-RoCE on lo)
#    in the same boot.
# Exits non-zero when a check failed.
set -uo pipefail
FABPERF=${FABPERF:?}
OUT=${VMLAB_RESULTS:?}
KEY=${KEY:?}
VMTESTS=${VMTESTS:?}  # tests/vm of the checkout (vm-lab runs a copy of this script)
W="$OUT/wire-g$VMLAB_GUEST"
mkdir -p "$W"
SUM="$OUT/summary-wire.txt"
fails=0
AGENT=""
say() { echo "$*" | tee -a "$SUM"; }
ok() { say "PASS $*"; }
bad() { say "FAIL $*"; fails=$((fails + 1)); }
stop_agent() { if [ -n "$AGENT" ]; then kill -TERM "$AGENT" 2>/dev/null; wait "$AGENT" 2>/dev/null; AGENT=""; fi; }
trap stop_agent EXIT

[ "${VMLAB_GUESTS:-1}" = 2 ] || { echo "rdma_pair_guest.sh needs scripts/vm-lab --guests 2"; exit 2; }
rdma link add rxew type rxe netdev eth0 || { bad "guest $VMLAB_GUEST: rdma link add rxew netdev eth0"; exit 1; }
hexaddr=$(printf '%02x%02x:%02x%02x' $(echo "$VMLAB_ADDR" | tr . ' '))
for _ in $(seq 100); do grep -q "$hexaddr" /sys/class/infiniband/rxew/ports/1/gids/* 2>/dev/null && break; sleep 0.1; done
"$FABPERF" agent --listen "$VMLAB_ADDR:6668" --key-file "$KEY" --ready-fd 3 --log-level warn 3>"$W/ready" 2>>"$W/agent.log" &
AGENT=$!
for _ in $(seq 200); do grep -q LISTENING "$W/ready" 2>/dev/null && break; sleep 0.1; done
grep -q LISTENING "$W/ready" || { bad "guest $VMLAB_GUEST: agent did not start: $(cat "$W/agent.log")"; exit 1; }

if [ "$VMLAB_GUEST" = 1 ]; then
  touch "$OUT/.wire-peer-ready"
  # Serve until guest 0 is done with the wire checks (bounded: the lab's timeout kills us anyway).
  for _ in $(seq 3000); do [ -f "$OUT/.wire-done" ] && break; sleep 0.1; done
  [ -f "$OUT/.wire-done" ] || echo "guest 1: guest 0 never finished the wire checks"
  exit 0
fi

: >"$SUM"
for _ in $(seq 600); do [ -f "$OUT/.wire-peer-ready" ] && break; sleep 0.1; done
[ -f "$OUT/.wire-peer-ready" ] || { bad "guest 1's agent never became ready"; touch "$OUT/.wire-done"; exit 1; }
say "rxew GIDs: $(cd /sys/class/infiniband/rxew/ports/1/gids && for g in 0 1; do printf '%s=%s ' $g "$(cat $g)"; done)"

# A hostile rdma_cm client against guest 1's agent (tests/vm/cm_forge.cpp, acting as its
# coordinator): a foreign, a forged and a replayed connect request are refused with their reasons,
# the genuine one is accepted. The runs below then show the agent serves normally afterwards.
if [ -n "${FORGE:-}" ]; then
  if timeout -k 5 120 "$FORGE" "$KEY" "$VMLAB_PEER_ADDR:6668" >"$W/forge.out" 2>&1; then
    ok "rdma_cm requests by a hostile client: $(grep '^PASS' "$W/forge.out" | sed 's/^PASS //' | paste -sd ';' -)"
  else
    bad "rdma_cm requests by a hostile client: $(tr '\n' ' ' <"$W/forge.out")"
  fi
else
  say "SKIP rdma_cm requests by a hostile client: no FORGE tool given"
fi

# A forged endpoint (tests/vm/qp_forge.cpp): a queue pair on this guest's rxew without the test
# token, handed to guest 1's agent as the only server of a write test (the default set-up, not
# rdma_cm). Its buffer must stay untouched and the agent must report the proof failure; the
# control case, proving the token, must receive the writes.
if [ -n "${QPFORGE:-}" ]; then
  t0=$(date +%s.%N)
  if timeout -k 5 120 "$QPFORGE" "$KEY" "$VMLAB_PEER_ADDR:6668" rxew "$VMLAB_ADDR" >"$W/qp-forge.out" 2>&1; then
    ok "forged queue pair endpoint ($(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s): $(grep '^PASS' "$W/qp-forge.out" | sed 's/^PASS //' | paste -sd ';' -)"
  else
    bad "forged queue pair endpoint: $(tr '\n' ' ' <"$W/qp-forge.out")"
  fi
else
  say "SKIP forged queue pair endpoint: no QPFORGE tool given"
fi

# Server in guest 1, client in guest 0: the traffic crosses the wire.
CASES=()
run_wire() {  # NAME ARGS...
  local name=$1 t0 t1 rc setup; shift
  t0=$(date +%s.%N)
  timeout -k 5 120 "$FABPERF" run --transport rdma --servers "$VMLAB_PEER_ADDR" --clients "$VMLAB_ADDR" --key-file "$KEY" \
    --time 3 --buffsize 64K --json "$W/$name.json" --quiet --log-level info "$@" >"$W/$name.out" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  if [ $rc -ne 0 ]; then bad "$name: fabperf run exited $rc: $(grep -v '^\[' "$W/$name.out" | tail -3) $(tail -2 "$W/$name.out")"; return; fi
  setup=$(sed -n 's/.*agents set up in \([0-9.]*\) s.*/\1/p' "$W/$name.out" | head -1)
  say "ran $name ($*) in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s; set-up (connect, clock sync, QPs) ${setup:-?} s"
  CASES+=("$W/$name.json")
}
run_wire cc-write --test write --mode stream
run_wire cm-write --test write --mode stream --rdma-cm
run_wire cm-nwrite --test nwrite --mode stream --rdma-cm --parallel 2
run_wire cc-read-rpc --test read --mode rpc

# The same engine from nsdperf's shell ("rdma on", "usecm on") and from a plan file
# (transport = "rdma", rdma-cm = true): the flows are rdma_cm QPs ("rdma_cm qpn" in their names).
t0=$(date +%s.%N)
timeout -k 5 120 "$FABPERF" shell --key-file "$KEY" \
  "server $VMLAB_PEER_ADDR; client $VMLAB_ADDR; rdma on; usecm on; ttime 3; buffsize 65536; status; test write" \
  >"$W/shell.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "usecm on" "$W/shell.out" && grep -Eq "write [0-9.]+ MB/sec" "$W/shell.out"; then
  ok "shell rdma on + usecm on in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s: $(grep -Em1 'write [0-9.]+ MB/sec' "$W/shell.out")"
else
  bad "shell rdma on + usecm on: exit $rc: $(tail -5 "$W/shell.out" | tr '\n' ' ')"
fi
cat >"$W/rdma-plan.toml" <<EOF
name = "rdma-plan"
[[hosts]]
name = "s"
address = "$VMLAB_PEER_ADDR:6668"
roles = ["server"]
[[hosts]]
name = "c"
address = "$VMLAB_ADDR:6668"
roles = ["client"]
[[tests]]
name = "cm"
pattern = "bipartite"
transport = "rdma"
rdma-cm = true
mode = "stream"
time = 3
buffsize = "64K"
EOF
timeout -k 5 180 "$FABPERF" run "$W/rdma-plan.toml" --key-file "$KEY" --results "$W/rdma-plan.jsonl" >"$W/plan.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '"rdma_cm":true' "$W/rdma-plan.jsonl" && grep -q 'rdma_cm qpn' "$W/rdma-plan.jsonl"; then
  ok "plan file with transport rdma, rdma-cm = true: exit 0; $(grep -Em1 'MB/s' "$W/plan.out")"
else
  bad "plan file with rdma-cm: exit $rc: $(tail -5 "$W/plan.out" | tr '\n' ' ')"
fi

# rxe's hw_counters in the diagnosis (docs/counters.md): a write stream across the wire, sampled
# every 0.5 s; about 2 s into the window netem drops 3% of what leaves this guest's eth0 (the
# netdev under rxew) for 1.5 s. RoCE recovers by go-back-N: guest 1's responder counts the gaps
# (out_of_seq_request) and NAKs, this guest's requester counts the NAKs (rcvd_seq_err) and resends.
# The loss may act from just before `tc replace` starts until `tc del` has returned: that span is
# where the diagnosis must name an rxe counter (an emulated guest takes seconds to run tc: it is
# run once beforehand so its start-up is not in the span, and the test is long enough that the
# intervals outside it make the median).
say "rxew hw_counters: $(ls /sys/class/infiniband/rxew/ports/1/hw_counters | paste -sd ' ' -)"
/usr/sbin/tc qdisc show dev eth0 >/dev/null
lt0=$(date +%s.%N)
timeout -k 5 120 "$FABPERF" run --transport rdma --servers "$VMLAB_PEER_ADDR" --clients "$VMLAB_ADDR" --key-file "$KEY" \
  --test write --mode stream --time 14 --warmup 1 --interval 0.5 --buffsize 64K --json "$W/loss.json" --log-level info \
  >"$W/loss.out" 2>&1 &
LOSS_RUN=$!
for _ in $(seq 1 600); do grep -q 'agents set up' "$W/loss.out" 2>/dev/null && break; sleep 0.1; done
sleep 3
l0=$(date +%s%N)
/usr/sbin/tc qdisc replace dev eth0 root netem loss 3% || say "netem on eth0 failed"
sleep 1.5
/usr/sbin/tc qdisc del dev eth0 root
l1=$(date +%s%N)
wait $LOSS_RUN
rc=$?
if [ $rc -ne 0 ]; then
  bad "write stream under netem loss: exit $rc: $(tail -3 "$W/loss.out" | tr '\n' ' ')"
elif python3 - "$W/loss.json" "$l0" "$l1" "$VMLAB_ADDR" >"$W/loss.check" 2>&1 <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
t0, t1, me = int(sys.argv[2]) / 1e9, int(sys.argv[3]) / 1e9, sys.argv[4]
for n in doc["nodes"]:
    for d in n["counters"]["dips"]:
        print(f"  {n['node']} {d['text']}")
cli = next(n for n in doc["nodes"] if n["node"].startswith(me))
p0, p1 = t0 - cli["window_open_unix_s"], t1 - cli["window_open_unix_s"]
print(f"  netem loss 3% on {me} eth0 at {p0:.2f}..{p1:.2f} s of the window")
cs = doc["connections"]
a = sum(c["tx_bytes_total"] for c in cs if c["role"] == "client")
b = sum(c["rx_bytes_total"] for c in cs if c["role"] == "server")
assert a > 0 and a == b, f"byte counts differ under loss: sender {a} vs receiver {b}"
def rxe(m):
    return m["source"].startswith("rxew:") and m["name"].startswith("hw_counters/") and m["category"] in ("retransmit", "timeout", "error")
dips = [d for d in cli["counters"]["dips"] if d["subject"] == "eth0"]
named = [d for d in dips if any(rxe(m) for m in d["rose"])]
# Interval edges are stamped when sampled: allow the sampling's own spread (50 ms). Within that
# span, the intervals where netem really dropped are the ones whose qdisc.drops rose (tc takes
# seconds to act in an emulated guest): the rxe counter must be named in one of those.
inside = [d for d in named if d["t1_s"] > p0 - 0.05 and d["t0_s"] < p1 + 0.05 and
          any(m["name"] == "qdisc.drops" for m in d["rose"])]
assert inside, f"no dip of {me} eth0 in the loss {p0:.2f}..{p1:.2f} names netem's qdisc.drops and an rxe hw counter: {[d['text'] for d in dips]}"
moved = sorted({m["name"] for d in inside for m in d["rose"] if rxe(m)})
print(f"PASS rxe hw counters in the diagnosis: {inside[0]['text']}  [rxe counters named: {', '.join(moved)}]")
PY
then
  grep -v "^PASS" "$W/loss.check" >>"$SUM"
  ok "($(awk -v a="$lt0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s) $(grep '^PASS' "$W/loss.check" | sed 's/^PASS //')"
else
  cat "$W/loss.check" >>"$SUM"
  bad "rxe hw counters under netem loss: $(tail -1 "$W/loss.check")"
fi
sed -n '/^Counters/,/^$/p' "$W/loss.out" >"$W/loss.counters.txt"

touch "$OUT/.wire-done"
stop_agent

python3 - "${CASES[@]}" <<'PY' | tee -a "$SUM"
import json, sys
bad = 0
for path in sys.argv[1:]:
    name = path.rsplit("/", 1)[1][:-5]
    try:
        doc = json.load(open(path)); test = name.split("-")[1]
        cs = doc["connections"]
        def tot(role, k): return sum(c[k] for c in cs if c["role"] == role)
        errs = [c.get("error") for c in cs if c.get("error")]
        assert not errs, f"flow errors: {errs}"
        if test == "read":
            a, b = tot("server", "tx_bytes_total"), tot("client", "rx_bytes_total")
        else:
            a, b = tot("client", "tx_bytes_total"), tot("server", "rx_bytes_total")
        assert a > 0 and a == b, f"byte counts differ: sender {a} vs receiver {b}"
        assert doc["complete"], doc.get("findings")
        local = sorted({c["local"] for c in cs})
        print(f"PASS {name}: sender {a} B = receiver {b} B, aggregate {doc['aggregate']['mb_per_s']:.1f} MB/s; {len(cs)} flows, e.g. {local[0]}")
    except Exception as e:
        bad += 1
        print(f"FAIL {name}: {e}")
print(f"wire fails: {bad}")
PY
fails=$(grep -c '^FAIL ' "$SUM")

# The single-guest checks (Soft-RoCE on lo) in the same boot, on their own device.
rdma link delete rxew
bash "$VMTESTS/rdma_guest.sh"
rc=$?
[ $fails -eq 0 ] && [ $rc -eq 0 ]
