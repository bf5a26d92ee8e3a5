#!/usr/bin/env python3
"""A relay cannot swap agents (issue 28): a keyless TCP relay listens where the coordinator expects
agent A and forwards every byte to agent B. B holds the key, so the TLS session completes, but B
answers on its own address: a keyed coordinator must refuse the relayed node by name instead of
running A's role on B (without the check the run passes, crediting A with B's figures). A direct
run of the same agents (B as the server, C as the client) is the control.
Usage: relay_swap.py FABPERF"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

fabperf = sys.argv[1]
work = tempfile.mkdtemp(prefix="fabperf-relay-")
key = os.path.join(work, "fabperf.key")
subprocess.run([fabperf, "keygen", key], check=True, capture_output=True)


def free_port(host):
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


# B on 127.0.0.2, C on 127.0.0.1; the relay on 127.0.0.1 (a host's address, not B's).
hosts = ["127.0.0.2", "127.0.0.1"]
agents, ports = [], []
for host in hosts:
    ports.append(free_port(host))
    agents.append(subprocess.Popen([fabperf, "agent", "--listen", f"{host}:{ports[-1]}", "--key-file", key],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
for host, port in zip(hosts, ports):
    for _ in range(100):
        try:
            socket.create_connection((host, port), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)

relayed = {"connections": 0}


def pump(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def relay(srv, target):
    while True:
        try:
            c, _ = srv.accept()
        except OSError:
            return
        relayed["connections"] += 1
        u = socket.create_connection(("127.0.0.2", target))
        threading.Thread(target=pump, args=(c, u), daemon=True).start()
        threading.Thread(target=pump, args=(u, c), daemon=True).start()


srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(16)
relay_addr = f"127.0.0.1:{srv.getsockname()[1]}"
threading.Thread(target=relay, args=(srv, ports[0]), daemon=True).start()

failures = []
b, c = (f"{h}:{p}" for h, p in zip(hosts, ports))
try:
    for name, servers, want in (("direct", b, 0), ("relayed", relay_addr, 3)):
        r = subprocess.run([fabperf, "run", "--servers", servers, "--clients", c, "--time", "0.5", "--key-file", key],
                           capture_output=True, text=True, timeout=60)
        print(f"{name}: --servers {servers} --clients {c}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        if r.returncode != want:
            failures.append(f"{name}: exit {r.returncode}, expected {want}")
        if want == 3 and not (relay_addr in r.stderr and "answered on 127.0.0.2" in r.stderr):
            failures.append(f"{name}: the error does not name the relayed node and the agent behind it: {r.stderr!r}")
    if relayed["connections"] == 0:
        failures.append("the coordinator never reached the relay: the test proves nothing")
finally:
    srv.close()
    for p in agents:
        p.send_signal(signal.SIGTERM)
        p.wait(10)
    subprocess.run(["rm", "-rf", work])
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
