#!/usr/bin/env python3
"""Listings' cgroup figures (jail.ls usage columns) against what the cgroups say
(tests/guest/usage.sh).

usage: usage.py SOCKET FIRST_TEST_NUMBER first [--order] JAIL...
       usage.py SOCKET FIRST_TEST_NUMBER stale JAIL CPU_SOURCE
first: the first listing that shows these running jails (none read yet) answers with
  figures of each, read after the listing came; with --order, a hello sent on a second
  connection right after it is answered first (agtd reads the cgroups off its loop).
stale: listings more than 2 s apart answer at once from the figures last read, with their
  true age, and have them read again; CPU time rises.  CPU_SOURCE says where the jail's CPU
  time is, as agtd reads it: v2:DIR (cpu.stat), cpuacct:DIR (cpuacct.usage) or procs:FILE
  (a cgroup.procs: utime + stime of each process).
Prints "ok N - ..." lines; the caller counts them.
"""
import json
import os
import selectors
import socket
import struct
import sys
import time

sock_path = sys.argv[1]
n = int(sys.argv[2])
failed = 0
COLS = ["name", "state", "memory", "pids", "cpu_usec", "usage_age_ms"]


def tap(good, desc, detail=""):
    global n, failed
    n += 1
    print(("ok" if good else "not ok"), n, "-", desc)
    if not good:
        failed += 1
        print("#  ", detail)


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sock_path)
    send(s, 1, "hello", {"version": 1})
    read_msg(s)
    return s


def send(s, i, method, params):
    data = json.dumps({"id": i, "method": method, "params": params}).encode()
    s.sendall(struct.pack(">I", len(data)) + data)


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


def rows(reply):
    """jail.ls's table as {name: {column: value}}."""
    res = reply["result"]
    return {r[0]: dict(zip(res["columns"], r)) for r in res["rows"]}


def listing(s):
    """One listing: its rows, and when it was sent and answered (monotonic ns)."""
    t0 = time.monotonic_ns()
    send(s, 2, "jail.ls", {"columns": COLS})
    r = read_msg(s)
    return rows(r), t0, time.monotonic_ns()


def first(args):
    order = args[0] == "--order"
    jails = args[1:] if order else args
    a, b = connect(), connect()
    t0 = time.monotonic_ns()
    send(a, 2, "jail.ls", {"columns": COLS})
    if order:
        # Sent right after the listing: agtd reads it while the listing waits for its
        # cgroup read, and answers it before the listing (with the read on agtd's loop, the
        # listing's answer is written before this request is even read).
        send(b, 3, "hello", {"version": 1})
        read_msg(b)
        tb = time.monotonic_ns()
        sel = selectors.DefaultSelector()
        sel.register(a, selectors.EVENT_READ)
        waiting = not sel.select(timeout=0)
        sel.close()
    r = read_msg(a)
    t1 = time.monotonic_ns()
    tab = rows(r)
    rtt_ms = (t1 - t0) / 1e6
    for j in jails:
        row = tab.get(j, {})
        have = all(row.get(c) is not None for c in ("memory", "pids", "cpu_usec", "usage_age_ms"))
        tap(have and row["state"] == "running" and row["pids"] >= 1,
            f"the first listing shows jail {j}'s figures ({row.get('pids')} processes, "
            f"{row.get('cpu_usec')} us CPU, {row.get('memory')} bytes)", row)
        # read after the listing came: no older than the listing's own round trip
        tap(have and row["usage_age_ms"] <= rtt_ms + 1,
            f"... read while the listing waited: age {row.get('usage_age_ms')} ms <= its "
            f"round trip {rtt_ms:.1f} ms", row)
    if order:
        tap(waiting,
            f"a hello on another connection, sent right after it, is answered while the "
            f"listing still waits for the cgroups: {(tb - t0) / 1e6:.1f} against "
            f"{rtt_ms:.1f} ms")
    a.close()
    b.close()


def clk_tck():
    return os.sysconf("SC_CLK_TCK")


def cpu_usec(source):
    """The jail's CPU time now, from where agtd reads it."""
    kind, path = source.split(":", 1)
    if kind == "v2":
        with open(os.path.join(path, "cpu.stat")) as f:
            for line in f:
                k, v = line.split()
                if k == "usage_usec":
                    return int(v)
        return 0
    if kind == "cpuacct":
        with open(os.path.join(path, "cpuacct.usage")) as f:
            return int(f.read()) // 1000
    total = 0
    with open(path) as f:
        pids = f.read().split()
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        total += (int(fields[11]) + int(fields[12])) * 1000000 // clk_tck()
    return total


def stale(args):
    jail, source = args
    s = connect()
    samples = []  # (monotonic ns, CPU time in us)

    def sample():
        samples.append((time.monotonic_ns(), cpu_usec(source)))

    sample()
    tab, t0, t1 = listing(s)  # the jail has figures from here on
    sample()
    last = tab[jail]["cpu_usec"]
    stale_ok = honest = rising = evidence = 0
    runs = 4
    for i in range(runs):
        time.sleep(2.3)
        sample()
        tab, t0, t1 = listing(s)
        sample()
        row = tab[jail]
        age, cpu = row["usage_age_ms"], row["cpu_usec"]
        # more than 2 s after the last read: answered at once from it, with its true age
        stale_ok += age is not None and age >= 2000
        # The figures were read at or after t1 - age (age is truncated to ms): every
        # sample of the cgroup taken before then is at most what the listing shows, and
        # the sample taken after the answer at least.
        read_at = t1 - (age + 1) * 1000000
        before = [c for (t, c) in samples if t < read_at]
        evidence += bool(before)  # none: read before this script began
        if max(before, default=0) <= cpu <= samples[-1][1]:
            honest += 1
        else:
            print(f"#   run {i}: cpu {cpu} age {age}, samples before the read "
                  f"{before[-3:]}, after {samples[-1][1]}")
        rising += i > 0 and cpu > last  # the first answers from the read `last` came from
        last = cpu
    tap(stale_ok == runs,
        f"listings 2.3 s apart answer from the figures last read, 2 s old or more "
        f"({stale_ok} of {runs})")
    tap(honest == runs and evidence >= runs - 1,
        f"their age is true: the CPU time shown lies between the cgroup's before the "
        f"stated read and after the answer ({honest} of {runs}, {evidence} with samples "
        f"before the read)")
    tap(rising == runs - 1, f"the jail's CPU time rises from one listing to the next "
        f"({rising} of {runs - 1}, last {last} us)")
    # each of those listings had the figures read again, in the background
    deadline = time.monotonic() + 10
    fresh = None
    while time.monotonic() < deadline:
        tab, t0, t1 = listing(s)
        if tab[jail]["usage_age_ms"] < 2000:
            fresh = tab[jail]
            break
        time.sleep(0.1)
    tap(fresh is not None and fresh["cpu_usec"] >= last,
        f"a stale listing has them read again: a listing soon after shows them younger "
        f"than 2 s ({fresh and fresh['usage_age_ms']} ms) and no lower", fresh)
    s.close()


cmd = sys.argv[3]
try:
    {"first": first, "stale": stale}[cmd](sys.argv[4:])
except (OSError, EOFError, KeyError, ValueError) as e:
    tap(False, f"usage.py {cmd} ran to its end", repr(e))
sys.exit(1 if failed else 0)
