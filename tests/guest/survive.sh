#!/usr/bin/env bash
# Jails outlive agtd (guest/keeper/keeper.h): with N jails running (100 unless SURVIVE_JAILS says),
# agtd is killed with SIGKILL and started again, then stopped and replaced by another copy of
# its binary (an upgrade).  After each, every jail still runs, its log holds everything it
# wrote (what it wrote while agtd was away too), attach, exec, stop and rm work, and a jail
# that exited while agtd was away has its own exit code and time.
. "$(dirname "$0")/lib.sh"

command -v tmux >/dev/null || bail "tmux is needed to drive a real terminal (apt-get install tmux)"
N=${SURVIVE_JAILS:-100}
agtd_start
build_test_rootfs
R=$TEST_ROOTFS
WS=$T/ws
mkdir -p "$WS"
export TMUX_TMPDIR=$T
TM="tmux -L agt-survive"

running() { ctl jail ls | awk '$3 == "running"' | wc -l; }
# logs_have PATTERN-PREFIX: how many of the N jails' logs (through agtd) have PREFIX-<i>
logs_have() {
  local n=0 i
  for i in $(seq 1 "$N"); do
    ctl jail logs "j$i" | grep -qx "$1-$i" && n=$((n + 1))
  done
  echo "$n"
}
# files_have PREFIX: the same, read from the log files (agtd may be away)
files_have() {
  local n=0 i
  for i in $(seq 1 "$N"); do
    grep -qx "$1-$i" "$STATE/jails/j$i/console.log" 2>/dev/null && n=$((n + 1))
  done
  echo "$n"
}
all_files_have() { [ "$(files_have "$1")" = "$N" ]; }
all_logs_have() { [ "$(logs_have "$1")" = "$N" ]; }

# Each jail names a small disk limit: the running jails' limits together never exceed the
# jails' disk (guest/jail/disk.h), and $N default ones (a tenth of it each) would.
# Each jail says "before", waits for /work/go, says "during", waits for /work/after, says
# "after", and sleeps.
warm=0
for i in $(seq 1 "$N"); do
  out=$(ctl jail run --name "j$i" --rootfs "$R" --workspace "$WS" --disk 64M -- /bin/sh -c \
    "echo before-$i; while [ ! -e /work/go ]; do sleep 1; done; echo during-$i;
     while [ ! -e /work/after ]; do sleep 1; done; echo after-$i; exec sleep 100000") ||
    bail "jail j$i did not start"
  case $out in *"(a prepared jail)"*) warm=$((warm + 1)) ;; esac
done
# (prepared jails are made between starts; most runs take one)
check "some of them took a prepared jail ($warm of $N), whose keeper was there before" \
  test "$warm" -gt 0
ctl jail run --name tt --rootfs "$R" --workspace "$WS" --disk 64M --tty -- /bin/sh >/dev/null
ctl jail run --name ex --rootfs "$R" --workspace "$WS" --disk 64M -- /bin/sh -c \
  'while [ ! -e /work/stop ]; do sleep 0.2; done; exit 7' >/dev/null
