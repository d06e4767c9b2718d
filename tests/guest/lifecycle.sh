#!/usr/bin/env bash
# A jail's life: create, start, logs, stop (SIGTERM, then SIGKILL after the grace period),
# kill, restart, rm; records kept across an agtd restart; bad requests refused clearly.
. "$(dirname "$0")/lib.sh"

agtd_start
build_test_rootfs
R=$TEST_ROOTFS

out=$(ctl jail create --name a --rootfs "$R" -- /bin/sh -c 'echo out-$((6*7)); echo err >&2; exit 3')
is "create answers with the name" "$out" "a"
like "a created jail is listed as created" "$(ctl jail ls)" "^a +shell +created"
out=$(ctl jail start a)
like "start answers once the agent has exec'd" "$out" "^a started in [0-9.]+ ms"
out=$(ctl jail wait a)
is "wait answers with the exit code" "$out" "a: exited (exit code 3)"
logs=$(ctl jail logs a)
like "stdout is captured" "$logs" "^out-42$"
like "stderr is captured" "$logs" "^err$"
ctl jail start a >/dev/null && ctl jail wait a >/dev/null
is "a jail can be started again; logs accumulate" "$(ctl jail logs a | grep -c out-42)" 2
like "inspect shows the command" "$(ctl jail inspect a)" '"argv": \['
like "inspect shows variable names, not values" "$(ctl jail inspect a)" '"PATH"'
check "inspect does not show variable values" test -z "$(ctl jail inspect a | grep '/usr/local/bin:')"

# stop: an agent that ignores SIGTERM is killed after the grace period
ctl jail run --name b --rootfs "$R" -- /bin/sh -c 'trap "" TERM; echo ready; while :; do sleep 1; done' >/dev/null
# the agent ignores SIGTERM only once its trap ran: a stop before that (a loaded machine)
# ends it at once, and the test would say the grace period was not kept
wait_until 30 sh -c "\"$AGTD\" ctl -s \"$SOCK\" jail logs b | grep -q '^ready\$'" ||
  not_ok "the SIGTERM-ignoring agent never printed 'ready'"
t0=$(date +%s%N)
out=$(ctl jail stop b 500)
t1=$(date +%s%N)
like "stop of a SIGTERM-ignoring agent ends with SIGKILL" "$out" "exit code 137"
ms=$(((t1 - t0) / 1000000))
check "stop waited for the grace period (${ms} ms >= 450)" test "$ms" -ge 450
like "the reason says so" "$(ctl jail inspect b)" "grace period"

# stop: an agent that exits on SIGTERM
ctl jail run --name c --rootfs "$R" -- /bin/sh -c 'trap "exit 0" TERM; while :; do sleep 0.1; done' >/dev/null
sleep 0.3
out=$(ctl jail stop c 10000)
like "stop delivers SIGTERM to the agent" "$out" "exit code 0"

# Once the agent runs, the jail's pid 1 is agt-init (guest/child/init.c), a static program of
# a few pages, not the copy of agtd that set the jail up: it forwards signals the same way.
ctl jail run --name i --rootfs "$R" -- probe sleep 100 >/dev/null
ipid=$(ctl --json jail inspect i | grep -o '"pid": [0-9]*' | grep -o '[0-9]*$')
check "the init becomes agt-init once its agent runs" \
  wait_until 10 sh -c "readlink /proc/$ipid/exe | grep -q '^/memfd:agt-init'"
is "the init's name is agt-init" "$(cat "/proc/$ipid/comm")" agt-init
maps=$(wc -l <"/proc/$ipid/maps")
check "the init maps a few regions, not agtd's (${maps})" test "$maps" -lt 40
is "the init stays non-dumpable (its /proc files are root's)" "$(stat -c %u "/proc/$ipid/maps")" 0
ctl jail kill i 15 >/dev/null
like "agt-init forwards SIGTERM to the agent" "$(ctl jail wait i)" "exit code 143"
ctl jail rm i >/dev/null

# kill
ctl jail run --name d --rootfs "$R" -- probe sleep 100 >/dev/null
ctl jail kill d 9 >/dev/null
like "kill ends the jail" "$(ctl jail wait d)" "exit code 137"

# rm of a running jail needs force
ctl jail run --name e --rootfs "$R" -- probe sleep 100 >/dev/null
out=$(ctl jail rm e 2>&1)
like "rm of a running jail is refused" "$out" "is running: stop it first"
ctl jail rm e --force >/dev/null
like "rm --force kills and removes it" "$(ctl jail ls)" "^NAME"
check "e is gone" test -z "$(ctl jail ls | grep '^e ')"

