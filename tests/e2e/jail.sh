#!/usr/bin/env bash
# Working with running jails through agt, over SSH to the stand-in's VM (a real sshd and a
# real agtd; see lima.sh):
#
#   agt jail run attaches at once, through a real pty (tmux): type into the jailed shell,
#   read the answer, resize the window and see stty size change, detach, reattach and see
#   what was printed meanwhile, detach keys from the config; run of a command shows its
#   output and exits with its code; exec; logs -f loses nothing under 57 MB written as
#   fast as the jail can; port reaches a server on the jail's loopback (several
#   connections, a large body) and ends with its jail; --allow and the agents.NAME.allow
#   config against a test HTTP server, and agt jail net showing the allowed and the refused
#   request; jail ls; secrets by --env NAME, --env-file and jail.env reach the agent but
#   not agt's command line, agt jail inspect or agtd's log.
#
# Needs root and Linux, tmux, curl and ss.  A missing prerequisite is a failure.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
exec </dev/null # agt is not on a terminal here, except where tmux gives it one

command -v tmux >/dev/null || bail "tmux is needed to drive a real terminal (apt-get install tmux)"
command -v curl >/dev/null || bail "curl is needed (apt-get install curl)"
command -v ss >/dev/null || bail "ss is needed (apt-get install iproute2)"

MODEL_PID=
e2e_cleanup_hook() {
  [ -n "$MODEL_PID" ] && kill "$MODEL_PID" 2>/dev/null
  [ -n "${TM:-}" ] && $TM kill-server 2>/dev/null
  [ -n "${PORTER:-}" ] && kill "$PORTER" 2>/dev/null
  return 0
}

e2e_vm_up
e2e_test_rootfs
printf 'jail:\n  rootfs: test\n' >>"$AGT_CONFIG"

# agt for commands tmux runs: the same environment, whatever tmux passes on
cat >"$T/agt" <<EOF
#!/bin/sh
export LIMA_HOME='$LIMA_HOME' XDG_CACHE_HOME='$XDG_CACHE_HOME' XDG_CONFIG_HOME='$XDG_CONFIG_HOME'
export XDG_RUNTIME_DIR='$XDG_RUNTIME_DIR'
export AGT_CONFIG='$AGT_CONFIG' AGT_FAKE_LIMACTL_ALLOW_ROOT=1 PATH='$PATH'
exec '$AGT' "\$@"
EOF
chmod 755 "$T/agt"
. "$SRCDIR/tests/e2e/tmux.sh"
tmux_server agt-e2e
attached() { # attached JAIL: the number of clients agtd counts on it
  agt jail ls --json | python3 -c 'import json,sys
print(next((j.get("attached", 0) for j in json.load(sys.stdin) if j["name"] == sys.argv[1]), -1))' "$1"
}
attached_is() { test "$(attached "$1")" = "$2"; }

# --- attach through a real terminal
$TM new-session -d -s one -x 100 -y 30 -c "$WORK/proj" "$T/agt jail run --name sh1; echo EXITED rc=\$?; sleep 60"
check "agt jail run attaches at once: the jailed shell's prompt" wait_for one '^/work \$'
check "with a line saying how to detach" shows one '^\[attached to sh1; detach with ctrl-\],ctrl-\]\]'
check "after the run's first line: the workspace, the project directory" \
  shows one "^agt: jail sh1: workspace $WORK/proj \(at /work\)$"
check "and the network policy" shows one \
  "^agt: network: allow, but no host is allowed \(agents.shell.allow is empty"
$TM send-keys -t one 'echo typed-$((6*7)); stty size' Enter
check "typed input reaches the jailed shell and its answer comes back" wait_for one '^typed-42$'
check "the jail's terminal has the window's size (30 100)" wait_for one '^30 100$'
$TM resize-window -t one -x 120 -y 40
sleep 0.5
$TM send-keys -t one 'stty size' Enter
check "a resize reaches the jail (stty size says 40 120)" wait_for one '^40 120$'
run agt jail ls
like "agt jail ls: the jail runs, with CPU, memory and one attached client" "$OUT" \
  '^sh1 +shell +running +- +[0-9a-f]+ +[0-9]+s +[0-9.]+s +[0-9.]+M +1 +0$'
