"""agtd's framing for the guest tests' Python clients (docs/PROTOCOL.md): each message a
4-byte big-endian length, then that many bytes of JSON.  Imported by rpc.py, frames.py,
clients.py, paste.py and halfclose.py (Python puts a script's own directory on its path)."""
import json
import struct


def frame(obj):
    """A frame of obj: JSON of a Python value, or bytes as they are (malformed ones too)."""
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


def _read(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return buf


def read_msg(s, eof_ok=False):
    """The next message.  At the end of the stream: None when eof_ok, else EOFError."""
    hdr = _read(s, 4)
    body = _read(s, struct.unpack(">I", hdr)[0]) if hdr is not None else None
    if body is None:
        if eof_ok:
            return None
        raise EOFError("agtd closed the connection")
    return json.loads(body)


def call(s, i, method, params=None):
    """Send request i and read the next message (its answer, on a connection with no stream)."""
    req = {"id": i, "method": method}
    if params is not None:
        req["params"] = params
    s.sendall(frame(req))
    return read_msg(s)


def hello(s):
    return call(s, 1, "hello", {"version": 1})


class Tap:
    """TAP lines numbered on from a shell script's count (its TAP_N)."""

    def __init__(self, first):
        self.n = first
        self.failed = 0

    def __call__(self, good, desc, detail=""):
        self.n += 1
        print(("ok" if good else "not ok"), self.n, "-", desc)
        if not good:
            self.failed += 1
            print("#  ", detail)
