#!/usr/bin/env bash
# A jail on a terminal: attach through a real pty (tmux), type, resize, detach, reattach and
# see what was printed meanwhile; several clients with one writer; logs -f loses nothing.
. "$(dirname "$0")/lib.sh"

command -v tmux >/dev/null || bail "tmux is needed to drive a real terminal (apt-get install tmux)"
agtd_start
build_test_rootfs
R=$TEST_ROOTFS
export TMUX_TMPDIR=$T
TM="tmux -L agt-test"

screen() { $TM capture-pane -p -t "$1" | grep -v '^$'; }
# wait_for SESSION PATTERN: up to 10 s for the pane to show PATTERN
wait_for() {
  for _ in $(seq 1 100); do
    screen "$1" | grep -Eq -- "$2" && return 0
    sleep 0.1
  done
  return 1
}

$TM new-session -d -s one -x 100 -y 30 \
  "$AGTD ctl -s $SOCK jail run --name sh1 --rootfs $R --attach -- /bin/sh; echo EXITED rc=\$?; sleep 60"
check "jail run --attach shows the jail's shell prompt" wait_for one '^/work \$'
$TM send-keys -t one 'echo typed-$((6*7)); stty size' Enter
check "typed input reaches the jail's shell and its answer comes back" wait_for one '^typed-42$'
check "the jail's terminal has the client's size (30 100)" wait_for one '^30 100$'
$TM resize-window -t one -x 120 -y 40
sleep 0.3
$TM send-keys -t one 'stty size' Enter
check "a resize reaches the jail (stty size says 40 120)" wait_for one '^40 120$'
like "the jail counts one attached client" "$(ctl --json jail ls)" '"attached": 1'

$TM send-keys -t one 'sleep 2; echo produced-while-away' Enter
sleep 0.3
$TM send-keys -t one C-p C-q
check "the detach keys leave the jail" wait_for one 'detached from sh1; it keeps running'
check "the client then exits 0" wait_for one '^EXITED rc=0$'
like "the jail is still running" "$(ctl jail ls)" "^sh1 +shell +running"
sleep 2.5

$TM new-session -d -s two -x 120 -y 40 "$AGTD ctl -s $SOCK jail attach sh1; echo EXITED rc=\$?; sleep 60"
check "on reattach the output produced meanwhile is shown" wait_for two '^produced-while-away$'
$TM new-session -d -s three -x 80 -y 20 "$AGTD ctl -s $SOCK jail attach sh1; echo EXITED rc=\$?; sleep 60"
check "a second client attaches read-only" wait_for three 'attached to sh1, read-only'
like "two clients are attached" "$(ctl --json jail ls)" '"attached": 2'
$TM send-keys -t two 'echo from-the-writer' Enter
check "the writer's typing shows on the read-only client too" wait_for three '^from-the-writer$'
$TM send-keys -t three 'echo from-the-reader' Enter
sleep 0.5
check "the read-only client's typing does not reach the jail" test -z "$(screen two | grep from-the-reader)"
$TM send-keys -t two 'exit 7' Enter
check "when the agent exits, the writer's client exits with its code" wait_for two '^EXITED rc=7$'
check "and so does the read-only client's" wait_for three '^EXITED rc=7$'
like "the jail has exited with 7" "$(ctl jail wait sh1)" "exit code 7"
$TM kill-server 2>/dev/null

# logs -f: 4.5 million numbered lines (about 57 MB) as fast as the jail can write them, with
# an 8 MiB log on disk; the follower gets every line, in order.
ctl jail create --name spam --rootfs "$R" -- probe spam 4500000 >/dev/null
ctl jail logs spam -f >"$T/follow.out" &
follower=$!
sleep 0.3
ctl jail start spam >/dev/null
ctl jail wait spam >/dev/null
wait $follower
is "logs -f exits 0 when the jail ends" "$?" 0
out=$(awk 'BEGIN { n = 0 } { if ($0 != "line " n) { print "line " NR " is: " $0; exit } n++ } END { print n }' "$T/follow.out")
is "logs -f lost nothing: all 4500000 lines, in order" "$out" 4500000
check "while the log on disk stayed within its budget" test "$(cat "$STATE"/jails/spam/console.log* | wc -c)" -le $((8 << 20))

ctl jail rm sh1 >/dev/null
ctl jail rm spam >/dev/null
is "no process is left" "$(jail_procs)" 0
