#!/usr/bin/env python3
"""A key-less impostor (issue 28): a TLS 1.3 server with an ordinary self-signed certificate that
ignores the pre-shared key a keyed coordinator offers. The coordinator must refuse it during the
handshake, name it, and send it nothing: no HELLO, no test token. Checked for `run` and `links`
through the real binary. Usage: tls_impostor.py FABPERF"""
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading

fabperf = sys.argv[1]
work = tempfile.mkdtemp(prefix="fabperf-impostor-")
cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-subj", "/CN=impostor", "-days", "1", "-keyout", key, "-out", cert],
               check=True, capture_output=True)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.load_cert_chain(cert, key)

stats = {"handshakes": 0, "app_bytes": 0, "connections": 0}
stop = threading.Event()


def serve(srv):
    while not stop.is_set():
        try:
            raw, _ = srv.accept()
        except socket.timeout:
            continue
        stats["connections"] += 1
        raw.settimeout(3)
        try:
            tls = ctx.wrap_socket(raw, server_side=True)
            stats["handshakes"] += 1
            while True:  # whatever the peer sends once it believes the session (HELLO, SETUP, ...)
                data = tls.recv(65536)
                if not data:
                    break
                stats["app_bytes"] += len(data)
        except (ssl.SSLError, OSError):
            pass
        finally:
            raw.close()


# Two impostors: a run needs a server and a client, each a different node.
peers, threads = [], []
for _ in range(2):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    peers.append(f"127.0.0.1:{srv.getsockname()[1]}")
    threads.append(threading.Thread(target=serve, args=(srv,), daemon=True))
    threads[-1].start()
subprocess.run([fabperf, "keygen", os.path.join(work, "fabperf.key")], check=True, capture_output=True)
peer = peers[0]
failures = []
for args in (["run", "--servers", peers[0], "--clients", peers[1], "--time", "1"], ["links", peer]):
    r = subprocess.run([fabperf, *args, "--key-file", os.path.join(work, "fabperf.key")], capture_output=True,
                       text=True, timeout=60)
    name = args[0]
    print(f"fabperf {name}: exit {r.returncode}: {r.stderr.strip()}")
    if r.returncode != 3:
        failures.append(f"{name}: exit {r.returncode}, expected 3 (infrastructure: the peer is refused)")
    if "answered with a certificate instead of the shared key" not in r.stderr or peer not in r.stderr:
        failures.append(f"{name}: the error does not name the impostor and why: {r.stderr!r}")
stop.set()
for t in threads:
    t.join(2)
print(f"impostor: {stats['connections']} connections, {stats['handshakes']} TLS handshakes completed, "
      f"{stats['app_bytes']} bytes of application data received")
if stats["connections"] == 0:
    failures.append("the coordinator never reached the impostor: the test proves nothing")
if stats["app_bytes"] != 0:
    failures.append(f"the coordinator sent {stats['app_bytes']} bytes inside the impostor's session")
for f in failures:
    print("FAIL:", f)
subprocess.run(["rm", "-rf", work])
sys.exit(1 if failures else 0)