like "under a header naming the columns" "$OUT" '^NAME +AGENT +STATE +EXIT +ROOTFS +AGE +CPU +MEMORY +ATTACHED +REFUSED$'
is "agt jail ls --json counts it too" "$(attached sh1)" 1

# ctrl-p ctrl-q (docker's detach keys; ctrl-p is opencode's command palette) go to the jail
$TM send-keys -t one C-p C-q
sleep 0.5
check "ctrl-p ctrl-q do not detach: they reach the jail" test -z "$(screen one | grep detached)"
$TM send-keys -t one C-c # they went to the shell's line editor: drop that line
sleep 0.3
# a program that switches on the alternate screen, mouse reporting, bracketed paste, hides
# the cursor: detaching must switch them off in the user's terminal
$TM send-keys -t one "printf '\\033[?1049h\\033[?1000h\\033[?1006h\\033[?2004h\\033[?25l'; sleep 2; printf '\\033[?1049l'; echo produced-while-away" Enter
check "the jail's program switched the terminal to the alternate screen, with the mouse on" \
  wait_until 10 sh -c "test \"\$($TM display -p -t one '#{alternate_on}#{mouse_any_flag}#{mouse_sgr_flag}#{cursor_flag}')\" = 1110"
$TM send-keys -t one C-] C-]
check "ctrl-] ctrl-] detaches" wait_for one 'detached from sh1; it keeps running'
is "leaving the user's terminal off the alternate screen, mouse reporting off, the cursor shown" \
  "$($TM display -p -t one '#{alternate_on}#{mouse_any_flag}#{mouse_sgr_flag}#{cursor_flag}')" 0001
check "and agt exits 0" wait_for one '^EXITED rc=0$'
like "the jail still runs" "$(agt jail ls)" "^sh1 +shell +running"
check "with nobody attached" wait_until 5 attached_is sh1 0
sleep 2

# the detach keys from the repository's config
mkdir -p "$WORK/.agt"
printf 'jail:\n  detach_keys: ctrl-x,x\n' >"$WORK/.agt/config.yaml"
$TM new-session -d -s two -x 120 -y 40 -c "$WORK/proj" "$T/agt jail attach sh1; echo EXITED rc=\$?; sleep 60"
check "on reattach the output produced meanwhile is shown" wait_for two '^produced-while-away$'
check "the detach keys come from jail.detach_keys" shows two 'detach with ctrl-x,x\]'
$TM send-keys -t two 'echo still-here' Enter
check "the reattached terminal types into the same shell" wait_for two '^still-here$'
$TM send-keys -t two C-] C-]
sleep 0.5
check "ctrl-] ctrl-] no longer detaches" test -z "$(screen two | grep detached)"
$TM send-keys -t two C-c # they went to the shell's line editor: drop that line
sleep 0.3
$TM send-keys -t two C-x x
check "ctrl-x x does" wait_for two 'detached from sh1; it keeps running'
rm -rf "$WORK/.agt"

# stdin not a terminal: no detach keys offered (they cannot be typed); ctrl-c detaches
$TM new-session -d -s four -x 100 -y 20 -c "$WORK/proj" "$T/agt jail attach --read-only sh1 </dev/null; echo EXITED rc=\$?; sleep 60"
check "attached with stdin not a terminal, agt offers no detach keys" \
  wait_for four '^\[attached to sh1, read-only; stdin is not a terminal: ctrl-c or SIGTERM detaches\]'
$TM send-keys -t four C-c
check "and ctrl-c detaches" wait_for four 'detached from sh1; it keeps running'
check "with status 0" wait_for four '^EXITED rc=0$'
$TM new-session -d -s three -x 80 -y 24 -c "$WORK/proj" "$T/agt jail attach --detach-keys ctrl-a,d sh1; echo EXITED rc=\$?; sleep 60"
check "a third attach shows the screen" wait_for three '^still-here$'
$TM send-keys -t three 'exit 7' Enter
check "when the jailed shell exits, agt jail attach exits with its code" wait_for three '^EXITED rc=7$'
like "the jail has exited with 7" "$(agt jail ls)" '^sh1 +shell +exited +7 '
$TM kill-server 2>/dev/null
TM=