# records survive an agtd restart; a jail running at the restart goes on under its keeper
# (tests/guest/survive.sh has the rest)
ctl jail run --name f --rootfs "$R" -- probe sleep 100 >/dev/null
agtd_stop
agtd_start
out=$(ctl jail ls)
like "a restarted agtd lists the jails" "$out" "^a +shell +exited +3"
like "the jail that was running is still running" "$out" "^f +shell +running"
like "its logs are still there" "$(ctl jail logs a)" "out-42"
like "the jail that ran on can be killed" "$(ctl jail stop f 0; ctl jail wait f)" "exit code 137"
is "no process of the killed jail survived" "$(jail_procs)" 0
ctl jail start f >/dev/null
like "a jail can start again after the restart" "$(ctl jail ls)" "^f +shell +running"
ctl jail rm f --force >/dev/null

# The log's offsets come from its files, not from the record (written at the start and end
# of a run): output written after the start of a jail that was running when agtd was killed
# is all there, and a second run's output follows it at the right offsets.  The 32K budget
# rotates the log in both runs (each writes 19 KB).
rpc() { python3 "$SRCDIR/tests/guest/rpc.py" "$SOCK" "$@"; }
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
lines='i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done'
run_bytes=$(bash -c "$lines" | wc -c)
ctl jail run --name lg --rootfs "$R" --log 32K -- /bin/sh -c "sleep 0.3; $lines; sleep 100" >/dev/null
for _ in $(seq 1 100); do ctl jail logs lg | grep -q '^line 1999$' && break; sleep 0.05; done
kill -KILL "$AGTD_PID"
wait "$AGTD_PID" 2>/dev/null
AGTD_PID=
agtd_start
r=$(rpc jail.logs '{"name": "lg"}')
is "after agtd was killed, the log's end is all the jail wrote" "$(jget end <<<"$r")" "$run_bytes"
like "and the log reads up to its last line" "$(ctl jail logs lg | tail -1)" "^line 1999$"
state=$(ctl jail ls | awk '$1 == "lg" {print $3}')
[ "$state" = running ] || ctl jail start lg >/dev/null
[ "$state" = running ] || for _ in $(seq 1 100); do
  [ "$(jget end <<<"$(rpc jail.logs '{"name": "lg"}')")" -ge $((2 * run_bytes)) ] && break
  sleep 0.05
done
r=$(rpc jail.logs '{"name": "lg"}')
want=$((run_bytes * 2))
[ "$state" = running ] && want=$run_bytes
is "a second run's output follows at the right offsets (end)" "$(jget end <<<"$r")" "$want"
r=$(rpc jail.logs "{\"name\": \"lg\", \"offset\": $((want - run_bytes)), \"max\": 7}")
is "the run's first line is at the offset where it began" \
  "$(jget offset <<<"$r") $(jget data_b64 <<<"$r" | base64 -d | od -An -c | tr -s " " | sed "s/^ //")" \
  "$((want - run_bytes)) l i n e 0 \\n"
ctl jail rm lg --force >/dev/null

# secrets name variables of env, each once (a name without a value would be "lost" at
# every agtd start)
sk_bad() { # SECRETS-JSON
  rpc jail.run "{\"name\": \"skbad\", \"rootfs\": \"$R\", \"argv\": [\"true\"],
    \"env\": {\"SK_KEY\": \"v\", \"A\": \"B=x\"}, \"secrets\": $1}" 2>&1
}
like "a secret that is not in env is refused" "$(sk_bad '["SK_KEY", "NOPE"]')" \
  "'secrets\[1\]': 'NOPE' is not a variable of 'env'"
like "a secret named twice is refused" "$(sk_bad '["SK_KEY", "SK_KEY"]')" \
  "'secrets\[1\]': 'SK_KEY' is named twice"
like "a secret that is no variable's name is refused" "$(sk_bad '["A=B"]')" \
  "'secrets\[0\]': 'A=B' is not a variable of 'env'"
is "and no jail was made" "$(ctl jail ls | grep -c skbad)" 0

