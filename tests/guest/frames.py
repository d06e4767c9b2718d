#!/usr/bin/env python3
"""Sends well-formed and malformed frames to agtd and prints TAP lines for what it answers.

usage: frames.py SOCKET FIRST_TEST_NUMBER
Prints "ok N - ..." lines; the caller counts them.
"""
import socket
import struct
import sys
import time

from agtdwire import Tap, frame, hello, read_msg

sock_path = sys.argv[1]
tap = Tap(int(sys.argv[2]))


def connect():
    for _ in range(100):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        try:
            s.connect(sock_path)
            return s
        except BlockingIOError:  # the listen backlog is full for a moment
            s.close()
            time.sleep(0.01)
    raise RuntimeError("cannot connect to agtd")


s = connect()
r = hello(s)
tap(r.get("result", {}).get("version") == 1, "hello answers with the protocol version", r)

cases = [
    (b"\x00\x00\x00\x00", "empty frame"),
    (frame(b"{not json"), "not valid JSON"),
    (frame(b"[1,2,3]"), "not a JSON object"),
    (frame({"method": "jail.ls"}), "field 'id'"),
    (frame({"id": 2}), "field 'method'"),
    (frame({"id": 3, "method": "jail.ls", "params": [1]}), "field 'params'"),
    (frame({"id": 4, "method": "no.such"}), "unknown method 'no.such'"),
    (frame({"id": 5, "method": "jail.inspect", "params": {"name": 7}}), "must be a string"),
    (frame({"id": 6, "method": "jail.create", "params": {"name": "x", "bogus": 1}}), "unknown field 'bogus'"),
    (frame(b'{"id":7,"id":8,"method":"jail.ls"}'), "duplicate"),
    (frame({"id": 9, "method": "jail.create", "params": {"name": "../../etc"}}), "jail name"),
    # A limit of 0 is not "no limit": that is written "unlimited".
    (frame({"id": 10, "method": "jail.create", "params": {"name": "z0", "limits": {"memory": 0}}}),
     "field 'memory' is 0, which is not a limit: write \"unlimited\" for none"),
    (frame({"id": 11, "method": "jail.create", "params": {"name": "z0", "limits": {"pids": 0}}}),
     "field 'pids' is 0, which is not a limit"),
    (frame({"id": 12, "method": "jail.create", "params": {"name": "z0", "limits": {"cpu": 0}}}),
     "field 'cpu' is 0, which is not a limit"),
    (frame({"id": 13, "method": "jail.create", "params": {"name": "z0", "limits": {"cpu": "none"}}}),
     "field 'cpu' must be a positive integer or \"unlimited\""),
    (frame({"id": 14, "method": "jail.create", "params": {"name": "z0", "limits": {"cpu": 5}}}),
     "limits.cpu must be at least 10"),
]
for raw, want in cases:
    s.sendall(raw)
    r = read_msg(s)
    msg = r.get("error", {}).get("message", "")
    tap("error" in r and want in msg, f"bad frame ({want}) gets an error reply", r)

# Oversized: a 2 GiB declared frame; the start of its body, then a good request on the
# same connection is still answered.
s.sendall(struct.pack(">I", 0x7FFFFFF0) + b"x" * 100000)
r = read_msg(s)
tap("exceeds the limit" in r.get("error", {}).get("message", ""), "an oversized frame is refused", r)

# A request before hello on a fresh connection.
s2 = connect()
s2.sendall(frame({"id": 1, "method": "jail.ls"}))
r = read_msg(s2)
tap("before 'hello'" in r.get("error", {}).get("message", ""), "a request before hello is refused", r)
s2.sendall(frame({"id": 2, "method": "hello", "params": {"version": 99}}))
r = read_msg(s2)
tap("not supported" in r.get("error", {}).get("message", ""), "an unknown protocol version is refused", r)
s2.close()

# Meanwhile other clients are served at once.
t0 = time.time()
s3 = connect()
hello(s3)
s3.sendall(frame({"id": 2, "method": "jail.ls"}))
r = read_msg(s3)
tap("jails" in r.get("result", {}) and time.time() - t0 < 2, "another client is served while one sends garbage", r)

# Half a frame, then silence: the others are not held up.
s4 = connect()
s4.sendall(struct.pack(">I", 100) + b'{"id":')
s3.sendall(frame({"id": 3, "method": "daemon.status"}))
r = read_msg(s3)
tap("uptime" in r.get("result", {}), "a half-sent frame on one connection stalls no other", r)
s4.close()

# Many connections that hang up abruptly: fewer than one uid's share of --max-clients (192 of
# the default 256), since agtd may not have seen the earlier hang-ups when the next connects,
# and a connection over the share is refused (and closed) by design.
for _ in range(150):
    c = connect()
    c.sendall(struct.pack(">I", 50) + b"{")
    c.close()
# agtd sees each hang-up in its own time: ask until the count settles (at most 5 s).
for i in range(50):
    s3.sendall(frame({"id": 4 + i, "method": "daemon.status"}))
    r = read_msg(s3)
    if r.get("result", {}).get("clients", 99) <= 3:
        break
    time.sleep(0.1)
tap(r.get("result", {}).get("clients", 99) <= 3, "abandoned connections are cleaned up", r)
s3.close()
s.close()
sys.exit(1 if tap.failed else 0)