run agt jail attach sh1
is "attaching to an exited jail fails" "$RC" 1
like "saying why" "$ERR" "only a running jail can be attached"
run agt jail attach --detach-keys ctrl-pp sh1
is "bad detach keys are a usage error" "$RC" 2
like "naming the key" "$ERR" "'ctrl-pp' is not a key"

# --- run without a terminal: the command's output, then its exit code
run agt jail run --name b1 -- /bin/sh -c 'echo out-1; echo err-1 >&2; exit 5'
is "agt jail run of a command exits with its code" "$RC" 5
is "after printing its output" "$OUT" "$(printf 'out-1\nerr-1')"
run agt jail run -d --name b2 -- /bin/sh -c 'echo bg; sleep 300'
is "agt jail run -d returns at once" "$RC" 0
like "saying the jail started" "$OUT" '^b2 started in [0-9.]+ ms$'
like "without a terminal for a command run from a script" "$(agt jail inspect b2)" '"tty": false'
agt jail rm --force b2 >/dev/null
# --- the workspace: the current directory where the VM sees it, else a refusal saying how
mkdir -p "$T/outside"
run sh -c "cd '$T/outside' && '$AGT' jail run --name w1 -- true"
is "run from a directory the VM does not mount: refused, a usage error" "$RC" 2
like "saying the agent would get an empty /work" "$ERR" \
  "^agt: the current directory '$T/outside' is not in a directory the VM mounts, so the agent would get an empty /work"
like "with the config lines that fix it" "$ERR" "^        - location: $T\$"
run sh -c "cd '$WORK' && '$AGT' jail run --name w1 -- true"
is "run from a mount itself: refused" "$RC" 2
like "saying it holds projects" "$ERR" "'$WORK' is a mount itself \(vm.mounts, $AGT_CONFIG:4:7\)"
is "and no jail was made" "$(agt jail ls --json | grep -c w1)" 0
echo from-the-project >"$WORK/proj/marker"
run agt jail run --name w2 -- /bin/sh -c 'cat /work/marker'
is "run from a project directory: the agent sees its files" "$OUT" from-the-project
like "the run's first line names it" "$ERR" "^agt: jail w2: workspace $WORK/proj \(at /work\)"
rm -f "$WORK/proj/marker"
agt jail rm w2 >/dev/null
# -- ARGS after an agent name go after the agent's command; -- COMMAND alone replaces it
run agt jail run --name a1 shell -- -c 'echo appended-to-the-shell'
is "agt jail run shell -- ARGS appends ARGS to the agent's command" "$OUT" appended-to-the-shell
like "(its argv)" "$(agt jail inspect a1 | tr -d ' \n')" '"argv":\["/bin/sh","-c","echoappended-to-the-shell"\]'
agt jail rm a1 >/dev/null
run agt jail run --name a2 nosuchagent
is "an agent agt has no profile for is a usage error" "$RC" 2
like "saying which it knows and how to run a command" "$ERR" \
  "unknown agent 'nosuchagent' \(claude, codex, gemini, opencode, pi, shell\); to run a command instead, put it after '--': agt jail run -- nosuchagent"

# --disk: what the jail may write to its root (a btrfs quota in agtd)
run agt jail run --name b3 --disk 24M -- /bin/sh -c \
  'dd if=/dev/zero of=/home/agent/fill bs=1M count=48 2>&1; echo dd=$?'
like "agt jail run --disk stops a jail that writes past it" "$OUT" "Disk quota exceeded"
like "and sets the jail's limit" "$(agt jail inspect b3)" '"disk": 25165824'
agt jail rm b3 >/dev/null

