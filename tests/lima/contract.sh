#!/usr/bin/env bash
# The stand-in held to the real thing: the same limactl scenario (tests/lima/contract.py:
# create, list, clone, rename, protect, factory-reset, delete, restore, refusals, an
# image that cannot be had; no boot) against the real limactl and against
# tests/fakes/limactl, both run as the unprivileged user; what agt sees (exit codes,
# list --json fields, the messages agt quotes, agt's own output) must be the same, step
# by step.  Where they differ, the stand-in is wrong.  Helpers: lib.sh.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FAKE=$SRCDIR/tests/fakes/limactl
[ -f "$FAKE" ] || bail "no tests/fakes/limactl"
mkdir -p "$T/fake" "$T/real" "$T/stand-in"
cp "$FAKE" "$T/fake/limactl"
chmod 755 "$T/fake/limactl"
cp "$SRCDIR/tests/lima/contract.py" "$T/contract.py"
for d in real stand-in; do
  cp -R "$T/src" "$T/$d/src"
done
chown -R "$LUSER:" "$T"
as_lima qemu-img create -q -f qcow2 "$T/real/image.qcow2" 1G || bail "qemu-img create failed"
as_lima qemu-img create -q -f qcow2 "$T/stand-in/image.qcow2" 1G || bail "qemu-img create failed"

as_lima python3 "$T/contract.py" "$LIMACTL" "$T/bin/agt" "$T/real" >"$T/real.out" 2>"$T/real.err" ||
  bail "the scenario against the real limactl did not run: $(tail -3 "$T/real.err")"
as_lima python3 "$T/contract.py" "$T/fake/limactl" "$T/bin/agt" "$T/stand-in" >"$T/stand-in.out" 2>"$T/stand-in.err" ||
  bail "the scenario against the stand-in did not run: $(tail -3 "$T/stand-in.err")"
steps_real=$(wc -l <"$T/real.out")
check "the scenario ran steps against the real limactl" test "$steps_real" -gt 0
is "both runs went through the same number of steps" "$(wc -l <"$T/stand-in.out")" "$steps_real"
# paths and the program itself differ between the runs; nothing else may
sed -i "s|$T/fake/limactl|LIMACTL|g" "$T/stand-in.out"
sed -i "s|$LIMACTL|LIMACTL|g" "$T/real.out"
while IFS= read -r -u 3 real && IFS= read -r -u 4 fake; do
  step=$(printf '%s' "$real" | python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])')
  if [ "$real" = "$fake" ]; then
    ok "$step: the stand-in behaves as the real limactl"
  else
    not_ok "$step: the stand-in behaves as the real limactl"
    python3 - "$real" "$fake" <<'PY'
import json, sys
a, b = (json.loads(x)["what"] for x in sys.argv[1:3])
for k in sorted(set(a) | set(b)):
    if a.get(k) != b.get(k):
        print("#   %s real:      %s" % (k, json.dumps(a.get(k))))
        print("#   %s stand-in:  %s" % (k, json.dumps(b.get(k))))
PY
  fi
done 3<"$T/real.out" 4<"$T/stand-in.out"
