#!/usr/bin/env bash
# Keepers (guest/keeper/keeper.h) as agtd finds them again and lets them go: agtd's log says
# what it found, a prepared jail's keeper that does not answer stalls no client, and every
# keeper that was agtd's child is reaped.
. "$(dirname "$0")/lib.sh"

agtd_start
build_test_rootfs
R=$TEST_ROOTFS

warm() { ctl status | python3 -c "import json,sys; w=json.load(sys.stdin)['warm']; print(w['$1'])"; }
ready() { [ "$(warm ready)" = "$(warm target)" ]; }
# The children of agtd that have exited and are not reaped.
zombies() { ps --ppid "$AGTD_PID" -o stat= 2>/dev/null | grep -c '^Z'; }
# Whether the jail's network namespace has a listener on 127.0.0.1:3128 (the proxy's port).
squatted() {
  local p
  p=$(grep -l "/$CG/sq\$" /proc/[0-9]*/cgroup 2>/dev/null | head -1 | cut -d/ -f3)
  [ -n "$p" ] && grep -q '^ *[0-9]*: 0100007F:0C38 00000000:0000 0A' "/proc/$p/net/tcp"
}

# 1. Found again: what the log says is what agtd found.
ctl jail run --name ok1 --rootfs "$R" -- probe sleep 100000 >/dev/null
ctl jail run --name gone --rootfs "$R" -- /bin/sh -c \
  'while [ ! -e /work/end ]; do sleep 0.1; done; exit 3' >/dev/null
# In network mode allow, a jail whose agent takes the proxy's port while agtd is away.
ctl jail run --name sq --rootfs "$R" --allow example.com:443 -- /bin/sh -c \
  'while ! toybox nc -s 127.0.0.1 -p 3128 -l >/dev/null 2>&1; do sleep 0.1; done' >/dev/null
kill -KILL "$AGTD_PID"
wait "$AGTD_PID" 2>/dev/null
AGTD_PID=
touch "$STATE/workspaces/gone/end"
check "while agtd is away, a jail takes the proxy's port" wait_until 10 squatted
check "and another ends" wait_until 10 test -e "$STATE/jails/gone/exit"
before=$(wc -l <"$T/agtd.log")
agtd_start
log=$(tail -n +"$((before + 1))" "$T/agtd.log")
like "a running jail is found running" "$log" "jail 'ok1': found running \(pid [0-9]+\) under its keeper$"
like "a jail that ended while agtd was away is said to have ended" "$log" \
  "jail 'gone': ended while agtd was away \(exit code 3\)"
check "and not to be running" sh -c "! printf '%s\n' \"\$1\" | grep -q \"jail 'gone': found running\"" _ "$log"
like "a jail whose proxy cannot listen again is said to run without it" "$log" \
  "jail 'sq': found running \(pid [0-9]+\) under its keeper, but without its proxy .*: listen on 127.0.0.1:3128 in the jail: Address (already )?in use"
check "and not to be found running as before" sh -c "! printf '%s\n' \"\$1\" | grep -q \"jail 'sq': found running ([^)]*) under its keeper\$\"" _ "$log"
is "it runs on" "$(ctl jail ls | awk '$1 == "sq" {print $3}')" running
is "gone's exit code is its own" "$(ctl jail inspect gone | python3 -c 'import json,sys; print(json.load(sys.stdin)["exit_code"])')" 3
for j in ok1 gone sq; do ctl jail rm "$j" --force >/dev/null; done

# 2. A prepared jail whose keeper does not answer (stopped) is discarded without stalling
# anyone, and its keeper is reaped once it ends.
ctl jail run --name w0 --rootfs "$R" -- /bin/true >/dev/null
check "prepared jails are ready" wait_until 20 ready
ctl jail rm w0 >/dev/null
keepers=$(for p in $(procs_named agt-keeper); do
  case $(readlink "$p/fd/8" 2>/dev/null) in "$STATE/jails/.w-"*) echo "${p#/proc/}" ;; esac
done)
check "their keepers are agtd's children" test -n "$keepers"
for k in $keepers; do kill -STOP "$k"; done
t0=$(date +%s%N)
ctl rootfs rm "$R" >/dev/null &
rm_pid=$!
sleep 0.2
ctl jail ls >/dev/null
t1=$(date +%s%N)
wait "$rm_pid"
t2=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
check "meanwhile another client is answered at once (${ms} ms, < 2000)" test "$ms" -lt 2000
ms=$(((t2 - t0) / 1000000))
check "rootfs rm answers without waiting for the keepers (${ms} ms, < 2000)" test "$ms" -lt 2000
sleep 1
for k in $keepers; do kill -CONT "$k"; done
gone_all() {
  for k in $keepers; do [ -e "/proc/$k" ] && return 1; done
  return 0
}
check "once they go on, agtd lets them go and reaps them (no zombie)" wait_until 15 gone_all
is "no zombie child of agtd" "$(zombies)" 0
no_w() { [ "$(ls -A "$STATE/jails" | grep -c '^\.w-')" = 0 ]; }
check "their directories are gone" wait_until 10 no_w
is "their cgroups are gone" \
  "$(find /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG" -mindepth 1 -type d -name 'w-*' 2>/dev/null | wc -l)" 0
