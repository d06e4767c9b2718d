#!/usr/bin/env python3
"""Writes an assembly file that puts a binary into agtd's read-only data.

usage: embed.py SYMBOL BINARY OUTPUT.S
The binary's hash is written into the file, so a new binary makes a new object.
"""
import hashlib
import sys

sym, binary, out = sys.argv[1:4]
with open(binary, "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()
with open(out, "w") as f:
    f.write(f"/* {binary} sha256 {digest} */\n")
    f.write("\t.section .rodata\n\t.balign 16\n")
    f.write(f"\t.global {sym}\n{sym}:\n\t.incbin \"{binary}\"\n")
    f.write(f"\t.global {sym}_end\n{sym}_end:\n")
    f.write("\t.section .note.GNU-stack,\"\",%progbits\n")
