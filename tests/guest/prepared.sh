#!/usr/bin/env bash
# Prepared jails (guest/jail/jail_warm.c): jail.run takes one when its rootfs matches, and the
# jail it becomes is the jail a cold start makes: its user, workspace, hostname, /tmp size,
# limits and terminal; what cannot be prepared starts cold; nothing is left behind.
. "$(dirname "$0")/lib.sh"

agtd_start --realtime-starts # as the Lima guest runs it
build_test_rootfs
R=$TEST_ROOTFS

warm() { ctl status | python3 -c "import json,sys; w=json.load(sys.stdin)['warm']; print(w['$1'])"; }
wait_ready() {
  for _ in $(seq 1 200); do
    [ "$(warm ready)" = "$(warm target)" ] && return 0
    sleep 0.05
  done
  return 1
}

is "prepared jails are on" "$(warm enabled)" True
is "none is made before a jail.run names a rootfs" "$(warm ready)" 0

WS=$T/ws
mkdir "$WS"
chown 1000:1000 "$WS"
out=$(ctl jail run --name p0 --rootfs "$R" --workspace "$WS" -- /bin/true)
like "the first run starts cold" "$out" "^p0 started in [0-9.]+ ms$"
check "then agtd prepares jails for its rootfs" wait_ready
is "two by default" "$(warm target)" 2

