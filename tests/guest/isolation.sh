#!/usr/bin/env bash
# 50 jails at once, each writing its own workspace; none sees another's files or
# processes, nor the guest's; the classic escapes fail.
. "$(dirname "$0")/lib.sh"

N=50
# Each jail names a small disk limit: the running jails' limits together never exceed the
# jails' disk (guest/jail/disk.h), and 50 default ones (a tenth of it each) would.
DISK=128M
agtd_start
build_test_rootfs

# A file on the guest that no jail may reach.
echo guest-only >"$T/marker"
WS=$STATE/workspaces

for i in $(seq 1 $N); do
  ctl jail run --name "j$i" --rootfs "$TEST_ROOTFS" --disk "$DISK" --env ME="j$i" --env WS="$WS" \
    --env N="$N" -- /bin/sh -c '
      echo "$ME" > /work/out.txt
      probe ps > /work/ps.txt
      for k in $(seq 1 $N); do
        [ -e "$WS/j$k/out.txt" ] && echo "sees $WS/j$k"
        [ -e "/work/../j$k" ] && echo "sees sibling j$k"
      done > /work/leaks.txt
      while [ ! -e /work/go ]; do sleep 0.1; done
      cat /work/out.txt > /work/after.txt' >/dev/null || not_ok "start jail j$i"
done
# Each jail holds until it is told to go, however long the 50 starts took.
running=$(ctl --json jail ls | grep -c '"state": "running"')
is "all $N jails are running at once" "$running" "$N"
for i in $(seq 1 $N); do touch "$WS/j$i/go"; done

for i in $(seq 1 $N); do ctl jail wait "j$i" >/dev/null; done
bad=0
for i in $(seq 1 $N); do
  [ "$(cat "$WS/j$i/out.txt" 2>/dev/null)" = "j$i" ] || { echo "# j$i out.txt wrong"; bad=1; }
  [ "$(cat "$WS/j$i/after.txt" 2>/dev/null)" = "j$i" ] || { echo "# j$i after.txt wrong"; bad=1; }
done
is "each jail wrote its own workspace, and nobody else's" "$bad" 0

bad=0
for i in $(seq 1 $N); do
  c=$(grep '^count' "$WS/j$i/ps.txt" | cut -d' ' -f2)
  [ "$c" = 3 ] || { echo "# j$i sees $c processes:"; sed 's/^/#   /' "$WS/j$i/ps.txt"; bad=1; }
done
is "each jail sees only its own processes (init, sh, probe)" "$bad" 0

leaks=$(cat "$WS"/j*/leaks.txt)
is "no jail sees another jail's workspace" "$leaks" ""

codes=$(ctl --json jail ls | grep -o '"exit_code": [0-9]*' | sort | uniq -c | tr -s ' ')
is "all $N exited with 0" "$codes" " $N \"exit_code\": 0"

# The escapes, run as the agent would.
run_probe() {
  local name=$1
  shift
  ctl jail run --name "$name" --rootfs "$TEST_ROOTFS" --disk "$DISK" -- "$@" >/dev/null
  ctl jail wait "$name" >/dev/null
  ctl jail logs "$name"
}
out=$(run_probe esc1 probe escape-chroot "$T/marker")
like "double chroot is refused and the guest stays unreachable" "$out" "^blocked: chroot: Operation not permitted"
check "double chroot: no ESCAPED line" test -z "$(printf '%s' "$out" | grep ESCAPED)"
out=$(run_probe esc2 probe proc-root "${T#/}/marker")
like "/proc/PID/root reaches nothing of the guest" "$out" "^blocked: no /proc/PID/root"
out=$(run_probe esc3 probe fds "${T#/}/marker")
like "only fds 0-2 are inherited" "$out" "^blocked: only fds 0-2 are open"
out=$(run_probe esc4 probe status)
like "the agent has no capabilities" "$out" "CapEff:[[:space:]]+0000000000000000"
like "the bounding set is empty" "$out" "CapBnd:[[:space:]]+0000000000000000"
like "no_new_privs is set" "$out" "NoNewPrivs:[[:space:]]+1"
like "a seccomp filter is loaded" "$out" "Seccomp:[[:space:]]+2"
like "the agent is not root" "$out" "Uid:[[:space:]]+[1-9][0-9]*"
out=$(run_probe esc5 /bin/sh -c 'cat /proc/self/mountinfo')
# The workspace's guest path shows as its bind mount's root (as in every container runtime);
# the overlay's layers do not.
check "the jail's mount table does not spell out the rootfs store" \
  test -z "$(printf '%s' "$out" | grep -e "lowerdir=/" -e "upperdir=/" -e "$STATE/rootfs")"
check "the old root is gone from the jail's mount table" \
  test -z "$(printf '%s\n' "$out" | awk '$5 == "/" && $4 == "/"' | grep -v overlay)"
# One tmpfs for /dev, /dev/shm, /tmp and the masks of /proc; the rest comes from the guest's
# own (its devices, the workspace).
is "the jail mounts four file systems of its own" "$(own_superblocks "$out")" \
  "devpts overlay proc tmpfs "
out=$(run_probe esc6 /bin/sh -c 'ls /dev | tr "\n" " "')
is "/dev holds only the minimal nodes" "$out" "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero "
out=$(run_probe esc7 /bin/sh -c 'echo x > /proc/sys/kernel/hostname 2>&1; echo rc=$?; mknod /tmp/sda b 8 0 2>&1; echo rc=$?')
like "/proc/sys is not writable" "$out" "rc=[1-9]"
check "mknod is refused" test "$(printf '%s\n' "$out" | grep -c 'rc=[1-9]')" = 2
out=$(run_probe esc8 /bin/sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "')
is "the jail's network has loopback only" "$out" "lo"
# The masked /proc directories the guest has: each an empty directory the jail cannot write.
want=
for d in /proc/acpi /proc/scsi /proc/asound; do [ -d "$d" ] && want="$want$d:0:read-only "; done
out=$(run_probe esc9 /bin/sh -c 'for d in /proc/acpi /proc/scsi /proc/asound; do
  [ -d $d ] && echo "$d:$(ls -A $d | wc -l):$(mkdir $d/x 2>/dev/null && echo writable || echo read-only)"
  done' | tr '\n' ' ')
is "the masked /proc directories (${want:-none here}) are empty and read-only" "$out" "$want"

for i in $(seq 1 $N); do ctl jail rm "j$i" >/dev/null; done
for i in 1 2 3 4 5 6 7 8 9; do ctl jail rm "esc$i" >/dev/null; done
is "removing the jails leaves no mount behind" "$(leftovers)" 0
is "removing the jails leaves no cgroup behind" "$(cgroup_dirs)" 0
is "removing the jails leaves no workspace behind" "$(ls "$WS" | wc -l)" 0
is "no process of the jails is left" "$(jail_procs)" 0
