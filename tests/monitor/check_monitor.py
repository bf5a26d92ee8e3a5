#!/usr/bin/env python3
"""The checks of tests/monitor/test_monitor_netns.sh against a running monitor and Prometheus.

Runs in the root namespace; every HTTP request goes through `ip netns exec NS curl` because the
monitor and Prometheus listen on the loopback of h1's namespace. Every wait is bounded.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--ns", required=True)
ap.add_argument("--lab", required=True)
ap.add_argument("--tag", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--top", required=True)
ap.add_argument("--kill-h3", type=int, required=True)
a = ap.parse_args()

T0 = time.monotonic()
HOSTS = ["h1", "h2", "h3", "h4"]
PAIRS = [(c, s) for c in HOSTS for s in HOSTS if c != s]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def say(msg):
    print(f"[{time.monotonic() - T0:5.1f} s] {msg}", flush=True)


def curl(*args, check=True):
    p = subprocess.run(["ip", "netns", "exec", a.ns, "curl", "-s", "--max-time", "5", *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        fail(f"curl {' '.join(args)}: exit {p.returncode} {p.stderr.strip()}")
    return p.stdout


def scrape():
    return curl("-f", "http://127.0.0.1:9668/metrics")


def samples(text, name):
    """{labels-dict-as-tuple: value} of one metric in an exposition."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^" + re.escape(name) + r"(?:\{(.*)\})? (\S+)$", line)
        if m:
            labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1) or "")))
            out[labels] = float(m.group(2))
    return out


def query(expr):
    j = json.loads(curl("-f", "-G", "http://127.0.0.1:9090/api/v1/query", "--data-urlencode", f"query={expr}"))
    if j.get("status") != "success":
        fail(f"prometheus query {expr}: {j}")
    return [(r["metric"], float(r["value"][1])) for r in j["data"]["result"]]


def wait(what, fn, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.5)
    fail(f"{what}: not within {timeout} s")


def rotations(text=None):
    s = samples(text or scrape(), "fabperf_monitor_rotations_total")
    return int(next(iter(s.values()))) if s else 0


def probe_log():
    out = []
    with open(os.path.join(a.work, "probes.jsonl")) as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
    return out


def pair_of(metric):
    return (metric["client"], metric["server"])


# 1. The first rotation sets every baseline.
wait("rotation 1 in Prometheus", lambda: any(v >= 1 for _, v in query("fabperf_monitor_rotations_total")), 80)
say("rotation 1 done; Prometheus has it")

# 2. The exposition passes promtool's lint with no warning at all; HTTP edges.
text = scrape()
with open(os.path.join(a.work, "scrape.txt"), "w") as f:
    f.write(text)
lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
if lint.returncode != 0 or lint.stdout.strip() or lint.stderr.strip():
    fail(f"promtool check metrics: exit {lint.returncode}: {lint.stdout}{lint.stderr}")
rules = os.path.join(a.top, "scripts/monitor/fabperf-alerts.yml")
r = subprocess.run(["promtool", "check", "rules", rules], capture_output=True, text=True)
if r.returncode != 0:
    fail(f"promtool check rules: {r.stdout}{r.stderr}")
say(f"promtool check metrics: clean ({len(text.splitlines())} lines); check rules: {r.stdout.strip().splitlines()[-1].strip()}")
code = curl("-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:9668/other", check=False)
if code != "404":
    fail(f"GET /other: {code}, expected 404")
