#!/usr/bin/env python3
"""One request to agtd; prints its result (or error) as JSON.

usage: rpc.py SOCKET METHOD [PARAMS_JSON]
"""
import json
import socket
import sys

from agtdwire import call, hello


s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
s.connect(sys.argv[1])
hello(s)
r = call(s, 2, sys.argv[2], json.loads(sys.argv[3]) if len(sys.argv) > 3 else {})
print(json.dumps(r.get("result", r)))
sys.exit(0 if "result" in r else 1)
