#!/usr/bin/env python3
"""The kernel's keyring, for the tests of a jail's secrets (guest/jail/secrets.h).

usage: keyctl.py works          exit 0 when this process can add a key to its own keyring
                                (not where the kernel has none, or a seccomp filter refuses it)
       keyctl.py invalidate ID  drop the key ID (hex, as /proc/keys shows it), as a reboot does
       keyctl.py read-as-nobody ID
                                as a process that possesses root's user keyring (its session
                                keyring links it, as pam_keyinit's does at a root login) but
                                is uid 65534: read key ID; prints "read N bytes" or
                                "refused: ERRNO"
       keyctl.py plant-as-nobody ID
                                as the same process: add a key of its own, anyone's to use,
                                under key ID's description, and link it into root's user
                                keyring; prints "linked" or "not linked"
"""
import ctypes
import errno
import os
import sys

ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
KEYCTL_GET_KEYRING_ID, KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_SETPERM = 0, 1, 5
KEYCTL_DESCRIBE, KEYCTL_LINK, KEYCTL_READ, KEYCTL_INVALIDATE = 6, 8, 11, 21
KEY_SPEC_PROCESS_KEYRING, KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING = -2, -3, -4

libc = ctypes.CDLL(None, use_errno=True)


def keyctl(*a):
    """keyctl(2): its result, or -errno."""
    a = [ctypes.c_long(x) for x in a] + [ctypes.c_long(0)] * (5 - len(a))
    r = libc.syscall(KEYCTL, *a)
    return r if r >= 0 else -ctypes.get_errno()


def invalidate(key):
    return keyctl(KEYCTL_INVALIDATE, key) == 0


def possess_as_nobody():
    """A new session keyring that links root's user keyring, then uid and gid 65534.
    Returns root's user keyring's id (after the change, the spec names uid 65534's)."""
    keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0)
    if keyctl(KEYCTL_LINK, KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING) < 0:
        sys.exit("keyctl.py: cannot link root's user keyring")
    user = keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING)
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
    return user


if len(sys.argv) == 2 and sys.argv[1] == "works":
    k = libc.syscall(ADD_KEY, b"user", b"agt-test-probe", b"x", 1,
                     ctypes.c_long(KEY_SPEC_PROCESS_KEYRING))
    sys.exit(0 if k >= 0 and invalidate(k) else 1)
if len(sys.argv) == 3 and sys.argv[1] == "read-as-nobody":
    possess_as_nobody()
    buf = ctypes.create_string_buffer(4096)
    r = keyctl(KEYCTL_READ, int(sys.argv[2], 16), ctypes.addressof(buf), 4096)
    print("read %d bytes" % r if r >= 0 else "refused: " + errno.errorcode[-r])
    sys.exit(0)
if len(sys.argv) == 3 and sys.argv[1] == "plant-as-nobody":
    buf = ctypes.create_string_buffer(4096)
    keyctl(KEYCTL_DESCRIBE, int(sys.argv[2], 16), ctypes.addressof(buf), 4096)
    desc = buf.value.split(b";", 4)[4]  # type;uid;gid;perm;description
    user = possess_as_nobody()
    data = b"SK_KEY=planted\0"
    k = libc.syscall(ADD_KEY, b"user", desc, data, len(data),
                     ctypes.c_long(KEY_SPEC_PROCESS_KEYRING))
    keyctl(KEYCTL_SETPERM, k, 0x3F3F3F3F)
    print("linked" if k > 0 and keyctl(KEYCTL_LINK, k, user) == 0 else "not linked")
    sys.exit(0)
if len(sys.argv) == 3 and sys.argv[1] == "invalidate":
    if not invalidate(int(sys.argv[2], 16)):
        sys.exit("keyctl.py: invalidate %s: %s" % (sys.argv[2], os.strerror(ctypes.get_errno())))
    sys.exit(0)
sys.exit(__doc__)
