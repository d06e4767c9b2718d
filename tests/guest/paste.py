#!/usr/bin/env python3
"""Attach to a jail as its writer and send input as fast as agtd takes it, reading nothing.

usage: paste.py SOCKET JAIL MIB
Sends up to MIB MiB of input in 256 KiB `in` frames; stops early once agtd has taken
nothing for 3 s (it stopped reading).  Prints the bytes sent, then waits for a line on stdin
before closing (so the caller can look at agtd meanwhile).
"""
import base64
import json
import socket
import sys

from agtdwire import frame, hello, read_msg

sock_path, jail, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])


s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock_path)
hello(s)
s.sendall(frame({"id": 2, "method": "jail.attach", "params": {"name": jail, "write": True}}))
r = read_msg(s)
if not r.get("result", {}).get("writer"):
    sys.exit("not the writer: %s" % json.dumps(r))
chunk = frame({"in": base64.b64encode(b"x" * (256 << 10)).decode()})
s.settimeout(3)
sent = 0
try:
    while sent < (mib << 20):
        s.sendall(chunk)
        sent += 256 << 10
except socket.timeout:
    pass
print(sent, flush=True)
sys.stdin.readline()
s.close()