# Secrets (jail.run's `secrets`) are never on disk, and a jail started again after agtd was
# killed still has them: their values wait in root's keyring (guest/jail/secrets.h).  After
# a reboot (here: the key invalidated by hand) the jail starts without them, and says so.
# A kernel without keys (no /proc/keys) keeps them in agtd's memory only: skipped there.
# tests/keyctl.py works: this process can add a key (no kernel keyring, or a seccomp
# filter refusing the calls, as in some containers: skipped)
if [ -r /proc/keys ] && python3 "$SRCDIR/tests/keyctl.py" works; then
# agtd as systemd runs a service (KeyringMode=private): each start in a session keyring of
# its own, not linked to root's user keyring, so agtd never possesses the keys it finds there
cat >"$T/agtd-own-keyring" <<EOF
#!/usr/bin/env python3
import ctypes, os, sys
nr = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(nr, 1, None, 0, 0, 0) < 0:  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
    sys.exit("agtd-own-keyring: errno %d" % ctypes.get_errno())
os.execv("$AGTD", ["$AGTD"] + sys.argv[1:])
EOF
chmod +x "$T/agtd-own-keyring"
REAL_AGTD=$AGTD
agtd_stop
AGTD=$T/agtd-own-keyring
agtd_start
SV=secret-$$-$RANDOM$RANDOM
SHOWSK='echo "k=$SK_KEY p=$PLAIN"'
sk_start() { # NAME [SCRIPT]
  rpc jail.run "{\"name\": \"$1\", \"rootfs\": \"$R\", \"argv\": [\"/bin/sh\", \"-c\", $(jq_str "${2:-$SHOWSK}")],
    \"env\": {\"SK_KEY\": \"$SV\", \"PLAIN\": \"x\"}, \"secrets\": [\"SK_KEY\"]}" >/dev/null
}
sk_run() { # NAME
  sk_start "$1"
  ctl jail wait "$1" >/dev/null
}
sk_again() { # NAME: start the jail again; what its run printed last
  ctl jail start "$1" >/dev/null
  ctl jail wait "$1" >/dev/null
  ctl jail logs "$1" | tail -1
}
jq_str() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; }
# the key of jail NAME in /proc/keys: its id in hex, or nothing
sk_key() { awk -v d="agt-jail-secrets:$STATE/jails/$1:" 'index($0, d) && $2 !~ /[iRD]/ { print $1 }' /proc/keys; }
sk_run sk
is "a secret reaches the jail" "$(ctl jail logs sk)" "k=$SV p=x"
is "its value is not in jail.json" "$(grep -c "$SV" "$STATE/jails/sk/jail.json")" 0
like "whose secrets are named" "$(tr -d ' \n' <"$STATE/jails/sk/jail.json")" '"secrets":\["SK_KEY"\]'
check "it is kept in root's keyring" test -n "$(sk_key sk)"
# A process that possesses the key (its session keyring links root's user keyring, as
# pam_keyinit's does at a root login, and jails and anything started from there inherit it)
# but is not root may not read it: the key gives a possessor no rights.
out=$(python3 "$SRCDIR/tests/keyctl.py" read-as-nobody "$(sk_key sk)" 2>&1)
is "a process that possesses the key but is not root cannot read it" "$out" "refused: EACCES"
sk_start sk3 'sleep 100'
sk_run sk4
kill -KILL "$AGTD_PID"
wait "$AGTD_PID" 2>/dev/null
AGTD_PID=
# Such a process may link a key of its own into root's user keyring (the kernel gives its
# possessor that right), displacing agtd's under the jail's description: agtd does not take it.
out=$(python3 "$SRCDIR/tests/keyctl.py" plant-as-nobody "$(sk_key sk4)" 2>&1)
is "a process that is not root links a key of its own under a jail's description" "$out" linked
agtd_start
r=$(rpc jail.inspect '{"name": "sk4"}')
like "agtd does not take a key that is not its own" "$r" '"secrets_lost": \["SK_KEY"\]'
like "and says so" "$(cat "$T/agtd.log")" "jail 'sk4': the key under its secrets' description is not agtd's \(user;65534;"
is "the jail starts without it" "$(sk_again sk4)" "k= p=x"
ctl jail rm sk4 >/dev/null
for k in $(sk_key sk4); do python3 "$SRCDIR/tests/keyctl.py" invalidate "$k"; done
is "after agtd was killed, a jail started again still has its secret" "$(sk_again sk)" "k=$SV p=x"
r=$(rpc jail.inspect '{"name": "sk"}')
like "jail.inspect names its secrets" "$r" '"secrets": \["SK_KEY"\]'
is "and none lost" "$(grep -c secrets_lost <<<"$r")" 0
out=$(ctl jail exec sk3 -- /bin/sh -c "$SHOWSK" 2>&1)
is "jail exec into a jail that ran on meanwhile has it too" "$out" "k=$SV p=x"
ctl jail rm sk >/dev/null
ctl jail rm sk3 --force >/dev/null
is "jail rm drops the key" "$(sk_key sk)$(sk_key sk3)" ""