# --- secrets: --env NAME (from agt's environment), --env-file and jail.env NAME reach the
# agent, but are never on agt's command line (what ps on this machine shows), nor in
# agt jail inspect, nor in agtd's log.  The control (--env NAME=VALUE) shows the check can
# see a secret on the command line when one is there.
SECRET_ENV=env-secret-$$-$RANDOM$RANDOM
SECRET_FILE=file-secret-$$-$RANDOM$RANDOM
SECRET_PIPE=pipe-secret-$$-$RANDOM$RANDOM
SECRET_CFG=config-secret-$$-$RANDOM$RANDOM
printf '# secrets for the agent\n\nexport FILE_SECRET="%s"\r\nPLAIN=visible\nENV_SECRET=overridden\n' \
  "$SECRET_FILE" >"$T/secrets.env"
export ENV_SECRET=$SECRET_ENV
SHOW='echo "env=$ENV_SECRET file=$FILE_SECRET pipe=$PIPE_SECRET plain=$PLAIN"'
# printf is bash's builtin: the pipe's secret is on no command line either
run agt jail run --name sec1 --env-file "$T/secrets.env" --env ENV_SECRET \
  --env-file <(printf 'PIPE_SECRET=%s\n' "$SECRET_PIPE") -- /bin/sh -c "$SHOW"
is "secrets by --env NAME, --env-file and a pipe reach the agent (the last setting wins)" "$OUT" \
  "env=$SECRET_ENV file=$SECRET_FILE pipe=$SECRET_PIPE plain=visible"
run agt jail inspect sec1
like "agt jail inspect lists the variables by name" "$OUT" '"FILE_SECRET"'
unlike "but shows none of their values" "$OUT" "$SECRET_ENV|$SECRET_FILE|$SECRET_PIPE|visible"

"$AGT" jail run --name sec2 --env ENV_SECRET --env-file "$T/secrets.env" -- \
  /bin/sh -c 'echo "ready $FILE_SECRET"; sleep 60' >"$T/sec2.out" 2>&1 &
SECPID=$!
wait_until 15 grep -q "^ready $SECRET_FILE" "$T/sec2.out" || not_ok "the jail sec2 did not start"
cmdline=$(tr '\0' ' ' <"/proc/$SECPID/cmdline")
like "a running agt jail run: its command line names the variable and the file" "$cmdline" \
  "jail run --name sec2 --env ENV_SECRET --env-file $T/secrets.env"
unlike "but holds no secret" "$cmdline" "$SECRET_ENV|$SECRET_FILE"
agt jail stop --grace 0 sec2 >/dev/null
wait "$SECPID"
"$AGT" jail run --name sec3 --env "ENV_SECRET=$SECRET_ENV" -- /bin/sh -c 'echo ready; sleep 60' \
  >"$T/sec3.out" 2>&1 &
SECPID=$!
wait_until 15 grep -q '^ready' "$T/sec3.out" || not_ok "the jail sec3 did not start"
like "the control: --env NAME=VALUE does show in the command line" \
  "$(tr '\0' ' ' <"/proc/$SECPID/cmdline")" "ENV_SECRET=$SECRET_ENV"
agt jail stop --grace 0 sec3 >/dev/null
wait "$SECPID"

# jail.env NAME in the user's config; a repository's overlay may not read the environment
export CFG_SECRET=$SECRET_CFG
sed 's/^jail:$/jail:\n  env: [CFG_SECRET]/' "$AGT_CONFIG" >"$T/secret-config.yaml"
run agt --config "$T/secret-config.yaml" jail run --name sec4 -- /bin/sh -c 'echo "cfg=$CFG_SECRET"'
is "jail.env NAME in the user's config takes the value from agt's environment" "$OUT" "cfg=$SECRET_CFG"
run agt jail inspect sec4
unlike "and agt jail inspect does not show it" "$OUT" "$SECRET_CFG"
mkdir -p "$WORK/.agt"
printf 'jail:\n  env: [CFG_SECRET]\n' >"$WORK/.agt/config.yaml"
run agt jail run --name sec5 -- true
is "jail.env NAME in a repository's .agt/config.yaml is refused" "$RC" 2
like "saying why" "$ERR" "'jail.env' entry 'CFG_SECRET' takes its value from agt's environment, which only the user's config may do"
rm -rf "$WORK/.agt"
unset CFG_SECRET

