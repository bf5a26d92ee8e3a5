#!/usr/bin/env bash
# fabperf monitor against the real thing (docs/monitor.md, docs/testing.md "Monitor test"):
#  4 hosts through a switch at 200 Mbit/s (network namespaces), an agent on each; the monitor runs
#  in h1's namespace (it dials 198.18.x) and a real Prometheus from Debian runs beside it, scraping
#  127.0.0.1:9668 every second with the shipped alert rules loaded. check_monitor.py then:
#  - waits for the first rotation (it sets every baseline: baseline-probes = 1);
#  - lints a scrape with `promtool check metrics` (no output allowed) and the rules with
#    `promtool check rules`; checks 404, 405 and an oversized request;
#  - compares what Prometheus stored with the monitor's own records (state file, --probe-log);
#  - shapes h4's link to 30 Mbit/s: a drift alert must rise within two rotations, only for pairs
#    with h4, and the shipped FabperfThroughputDrift rule must fire; restoring 200 Mbit/s must
#    clear them within two rotations;
#  - kills h3's agent: its pairs count failures, fabperf_agent_up{host="h3"} drops to 0, the
#    other pairs go on being probed;
#  - every metric name in the shipped rules and dashboard must be in a real scrape.
# Then: a restart reloads the baselines (shown before any probe), a corrupt state file is refused
# by name (exit 2), and `--once` with baselines seeded from a `fabperf run --json` acceptance run
# exits 0.
FABPERF=$1 TOP=$2
. "$TOP/tests/netns/lib.sh"
require_root
for tool in prometheus promtool curl; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed (scripts/install-deps --test)"; exit 77; }
done
TAG="mo$(( $$ % 100000 ))"
"$LAB" up "$TAG" --hosts 4 --links 1 --rate 200mbit >/dev/null
for h in 1 2 3 4; do start_agent $h 198.18.0.$h; done
NS1=$("$LAB" ns "$TAG" 1)

mkdir -p "$WORK/prom" "$WORK/state"
cat > "$WORK/monitor.toml" <<TOML
[monitor]
listen = "127.0.0.1:9668"
state-dir = "$WORK/state"
max-duty = "100%"
latency-interval = "300s"
drift-percent = 40
baseline-probes = 1
max-backoff = "4s"
connect-timeout = "2s"
$(for h in 1 2 3 4; do printf '[[hosts]]\nname = "h%s"\naddress = "198.18.0.%s"\n' $h $h; done)
[probe]
time = 0.6
warmup = 0.2
buffsize = "256K"
threads = 1
[latency]
time = 0.3
TOML
"$FABPERF" monitor "$WORK/monitor.toml" --check

# A bad key is refused by name, with exit 2.
sed 's/^max-duty/max-dooty/' "$WORK/monitor.toml" > "$WORK/bad.toml"
set +e
"$FABPERF" monitor "$WORK/bad.toml" > "$WORK/bad.out" 2>&1; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "field 'max-dooty': unknown field of \[monitor\]" "$WORK/bad.out" || { echo "FAIL: bad key: exit $rc"; cat "$WORK/bad.out"; exit 1; }

start_monitor() {
  # `ip netns exec` execs the command: $! is the monitor's own PID (a shell function would fork).
  ip netns exec "$NS1" "$FABPERF" monitor "$WORK/monitor.toml" "${KEYARGS[@]}" --probe-log "$WORK/probes.jsonl" "$@" 2>>"$WORK/monitor.log" &
  MONITOR_PID=$!
  PIDS+=($MONITOR_PID)
  for _ in $(seq 100); do
    in_host 1 curl -sf --max-time 2 http://127.0.0.1:9668/metrics >/dev/null 2>&1 && return 0
    kill -0 $MONITOR_PID 2>/dev/null || { echo "FAIL: monitor exited"; cat "$WORK/monitor.log"; exit 1; }
    sleep 0.1
  done
  echo "FAIL: monitor's /metrics did not answer"; cat "$WORK/monitor.log"; exit 1
}
stop_monitor() {
  kill -TERM $MONITOR_PID
  local rc=0
  wait $MONITOR_PID || rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: monitor exited $rc on SIGTERM"; tail -5 "$WORK/monitor.log"; exit 1; }
}
start_monitor