code = curl("-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "http://127.0.0.1:9668/metrics", check=False)
if code != "405":
    fail(f"POST /metrics: {code}, expected 405")
big = curl("-w", " %{http_code}", "-H", "X-Big: " + "a" * 20000, "http://127.0.0.1:9668/metrics", check=False)
if not big.endswith(" 400") or "bad request" not in big:
    fail(f"a 20 kB header: {big[-80:]!r}, expected 400 bad request")
say("HTTP: 404 for /other, 405 for POST, 400 for a 20 kB header")

# 3. What Prometheus stored is what the monitor measured (its state file and probe log).
state = json.load(open(os.path.join(a.work, "state/baselines.json")))
base = {(b["client"], b["server"]): b["bytes_per_second"] for b in state["baselines"]}
if set(base) != set(PAIRS) or any(v is None for v in base.values()):
    fail(f"state file baselines: {base}")
pb = {pair_of(m): v for m, v in query("fabperf_baseline_bytes_per_second")}
if set(pb) != set(PAIRS):
    fail(f"baseline series in Prometheus: {sorted(pb)}")
for p in PAIRS:
    if abs(pb[p] - base[p]) > 1e-9 * base[p]:
        fail(f"baseline {p}: Prometheus {pb[p]} vs state file {base[p]}")
log = probe_log()
seen = {}
lat = {}
for rec in log:
    for pr in rec["pairs"]:
        key = (pr["client"], pr["server"])
        if rec["kind"] == "bandwidth" and pr["bytes_per_second"] is not None:
            seen.setdefault(key, set()).add(pr["bytes_per_second"])
        if rec["kind"] == "latency" and pr["p50_seconds"] is not None:
            lat.setdefault(key, set()).add(pr["p50_seconds"])
pt = {pair_of(m): v for m, v in query("fabperf_throughput_bytes_per_second")}
if set(pt) != set(PAIRS):
    fail(f"throughput series in Prometheus: {sorted(pt)}")
for p in PAIRS:
    if not any(abs(pt[p] - v) <= 1e-9 * v for v in seen.get(p, ())):
        fail(f"throughput {p}: Prometheus {pt[p]} is none of the monitor's probes {sorted(seen.get(p, ()))}")
pl = {pair_of(m): v for m, v in query("fabperf_latency_p50_seconds")}
for p in PAIRS:
    if p not in pl or not any(abs(pl[p] - v) <= 1e-9 * v for v in lat.get(p, ())):
        fail(f"latency p50 {p}: Prometheus {pl.get(p)} vs the monitor's {sorted(lat.get(p, ()))}")
say("Prometheus agrees with the monitor: 12 baselines (state file), 12 throughputs and 12 latency p50 (probe log)")
# Against the shaper, not fabperf: tbf holds every link to 200 Mbit/s = 25 MB/s, so no probe can
# report more (10% slack for the bucket a 0.6 s probe may drain), and a working pair gets a real
# share of it (a units or scaling slip fails one side or the other).
for p, vals in seen.items():
    for v in vals:
        if not 0.25 * 25e6 <= v <= 1.10 * 25e6:
            fail(f"throughput {p}: {v / 1e6:.2f} MB/s, outside what a 200 Mbit/s tbf link allows (6.25-27.5 MB/s)")
for p in [("h1", "h2"), ("h4", "h1")]:
    say(f"  {p[0]}->{p[1]}: throughput {pt[p] / 1e6:.2f} MB/s, baseline {pb[p] / 1e6:.2f} MB/s, latency p50 {pl[p] * 1e6:.0f} us")

# 4. h4's link shaped to 30 Mbit/s: the drift alert within two rotations, only for h4's pairs.
r0 = rotations()
subprocess.run([a.lab, "shape", a.tag, "4", "0", "30mbit"], check=True)
t_shaped = time.time()
say(f"h4's link shaped to 30 Mbit/s during rotation {r0 + 1}")


def alerts_now():
    t = scrape()
    return t, {tuple(v for k, v in lab if k in ("client", "server")) for lab, v in samples(t, "fabperf_drift_alert").items() if v == 1}


def raised():
    t, al = alerts_now()
    return (t, al) if al else None


t, al = wait("a drift alert after shaping h4", raised, 120)
r1 = rotations(t)
if r1 > r0 + 2:
    fail(f"the first drift alert came in rotation {r1 + 1}, more than two rotations after the shaping (rotation {r0 + 1})")
bad = [p for p in al if "h4" not in p]
if bad:
    fail(f"drift alerts for pairs without h4: {bad}")
say(f"drift alert raised in rotation {r1 + 1} (shaped in {r0 + 1}) for {sorted(al)}")
firing = wait("FabperfThroughputDrift firing in Prometheus",
              lambda: query('ALERTS{alertname="FabperfThroughputDrift",alertstate="firing"}'), 30)
for m, _ in firing:
    tp = query(f'fabperf_throughput_bytes_per_second{{client="{m["client"]}",server="{m["server"]}"}}')[0][1]
    say(f"  firing: {m['client']}->{m['server']}: {tp / 1e6:.2f} MB/s vs baseline {pb[pair_of(m)] / 1e6:.2f} MB/s")
if any("h4" not in pair_of(m) for m, _ in firing):
    fail(f"FabperfThroughputDrift fired for a pair without h4: {firing}")

# Wait for every h4 pair to have been probed while shaped, then restore the link.
def all_h4_alerted():
    t, al = alerts_now()
    return (t, al) if {p for p in PAIRS if "h4" in p} <= al else None


t, al = wait("drift alerts on all six h4 pairs", all_h4_alerted, 120)
# Against the shaper, not fabperf: a probe that ended 5 s or more after the shaping (time_unix_s is
# its end; a probe with its set-up takes about 1.5 s) ran wholly under tbf at 30 Mbit/s = 3.75 MB/s.
# Over the 0.4 s a probe measures (time 0.6 - warmup 0.2) tbf can pass at most rate x 0.4 s plus
# its bucket (256 KB, refilled while the link idles between probes) plus its 50 ms queue: 4.86 MB/s.
# Waits for one such probe of each h4 pair.
SHAPED_MAX = (3.75e6 * 0.4 + 256e3 + 3.75e6 * 0.05) / 0.4
def shaped_probes():
    got = {}
    for rec in probe_log():
        if rec["kind"] != "bandwidth" or rec["time_unix_s"] < t_shaped + 5:
            continue
        for pr in rec["pairs"]:
            if pr["bytes_per_second"] is not None and "h4" in (pr["client"], pr["server"]):
                got.setdefault((pr["client"], pr["server"]), []).append(pr["bytes_per_second"])
    return got if len(got) == 6 else None


shaped = wait("a probe of each h4 pair wholly under the 30 Mbit/s shaping", shaped_probes, 120)
over = {p: v for p, vals in shaped.items() for v in vals if v > SHAPED_MAX}
if over:
    fail(f"h4 pairs through a link shaped to 30 Mbit/s reported more than tbf can pass ({SHAPED_MAX / 1e6:.2f} MB/s): {over}")
say(f"every h4 pair probed under the shaping stayed within what tbf passes ({SHAPED_MAX / 1e6:.2f} MB/s): " +
    ", ".join(f"{c}->{s} {max(v) / 1e6:.2f}" for (c, s), v in sorted(shaped.items())))
r2 = rotations(t)
subprocess.run([a.lab, "shape", a.tag, "4", "0", "200mbit"], check=True)
say(f"all six h4 pairs alerted by rotation {r2 + 1}; h4's link back at 200 Mbit/s")


def cleared():
    t, al = alerts_now()
    return t if not al else None


t = wait("drift alerts cleared", cleared, 120)
r3 = rotations(t)
if r3 > r2 + 2:
    fail(f"the alerts cleared in rotation {r3 + 1}, more than two rotations after the restore (rotation {r2 + 1})")
wait("FabperfThroughputDrift no longer firing", lambda: not query('ALERTS{alertname="FabperfThroughputDrift",alertstate="firing"}'), 30)
say(f"every drift alert cleared in rotation {r3 + 1}; the rule stopped firing")

# 5. A down agent: its pairs count failures, the agent shows down, the others go on.
before = {pair_of(m): v for m, v in query('fabperf_probes_total{kind="bandwidth"}')}
os.kill(a.kill_h3, signal.SIGKILL)
say("h3's agent killed")
wait("fabperf_agent_up{host=\"h3\"} == 0", lambda: query('fabperf_agent_up{host="h3"} == 0'), 60)
fails = wait("probe failures of h3's pairs",
             lambda: query('sum(fabperf_probe_failures_total{kind="bandwidth",client="h3"}) + sum(fabperf_probe_failures_total{kind="bandwidth",server="h3"}) > 0'),
             60)


def others_progress():
    now = {pair_of(m): v for m, v in query('fabperf_probes_total{kind="bandwidth"}')}
    ok = [p for p in PAIRS if "h3" not in p and now.get(p, 0) > before.get(p, 0)]
    return ok if len(ok) >= 3 else None


progressed = wait("pairs without h3 still probed", others_progress, 60)
up = {m["host"]: v for m, v in query("fabperf_agent_up")}
say(f"h3 down: agent_up {up}, {fails[0][1]:.0f} failed probes of h3's pairs; still probed: {sorted(progressed)}")

# 6. Every metric the shipped rules and dashboard use is in a real scrape.
text = scrape()
names = set(re.findall(r"^(fabperf_\w+)[{ ]", text, re.M))
used = set()
for path in ["scripts/monitor/fabperf-alerts.yml", "scripts/monitor/grafana-dashboard.json"]:
    used |= set(re.findall(r"\bfabperf_[a-z_0-9]+", open(os.path.join(a.top, path)).read()))
# Bond member shares need a real bond (not in this host's kernel): the unit tests render them,
# and the VM lab's bonds carry them (docs/monitor.md).
needs_bond = {"fabperf_bond_member_share_ratio"}
missing = sorted(used - names - needs_bond)
if missing:
    fail(f"used in the rules or dashboard but not in a scrape: {missing}")
say(f"{len(used)} metric names in the rules and dashboard; all but {sorted(needs_bond)} are in the scrape")
print("scrape excerpt:")
for line in text.splitlines():
    if re.match(r'^fabperf_(throughput_bytes_per_second|baseline_bytes_per_second|drift_alert|latency_p99_seconds)\{client="h1",server="h2"', line) \
            or re.match(r'^fabperf_(agent_up|link_speed_bits_per_second|link_mtu_bytes)\{host="h(1|3)"', line):
        print("  " + line)
say("checks passed")
