#!/usr/bin/env bash
# A listing's cgroup figures (jail.ls usage columns): correct, with a true age, read off
# agtd's loop (guest/jail/jail_usage.h); the checks are in tests/guest/usage.py.
. "$(dirname "$0")/lib.sh"

agtd_start
build_test_rootfs
R=$TEST_ROOTFS

# burn: a busy loop held to a third of a CPU; many: 1500 idle processes, whose CPU time
# agtd adds up one /proc/PID/stat at a time where cpuacct is a hierarchy of its own
ctl jail run --name burn --rootfs "$R" --disk 64M --cpus 0.3 -- \
  /bin/sh -c 'while :; do :; done' >/dev/null
ctl jail run --name many --rootfs "$R" --disk 64M --pids unlimited --memory 1G -- \
  /bin/sh -c 'i=0; while [ $i -lt 1500 ]; do /bin/probe sleep 3600 & i=$((i + 1)); done; wait' \
  >/dev/null
CG_PIDS=/sys/fs/cgroup/pids/$CG/many/pids.current
[ -f "$CG_PIDS" ] || CG_PIDS=/sys/fs/cgroup/$CG/many/pids.current
many_up() { [ "$(cat "$CG_PIDS" 2>/dev/null || echo 0)" -ge 1502 ]; }
wait_until 120 many_up
check "jail many runs its 1500 processes ($(cat "$CG_PIDS" 2>/dev/null) in its cgroup)" many_up

# Where agtd reads a jail's CPU time (guest/cgroup): the order check needs a slow read, which
# only the per-process sum is (the others are one file per jail).
if [ -d "/sys/fs/cgroup/$CG/burn" ]; then
  SRC=v2:/sys/fs/cgroup/$CG/burn
elif [ -f /sys/fs/cgroup/cpu/cpuacct.usage ]; then
  SRC=cpuacct:/sys/fs/cgroup/cpu/$CG/burn
else
  SRC=procs:/sys/fs/cgroup/pids/$CG/burn/cgroup.procs
fi
ORDER=
[ "${SRC%%:*}" = procs ] && ORDER=--order

# usage.py's TAP lines are this script's
py() {
  local rc out=$T/usage.out
  python3 "$SRCDIR/tests/guest/usage.py" "$SOCK" "$TAP_N" "$@" >"$out"
  rc=$?
  cat "$out"
  TAP_N=$((TAP_N + $(grep -c '^ok\|^not ok' "$out")))
  TAP_FAILED=$((TAP_FAILED + $(grep -c '^not ok' "$out")))
  [ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$out")" -gt 0 ] || not_ok "usage.py $1 failed before its checks (rc $rc)"
}

# A new agtd has no figures of the jails it finds running under their keepers: its first
# listing waits for them (a jail's start reads its own, on the loop: one jail), and agtd
# serves others meanwhile.
agtd_stop
agtd_start
[ -n "$ORDER" ] || ok "# SKIP the order check: this machine's cgroups give a jail's CPU time in one file ($SRC)"
py first $ORDER burn many
py stale burn "$SRC"
# jail.ls without columns (agtd ctl jail ls --json) shows the same figures, as short forms.
like "the short forms carry usage with its age" "$(ctl --json jail ls | tr -d ' \n')" \
  '"name":"burn".*"usage":\{"age_ms":[0-9]+,"cpu_usec":[0-9]+,"memory":[0-9]+,"pids":[0-9]+\}'

ctl jail rm burn --force >/dev/null
ctl jail rm many --force >/dev/null
is "no process is left" "$(jail_procs)" 0
is "no cgroup is left" "$(cgroup_dirs)" 0