sk_run sk2
id=$(sk_key sk2)
kill -KILL "$AGTD_PID"
wait "$AGTD_PID" 2>/dev/null
AGTD_PID=
# what a reboot does to the keyring: the key is gone
python3 "$SRCDIR/tests/keyctl.py" invalidate "$id" || not_ok "could not invalidate the key '$id'"
agtd_start
r=$(rpc jail.inspect '{"name": "sk2"}')
like "a jail whose secret's value is gone says which in jail.inspect" "$r" '"secrets_lost": \["SK_KEY"\]'
like "and agtd's log says so" "$(cat "$T/agtd.log")" "jail 'sk2': the values of its secrets SK_KEY are gone"
is "it starts without it" "$(sk_again sk2)" "k= p=x"
r=$(rpc jail.start '{"name": "sk2", "secrets": {"PLAIN": "y"}}' 2>&1)
like "jail.start's secrets: a name that is not one of the jail's secrets is refused" "$r" \
  "secrets: 'PLAIN' is not one of jail 'sk2''s secrets"
r=$(rpc jail.start "{\"name\": \"sk2\", \"secrets\": {\"SK_KEY\": \"$(head -c 5000 /dev/zero | tr '\0' v)\"}}" 2>&1)
like "jail.start's secrets: a value longer than jail.run's env takes is refused" "$r" \
  "secrets: 'SK_KEY' must be a string of at most [0-9]+ bytes without NUL"
rpc jail.start '{"name": "sk2", "secrets": {"SK_KEY": "again"}}' >/dev/null
ctl jail wait sk2 >/dev/null
is "jail.start's secrets give the jail the value again" "$(ctl jail logs sk2 | tail -1)" "k=again p=x"
is "and it is no longer lost" "$(rpc jail.inspect '{"name": "sk2"}' | grep -c secrets_lost)" 0
ctl jail rm sk2 >/dev/null
agtd_stop
AGTD=$REAL_AGTD
agtd_start
else
  ok "secrets across agtd's restarts # SKIP this machine gives agtd no keyring"
fi

# A jail without a terminal: its stdout and stderr in its log in the order it wrote them (one
# pipe for both), on a prepared jail (jail run) and a cold start (create, then start)
ALT='i=0; while [ $i -lt 300 ]; do echo "o$i"; echo "e$i" >&2; i=$((i+1)); done'
want_alt=$(bash -c "$ALT" 2>&1)
ctl jail run --name alt1 --rootfs "$R" -- /bin/sh -c "$ALT" >/dev/null
ctl jail wait alt1 >/dev/null
is "stdout and stderr in the log in the order written (a prepared jail)" "$(ctl jail logs alt1)" "$want_alt"
ctl jail create --name alt2 --rootfs "$R" -- /bin/sh -c "$ALT" >/dev/null
ctl jail start alt2 >/dev/null
ctl jail wait alt2 >/dev/null
is "and on a cold start" "$(ctl jail logs alt2)" "$want_alt"
ctl jail rm alt1 >/dev/null
ctl jail rm alt2 >/dev/null

# jail ls lists the jails in the order they were made, the same after agtd restarts (which
# reads their records in the directory's order)
for n in ord-c ord-b ord-a; do
  ctl jail create --name "$n" --rootfs "$R" -- true >/dev/null
  sleep 1.1
done
order() { ctl jail ls | awk '$1 ~ /^ord-/ { print $1 }' | paste -sd' '; }
is "jail ls: in the order they were made" "$(order)" "ord-c ord-b ord-a"
agtd_stop
agtd_start
is "and the same after agtd restarts" "$(order)" "ord-c ord-b ord-a"
for n in ord-c ord-b ord-a; do ctl jail rm "$n" >/dev/null; done

# bounded logs: 8 KiB budget, 200 KB written: the end is kept, the rest rotated away
ctl jail run --name g --rootfs "$R" --log 8K -- probe spam 20000 >/dev/null
ctl jail wait g >/dev/null
logs=$(ctl jail logs g)
like "the newest output is kept" "$logs" "^line 19999$"
check "the log stays within its budget ($(du -sb "$STATE/jails/g" | cut -f1) bytes in the jail dir)" \
  test "$(cat "$STATE"/jails/g/console.log* | wc -c)" -le 8192

