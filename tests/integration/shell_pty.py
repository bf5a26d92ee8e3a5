#!/usr/bin/env python3
"""fabperf shell on a terminal (a pty): a line is edited (backspace, Ctrl-A, Ctrl-D), history is
recalled with the up arrow within a session and, from the history file, in the next session.
Usage: shell_pty.py FABPERF_BIN. Exit 77 (skip) when the binary was built without libedit."""
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import time

fab = sys.argv[1]
if "libedit" not in subprocess.run(["ldd", fab], capture_output=True, text=True).stdout:
    print("SKIP: fabperf was built without libedit (apt-get install libedit-dev)")
    sys.exit(77)

hist = os.path.join(tempfile.mkdtemp(prefix="fabperf-pty-"), "history")
env = dict(os.environ, FABPERF_HISTORY=hist, TERM="xterm", HOME="/nonexistent")


class Session:
    def __init__(self):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execve(fab, [fab, "shell"], env)
        self.buf = b""

    def until(self, pattern, count=1, timeout=10.0):
        deadline = time.monotonic() + timeout
        while self.buf.count(pattern) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                sys.exit(f"FAIL: waited for {pattern!r} x{count}; got {self.buf!r}")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    self.buf += os.read(self.fd, 4096)
                except OSError:
                    break
        if self.buf.count(pattern) < count:
            sys.exit(f"FAIL: {pattern!r} x{count} not seen; got {self.buf!r}")

    def send(self, data):
        os.write(self.fd, data)

    def close(self):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return status
            try:
                r, _, _ = select.select([self.fd], [], [], 0.1)
                if r:
                    self.buf += os.read(self.fd, 4096)
            except OSError:
                pass
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        sys.exit("FAIL: the shell did not exit at end of input")


DONE = b"Test time set to 5 seconds"
s = Session()
s.until(b"nsdperf> ")
time.sleep(0.5)  # libedit may print the prompt before it switches the terminal to raw mode
# "tttime 59", backspace, Ctrl-A (start of line), Ctrl-D (delete the char under the cursor):
# only a line editor turns that into "ttime 5".
s.send(b"tttime 59\x7f\x01\x04\r")
s.until(DONE)
s.send(b"buffsize 64K\r")
s.until(b"Buffer size set to 65536 bytes")
s.send(b"\x1b[A\x1b[A\r")  # up, up: "ttime 5" again
s.until(DONE, count=2)
s.until(b"nsdperf> ", count=4)  # back at the prompt, in raw mode again
time.sleep(0.5)
s.send(b"\x04")  # Ctrl-D on an empty line: end of input
status = s.close()
if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
    sys.exit(f"FAIL: shell exit status {status}")
with open(hist, "rb") as f:
    saved = f.read().replace(b"\\040", b" ")  # libedit's file format escapes spaces
for want in (b"ttime 5", b"buffsize 64K"):
    if want not in saved:
        sys.exit(f"FAIL: {want!r} not in the history file: {saved!r}")

s = Session()  # a new session recalls the last line from the file
s.until(b"nsdperf> ")
time.sleep(0.5)  # libedit may print the prompt before it switches the terminal to raw mode
s.send(b"\x1b[A\r")
s.until(DONE)
s.until(b"nsdperf> ", count=2)
time.sleep(0.5)
s.send(b"\x04")
s.close()
print("ok: line edited, history recalled in the session and from the history file")
shutil.rmtree(os.path.dirname(hist), ignore_errors=True)
