#!/usr/bin/env python3
"""A live line on a terminal while `fabperf run` works (issue 31): stderr is a pty, stdout a pipe.
The pty shows the set-up before the run's output exists, then "T of 3.0 s, N MB/s now" lines with
data moving; stdout carries the usual report and nothing of the live line; with --quiet the
terminal gets nothing. Usage: progress_pty.py FABPERF"""
import os
import pty
import re
import select
import subprocess
import sys

fab = sys.argv[1]
failures = []


def run(extra):
    master, slave = pty.openpty()
    p = subprocess.Popen([fab, "run", "--local", "2", "--mode", "stream", "--time", "3", *extra],
                         stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    os.set_blocking(p.stdout.fileno(), False)
    tty, out, tty_before_out = b"", b"", None
    while True:
        r, _, _ = select.select([master, p.stdout], [], [], 60)
        if not r:
            break
        if master in r:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                chunk = b""
            if chunk and tty_before_out is None:
                tty_before_out = out == b""  # the terminal heard from it before any result existed
            tty += chunk
        if p.stdout in r:
            chunk = p.stdout.read() or b""
            if not chunk and p.poll() is not None:
                break
            out += chunk
    p.wait(30)
    try:
        while True:  # what is left on the pty
            r, _, _ = select.select([master], [], [], 0.2)
            if not r:
                break
            chunk = os.read(master, 4096)
            if not chunk:
                break
            tty += chunk
    except OSError:
        pass
    os.close(master)
    return p.returncode, tty.decode(errors="replace"), out.decode(errors="replace"), tty_before_out


rc, tty, out, early = run([])
lines = re.findall(r"([0-9.]+) of 3\.0 s, ([0-9]+) MB/s now", tty)
print(f"exit {rc}; terminal: {len(lines)} live lines {lines[:4]}; first terminal output before the result: {early}")
if rc != 0:
    failures.append(f"run exit {rc}: {out[-500:]}")
if "setting up 1 server(s) and 1 client(s)" not in tty or not early:
    failures.append(f"no set-up line on the terminal before the result: {tty[:200]!r}")
if not lines or max(int(mb) for _, mb in lines) <= 0:
    failures.append(f"no live line with data moving: {tty!r}")
if "MB/s now" in out or "\r" in out or "MB/sec" not in out:
    failures.append(f"stdout is not the plain report: {out[:300]!r}")
rc, tty, out, _ = run(["--quiet"])
if tty.strip():
    failures.append(f"--quiet still drew on the terminal: {tty!r}")
if not re.search(r"MB/sec", out):
    failures.append(f"--quiet printed no summary line: {out!r}")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