# bad requests: clear errors, nothing created
expect_err() {
  local desc=$1 pattern=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] && printf '%s' "$out" | grep -Eq -- "$pattern"; then
    ok "$desc"
  else
    not_ok "$desc"
    echo "#   rc=$rc out: $out"
  fi
}
expect_err "a bad name is refused" "jail name 'Bad/Name' must start" \
  rpc jail.create '{"name": "Bad/Name", "argv": ["true"]}'
expect_err "and by agtd ctl, naming its flag" "^agtd ctl: --name 'Bad/Name' must start" \
  ctl jail create --name Bad/Name -- true
expect_err "a request's network mode is one of the jail spec's" \
  "'network.mode' must be none, allow or open, not 'wide'" \
  rpc jail.create '{"name": "nm", "network": {"mode": "wide"}, "argv": ["true"]}'
expect_err "a field no run option has is refused" "unknown field 'detach_keys'" \
  rpc jail.create '{"name": "dk", "detach_keys": "ctrl-a", "argv": ["true"]}'
expect_err "a duplicate name is refused" "exists already" ctl jail create --name a -- true
expect_err "a relative workspace is refused" "not an absolute path" ctl jail create --name w1 --workspace rel/dir -- true
expect_err "a workspace with .. is refused" "'\.\.' component" ctl jail create --name w2 --workspace "$T/../etc" -- true
ln -s /etc "$T/link"
expect_err "a workspace through a symlink is refused" "symlink" ctl jail create --name w3 --workspace "$T/link" -- true
mkdir -p "$T/real/ws"
ln -s "$T/real" "$T/link2"
expect_err "a symlink in the middle of the path is refused" "symlink" ctl jail create --name w4 --workspace "$T/link2/ws" -- true
expect_err "a workspace outside agtd's roots is refused" "not under a workspace root" ctl jail create --name w5 --workspace /etc -- true
# What a workspace may not be: a root itself, agtd's state, another jail's own workspace.
expect_err "a workspace root itself is refused" "workspace '$T' is a workspace root of agtd itself" ctl jail create --name w10 --workspace "$T" -- true
expect_err "agtd's workspaces/ is refused" "is a workspace root of agtd itself" ctl jail create --name w11 --workspace "$STATE/workspaces" -- true
expect_err "agtd's state directory is refused" "holds agtd's state directory" ctl jail create --name w12 --workspace "$STATE" -- true
expect_err "a directory inside agtd's state is refused" "is inside agtd's state directory" ctl jail create --name w13 --workspace "$STATE/jails" -- true
ctl jail create --name owner --rootfs "$R" -- true >/dev/null
check "(a jail with a workspace agtd made)" test -d "$STATE/workspaces/owner"
mkdir -p "$STATE/workspaces/owner/sub"
expect_err "another jail's own workspace is refused" "is the workspace agtd made for jail 'owner'" ctl jail create --name w14 --workspace "$STATE/workspaces/owner" -- true
expect_err "and a directory inside it" "is inside the workspace agtd made for jail 'owner'" ctl jail create --name w15 --workspace "$STATE/workspaces/owner/sub" -- true
ctl jail rm owner >/dev/null
check "(jail rm removes the workspace agtd made)" test ! -e "$STATE/workspaces/owner"
# A directory left where agtd would make a jail's workspace is not adopted.
mkdir -p "$STATE/workspaces/left"
echo keep >"$STATE/workspaces/left/file"
expect_err "a leftover directory is not taken as a new jail's workspace" "workspace '$STATE/workspaces/left' exists already, and agtd did not make it for this jail" ctl jail create --name left --rootfs "$R" -- true
is "and it is untouched" "$(cat "$STATE/workspaces/left/file")" keep
out=$(ctl jail create --name left2 --rootfs "$R" --workspace "$STATE/workspaces/left" -- true 2>&1)
is "named as the workspace, it is used" "$out" left2
ctl jail rm left2 >/dev/null
is "and jail rm leaves it" "$(cat "$STATE/workspaces/left/file")" keep
rm -rf "$STATE/workspaces/left"
expect_err "an unknown rootfs is refused" "rootfs 'nope'" ctl jail create --name w6 --rootfs nope -- true
expect_err "an unknown agent without argv is refused" "no default command" ctl jail create --name w7 --agent claude-x
expect_err "a too small memory limit is refused" "at least 8 MiB" ctl jail create --name w8 --memory 1M -- true
expect_err "start of an unknown jail" "no jail named 'zz'" ctl jail start zz
expect_err "a missing binary fails the start with the exec error" "exec /no/such: No such file" ctl jail run --name w9 --rootfs "$R" -- /no/such
check "the failed run left no jail behind" test -z "$(ctl jail ls | grep '^w')"

