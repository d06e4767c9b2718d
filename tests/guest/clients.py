#!/usr/bin/env python3
"""Stalled and greedy clients against an agtd started with --max-clients 16
--max-clients-per-uid 8 --hello-timeout 1000 --frame-timeout 1000 (tests/guest/daemon.sh).

usage: clients.py SOCKET FIRST_TEST_NUMBER GROUP
Prints "ok N - ..." lines; the caller counts them.  GROUP may use the socket: a child
process takes it with uid nobody to be another user.
"""
import grp
import os
import socket
import struct
import sys
import time

from agtdwire import Tap, frame, read_msg

sock_path = sys.argv[1]
tap = Tap(int(sys.argv[2]))
group = sys.argv[3]
PER_UID = 8


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock_path)
    return s


def read_or_eof(s):
    """The next message, or None: agtd may hang up on these clients."""
    return read_msg(s, eof_ok=True)


def hello(s):
    s.sendall(frame({"id": 1, "method": "hello", "params": {"version": 1}}))
    return read_or_eof(s)


def status(s, i):
    s.sendall(frame({"id": i, "method": "daemon.status"}))
    return read_or_eof(s)


def closed_with(s):
    """(message, seconds): what agtd says before it hangs up, and when it hung up."""
    t0 = time.time()
    r = read_or_eof(s)
    rest = read_or_eof(s) if r is not None else None
    return r, rest, time.time() - t0


# 1. Connections that never say hello hold their slots for a moment only.
# (root's share: 8; the per-uid share is checked with clients that said hello, below)
stalled = [connect() for _ in range(PER_UID)]
time.sleep(0.2)
late = connect()
r = read_or_eof(late)
tap(r is not None and "connections to agtd already" in r.get("error", {}).get("message", ""),
    "with its share taken by silent connections, a new one of that uid is refused at once", r)
late.close()
t0 = time.time()
r, rest, _ = closed_with(stalled[0])
took = time.time() - t0
tap(r is not None and "no 'hello' within 1000 ms" in r.get("error", {}).get("message", "")
    and rest is None,
    "a connection with no hello is told so and closed after the hello deadline", (r, rest))
tap(took < 5, "within the deadline's time (%.1f s)" % took)
for s in stalled[1:]:
    closed_with(s)
    s.close()
stalled[0].close()
s = connect()
r = hello(s)
tap(r is not None and r.get("result", {}).get("version") == 1,
    "once they are gone, a new client is served", r)

# 2. A frame begun and never finished, after a good hello.
s.sendall(struct.pack(">I", 100) + b'{"id":')
r, rest, took = closed_with(s)
tap(r is not None and "a frame was started and not finished within 1000 ms"
    in r.get("error", {}).get("message", "") and rest is None,
    "a frame started and not finished closes its connection after the frame deadline", (r, rest))
tap(took < 5, "within the deadline's time (%.1f s)" % took)
s.close()

# A frame sent a byte at a time, slower than the deadline allows in all, is cut too.
s = connect()
hello(s)
data = frame({"id": 2, "method": "daemon.status"})
cut = False
t0 = time.time()
try:
    for b in data:
        s.sendall(bytes([b]))
        time.sleep(0.1)
        if time.time() - t0 > 5:
            break
except (BrokenPipeError, ConnectionResetError):
    cut = True
r = read_or_eof(s) if not cut else None
tap(cut or (r is not None and "not finished" in r.get("error", {}).get("message", "")),
    "a frame trickled a byte at a time is cut at its deadline, not served", r)
s.close()

# 3. Long-lived connections are not cut: one idle after its hello for 3 deadlines, and one
# that sends whole frames slowly, are served.
idle = connect()
hello(idle)
busy = connect()
hello(busy)
for i in range(6):
    time.sleep(0.5)
    r = status(busy, 10 + i)
r2 = status(idle, 2)
tap(r is not None and "uptime" in r.get("result", {}),
    "a connection sending whole frames now and then is served past the deadlines", r)
tap(r2 is not None and "uptime" in r2.get("result", {}),
    "a connection idle after its hello for 3 s (3 deadlines) is still served", r2)
idle.close()
busy.close()

# 4. One uid holds at most its share: 8 of 16, with a hello each (idle, not stalled).
mine = []
for _ in range(PER_UID):
    c = connect()
    hello(c)
    mine.append(c)
extra = connect()
r = read_or_eof(extra)
msg = (r or {}).get("error", {}).get("message", "")
tap("uid 0 holds 8 connections to agtd already, its share of 16" in msg,
    "one uid past its share of the connections is refused", r)
extra.close()

# Another user (nobody, in the socket's group) is still served meanwhile.
rfd, wfd = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(rfd)
    ok = "no"
    try:
        gid = grp.getgrnam(group).gr_gid
        os.setgroups([gid])
        os.setgid(gid)
        os.setuid(65534)
        c = connect()
        r = hello(c)
        ok = "yes" if r and r.get("result", {}).get("version") == 1 else "no: %r" % r
    except Exception as e:  # reported by the parent
        ok = "no: %r" % e
    os.write(wfd, ok.encode())
    os._exit(0)
os.close(wfd)
got = os.read(rfd, 4096).decode()
os.waitpid(pid, 0)
tap(got == "yes", "another uid is served while one holds its whole share", got)
for c in mine:
    c.close()
time.sleep(0.3)
c = connect()
r = hello(c)
tap(r is not None and r.get("result", {}).get("version") == 1,
    "once it lets go, the first uid is served again", r)
c.close()
sys.exit(1 if tap.failed else 0)
