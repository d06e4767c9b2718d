#!/usr/bin/env bash
# A fork bomb and a memory hog stay inside their jails, and agtd keeps serving the others.
. "$(dirname "$0")/lib.sh"
# Every jail here names a small disk limit (--disk 64M): ten running default ones (a tenth of
# the jails' disk each) would be more than the disk, and a start would be refused (disk.h).

agtd_start
build_test_rootfs
R=$TEST_ROOTFS

ctl jail run --name bomb --rootfs "$R" --disk 64M --pids 64 -- probe forkbomb 6 >/dev/null
ctl jail run --name hog --rootfs "$R" --disk 64M --memory 64M -- probe memhog 1024 >/dev/null
sleep 1

# While both attack, other jails start, run and finish, and agtd answers at once.
t0=$(date +%s%N)
for i in 1 2 3 4 5 6 7 8; do
  ctl jail run --name "ok$i" --rootfs "$R" --disk 64M -- /bin/sh -c "echo alive-$i" >/dev/null || not_ok "start ok$i during the attack"
done
for i in 1 2 3 4 5 6 7 8; do ctl jail wait "ok$i" >/dev/null; done
t1=$(date +%s%N)
good=0
for i in 1 2 3 4 5 6 7 8; do [ "$(ctl jail logs "ok$i")" = "alive-$i" ] && good=$((good + 1)); done
is "8 other jails ran normally during the attacks ($(((t1 - t0) / 1000000)) ms)" "$good" 8
like "agtd answers during the attacks" "$(ctl hello)" "^agtd "

out=$(ctl jail wait bomb; ctl jail logs bomb)
like "the fork bomb hit the jail's pids limit" "$out" "forked [0-9]+ before: Resource temporarily unavailable"
n=$(printf '%s\n' "$out" | sed -n 's/^forked \([0-9]*\) before.*/\1/p')
check "the fork bomb made fewer than 64 processes ($n)" test "${n:-999}" -lt 64

out=$(ctl jail wait hog)
like "the memory hog was killed inside its jail" "$out" "exit code 137"
logs=$(ctl jail logs hog)
last=$(printf '%s\n' "$logs" | grep -E '^[0-9]+ MB$' | tail -1 | cut -d' ' -f1)
check "it got no further than its 64 MiB limit (last report ${last:-none} MB)" test "${last:-0}" -le 64

# The guest itself was untouched: agtd is alive and still serving.
check "agtd is still running" kill -0 "$AGTD_PID"
ctl jail run --name after --rootfs "$R" --disk 64M -- /bin/sh -c 'echo fine' >/dev/null
ctl jail wait after >/dev/null
is "a new jail runs fine afterwards" "$(ctl jail logs after)" "fine"

# No limit is written "unlimited"; 0 is refused, by ctl and (tests/guest/frames.py) by agtd.
out=$(ctl jail run --name zero --rootfs "$R" --memory 0 -- /bin/true 2>&1)
like "--memory 0 is refused" "$out" "--memory 0 is not a limit: write 'unlimited' for none"
out=$(ctl jail run --name zero --rootfs "$R" --pids 0 -- /bin/true 2>&1)
like "--pids 0 is refused" "$out" "--pids 0 is not a limit"
out=$(ctl jail run --name zero --rootfs "$R" --cpu 0 -- /bin/true 2>&1)
like "--cpu 0 is refused" "$out" "--cpu 0 is not a limit"
# Out of agtd's bounds (common/jailspec.h): ctl refuses it naming the flag, agtd naming the
# field (frames.py); --cpus takes cores as agt's does.
out=$(ctl jail run --name small --rootfs "$R" --memory 4M -- /bin/true 2>&1)
like "--memory below the least is refused by ctl" "$out" "--memory must be at least 8 MiB"
out=$(ctl jail run --name cores --rootfs "$R" --cpus 0.5 -- /bin/true 2>&1)
ctl jail wait cores >/dev/null
like "--cpus 0.5 is 500 thousandths" "$(ctl jail inspect cores | tr -d ' \n')" '"cpu":500'
ctl jail run --name free --rootfs "$R" --memory unlimited --pids unlimited --cpu unlimited -- /bin/sleep 30 >/dev/null
like "a jail with every lifted limit runs" "$(ctl jail ls)" "free +shell +running"
lim=$(ctl jail inspect free | python3 -c 'import json,sys; l=json.load(sys.stdin)["limits"]; print(l["memory"], l["pids"], l["cpu"])')
is "inspect says unlimited for each" "$lim" "unlimited unlimited unlimited"
if [ -d "/sys/fs/cgroup/$CG/free" ]; then
  cg=/sys/fs/cgroup/$CG/free
  is "its cgroup has no memory limit (v2)" "$(cat "$cg/memory.max")" max
  is "no pids limit" "$(cat "$cg/pids.max")" max
  like "no cpu limit" "$(cat "$cg/cpu.max")" "^max "
else
  check "its cgroup has no memory limit (v1)" \
    test "$(cat "/sys/fs/cgroup/memory/$CG/free/memory.limit_in_bytes")" -gt $((1 << 50))
  is "no pids limit" "$(cat "/sys/fs/cgroup/pids/$CG/free/pids.max")" max
  is "no cpu limit" "$(cat "/sys/fs/cgroup/cpu/$CG/free/cpu.cfs_quota_us")" -1
fi
ctl jail rm free --force >/dev/null

for j in bomb hog after ok1 ok2 ok3 ok4 ok5 ok6 ok7 ok8; do ctl jail rm "$j" >/dev/null; done
is "no process is left" "$(jail_procs)" 0
is "no cgroup is left" "$(cgroup_dirs)" 0