for j in a b c d g; do ctl jail rm "$j" >/dev/null; done
is "nothing is left in the jails directory" "$(ls "$STATE/jails" | wc -l)" 0
is "no mount is left" "$(leftovers)" 0
is "no cgroup is left" "$(cgroup_dirs)" 0

# The jails' writable layers: a btrfs subvolume with a quota each (guest/jail/disk.c).  Filling the
# root stops at the jail's disk limit; what was written stays across a restart of the jail.
like "agtd keeps the jails' writable layers on btrfs with a quota each" "$(ctl status)" \
  '"limits": true'
ctl jail run --name q --rootfs "$R" --disk 32M -- /bin/sh -c \
  'dd if=/dev/zero of=/home/agent/fill bs=1M count=64; echo dd=$?' >/dev/null
ctl jail wait q >/dev/null
like "a write past the disk limit fails with EDQUOT in the jail" "$(ctl jail logs q)" \
  "Disk quota exceeded"
size=$(stat -c %s "$STATE/jails/q/rw/upper/home/agent/fill")
check "the filler stopped at the limit (wrote $size bytes, limit 32 MiB)" \
  test "$size" -gt 0 -a "$size" -le $((32 << 20))
ctl jail start q >/dev/null
ctl jail wait q >/dev/null
check "the upper layer outlives a restart of the jail" \
  test -s "$STATE/jails/q/rw/upper/home/agent/fill"
ctl jail rm q >/dev/null
is "removing the jail removes its subvolume" "$(ls "$STATE/jails" | wc -l)" 0
agtd_stop
is "agtd unmounts the jails' disk when it stops" "$(grep -c " $T/" /proc/self/mountinfo)" 0
is "and leaves no cgroup, its prepared jails' neither" \
  "$(find /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG" -mindepth 1 -type d 2>/dev/null | wc -l)" 0
agtd_start
like "agtd mounts the same disk again at its next start" "$(ctl status)" '"limits": true'
is "with no prepared jail left on it" "$(ls -A "$STATE/jails" | grep -c '^\.w-')" 0
# A jail directory without its record (agtd killed while a start was writing it) is removed
# at the next start, with its writable layer.
mkdir -p "$STATE/jails/ghost/rw/upper"
agtd_stop
agtd_start
check "a jail directory without a record is removed at agtd's start" test ! -e "$STATE/jails/ghost"
like "saying so in the log" "$(cat "$T/agtd.log")" "removing '.*/jails/ghost': no record"

# jail port lasts as long as its jail, and no longer than agtd.
# wait_exit PID: wait up to 5 s for PID to end; its status in $ST, or "running".
wait_exit() {
  for _ in $(seq 1 100); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$1" 2>/dev/null; then
    kill "$1"
    wait "$1" 2>/dev/null
    ST=running
  else
    wait "$1"
    ST=$?
  fi
}
port_up() {
  for _ in $(seq 1 100); do
    grep -q '^forwarding 127.0.0.1:' "$1" && return 0
    sleep 0.05
  done
  return 1
}
ctl jail run --name pf --rootfs "$R" -- /bin/sleep 60 >/dev/null
ctl jail port pf 8080 0 >"$T/pf.out" 2>&1 &
PF=$!
check "jail port listens" port_up "$T/pf.out"
ctl jail stop pf 1000 >/dev/null
wait_exit $PF
is "jail port ends with its jail, with status 0" "$ST" 0
like "saying so" "$(cat "$T/pf.out")" "jail 'pf' ended: forwarding stopped"
out=$(ctl jail port pf 8080 0 2>&1)
is "jail port of an exited jail fails" "$?" 1
like "saying so" "$out" "jail 'pf' is exited: only a running jail's ports can be reached"
ctl jail rm pf >/dev/null
ctl jail run --name pf --rootfs "$R" -- /bin/sleep 60 >/dev/null
ctl jail port pf 8080 0 >"$T/pf.out" 2>&1 &
PF=$!
port_up "$T/pf.out"
kill -KILL "$AGTD_PID"
wait "$AGTD_PID" 2>/dev/null
AGTD_PID=
wait_exit $PF
is "jail port ends when agtd goes away, with status 1" "$ST" 1
like "saying so" "$(cat "$T/pf.out")" "forwarding to jail 'pf' stopped"
agtd_start
