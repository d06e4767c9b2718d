#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into tests/fuzz/corpus/ (run from anywhere).

proto: byte streams of real frames (docs/PROTOCOL.md, tests/guest/frames.py), each behind the
       control prefix fuzz_proto.c reads (a control byte, then that many chunk lengths).
yaml, manifest: copies of the manifests in the tree, config examples (host/config.c's keys)
       and near-valid variants.
"""
import json
import os
import shutil
import struct

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", ".."))
corpus = os.path.join(here, "corpus")


def frame(obj):
    data = obj if isinstance(obj, bytes) else json.dumps(obj, separators=(",", ":")).encode()
    return struct.pack(">I", len(data)) + data


def ctl(chunks=(), drain_at_end=False, base64=False, repeat=False):
    """The control prefix: how fuzz_proto.c splits the stream that follows."""
    assert len(chunks) < 16
    c = len(chunks) | (0x10 if drain_at_end else 0) | (0x20 if base64 else 0) | (0x40 if repeat else 0)
    return bytes([c]) + bytes(chunks)


def write(target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


hello = frame({"id": 1, "method": "hello", "params": {"version": 1, "client": "agt"}})
create = frame({"id": 2, "method": "jail.create", "params": {
    "name": "work", "agent": "opencode", "rootfs": "default", "workspace": "/srv/work/a",
    "argv": ["opencode", "serve", "--port", "4096"], "env": {"TERM": "xterm", "LANG": "C.UTF-8"},
    "limits": {"memory": 1073741824, "pids": 512, "cpu": 1500, "nofile": 4096, "tmp": 536870912,
               "log": 8388608},
}})
requests = [
    ("hello", hello),
    ("jail-create", create),
    ("jail-ls", frame({"id": 3, "method": "jail.ls"})),
    ("jail-stop", frame({"id": 4, "method": "jail.stop", "params": {"name": "work", "grace_ms": 500}})),
    ("jail-kill", frame({"id": 5, "method": "jail.kill", "params": {"name": "work", "signal": 15}})),
    ("jail-rm", frame({"id": 6, "method": "jail.rm", "params": {"name": "work", "force": True}})),
    ("jail-logs", frame({"id": 7, "method": "jail.logs", "params": {"name": "w", "offset": 0, "max": 4096}})),
    ("rootfs-build", frame({"id": 8, "method": "rootfs.build",
                            "params": {"manifest": "/etc/agt/rootfs/default.yaml", "allow_download": False}})),
    ("rootfs-rm", frame({"id": 9, "method": "rootfs.rm", "params": {"ref": "0123abcd"}})),
    ("reply-result", frame({"id": 7, "result": {"data_b64": "aGVsbG8sIGphaWwK", "offset": 0,
                                                "next": 12, "end": True, "state": "exited"}})),
    ("reply-error", frame({"id": 2, "error": {"kind": "invalid", "message": "unknown field 'bogus'"}})),
    ("base64-params", frame({"id": 10, "method": "x", "params": {"a": "", "b": "Zg==", "c": "Zm8=",
                                                                 "d": "Zm9v", "e": "Zm9=", "f": "Z==="}})),
]
for name, f in requests:
    write("proto", name, ctl() + f)

# Several frames in one stream, split in odd places, and drained at the end only.
session = hello + create + frame({"id": 3, "method": "jail.ls", "params": None})
write("proto", "session-bytewise", ctl([1]) + session)
write("proto", "session-split", ctl([3, 0, 7, 250, 2]) + session)
write("proto", "session-drain-at-end", ctl([5, 64], drain_at_end=True) + session)
# The session 64 times over, drained at the end: the decoder's buffer grows, then shrinks.
big = frame({"id": 11, "method": "jail.logs", "params": {"name": "w", "data_b64": "QUJD" * 512}})
write("proto", "session-repeated", ctl([255], drain_at_end=True, repeat=True) + session + big)

# Bad frames (tests/guest/frames.py), each followed by a good one.
bad = [
    ("empty-frame", b"\x00\x00\x00\x00"),
    ("not-json", frame(b"{not json")),
    ("not-object", frame(b"[1,2,3]")),
    ("no-id", frame({"method": "jail.ls"})),
    ("negative-id", frame({"id": -1, "method": "jail.ls"})),
    ("no-method", frame({"id": 2})),
    ("params-list", frame({"id": 3, "method": "jail.ls", "params": [1]})),
    ("name-number", frame({"id": 5, "method": "jail.inspect", "params": {"name": 7}})),
    ("duplicate-key", frame(b'{"id":7,"id":8,"method":"jail.ls"}')),
    ("big-numbers", frame(b'{"id":9223372036854775807,"method":"m","params":{"a":1e5,"b":-0.0,"c":18446744073709551615}}')),
    ("short-header", b"\x00\x00"),
    ("truncated", struct.pack(">I", 100) + b'{"id":'),
]
for name, raw in bad:
    write("proto", "bad-" + name, ctl([2, 9]) + raw + hello)

# An oversized frame whose body arrives in pieces, then a good frame.
write("proto", "oversized", ctl([4, 200, 1]) + struct.pack(">I", 0x7FFFFFF0) + b"x" * 300 + hello)
write("proto", "oversized-just", ctl([4]) + struct.pack(">I", 1024 * 1024 + 1) + b"y" * 40)

# base64 strings straight to agt_base64_decode.
for name, s in [("plain", b"aGVsbG8sIGphaWwK"), ("pad1", b"Zm8="), ("pad2", b"Zg=="),
                ("bad-pad", b"Z=g="), ("bad-char", b"Zm9v!A==")]:
    write("proto", "base64-" + name, ctl(base64=True) + s)

# YAML documents: the manifests and config examples.
for t in ("yaml", "manifest"):
    os.makedirs(os.path.join(corpus, t), exist_ok=True)
manifests = {
    "default": os.path.join(root, "rootfs", "default.yaml"),
    "test-rootfs": os.path.join(root, "tests", "guest", "test-rootfs.yaml"),
}
for name, path in manifests.items():
    shutil.copyfile(path, os.path.join(corpus, "yaml", name + ".yaml"))
    shutil.copyfile(path, os.path.join(corpus, "manifest", name + ".yaml"))

configs = {
    "config-full": """\
# ~/.config/agt/config.yaml
target: lima:agt
vm:
  name: agt
  cpus: 4
  memory: 8GiB
  disk: 40GiB
  vm_type: vz
  arch: default
  mount_type: virtiofs
  template: ~/agt/lima.yaml
  mounts:
    - ~/src
    - location: /tmp/agt
      writable: true
      mount_point: /mnt/agt
lima:
  limactl: limactl
  home: ~/.lima
  start_timeout: 10m
agtd:
  socket: /run/agtd.sock
ssh:
  known_hosts: ~/.ssh/known_hosts
  identity: ~/.ssh/id_ed25519
  connect_timeout: 30s
jail:
  agent: opencode
  rootfs: default
  env:
    - TERM=xterm-256color
    - LANG=C.UTF-8
  limits:
    memory: 2GiB
    pids: 512
    cpu: 2
    nofile: 4096
    tmp: 256MiB
    log: 16MiB
""",
    "config-overlay": """\
# .agt/config.yaml in a repository
jail:
  agent: shell
  env: [EDITOR=vi]
vm:
  mounts:
""",
    "config-ssh": "target: ssh://agent@build.example.org:2222\nssh: {identity: keys/agt, connect_timeout: 90}\n",
    "config-empty-sections": "vm:\njail:\n  limits:\n",
    "config-bad-types": "vm:\n  cpus: [1, 2]\n  memory: {a: b}\njail:\n  limits: 12\n  env: NOPE\n",
    "config-bool-forms": "vm:\n  mounts:\n    - {location: /a, writable: yes}\n    - {location: /b, writable: no}\n    - {location: /c, writable: maybe}\n",
    "anchors": "base: &b {cpus: 2, memory: 1GiB}\nvm: *b\nother:\n  <<: *b\n  cpus: 3\nlist: &l [1, 2, *b]\n",
    "flow-and-tags": "%YAML 1.1\n---\n!!map {? !!str a : !!int 1, b: [x, {c: \"d\\u0000e\"}], 'q''': |\n  text\n}\n",
    "numbers": "a: 0\nb: 18446744073709551615\nc: 18446744073709551616\nd: 0x10\ne: 1.5\nf: -1\ng: ' 1'\n",
    "multi-doc": "a: 1\n---\nb: 2\n...\n",
    "unterminated": "a: [1, 2\nb: \"open\n",
}
for name, text in configs.items():
    write("yaml", name + ".yaml", text)

near_manifests = {
    "download": """\
name: dl
files:
  - path: /usr/bin/opencode
    mode: "0755"
    libs: false
    sources:
      - env: AGT_OPENCODE_BIN
      - host: [/usr/local/bin/opencode, /usr/bin/opencode]
        package: opencode
      - download:
          version: 0.8.13
          max_bytes: 209715200
          arch:
            x86_64:
              url: https://example.org/opencode-linux-x64.tar.gz
              sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789ABCDEF
            aarch64: {url: "http://example.org/arm64", sha256: unknown}
    hint: install opencode
""",
    "plain-layout": """\
name: plain
layout: plain
dirs: [/etc, {path: /tmp, mode: "1777"}]
libraries: [libstdc++.so.6, /usr/lib/x86_64-linux-gnu/libgcc_s.so.1]
files:
  - {path: /etc/hostname, content: "jail\\n", mode: "0644"}
  - {path: /usr/share, tree: true, optional: true, sources: [{host: /usr/share/zoneinfo}]}
  - {path: /bin/sh, symlink: busybox}
""",
    "empty-files": "name: x\nfiles: []\n",
    "bad-path": "name: x\nfiles:\n  - {path: /a/../b, content: x}\n",
    "bad-mode": "name: x\ndirs: [{path: /d, mode: \"4755\"}]\nfiles: []\n",
    "duplicate": "name: x\ndirs: [/a]\nfiles:\n  - {path: /a, content: x}\n  - {path: /a, content: y}\n",
    "two-sources-kinds": "name: x\nfiles:\n  - path: /a\n    sources:\n      - {host: /a, env: A}\n",
    "tree-download": "name: x\nfiles:\n  - path: /a\n    tree: true\n    sources:\n      - download: {max_bytes: 1, arch: {x86_64: {url: https://e/a, sha256: unknown}}}\n",
    "dup-arch": "name: x\nfiles:\n  - path: /a\n    sources:\n      - download: {max_bytes: 1, arch: {x86_64: {url: https://e/a, sha256: unknown}, x86_64: {url: https://e/b, sha256: unknown}}}\n",
    "nul-name": "name: \"a\\0b\"\nfiles: []\n",
    "anchors": "name: x\nfiles:\n  - &e {path: /a, content: x}\n  - *e\n",
    "not-a-mapping": "- name: x\n",
}
for name, text in near_manifests.items():
    write("manifest", name + ".yaml", text)
