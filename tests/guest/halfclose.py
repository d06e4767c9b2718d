#!/usr/bin/env python3
"""A jail.exec client that half-closes its connection right after the request, then reads
the stream to its end; prints "LENGTH SHA256 exit=CODE" of the output it got.

usage: halfclose.py SOCKET JAIL ARGV...
"""
import base64
import hashlib
import socket
import sys

from agtdwire import frame, read_msg


s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(frame({"id": 1, "method": "hello", "params": {"version": 1}}))
if "result" not in (read_msg(s, eof_ok=True) or {}):
    sys.exit("no answer to hello")
s.sendall(frame({"id": 2, "method": "jail.exec", "params": {"name": sys.argv[2], "argv": sys.argv[3:]}}))
s.shutdown(socket.SHUT_WR)
h = hashlib.sha256()
n = 0
code = "none"
while True:
    m = read_msg(s, eof_ok=True)
    if m is None:
        break
    if "out" in m:
        data = base64.b64decode(m["out"])
        h.update(data)
        n += len(data)
    elif "exit" in m:
        code = m["exit"].get("exit_code")
    elif "error" in m:
        print("error:", m["error"], file=sys.stderr)
print(n, h.hexdigest(), "exit=%s" % code)