is "$((N + 2)) jails run" "$(running)" $((N + 2))
# Keepers run at normal priority, whatever the (realtime) start that spawned them.
keeper_policies() {
  local p
  for p in $(procs_named agt-keeper); do
    case $(readlink "$p/fd/8" 2>/dev/null) in "$STATE"/*) ;; *) continue ;; esac
    awk '/^policy/ {print $3}' "$p/sched"
  done | sort -u | tr '\n' ' '
}
is "every keeper runs SCHED_OTHER (policy 0)" "$(keeper_policies)" "0 "
check "every jail has said before" wait_until 30 all_logs_have before

# A command started by jail.exec is agtd's: it does not outlive it (PROTOCOL.md).
exec_sleep() {
  local p n=0
  for p in $(procs_named probe); do
    [ "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" = "probe sleep 3131 " ] && n=$((n + 1))
  done
  echo "$n"
}
exec_sleeps() { test "$(exec_sleep)" "$@"; }
ctl jail exec j1 -- probe sleep 3131 >/dev/null 2>&1 &
check "an exec'd command runs" wait_until 10 exec_sleeps -gt 0

# 1. agtd killed (SIGKILL): the jails go on, their keepers log what they write meanwhile.
kill -KILL "$AGTD_PID"
wait "$AGTD_PID" 2>/dev/null
AGTD_PID=
check "the exec'd command dies with agtd" wait_until 10 exec_sleeps = 0
touch "$WS/go" "$WS/stop"
check "while agtd is away, every jail's output reaches its log (during-i in console.log)" \
  wait_until 30 all_files_have during
check "the jail that exits while agtd is away records its exit" \
  wait_until 10 test -e "$STATE/jails/ex/exit"
sleep 2
restart=$(date +%s)
agtd_start
is "after agtd's SIGKILL and restart, all $((N + 1)) running jails run" "$(running)" $((N + 1))
# The killed agtd's prepared jails (never claimed) are gone, keepers and directories.
stale_keepers() {
  local p n=0 d
  for p in $(procs_named agt-keeper); do
    d=$(readlink "$p/fd/8" 2>/dev/null) || continue
    case $d in "$STATE"/jails/.w-*) n=$((n + 1)) ;; esac # removed (deleted) or not
  done
  echo "$n"
}
no_stale_keepers() { test "$(stale_keepers)" = 0; }
check "the last agtd's prepared jails leave no keeper behind" wait_until 10 no_stale_keepers
like "the jail that exited meanwhile has its own exit code" "$(ctl jail wait ex)" "exit code 7"
fin=$(python3 "$SRCDIR/tests/guest/rpc.py" "$SOCK" jail.inspect '{"name": "ex"}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["finished"])')
check "and its own exit time ($fin), not the restart's ($restart)" test "$fin" -lt "$restart"
is "every jail's log has what it wrote before" "$(logs_have before)" "$N"
is "and what it wrote while agtd was away" "$(logs_have during)" "$N"
touch "$WS/after"
check "output after the restart flows through agtd again (after-i)" wait_until 30 all_logs_have after
ok_order=0
for i in $(seq 1 "$N"); do
  [ "$(ctl jail logs "j$i" | tr '\n' ' ')" = "before-$i during-$i after-$i " ] && ok_order=$((ok_order + 1))
done
is "each log is whole and in order (before, during, after)" "$ok_order" "$N"

attach_works() { # SESSION WORD
  $TM new-session -d -s "$1" -x 100 -y 30 "$AGTD ctl -s $SOCK jail attach tt; sleep 60"
  sleep 0.5
  $TM send-keys -t "$1" "echo $2-\$((6*7))" Enter
  wait_until 10 sh -c "$TM capture-pane -p -t $1 | grep -qx '$2-42'"
  local r=$?
  $TM send-keys -t "$1" C-p C-q
  sleep 0.3
  return $r
}
check "attach to a terminal jail works after the restart" attach_works one first
like "logs -f after the restart: the whole log, then live" \
  "$(timeout 3 "$AGTD" ctl -s "$SOCK" jail logs j1 -f | tr '\n' ' ')" "^before-1 during-1 after-1 "
like "exec works after the restart" "$(ctl jail exec j1 -- /bin/sh -c 'echo exec-ok')" "exec-ok"
like "stop works after the restart" "$(ctl jail stop "j$N" 100; ctl jail wait "j$N")" "exit code"
ctl jail rm "j$N" >/dev/null
check "and rm" test ! -e "$STATE/jails/j$N"
N=$((N - 1))

# 2. An upgrade: agtd stopped (SIGTERM), another copy of its binary started on the same state.
cp "$AGTD" "$T/agtd-upgraded"
agtd_stop
check "after agtd stops, its jails still run" test "$(jail_procs)" -gt "$N"
touch "$WS/stop2"
old=$AGTD
AGTD=$T/agtd-upgraded
agtd_start
is "the upgraded agtd finds all $((N + 1)) running jails" "$(running)" $((N + 1))
is "with their whole logs" "$(logs_have after)" "$N"
check "attach works after the upgrade" attach_works two second
like "exec works after the upgrade" "$(ctl jail exec j1 -- /bin/sh -c 'echo exec-ok')" "exec-ok"
like "stop works after the upgrade" "$(ctl jail stop j1 100; ctl jail wait j1)" "exit code"
$TM kill-server 2>/dev/null
remove_all_jails
no_jail_procs() { test "$(jail_procs)" = 0; }
check "rm of every jail leaves no jail process" wait_until 10 no_jail_procs
AGTD=$old