run env -u NOT_SET_HERE "$AGT" jail run --name sec6 --env NOT_SET_HERE -- true
is "--env NAME of an unset variable is a usage error" "$RC" 2
like "naming it" "$ERR" "--env: NOT_SET_HERE is not set in agt's environment"
printf 'A=1\n\nexport %s\n' "$SECRET_FILE" >"$T/bad.env"
run agt jail run --name sec6 --env-file "$T/bad.env" -- true
is "a bad --env-file line is a usage error" "$RC" 2
is "naming the file and the line, not the text" "$ERR" "agt: jail run: --env-file: $T/bad.env:3: no '=' (each line is NAME=VALUE)"
is "and no jail was made" "$(agt jail ls --json | grep -c sec6)" 0

agtd_log=$(cat "$VMDIR/vm/agtd.log")
like "agtd's log tells of the jails" "$agtd_log" "sec1"
unlike "but holds no secret" "$agtd_log" "$SECRET_ENV|$SECRET_FILE|$SECRET_PIPE|$SECRET_CFG"
unlike "nor do the VM's other logs" "$(cat "$VMDIR"/vm/*.log "$VMDIR"/ha.*.log)" \
  "$SECRET_ENV|$SECRET_FILE|$SECRET_PIPE|$SECRET_CFG"
unset ENV_SECRET
for j in sec1 sec2 sec3 sec4; do agt jail rm "$j" >/dev/null; done

# --- exec and port: a server on the jail's loopback
agt jail run -d --name web -- /bin/sh -c 'echo served-from-the-jail > /work/index.html; head -c 5000000 /dev/urandom > /work/big; exec httpd -f -p 127.0.0.1:8080 -h /work' >/dev/null
# the agent's first commands may not have run yet when the run answers
check "the jail wrote its files" wait_until 10 agt jail exec web -- /bin/sh -c 'test -s /work/index.html'
run agt jail exec web -- /bin/sh -c 'cat /work/index.html; hostname; exit 4'
is "agt jail exec exits with the command's code" "$RC" 4
like "and prints its output" "$OUT" '^served-from-the-jail$'
like "run in the jail (its hostname)" "$OUT" '^web$'
run agt jail exec web -- /no/such
is "exec of a missing binary exits 127" "$RC" 127

"$AGT" jail port web 8080 0 >"$T/port.out" 2>"$T/port.err" &
PORTER=$!
check "agt jail port says where it listens" wait_until 10 grep -q '^forwarding 127.0.0.1:[0-9]* to port 8080 in jail web' "$T/port.out"
LPORT=$(sed -n 's/^forwarding 127.0.0.1:\([0-9]*\) .*/\1/p' "$T/port.out")
is "a request to the local port reaches the jail's server" \
  "$(curl -s -m 10 "http://127.0.0.1:$LPORT/index.html")" served-from-the-jail
pids=
for i in 1 2 3 4 5 6; do
  curl -s -m 20 -o "$T/c$i" "http://127.0.0.1:$LPORT/index.html" &
  pids="$pids $!"
