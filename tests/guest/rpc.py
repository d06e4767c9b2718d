#!/usr/bin/env python3
"""One request to agtd; prints its result (or error) as JSON.

usage: rpc.py SOCKET METHOD [PARAMS_JSON]
"""
import json
import socket
import struct
import sys


def read_msg(s):
    buf = b""
    while len(buf) < 4:
        chunk = s.recv(4 - len(buf))
        if not chunk:
            raise EOFError("agtd closed the connection")
        buf += chunk
    (size,) = struct.unpack(">I", buf)
    body = b""
    while len(body) < size:
        chunk = s.recv(size - len(body))
        if not chunk:
            raise EOFError("agtd closed the connection")
        body += chunk
    return json.loads(body)


def call(s, i, method, params):
    data = json.dumps({"id": i, "method": method, "params": params}).encode()
    s.sendall(struct.pack(">I", len(data)) + data)
    return read_msg(s)


s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
s.connect(sys.argv[1])
call(s, 1, "hello", {"version": 1})
r = call(s, 2, sys.argv[2], json.loads(sys.argv[3]) if len(sys.argv) > 3 else {})
print(json.dumps(r.get("result", r)))
sys.exit(0 if "result" in r else 1)