cat > "$WORK/prom/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $TOP/scripts/monitor/fabperf-alerts.yml
scrape_configs:
  - job_name: fabperf-monitor
    static_configs:
      - targets: ["127.0.0.1:9668"]
YML
ip netns exec "$NS1" prometheus --config.file="$WORK/prom/prometheus.yml" --storage.tsdb.path="$WORK/prom/data" \
  --web.listen-address=127.0.0.1:9090 --log.level=warn 2>"$WORK/prom/log" &
PIDS+=($!)
for _ in $(seq 100); do in_host 1 curl -sf --max-time 2 http://127.0.0.1:9090/-/ready >/dev/null 2>&1 && break; sleep 0.2; done
in_host 1 curl -sf --max-time 2 http://127.0.0.1:9090/-/ready >/dev/null || { echo "FAIL: prometheus not ready"; cat "$WORK/prom/log"; exit 1; }

H3_AGENT_PID=${PIDS[2]}
python3 "$TOP/tests/monitor/check_monitor.py" --ns "$NS1" --lab "$LAB" --tag "$TAG" --work "$WORK" --top "$TOP" \
  --kill-h3 "$H3_AGENT_PID"
grep -E "drift( cleared)?: " "$WORK/monitor.log" | head -8

# Restart: the baselines come back from the state file before any probe ran.
stop_monitor
grep -q "monitor: stopped" "$WORK/monitor.log" || { echo "FAIL: no 'stopped' line"; exit 1; }
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["schema"]=="fabperf.monitor-baselines" and len(d["baselines"])==12, d' "$WORK/state/baselines.json"
start_monitor
in_host 1 curl -sf http://127.0.0.1:9668/metrics > "$WORK/restart.txt"
n=$(grep -c '^fabperf_baseline_bytes_per_second{' "$WORK/restart.txt" || true)
[ "$n" -eq 12 ] || { echo "FAIL: $n baselines right after the restart, expected 12"; exit 1; }
grep -q "baselines loaded from $WORK/state/baselines.json" "$WORK/monitor.log" || { echo "FAIL: no reload line"; exit 1; }
stop_monitor
echo "restart: 12 baselines served before the first probe"

# A corrupt state file is named, never replaced; --reset-baselines starts afresh.
head -c 40 "$WORK/state/baselines.json" > "$WORK/state/cut" && mv "$WORK/state/cut" "$WORK/state/baselines.json"
set +e
in_host 1 "$FABPERF" monitor "$WORK/monitor.toml" "${KEYARGS[@]}" > "$WORK/corrupt.out" 2>&1; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "state file $WORK/state/baselines.json: not valid JSON" "$WORK/corrupt.out" || { echo "FAIL: corrupt state: exit $rc"; cat "$WORK/corrupt.out"; exit 1; }
echo "corrupt state file: $(tail -1 "$WORK/corrupt.out")"

# --once for cron, its baselines seeded from an acceptance run with the probe's settings.
in_host 1 "$FABPERF" run --servers 198.18.0.2 --clients 198.18.0.1 "${KEYARGS[@]}" --mode stream --time 0.6 --warmup 0.2 \
  --buffsize 256K --threads 1 --json "$WORK/acceptance.json" --quiet
mkdir -p "$WORK/state2"
cat > "$WORK/once.toml" <<TOML
[monitor]
state-dir = "$WORK/state2"
acceptance = "$WORK/acceptance.json"
max-duty = "100%"
[[hosts]]
name = "h1"
address = "198.18.0.1"
[[hosts]]
name = "h2"
address = "198.18.0.2"
[probe]
time = 0.6
warmup = 0.2
buffsize = "256K"
threads = 1
[latency]
time = 0.3
TOML
set +e
in_host 1 "$FABPERF" monitor "$WORK/once.toml" "${KEYARGS[@]}" --once > "$WORK/once.out" 2>&1; rc=$?
set -e
cat "$WORK/once.out"
[ $rc -eq 0 ] || { echo "FAIL: --once exit $rc, expected 0"; exit 1; }
grep -q "1 baselines seeded from $WORK/acceptance.json" "$WORK/once.out" || { echo "FAIL: acceptance not seeded"; exit 1; }
echo PASS