done
# shellcheck disable=SC2086
wait $pids
is "six connections at once, each on its own channel" "$(cat "$T"/c[1-6] | grep -c served-from-the-jail)" 6
want=$(agt jail exec web -- md5sum /work/big | cut -d' ' -f1)
is "a 5 MB body arrives intact" "$(curl -s -m 30 "http://127.0.0.1:$LPORT/big" | md5sum | cut -d' ' -f1)" "$want"
check "only this machine's loopback listens" test -n "$(ss -ltnH "sport = :$LPORT" | grep "127.0.0.1:$LPORT ")"
is "and nothing else" "$(ss -ltnH "sport = :$LPORT" | grep -vc "127.0.0.1:$LPORT ")" 0
kill -INT "$PORTER"
wait "$PORTER"
is "ctrl-c ends agt jail port with status 0" "$?" 0
PORTER=
"$AGT" jail port web 9 0 >"$T/port2.out" 2>"$T/port2.err" &
PORTER=$!
wait_until 10 grep -q forwarding "$T/port2.out"
LPORT=$(sed -n 's/^forwarding 127.0.0.1:\([0-9]*\) .*/\1/p' "$T/port2.out")
curl -s -m 5 "http://127.0.0.1:$LPORT/" >/dev/null
check "a port nothing listens on in the jail is reported" wait_until 5 grep -q "nothing listening on port 9" "$T/port2.err"
kill -INT "$PORTER"
wait "$PORTER"
PORTER=
"$AGT" jail port web 8080 0 >"$T/port3.out" 2>"$T/port3.err" &
PORTER=$!
wait_until 10 grep -q forwarding "$T/port3.out"
agt jail stop web >/dev/null
check "agt jail port ends with its jail" wait_until 10 sh -c "! kill -0 $PORTER 2>/dev/null"
wait "$PORTER"
is "with status 0" "$?" 0
PORTER=
like "saying so" "$(cat "$T/port3.err")" "^agt: jail 'web' ended: forwarding stopped$"
run agt jail port b1 8080 0
is "agt jail port of an exited jail fails" "$RC" 1
like "saying so" "$ERR" "jail 'b1' is exited"
agt jail rm --force web >/dev/null

# --- every byte through agt jail port and agt jail exec: transfers of a known pattern
# (probe xfer) around the relays' buffer sizes and 64 MiB; the server closes first, the
# client half-closes, a slow reader; each checked by length and hash
agt jail run -d --name xfer -- probe xfer serve 8080 >/dev/null
"$AGT" jail port xfer 8080 0 >"$T/xport.out" 2>"$T/xport.err" &
PORTER=$!
wait_until 10 grep -q forwarding "$T/xport.out"
LPORT=$(sed -n 's/^forwarding 127.0.0.1:\([0-9]*\) .*/\1/p' "$T/xport.out")
out=$(for m in down half echo up; do for n in 0 1 65535 65537 1048577 67108864; do
  "$PROBE" xfer get "$m" "$n" 127.0.0.1 "$LPORT"
done; done
"$PROBE" xfer get down 4194305 127.0.0.1 "$LPORT" 200
"$PROBE" xfer get up 4194305 127.0.0.1 "$LPORT" 200)
is "agt jail port: 26 transfers, each complete and intact" "$(grep -c '^ok ' <<<"$out")" 26
printf '%s\n' "$out" | grep -v '^ok ' | head -5 | sed 's/^/#   /'
kill -INT "$PORTER"
wait "$PORTER"
PORTER=
like "agt jail exec: 64 MiB of output, intact" \
  "$(agt jail exec xfer -- probe xfer gen 67108864 | "$PROBE" xfer check 67108864)" "^ok stream 67108864 hash="
like "agt jail exec: a slow reader gets all of it" \
  "$(agt jail exec xfer -- probe xfer gen 4194305 | "$PROBE" xfer check 4194305 200)" "^ok stream 4194305 hash="
agt jail rm --force xfer >/dev/null

# --- logs -f: 4.5 million numbered lines (about 57 MB) as fast as the jail writes them, with
# the default 8 MiB log on disk; the follower, over SSH, gets every line in order.
run agt jail create --name spam -- probe spam 4500000
like "agt jail create creates without starting" "$OUT" '^spam created$'
run agt jail create -d --name spam2 -- true
is "agt jail create takes no -d (it starts nothing)" "$RC" 2
like "saying so" "$ERR" "jail create: unknown option '-d'"
unlike "and its help lists none of -d, --detach-keys, --rm" "$(agt jail create --help)" "^ *(-d, )?--(detach|detach-keys|rm) "
"$AGT" jail logs -f spam >"$T/follow.out" 2>"$T/follow.err" &
FOLLOWER=$!
check "the follower is attached before the jail starts" wait_until 10 attached_is spam 1
t0=$(date +%s)
run agt jail start spam
like "agt jail start starts it" "$OUT" '^spam started in'
wait "$FOLLOWER"
is "agt jail logs -f exits 0 when the jail ends" "$?" 0
echo "# 57 MB followed in $(($(date +%s) - t0)) s"
out=$(awk 'BEGIN { n = 0 } { if ($0 != "line " n) { print "line " NR " is: " $0; exit } n++ } END { print n }' "$T/follow.out")
is "logs -f lost nothing: all 4500000 lines, in order" "$out" 4500000
check "while the log kept on disk stayed within its budget" \
  test "$(cat "$VMDIR"/disk/agt/jails/spam/console.log* | wc -c)" -le $((8 << 20))
