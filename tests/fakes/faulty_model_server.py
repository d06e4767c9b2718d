#!/usr/bin/env python3
"""The model server installed with agtd, with faults added from outside, for
tests/e2e/verify.sh: `agt verify` must catch each of them.

usage: faulty_model_server.py --server PATH --faults FILE [model server options]

PATH is the real model server (agtd's build tree's model-server); it is loaded as a module
and serves as usual, except for the jails the faults name.  FILE holds the faults, one a
line, read at each request (so one installation serves several runs):

  turn K           the requests of jail K (verify-TAG-0K) get HTTP 400: its turn fails
  leak K M         jail M's tool call also writes jail K's name into leaked.txt, in jail
                   M's own workspace: jail K's name is then found outside its workspace
  mount K DIR      at jail K's first request, a tmpfs is mounted at DIR/<jail K's name>
                   on the guest (the test unmounts it): something of jail K is left after
                   its removal

Jails are recognised by their names in the requests (verify's prompt holds them).
"""
import argparse
import importlib.machinery
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import threading

NAME = re.compile(r"verify-([0-9a-f]{4})-([0-9]{2})")


def load(path):
    loader = importlib.machinery.SourceFileLoader("model_server", path)
    spec = importlib.util.spec_from_loader("model_server", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def faults(path):
    out = []
    with open(path) as f:
        for line in f:
            w = line.split()
            if w:
                out.append(w)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--faults", required=True)
    a, rest = ap.parse_known_args()
    ms = load(a.server)
    mounted = set()
    lock = threading.Lock()

    def jail_of(body):
        m = NAME.search(json.dumps(body))
        return (m.group(1), int(m.group(2))) if m else (None, 0)

    def refused(body):
        tag, k = jail_of(body)
        for f in faults(a.faults):
            if f[0] == "turn" and int(f[1]) == k:
                return "fault 'turn %d': this jail's requests are refused" % k
            if f[0] == "mount" and int(f[1]) == k:
                with lock:
                    if k not in mounted:
                        d = os.path.join(f[2], "verify-%s-%02d" % (tag, k))
                        os.makedirs(d, exist_ok=True)
                        subprocess.run(["mount", "-t", "tmpfs", "agt-verify-fault", d], check=True)
                        mounted.add(k)
        return None

    real_post = ms.Handler.do_POST

    def do_post(self):
        data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            body = json.loads(data or b"{}")
        except ValueError:
            body = {}
        why = refused(body)
        if why:
            self.reply_json(400, {"error": {"message": why, "type": "invalid_request_error"}})
            return
        rfile, self.rfile = self.rfile, io.BytesIO(data)
        # the prompt names the jail: jail M's writes gain the leaks (per thread: the
        # server answers each connection in a thread of its own)
        tag, k = jail_of(body)
        local.leaks = [("leaked.txt", "verify-%s-%02d" % (tag, int(f[1])))
                       for f in faults(a.faults) if f[0] == "leak" and int(f[2]) == k]
        try:
            real_post(self)
        finally:
            self.rfile = rfile

    real_writes = ms.writes
    local = threading.local()
    ms.writes = lambda prompt: real_writes(prompt) + getattr(local, "leaks", [])
    ms.Handler.do_POST = do_post
    sys.argv = [a.server] + rest
    return ms.main()


if __name__ == "__main__":
    sys.exit(main())