out=$(ctl jail run --name p1 --rootfs "$R" --workspace "$WS" -- /bin/sh -c \
  'id -u; id -g; hostname; grep ^agent: /etc/passwd; stat -c "%u %a" /home/agent;
   echo hi >/work/from-p1; df -k /tmp | tail -1; cat /proc/self/status | grep -E "^(NoNewPrivs|Seccomp):";
   cat /proc/self/mountinfo')
like "the next run takes a prepared jail" "$out" "^p1 started in [0-9.]+ ms \(a prepared jail\)$"
ctl jail wait p1 >/dev/null
logs=$(ctl jail logs p1)
like "its agent runs as the workspace's owner" "$logs" "^1000$"
like "its hostname is the jail's name" "$logs" "^p1$"
like "its passwd names that user" "$logs" "^agent:x:1000:1000:"
like "its home belongs to that user" "$logs" "^1000 700$"
# /tmp, /dev/shm (64 MiB) and the masks of /proc are one tmpfs: 512 MiB + 64 MiB
like "its /tmp has the default size, with /dev/shm's" "$logs" "^tmpfs +589824 "
is "it mounts four file systems of its own, as a cold start does" "$(own_superblocks "$logs")" \
  "devpts overlay proc tmpfs "
like "no_new_privs is set" "$logs" "^NoNewPrivs:.1"
like "the seccomp filter is on" "$logs" "^Seccomp:.2"
is "it wrote to the workspace, as its owner" "$(stat -c '%u %s' "$WS/from-p1")" "1000 3"

# A different user (a workspace of its own: a new uid), other limits, another /tmp size.
wait_ready
out=$(ctl jail run --name p2 --rootfs "$R" --memory 100M --pids 50 --tmp 64M -- /bin/sh -c \
  'id -u; grep ^agent: /etc/passwd; stat -c "%u" /home/agent; df -k /tmp | tail -1')
like "a jail with other limits takes one too" "$out" "\(a prepared jail\)$"
ctl jail wait p2 >/dev/null
logs=$(ctl jail logs p2)
uid2=$(printf '%s\n' "$logs" | head -1)
check "it runs as a uid of its own ($uid2)" test "$uid2" -ge 100000
like "its passwd names that uid" "$logs" "^agent:x:$uid2:$uid2:"
like "its home is that uid's" "$logs" "^$uid2$"
like "its /tmp is resized to 64M (with /dev/shm's 64M)" "$logs" "^tmpfs +131072 "
ctl jail run --name p3 --rootfs "$R" --memory 100M --pids 50 -- /bin/sleep 30 >/dev/null
# Its init becomes agt-init once agtd has answered the start and closed the claim socket.
ipid=$(ctl --json jail inspect p3 | grep -o '"pid": [0-9]*' | grep -o '[0-9]*$')
check "its init becomes agt-init once the start is answered" \
  wait_until 10 sh -c "readlink /proc/$ipid/exe | grep -q '^/memfd:agt-init'"
# agtd clones with every signal blocked (none of its handlers may run in a child): the
# init's loop, the agent's exec and the keeper each unblock them all.
sigblk() { awk '/^SigBlk:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
kpid=$(awk '/^PPid:/ { print $2 }' "/proc/$ipid/status")
apid=$(awk '{ print $1 }' "/proc/$ipid/task/$ipid/children")
check "its init blocks no signal" wait_until 10 sh -c "grep -q '^SigBlk:.0000000000000000$' /proc/$ipid/status"
is "nor do its keeper ($(cat "/proc/$kpid/comm")) and its agent" "$(sigblk "$kpid") $(sigblk "$apid")" \
  "0000000000000000 0000000000000000"
cg_mem=$(find /sys/fs/cgroup/memory/"$CG"/p3 /sys/fs/cgroup/"$CG"/p3 -maxdepth 0 2>/dev/null | head -1)
if [ -f "$cg_mem/memory.limit_in_bytes" ]; then
  is "its cgroup carries its name and memory limit (v1)" "$(cat "$cg_mem/memory.limit_in_bytes")" 104857600
  is "and its pids limit" "$(cat /sys/fs/cgroup/pids/"$CG"/p3/pids.max)" 50
else
  is "its cgroup carries its name and memory limit (v2)" "$(cat "$cg_mem/memory.max")" 104857600
  is "and its pids limit" "$(cat "$cg_mem/pids.max")" 50
fi
ctl jail rm p3 --force >/dev/null

# On a terminal.
wait_ready
out=$(ctl jail run --name p4 --rootfs "$R" --tty -- /bin/sh -c 'tty >/work/tty.txt')
like "a jail on a terminal takes one" "$out" "\(a prepared jail\)$"
ctl jail wait p4 >/dev/null
like "and its agent has the terminal" "$(cat "$STATE/workspaces/p4/tty.txt")" "^/dev/pts/[0-9]+$"

# What cannot be prepared starts cold: network mode open (its namespace gets a veth pair).
if open_net_ready; then
  wait_ready
  out=$(ctl jail run --name p5 --rootfs "$R" --net open -- /bin/true)
  like "network mode open starts cold" "$out" "^p5 started in [0-9.]+ ms$"
else
  ok "network mode open starts cold # SKIP $OPEN_NET_SKIP"
fi

# A prepared jail killed from outside is not handed out.
wait_ready
for pid in $(grep -l "/$CG/w-" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3); do
  kill -KILL "$pid" 2>/dev/null
done
sleep 0.2
out=$(ctl jail run --name p6 --rootfs "$R" -- /bin/true)
like "after the prepared jails were killed, a run still starts (cold)" "$out" \
  "^p6 started in [0-9.]+ ms$"
check "and agtd prepares new ones" wait_ready

# Realtime starts (guest/jail/start_prio.h): a prepared jail waits SCHED_FIFO, and once its
# agent runs, nothing in the jail is realtime, nothing it forks, and it cannot become so.
policy() { awk '{ print $(NF - 11) "/" $(NF - 12) }' "/proc/$1/stat"; } # policy/rt_priority
like "agtd runs starts realtime" "$(ctl status)" '"realtime_starts": true'
wait_ready
w=$(grep -l "/$CG/w-" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3 | head -1)
CPUCG=/sys/fs/cgroup/cpu/$CG
# cgroup v1: the machine's realtime budget is one for all; while other agtds (other test runs
# on this machine) hold theirs, this agtd cannot take one for its prepared jails, says so, and
# they wait at normal priority.  Nothing else holds any on CI's machine.
no_budget=$(grep -o "prepared jails at normal priority (.*)" "$T/agtd.log" | head -1)
if [ -n "$no_budget" ]; then
  is "without a realtime budget, a prepared jail waits at normal priority" "$(policy "$w")" 0/0
  ok "a prepared jail waits SCHED_FIFO, priority 2 # SKIP agtd had no budget: $no_budget"
else
  is "a prepared jail waits SCHED_FIFO, priority 2" "$(policy "$w")" 1/2
  if [ -e "$CPUCG/cpu.rt_runtime_us" ]; then
    wcg=$(find "$CPUCG" -maxdepth 1 -name 'w-*' | head -1)
    is "with a realtime budget in its cgroup (cgroup v1)" "$(cat "$wcg/cpu.rt_runtime_us")" 20000
  fi
fi
out=$(ctl jail run --name p7 --rootfs "$R" -- /bin/sh -c   'cut -d" " -f40,41 /proc/self/stat; grep "realtime priority" /proc/self/limits;
   toybox chrt -f 1 true && echo went-realtime; exec probe sleep 100')
like "a prepared jail runs it" "$out" "^p7 started in [0-9.]+ ms \(a prepared jail\)$"
sleep 0.3
pol=$(for p in $(grep -l "/$CG/p7" /proc/[0-9]*/cgroup | cut -d/ -f3); do policy "$p"; done |
  sort -u | tr '\n' ' ')
is "then every process in it is SCHED_OTHER" "$pol" "0/0 "
is "agtd's loop too" "$(policy "$AGTD_PID")" 0/0
[ -e "$CPUCG/cpu.rt_runtime_us" ] &&
  is "the jail's realtime budget is given back" "$(cat "$CPUCG/p7/cpu.rt_runtime_us")" 0
logs=$(ctl jail logs p7)
like "what the agent forks is SCHED_OTHER" "$logs" "^0 0$"
like "RLIMIT_RTPRIO is 0 in the jail" "$logs" "^Max realtime priority +0 +0"
check "the jail cannot make itself realtime" test "$(printf '%s\n' "$logs" | grep -c went-realtime)" = 0
ctl jail stop p7 100 >/dev/null
if open_net_ready; then
  ctl jail run --name p8 --rootfs "$R" --net open -- probe sleep 100 >/dev/null
  sleep 0.3
  pol=$(for p in $(grep -l "/$CG/p8" /proc/[0-9]*/cgroup | cut -d/ -f3); do policy "$p"; done |
    sort -u | tr '\n' ' ')
  is "a cold start's processes are SCHED_OTHER (cloned by a realtime agtd)" "$pol" "0/0 "
  ctl jail stop p8 100 >/dev/null
else
  ok "a cold start's processes are SCHED_OTHER # SKIP $OPEN_NET_SKIP"
fi

# Removing the rootfs takes its prepared jails with it.
for j in p0 p1 p2 p4 p5 p6 p7 p8; do ctl jail rm "$j" >/dev/null; done
ctl rootfs rm "$R" >/dev/null
is "rootfs rm discards the prepared jails on it" "$(warm ready)" 0
# (their keepers' end is followed in agtd's loop: rm answers first)
no_w_dirs() { [ "$(ls -A "$STATE/jails" | grep -c '^\.w-')" = 0 ]; }
no_w_cgroups() {
  [ "$(find /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG" -mindepth 1 -type d -name 'w-*' 2>/dev/null | wc -l)" = 0 ]
}
no_procs() { [ "$(grep -l "/$CG/" /proc/[0-9]*/cgroup 2>/dev/null | wc -l)" = 0 ]; }
check "their processes are gone (within 10 s)" wait_until 10 no_procs
check "their directories are gone" wait_until 10 no_w_dirs
check "their cgroups are gone" wait_until 10 no_w_cgroups

# --warm 0: none.
agtd_stop
agtd_start --warm 0
is "agtd serve --warm 0 prepares none" "$(warm enabled)" False
agtd_stop
agtd_start
like "agtd serve without --realtime-starts: starts at normal priority" "$(ctl status)" '"realtime_starts": false'
like "saying so in its log" "$(cat "$T/agtd.log")" "starts: normal priority \(no --realtime-starts\)"