run agt jail logs --since 20 spam
like "--since starts at a byte offset, past what was rotated away" "$(printf '%s\n' "$OUT" | tail -1)" '^line 4499999$'
agt jail rm spam >/dev/null

# --- the network: --allow, agents.NAME.allow, and agt jail net
python3 "$SRCDIR/guest/tools/model_server.py" --host 127.0.0.1 --port 0 --log "$T/model.log" >"$T/model.out" 2>&1 &
MODEL_PID=$!
wait_until 10 grep -q listening "$T/model.out" || bail "the test model server did not start"
MPORT=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$T/model.out")
OTHER=$((MPORT == 65535 ? MPORT - 1 : MPORT + 1))
GET="wget -q -O - http://127.0.0.1:$MPORT/v1/models; echo; wget -q -O - http://127.0.0.1:$OTHER/ 2>&1; echo rc=\$?"
run agt jail run --name n1 --allow "127.0.0.1:$MPORT" -- /bin/sh -c "$GET"
like "with --allow the test server answers through agtd's proxy" "$OUT" '"id": "mock"'
like "another port of the same host is refused" "$OUT" "403 Forbidden"
run agt jail net n1
like "agt jail net shows the allowed request, with its bytes" "$OUT" \
  "^closed +GET +127\.0\.0\.1:$MPORT \(127\.0\.0\.1\) up [0-9]+ down [0-9]+"
like "and the refused one, with the reason" "$OUT" \
  "^blocked +GET +127\.0\.0\.1:$OTHER: host not on the jail's allowlist"
run agt jail net --json n1
is "agt jail net --json: one object per decision" \
  "$(printf '%s\n' "$OUT" | python3 -c 'import json,sys; print(" ".join(json.loads(l)["decision"] for l in sys.stdin))')" \
  "allowed closed blocked"

run agt jail run --name n2 -- /bin/sh -c "$GET"
like "without --allow the test server is refused" "$OUT" "403 Forbidden"
unlike "and does not answer" "$OUT" '"id": "mock"'
like "agt says so when the jail ends, naming the first refusal and where to look" "$ERR" \
  "^agt: jail n2: its network proxy refused 2 connections, the first to 127\.0\.0\.1:$MPORT \(host not on the jail's allowlist\): 'agt jail net n2' lists them"
like "and agt jail ls counts them in its REFUSED column" "$(agt jail ls)" '^n2 +shell +exited +0 .* 2$'
cat >>"$AGT_CONFIG" <<EOF
agents:
  shell:
    allow:
      - 127.0.0.1:$MPORT
EOF
run agt jail run --name n3 -- /bin/sh -c "$GET"
like "agents.shell.allow in the config lets it through" "$OUT" '"id": "mock"'
run agt jail run --name n4 --net none -- /bin/sh -c "$GET"
unlike "--net none: no way out, allowlist or not" "$OUT" '"id": "mock"'
run agt jail net n4
is "and no proxy to log anything" "$OUT" ""

(agt jail run -d --name n5 --allow "127.0.0.1:$MPORT" -- /bin/sh -c "sleep 1; $GET; sleep 1" >/dev/null
  "$AGT" jail net -f n5 >"$T/net-follow.out")
like "agt jail net -f follows the decisions until the jail exits" "$(cat "$T/net-follow.out")" \
  "^blocked +GET +127\.0\.0\.1:$OTHER"

for j in sh1 b1 n1 n2 n3 n4 n5; do agt jail rm "$j" >/dev/null; done
is "no jail is left" "$(agt jail ls --json)" "[]"
