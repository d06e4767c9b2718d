#!/usr/bin/env bash
# The socket and the protocol: permissions, hello, and bad frames that get error replies
# while agtd keeps serving everyone else.
AGT_TEST_MACHINE_SETTINGS=no # applied below, after the check that agtd does not
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || bail "python3 is needed for the frame tests (apt-get install python3)"
agtd_start

is "the socket is mode 0660" "$(stat -c %a "$SOCK")" 660
is "the socket belongs to root" "$(stat -c %U:%G "$SOCK")" root:root
like "hello prints agtd's version" "$(ctl hello)" "^agtd [0-9]+\.[0-9]+\.[0-9]+, protocol 1$"

python3 "$SRCDIR/tests/guest/frames.py" "$SOCK" "$TAP_N" >"$T/frames.out"
rc=$?
cat "$T/frames.out"
TAP_N=$((TAP_N + $(grep -c '^ok\|^not ok' "$T/frames.out")))
TAP_FAILED=$((TAP_FAILED + $(grep -c '^not ok' "$T/frames.out")))
[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$T/frames.out")" -gt 0 ] || not_ok "frames.py failed before its checks (rc $rc)"

check "agtd survived the bad frames" kill -0 "$AGTD_PID"
like "and still answers" "$(ctl hello)" "^agtd "

# Machine-wide settings are not agtd's (lima/provision/machine.sh sets them for the Lima
# guest): agtd leaves the console loglevel alone, does not turn on the kernel's cgroup flag
# favordynmods, and runs starts at normal priority unless asked.
agtd_stop
read -r l1 l2 l3 l4 </proc/sys/kernel/printk
echo "7 $l2 $l3 $l4" >/proc/sys/kernel/printk
agtd_start
is "agtd leaves the console loglevel alone" "$(cut -f1 /proc/sys/kernel/printk)" 7
echo "$l1 $l2 $l3 $l4" >/proc/sys/kernel/printk
if [ "$MACHINE_DYNMODS_BEFORE" = 0 ]; then
  is "agtd leaves the kernel's cgroup flag favordynmods off" \
    "$(grep -E ' - cgroup2? ' /proc/self/mountinfo | grep -c favordynmods)" 0
else
  ok "agtd leaves favordynmods alone # SKIP it was on before this test (it stays on until reboot)"
fi
dyn=$(grep -E ' - cgroup2? ' /proc/self/mountinfo | grep -q favordynmods && echo true || echo false)
like "daemon.status says what it found" "$(ctl status)" "\"favordynmods\": $dyn"
like "starts run at normal priority by default" "$(ctl status)" '"realtime_starts": false'

# A group may be given the socket; an unknown group is a clear start-up error.
agtd_stop
out=$("$AGTD" serve --socket "$T/other.sock" --state-dir "$STATE" --cgroup "$CG" --group no-such-group-x 2>&1)
like "an unknown socket group is refused at start-up" "$out" "socket group 'no-such-group-x' does not exist"
groupadd -f agt-test-grp
agtd_start --group agt-test-grp
is "the socket belongs to the configured group" "$(stat -c %G "$SOCK")" agt-test-grp
check "agtd has no TCP or UDP socket" test -z "$(ss -tulpn 2>/dev/null | grep "pid=$AGTD_PID,")"

# The state directory is an absolute path: a relative one would name another directory
# from another working directory, and jails' paths (and their secrets' keys) are made of it.
out=$(cd "$T" && timeout 10 "$AGTD" serve --socket "$T/rel.sock" --state-dir rel/state --cgroup "$CG-2" 2>&1)
rc=$?
like "a relative state directory is refused at start-up" "$out" \
  "--state-dir 'rel/state' is not an absolute path"
check "and agtd exits non-zero (rc $rc) without a socket" test "$rc" -ne 0 -a ! -e "$T/rel.sock"

# One agtd per state directory and per socket: a second one refuses to start, with a clear
# error, and leaves the first one's socket alone.
out=$(timeout 10 "$AGTD" serve --socket "$T/second.sock" --state-dir "$STATE" --cgroup "$CG-2" 2>&1)
rc=$?
like "a second agtd on the same state directory is refused" "$out" \
  "another agtd \(pid $AGTD_PID\) serves the state directory '$STATE'"
check "and exits non-zero (rc $rc)" test "$rc" -ne 0
check "without making a socket of its own" test ! -e "$T/second.sock"
out=$(timeout 10 "$AGTD" serve --socket "$SOCK" --state-dir "$T/state2" --cgroup "$CG-2" 2>&1)
rc=$?
like "a second agtd on the same socket is refused" "$out" \
  "another agtd \(pid $AGTD_PID\) serves the socket '$SOCK'"
check "and exits non-zero (rc $rc)" test "$rc" -ne 0
check "the first one's socket is still there" test -S "$SOCK"
like "and the first agtd still answers on it" "$(ctl hello)" "^agtd "
agtd_stop

# A layers.img attached to a loop device already (mounted elsewhere) is not mounted again.
if [ -f "$STATE/layers.img" ] && command -v losetup >/dev/null; then
  dev=$(losetup --find --show --read-only "$STATE/layers.img")
  TEST_LOOP_DEV=$dev # (detached by finish if the test is cut short)
  out=$(timeout 20 "$AGTD" serve --socket "$SOCK" --state-dir "$STATE" --cgroup "$CG" 2>&1)
  rc=$?
  losetup -d "$dev"
  TEST_LOOP_DEV=
  like "agtd refuses a layers.img attached elsewhere" "$out" \
    "layers.img' is attached to $dev already"
  check "and exits non-zero (rc $rc)" test "$rc" -ne 0
  # Mounted elsewhere (a mount's loop device, autoclear): agtd mounts that same device, never
  # a second one (two btrfs on one image).
  agtd_stop
  mkdir -p "$T/elsewhere"
  mount -o loop "$STATE/layers.img" "$T/elsewhere"
  agtd_start
  like "agtd mounts a layers.img mounted elsewhere from the same loop device" "$(ctl status)" \
    '"limits": true'
  is "the image is attached once" "$(losetup -j "$STATE/layers.img" | wc -l)" 1
  agtd_stop
  umount "$T/elsewhere"
  agtd_start
  like "once detached, agtd mounts it" "$(ctl status)" '"limits": true'
else
  not_ok "no layers.img to test a second attach with (losetup: $(command -v losetup))"
fi

# Stalled and greedy clients (tests/guest/clients.py): a deadline for the hello and one for
# a started frame, and a share of the connections per uid; idle connections stay.
agtd_stop
agtd_start --group agt-test-grp --max-clients 16 --max-clients-per-uid 8 --hello-timeout 1000 \
  --frame-timeout 1000
python3 "$SRCDIR/tests/guest/clients.py" "$SOCK" "$TAP_N" agt-test-grp >"$T/clients.out"
rc=$?
cat "$T/clients.out"
TAP_N=$((TAP_N + $(grep -c '^ok\|^not ok' "$T/clients.out")))
TAP_FAILED=$((TAP_FAILED + $(grep -c '^not ok' "$T/clients.out")))
[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$T/clients.out")" -gt 0 ] || not_ok "clients.py failed before its checks (rc $rc)"
like "agtd logs who sent no hello" "$(cat "$T/agtd.log")" "client \(uid 0, pid [0-9]+\) sent no hello within 1000 ms: disconnected"
check "agtd survived them" kill -0 "$AGTD_PID"
