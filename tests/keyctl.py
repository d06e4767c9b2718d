#!/usr/bin/env python3
"""The kernel's keyring, for the tests of a jail's secrets (guest/jail/secrets.h).

usage: keyctl.py works          exit 0 when this process can add a key to its own keyring
                                (not where the kernel has none, or a seccomp filter refuses it)
       keyctl.py invalidate ID  drop the key ID (hex, as /proc/keys shows it), as a reboot does
"""
import ctypes
import os
import sys

ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
KEYCTL_INVALIDATE = 21
KEY_SPEC_PROCESS_KEYRING = -2

libc = ctypes.CDLL(None, use_errno=True)


def invalidate(key):
    return libc.syscall(KEYCTL, KEYCTL_INVALIDATE, key, 0, 0, 0) == 0


if len(sys.argv) == 2 and sys.argv[1] == "works":
    k = libc.syscall(ADD_KEY, b"user", b"agt-test-probe", b"x", 1,
                     ctypes.c_long(KEY_SPEC_PROCESS_KEYRING))
    sys.exit(0 if k >= 0 and invalidate(k) else 1)
if len(sys.argv) == 3 and sys.argv[1] == "invalidate":
    if not invalidate(int(sys.argv[2], 16)):
        sys.exit("keyctl.py: invalidate %s: %s" % (sys.argv[2], os.strerror(ctypes.get_errno())))
    sys.exit(0)
sys.exit(__doc__)
