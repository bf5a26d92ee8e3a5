#!/usr/bin/env python3
"""Builds a plan results file (JSON Lines, docs/reports.md) from real `fabperf run --json`
results, for the `fabperf report` end-to-end test, until plans produce them themselves.

Every number in a step's "result" was measured by the real binary. Host names n1..n4 stand for
the four --local agents of each run (2 clients, 2 servers): four runs with the roles rotated
cover all 12 ordered pairs of 4 hosts. The KPI lines are written here, by the test: their
thresholds come from the measured values (so that some pass and some fail), and each check's
value is read from the measured result, exactly as a KPI evaluator would.

usage: make_results.py OUT.jsonl [--no-end] RUN1.json RUN2.json RUN3.json RUN4.json
"""
import json
import statistics
import sys

ROLES = [(["n1", "n2"], ["n3", "n4"]), (["n3", "n4"], ["n1", "n2"]),
         (["n1", "n3"], ["n2", "n4"]), (["n2", "n4"], ["n1", "n3"])]


def names(result, clients, servers):
    """Result node index -> plan host name, by role order (as the report itself maps them)."""
    out, ci, si = {}, 0, 0
    for n in result["nodes"]:
        if n["role"].startswith("client"):
            out[n["index"]] = clients[ci]; ci += 1
        else:
            out[n["index"]] = servers[si]; si += 1
    return out


def main():
    args = sys.argv[1:]
    out_path = args.pop(0)
    no_end = "--no-end" in args
    runs = [json.load(open(a)) for a in args if a != "--no-end"]
    assert len(runs) == 4, "need four run results"
    hosts = [{"name": f"n{i}", "address": "127.0.0.1", "links": ["lo"]} for i in range(1, 5)]
    lines = [{"type": "plan", "schema": "fabperf.plan-results", "version": 1,
              "fabperf_version": runs[0]["fabperf_version"], "started_at": runs[0]["started_at"],
              "plan_file": "e2e-plan.yaml",
              "plan": {"name": "report-e2e", "hosts": hosts,
                       "tests": [{"name": "mesh", "pattern": "all-pairs", "test": "write"}],
                       "kpis": {"pair_min_mb_per_s": "median of the measured pairs",
                                "node_min_tx_mb_per_s": "half the best client"}},
              "steps_total": 4}]
    pair_values, node_values = [], []
    for i, r in enumerate(runs):
        c, s = ROLES[i]
        nm = names(r, c, s)
        pair_values += [(f"mesh/{i}", f"{nm[p['client']]}->{nm[p['server']]}", p["mb_per_s"]) for p in r["pairs"]]
        node_values += [(f"mesh/{i}", nm[n["index"]], n["tx_mb_per_s"]) for n in r["nodes"] if n["role"] == "client"]
    pair_threshold = round(statistics.median(v for _, _, v in pair_values), 1)
    node_threshold = round(max(v for _, _, v in node_values) / 2, 1)
    for i, r in enumerate(runs):
        c, s = ROLES[i]
        lines.append({"type": "step", "index": i, "id": f"mesh/{i}", "test": "mesh", "pattern": "all-pairs",
                      "clients": c, "servers": s, "status": "done", "error": "",
                      "started_at": r["started_at"], "duration_s": r["settings"]["time_ns"] / 1e9, "result": r})
        for step, subject, v in pair_values:
            if step != f"mesh/{i}":
                continue
            ok = v >= pair_threshold
            lines.append({"type": "kpi", "test": "mesh", "step": step, "kpi": "pair_min_mb_per_s", "scope": "pair",
                          "subject": subject, "value": v, "threshold": pair_threshold, "op": ">=", "unit": "MB/s",
                          "pass": ok, "detail": "" if ok else f"{subject} {v:.1f} MB/s < {pair_threshold} MB/s"})
        for step, subject, v in node_values:
            if step != f"mesh/{i}":
                continue
            ok = v >= node_threshold
            lines.append({"type": "kpi", "test": "mesh", "step": step, "kpi": "node_min_tx_mb_per_s", "scope": "node",
                          "subject": subject, "value": v, "threshold": node_threshold, "op": ">=", "unit": "MB/s",
                          "pass": ok, "detail": "" if ok else f"{subject} sent {v:.1f} MB/s < {node_threshold} MB/s"})
    agg = [r["aggregate"]["mb_per_s"] for r in runs]
    ratio = min(agg) / max(agg)
    lines.append({"type": "kpi", "test": None, "step": None, "kpi": "aggregate_min_max_ratio", "scope": "aggregate",
                  "subject": "", "value": ratio, "threshold": 0.5, "op": ">=", "unit": "ratio", "pass": ratio >= 0.5,
                  "detail": "" if ratio >= 0.5 else f"slowest step {min(agg):.0f} MB/s is under half the fastest"})
    failed = sum(1 for l in lines if l["type"] == "kpi" and not l["pass"])
    if not no_end:
        lines.append({"type": "end", "finished_at": runs[-1]["started_at"], "interrupted": False,
                      "passed": failed == 0, "exit_code": 1 if failed else 0})
    with open(out_path, "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\n")
    print(json.dumps({"kpis": sum(1 for l in lines if l["type"] == "kpi"), "failed": failed}))


main()
