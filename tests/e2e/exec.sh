#!/usr/bin/env bash
# agt jail exec as docker exec is used, target local: -i gives the command stdin from a pipe
# (its end too), -it a terminal of the jail (through a real pty: tmux) with its size, a
# resize, ctrl-c reaching the command, the command's exit status, and the detach keys
# leaving it running; -t without a terminal is refused.
#
# Needs root and Linux (agtd), tmux.  A missing prerequisite is a failure ("Bail out!").
set -u

: "${PROBE:?PROBE must name the static probe binary (meson sets it)}"
LOCAL_TEST=exec
. "$(dirname "${BASH_SOURCE[0]}")/local-lib.sh"
[ -x "$PROBE" ] || bail "no probe at $PROBE"
command -v tmux >/dev/null || bail "tmux is needed to drive a real terminal (apt-get install tmux)"
exec </dev/null # agt is not on a terminal here, except where tmux gives it one

. "$SRCDIR/tests/e2e/tmux.sh"
tmux_server agt-e2e-exec
trap 'rc=$?; $TM kill-server 2>/dev/null; (exit $rc); local_cleanup' EXIT

local_config
agt() { "$AGT" "$@"; }
# agt for commands tmux runs: the same environment, whatever tmux passes on
cat >"$T/agt" <<SH
#!/bin/sh
export AGT_CONFIG='$AGT_CONFIG' AGT_TARGET=local XDG_CACHE_HOME='$XDG_CACHE_HOME' PATH='$PATH'
exec '$AGT' "\$@"
SH
chmod 755 "$T/agt"

run agt -q up
[ "$RC" = 0 ] || bail "agt up: $ERR"
sed "s|@PROBE@|$PROBE|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$T/test-rootfs.yaml"
run agt rootfs build --no-download "$T/test-rootfs.yaml"
[ "$RC" = 0 ] || bail "the test rootfs did not build: $ERR"
cd "$T/projects/app" || bail "cd"
agt -q jail run -d --name ex -- sleep 600 >/dev/null || bail "jail ex"

# --- -i: stdin from a pipe, and its end
OUT=$(printf 'one\ntwo\n' | agt jail exec -i ex -- /bin/sh -c 'cat; echo "stdin ended"')
RC=$?
is "agt jail exec -i: the command reads the pipe, and sees its end" "$OUT" "$(printf 'one\ntwo\nstdin ended')"
is "exit 0" "$RC" 0
OUT=$(echo 3 | agt jail exec -i ex -- /bin/sh -c 'read n; exit $((n * 2))')
is "the command's exit status is agt's" "$?" 6
OUT=$(echo not-read | agt jail exec ex -- cat)
is "without -i its stdin is /dev/null, as before" "$OUT" ""
head -c 3000000 /dev/urandom >"$T/blob"
OUT=$(agt jail exec -i ex -- md5sum <"$T/blob" | cut -d' ' -f1)
is "3 MB through stdin arrive whole" "$OUT" "$(md5sum <"$T/blob" | cut -d' ' -f1)"
run agt jail exec -t ex -- true
is "-t without a terminal: a usage error" "$RC" 2
like "saying why, and what to use" "$ERR" "^agt: -t: stdin is not a terminal .*use -i alone"

# --- -it: a terminal of the jail
# a session that lasts, so that killing one of the others never ends the tmux server while
# the next new-session talks to it
$TM new-session -d -s keep 'sleep 600'
$TM new-session -d -s one -x 100 -y 30 -c "$T/projects/app" \
  "$T/agt jail exec -it ex /bin/sh; echo EXITED rc=\$?; sleep 60"
check "agt jail exec -it: a shell on a terminal" wait_for one '^/work \$ ?$'
$TM send-keys -t one 'PS1="jail\$ "' Enter
check "that takes what is typed" wait_for one '^jail\$ ?$'
$TM send-keys -t one 'tty; stty size' Enter
check "its terminal is one of the jail's (/dev/pts/N)" wait_for one '^/dev/pts/[0-9]+$'
check "of the window's size (30 100)" wait_for one '^30 100$'
$TM resize-window -t one -x 120 -y 40
sleep 0.5
$TM send-keys -t one 'stty size' Enter
check "a resize reaches it (40 120)" wait_for one '^40 120$'
$TM send-keys -t one 'cat' Enter
sleep 0.3
$TM send-keys -t one C-c
# the next line only at the new prompt: the ^C flushes what is typed before it
check "ctrl-c ends cat: a new prompt" wait_for one '^jail\$ ?$'
$TM send-keys -t one 'echo after-ctrl-c' Enter
check "ctrl-c goes to the command (cat ends), not to agt" wait_for one '^after-ctrl-c$'
$TM send-keys -t one 'exit 5' Enter
check "the shell's exit status is agt's" wait_for one '^EXITED rc=5$'
$TM kill-session -t one

# --- the detach keys leave the command running
$TM new-session -d -s two -x 100 -y 30 -c "$T/projects/app" \
  "$T/agt jail exec -it ex /bin/sh -c 'echo ready; exec sleep 777'; echo EXITED rc=\$?; sleep 60"
check "a command on a terminal" wait_for two '^ready$'
$TM send-keys -t two C-] C-]
check "the detach keys (ctrl-] ctrl-]) leave it" wait_for two '^\[detached from the command in ex; it keeps running\]$'
check "agt exits 0" wait_for two '^EXITED rc=0$'
# the jail's processes from its /proc (busybox ps leaves some out)
jail_procs() { agt jail exec ex -- /bin/sh -c 'for p in /proc/[0-9]*; do tr "\0" " " <$p/cmdline; echo; done'; }
like "and the command runs on" "$(jail_procs)" '^sleep 777 $'
$TM kill-session -t two

$TM new-session -d -s three -x 100 -y 30 -c "$T/projects/app" \
  "$T/agt jail exec -t ex -- /bin/sh -c 'tty; exit 3'; echo EXITED rc=\$?; sleep 60"
check "-t alone: a terminal, no input" wait_for three '^/dev/pts/[0-9]+$'
check "and the exit status" wait_for three '^EXITED rc=3$'

agt jail rm --force ex >/dev/null
run agt down
is "agt down at the end" "$RC" 0
