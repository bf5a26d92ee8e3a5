#!/usr/bin/env python3
"""Checks the outputs of tests/vm/pcie_guest.sh (the `pcie` label) against what the guest's
machine was built with (tests/vm/test_pcie_lab.sh): the card's two functions 0000:81:00.0/.1 on
root port 0000:80:00.0 (capable of x4 at 8 GT/s) on NUMA node 1 (CPU 1), each port 56000 Mb/s,
ens1f0's interrupts pinned to CPU 0. qemu's emulated endpoints train and report x1 at 2.5 GT/s,
so the link the card can use is x1 Gen1: 2.0 Gbit/s after 8b/10b, 1.7 after the TLP overhead of
the 128-byte payloads qemu's endpoints use. Usage: check_pcie.py RESULTS_DIR"""
import json
import os
import re
import sys

res = sys.argv[1]
failed = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failed.append(what)


def read(name):
    with open(os.path.join(res, name)) as f:
        return f.read()


def card_link(doc):
    for link in doc["links"]:
        if link["name"] == "ens1f0":
            return link
    return None


def check_card(link, where):
    p = link and link.get("pcie")
    check(p is not None, f"{where}: ens1f0 has PCIe facts")
    if not p:
        return
    check(p["address"] == "0000:81:00.0" and p["port"] == "0000:80:00.0",
          f"{where}: function 0000:81:00.0 behind root port 0000:80:00.0 (got {p['address']} / {p['port']})")
    check(p["link"] == {"gts": 2.5, "width": 1, "generation": 1}, f"{where}: link trained x1 2.5 GT/s (got {p['link']})")
    check(p["max"] == {"gts": 2.5, "width": 1, "generation": 1}, f"{where}: the card's own maximum x1 2.5 GT/s (got {p['max']})")
    check(p["port_max"] == {"gts": 8.0, "width": 4, "generation": 3},
          f"{where}: the narrowed root port's x-width=4 x-speed=8 read as the slot's capability (got {p['port_max']})")
    check(p["numa_node"] == 1 and link["numa_node"] == 1, f"{where}: NUMA node 1 (got {p['numa_node']})")
    check(p["irq"]["local_cpus"] == "1" and not p["irq"]["all_cpus_local"], f"{where}: local CPUs 1 (got {p['irq']})")
    check([x["name"] for x in p["ports"]] == ["ens1f0", "ens1f1"] and all(x["speed_mbps"] == 56000 for x in p["ports"]),
          f"{where}: both functions' ports share the link at 56000 Mb/s (got {p['ports']})")
    check(p["ports_speed_mbps"] == 112000, f"{where}: 112 Gbit/s of ports")
    check(p["max_payload"] in (128, 0), f"{where}: max payload read as qemu's 128 B, or unread (got {p['max_payload']})")
    check(abs(p["raw_gbps"] - 2.0) < 1e-9, f"{where}: 2.0 Gbit/s after 8b/10b (got {p['raw_gbps']})")
    mps = p["max_payload"] or 256
    check(abs(p["usable_gbps"] - 2.0 * mps / (mps + 26)) < 1e-9, f"{where}: usable = raw x {mps}/{mps + 26} (got {p['usable_gbps']})")
    check(p["irq"]["irqs"] >= 2 and p["irq"]["remote_affinity"] == p["irq"]["irqs"],
          f"{where}: every IRQ of ens1f0 set to a CPU outside node 1 (got {p['irq']})")
    levels = sorted(f["level"] for f in p["findings"])
    check(levels == ["warning", "warning"], f"{where}: two warnings (ceiling, interrupts) and no error (got {p['findings']})")


links = json.loads(read("links.json"))
check_card(card_link(links), "links --json")
f1 = next((x for x in links["links"] if x["name"] == "ens1f1"), None)
check(f1 is not None and f1.get("pcie") and f1["pcie"]["address"] == "0000:81:00.1", "links --json: ens1f1 is function 0000:81:00.1")

remote = json.loads(read("links-remote.json"))
check(len(remote["hosts"]) == 1 and "error" not in remote["hosts"][0], "links through the agent answered")
check_card(card_link(remote["hosts"][0]), "links through the agent")

text = read("links.txt")
row = re.search(r"^0000:81:00\.0 +x1 Gen1 \(2\.5 GT/s\) +x1 Gen1 \(2\.5 GT/s\) +x4 Gen3 \(8 GT/s\) +1 +1\.7  ens1f0 ens1f1: "
                r"2 x 56 Gbit/s \(112 Gbit/s\)$", text, re.M)
check(row is not None, "links text: the card's row (link, card max, slot max, node, usable, ports)")
check(re.search(r"warning +ens1f0\+ens1f1: PCIe x1 Gen1 \(2\.5 GT/s\) \(0000:81:00\.0\): 1\.7 Gbit/s usable for 2 x 56 Gbit/s "
                r"of ports \(112\.0 Gbit/s\)", text) is not None, "links text: the slot's ceiling below the ports' total")
check(re.search(r"warning +ens1f0: \d+ of its \d+ IRQs are set to CPUs outside NUMA node 1 \(local CPUs 1\)|"
                r"warning +ens1f0: \d+% of the interrupts of its \d+ IRQs were served by CPUs outside NUMA node 1", text)
      is not None, "links text: ens1f0's interrupts outside its node")

pre = read("preflight.out")
rc = read("preflight.rc").strip()
check(rc == "0", f"preflight: warnings only, exit 0 (got {rc})")
check(re.search(r"warning +198\.18\.0\.1:6668: ens1f0: PCIe x1 Gen1 \(2\.5 GT/s\) \(0000:81:00\.0\): 1\.7 Gbit/s usable for "
                r"2 x 56 Gbit/s of ports \(112\.0 Gbit/s\)", pre) is not None, "preflight: names the short slot behind ens1f0")
check(re.search(r"warning +198\.18\.0\.1:6668: ens1f0: .*outside NUMA node 1", pre) is not None,
      "preflight: names ens1f0's interrupts served outside its node")
check("error" not in pre.split("preflight: ok")[0], "preflight: no error (no link trained below its card's maximum)")

print(f"{len(failed)} check(s) failed" if failed else "every check passed")
sys.exit(1 if failed else 0)
