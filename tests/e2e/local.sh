#!/usr/bin/env bash
# Target local as a new user meets it: agt up starts a private agtd (its own socket, state,
# cgroup and log); a jail run from a project directory works on it, and says so with its
# network policy in its first lines; a directory agtd cannot see is refused with the config
# lines that fix it; opencode's default allowlist; NO_PROXY and no_proxy kept the same;
# --quiet keeps the pid; agt down stops agtd, agt delete removes its state; the Lima-only
# commands say what to do instead; --help works for every command here.
#
# Needs root and Linux (agtd).  A missing prerequisite is a failure ("Bail out!").
set -u

: "${PROBE:?PROBE must name the static probe binary (meson sets it)}"
LOCAL_TEST=local
. "$(dirname "${BASH_SOURCE[0]}")/local-lib.sh"
[ -x "$PROBE" ] || bail "no probe at $PROBE"
exec </dev/null

local_config
mkdir -p "$T/elsewhere"
agt() { "$AGT" "$@"; }

# --- agt up, quiet: the pid is a result, not progress
run agt -q up
is "agt -q up starts agtd" "$RC" 0
like "and still says which pid, and how to stop it" "$OUT" "^agtd started \(pid [0-9]+\); 'agt down' stops it$"
is "with no progress lines" "$ERR" ""
sed "s|@PROBE@|$PROBE|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$T/test-rootfs.yaml"
run agt rootfs build --no-download "$T/test-rootfs.yaml"
[ "$RC" = 0 ] || bail "the test rootfs did not build: $ERR"

# --- the workspace: the current directory, where agtd can see it
cd "$T/projects/app" || bail "cd"
echo from-the-project >marker
run agt jail run --name w1 -- /bin/sh -c 'cat /work/marker; echo "NO=$NO_PROXY no=$no_proxy"'
is "agt jail run in a project directory: the agent works on it" "$(printf '%s\n' "$OUT" | head -1)" from-the-project
is "the run's first line names the workspace" "$(printf '%s\n' "$ERR" | head -1)" \
  "agt: jail w1: workspace $T/projects/app (at /work)"
like "the next one the network policy" "$(printf '%s\n' "$ERR" | sed -n 2p)" \
  "^agt: network: allow, but no host is allowed \(agents.shell.allow is empty; --allow HOST\[:PORT\] adds one\)$"
like "NO_PROXY and no_proxy are agtd's, the same" "$OUT" "^NO=localhost,127.0.0.1,::1 no=localhost,127.0.0.1,::1$"
run agt jail run --name w2 --env NO_PROXY=localhost,::1 -- /bin/sh -c 'echo "NO=$NO_PROXY no=$no_proxy"'
is "setting NO_PROXY sets no_proxy the same" "$OUT" "NO=localhost,::1 no=localhost,::1"
run agt jail run --name w3 --env no_proxy=example.com -- /bin/sh -c 'echo "NO=$NO_PROXY no=$no_proxy"'
is "and the other way round" "$OUT" "NO=example.com no=example.com"
run agt jail run --name w4 --env NO_PROXY=a --env no_proxy=b -- true
is "both, different: refused" "$RC" 2
like "saying why" "$ERR" "sets NO_PROXY and no_proxy to different values: set one"
run agt -q jail run --name w5 -- /bin/sh -c 'echo quiet'
is "--quiet drops the first lines" "$ERR" ""
# a workspace of root's: the jail's user is never root, so it may only read it; said at start
mkdir "$T/projects/roots"
cd "$T/projects/roots" || bail "cd"
run agt jail run --name w7 -- /bin/sh -c 'touch /work/x'
is "in a workspace of root's the agent cannot write" "$RC" 1
is "the run's second line says so, and the fix" "$(printf '%s\n' "$ERR" | sed -n 2p)" \
  "agt: the workspace is root's: the jail's user, never root, can read it but not write it ('chown USER $T/projects/roots' and the jail runs as USER)"
chmod 777 "$T/projects/roots"
run agt jail run --name w8 -- /bin/sh -c 'touch /work/x'
is "one others may write: the agent writes it" "$RC" 0
unlike "and nothing is said" "$ERR" "workspace is root's"

# --- agt doctor as a user agtd's socket refuses: each fix says to run agt as root
install -m 755 "$AGT" "$T/agt-copy" # the build tree may be closed to that user
install -d -o nobody "$T/nobody"     # its cache
run runuser -u nobody -- env XDG_CACHE_HOME="$T/nobody" "$T/agt-copy" doctor
is "agt doctor as nobody: checks fail" "$RC" 1
ROW=$(printf '%s\n' "$OUT" | grep -A1 -E '^local +agtd +FAIL')
like "agtd's row says the socket refused it" "$ROW" "Permission denied: agt may not use agtd's socket"
like "and to run agt as root" "$ROW" "^ +fix: run agt as root: agtd's socket is root's$"
ROW=$(printf '%s\n' "$OUT" | grep -A1 -E '^guest +namespaces +FAIL')
like "the rows of the checks' script say what stopped it" "$ROW" \
  "the checks' script failed \(exit [0-9]+\): [^ ]"
like "and to run agt as root" "$ROW" \
  "^ +fix: run agt as root: these checks run as root, through sudo -n when agt is not$"

cd "$T/elsewhere" || bail "cd"
run agt jail run --name w6 -- true
is "a directory agtd cannot see: refused, a usage error" "$RC" 2
like "saying the agent would get an empty /work" "$ERR" \
  "^agt: the current directory '$T/elsewhere' is not where agtd can see it \(target local: agtd takes workspaces under /home, /Users, $T/projects, $T/state/workspaces\), so the agent would get an empty /work"
like "with the config lines that fix it" "$ERR" "^        - location: $T$"
like "and how to apply them" "$ERR" "restart agtd \('agt down && agt up'\)"
cd "$T/projects" || bail "cd"
run agt jail run --name w6 -- true
is "a workspace root itself: refused" "$RC" 2
like "saying why" "$ERR" "'$T/projects' is one of agtd's workspace roots"
run agt jail run --name w6 --workspace "$T/elsewhere" -- true
is "--workspace outside the roots: refused too" "$RC" 2
like "naming it" "$ERR" "^agt: --workspace '$T/elsewhere' is not where agtd can see it"
is "no jail was made by the refusals" "$(agt jail ls --json | grep -c '"w[46]"')" 0

# --- opencode's default allowlist, said at start; the config removes an entry
cd "$T/projects/app" || bail "cd"
run agt jail create --name oc1 opencode -- --model test/x
like "opencode's policy: its provider, its model catalogue, the npm registry" "$ERR" \
  "^agt: network: allow, through agtd's proxy, to opencode.ai:443, models.opencode.ai:443, registry.npmjs.org:443 \(agents.opencode.allow"
like "-- ARGS after the agent go after its command" "$(agt jail inspect oc1 | tr -d ' \n')" \
  '"argv":\["opencode","serve","--hostname","127.0.0.1","--port","4096","--model","test/x"\]'
like "agt config show lists them as defaults" "$(agt config show)" \
  "- registry.npmjs.org:443 +# default: the npm packages opencode installs$"
cp "$T/config.yaml" "$T/config-no-npm.yaml"
printf 'agents:\n  opencode:\n    allow:\n      - "!registry.npmjs.org:443"\n' >>"$T/config-no-npm.yaml"
run agt --config "$T/config-no-npm.yaml" jail create --name oc2 opencode
like "\"!HOST\" in agents.NAME.allow removes a default" "$ERR" \
  "to opencode.ai:443, models.opencode.ai:443 \(agents"
like "and agtd gets the list without it" "$(agt jail inspect oc2 | tr -d ' \n')" \
  '"allow":\["opencode.ai:443","models.opencode.ai:443"\]'
agt jail rm oc1 >/dev/null
agt jail rm oc2 >/dev/null

# --- conventions of docker and podman
run agt jail run --rm --name rm1 -- /bin/sh -c 'echo gone-after'
is "agt jail run --rm: the command's output" "$OUT" gone-after
is "and the jail is removed when it exits" "$(agt jail ls -q | grep -c '^rm1$')" 0
run agt jail run --rm --name rm2 -- busybox wget -q -O /dev/null http://agt-refused.example/
like "--rm: the proxy's refusal said when the jail ends" "$ERR" \
  "^agt: jail rm2: its network proxy refused 1 connection, the first to agt-refused\.example:80 \(host not on the jail's allowlist\); --allow"
unlike "without pointing at 'agt jail net' for a jail removed" "$ERR" "agt jail net rm2"
run agt jail run --rm -d -- true
is "--rm with -d: a usage error" "$RC" 2
run agt jail run -d --name c1 --cpus 1.5 -- sleep 300
like "--cpus 1.5: a limit of 1500 thousandths of a core" "$(agt jail inspect c1 | tr -d ' \n')" '"cpu":1500'
run agt jail run -d --name c2 --cpus 1.2345 -- true
is "--cpus with more than three decimals: a usage error" "$RC" 2
# A limit out of agtd's bounds (common/jailspec.h) is refused by agt before it asks agtd,
# naming the flag, or the config file and its line.
run agt jail run -d --name c4 --memory 4M -- true
is "--memory below agtd's least: a usage error" "$RC" 2
like "naming the flag and the bound" "$ERR" "agt: jail run: --memory must be at least 8 MiB"
printf 'jail:\n  limits:\n    nofile: 8\n' >"$T/bad-limits.yaml"
run agt --config "$T/bad-limits.yaml" jail run -d --name c5 -- true
like "jail.limits out of bounds: named with its file and line" "$ERR" \
  "$T/bad-limits.yaml:3:13: jail.limits.nofile must be at least 16"
is "and no jail was made" "$(agt jail ls -q | grep -c '^c[45]$')" 0
agt jail run -d --name c3 -- sleep 300 >/dev/null
run agt jail ls -q
like "agt jail ls -q: the names only" "$OUT" "^c1$"
unlike "without the header" "$OUT" "^NAME"
t0=$(date +%s)
run agt jail stop -t 1 c1 c3
is "agt jail stop -t SECONDS of two jails" "$RC" 0
like "says each one's state" "$OUT" "^c1: exited"
like "the other's too" "$OUT" "^c3: exited"
check "within the grace given (sleep ignores nothing: SIGTERM ends it)" test $(($(date +%s) - t0)) -le 5
run agt jail inspect c1 --json
is "an option after the operand (agt jail inspect NAME --json)" "$RC" 0
run agt jail logs w1 --since 0
is "agt jail logs NAME --since 0, options after the name" "$OUT" "$(printf 'from-the-project\nNO=localhost,127.0.0.1,::1 no=localhost,127.0.0.1,::1')"
run agt jail logs --offset 17 w1
is "agt jail logs --offset BYTES: from that byte" "$OUT" "NO=localhost,127.0.0.1,::1 no=localhost,127.0.0.1,::1"
run agt rootfs ls -q
like "agt rootfs ls -q: the ids only" "$OUT" '^[0-9a-f]{64}$'
run agt jail rm c1 no-such c3
is "agt jail rm of several names, one missing: a failure" "$RC" 1
like "saying which" "$ERR" "no-such"
like "the others removed" "$OUT" "^c1 removed$"
like "all of them" "$OUT" "^c3 removed$"
run agt jail prune
is "agt jail prune without a terminal to ask on: refused" "$RC" 2
run agt jail prune --force
is "agt jail prune --force" "$RC" 0
like "removes the exited jails" "$OUT" "^w1 removed$"
is "none is left" "$(agt jail ls -q)" ""
run agt version
like "agt version" "$OUT" "^agt [0-9]"
run agt help jail run
like "agt help jail run is its --help" "$OUT" "^usage: agt jail run"
run agt jial ls
is "a mistyped command: a usage error" "$RC" 2
like "with a suggestion" "$ERR" "unknown command 'jial': did you mean 'agt jail'\?"
run agt jail lss
like "a mistyped subcommand too" "$ERR" "did you mean 'agt jail ls'\?"
run agt jail ls --jsno
like "and a mistyped option, naming the command" "$ERR" "^agt: jail ls: unknown option '--jsno' \(did you mean --json\?\)"
run agt completion --zsh
like "the command's name is its words, not its operands" "$ERR" "^agt: completion: unknown option '--zsh'"
run agt down --forse
like "and an alias is named as typed" "$ERR" "^agt: down: unknown option '--forse' \(did you mean --force\?\)"

# --- the Lima-only commands say what to do instead; --help works for every command
for cmd in up stop down delete reset clone shell status template config jail rootfs verify doctor; do
  run agt "$cmd" --help
  if [ "$RC" = 0 ] && printf '%s\n' "$OUT" | grep -q '^usage: agt'; then
    ok "agt $cmd --help on target local prints its usage"
  else
    not_ok "agt $cmd --help on target local prints its usage (rc $RC: $ERR)"
  fi
done
run agt reset
is "agt reset on local: a usage error" "$RC" 2
like "saying what to do instead" "$ERR" "'agt delete' removes agtd's state"
run agt clone gold
like "agt clone on local says what is an image here" "$ERR" "the jails' root filesystems are the images"
run agt shell
like "agt shell on local says where a jail's shell is" "$ERR" "'agt jail exec NAME -- sh'"

# --- an agent's key is never on disk in agtd's state; it outlives agtd's restarts (the
# kernel's keyring), and when the VM's restart took it, agt jail start gives agt's value again
# tests/keyctl.py works: this process can add a key (no kernel keyring, or a seccomp
# filter refusing the calls, as in some containers: skipped)
if [ -r /proc/keys ] && python3 "$SRCDIR/tests/keyctl.py" works; then
  mkdir -p "$T/agents"
  cat >"$T/agents/keyed.yaml" <<'PROFILE'
name: keyed
description: a shell that shows its key
runtime: none
command: [/bin/sh, -c, 'echo "key=$AGT_E2E_KEY"']
env:
  key: AGT_E2E_KEY
PROFILE
  KV=key-$$-$RANDOM$RANDOM
  AGT_E2E_KEY=$KV run agt jail run --name keyed keyed
  is "an agent's key from agt's environment reaches it" "$OUT" "key=$KV"
  is "and is not in agtd's state on disk" "$(grep -rlF "$KV" "$T/state" | grep -vc '/console.log')" 0
  agt down >/dev/null
  agt up >/dev/null
  run env -u AGT_E2E_KEY "$AGT" jail start -a keyed
  is "after agtd restarted, the jail started again still has it" "$OUT" "key=$KV"
  # what a reboot of the VM does to the keyring: the key is gone
  agt down >/dev/null
  id=$(awk -v d="agt-jail-secrets:$T/state/jails/keyed:" 'index($0, d) && $2 !~ /[iRD]/ { print $1 }' /proc/keys)
  python3 "$SRCDIR/tests/keyctl.py" invalidate "$id" || not_ok "could not invalidate the key '$id'"
  agt up >/dev/null
  like "agt jail inspect names the key whose value is gone" "$(agt jail inspect keyed | tr -d ' \n')" \
    '"secrets_lost":\["AGT_E2E_KEY"\]'
  run env -u AGT_E2E_KEY "$AGT" jail start -a keyed
  is "without it in agt's environment the jail starts without it" "$OUT" "key="
  like "and agt says so" "$ERR" "^agt: jail keyed: the VM restarted since it was made and took the value of AGT_E2E_KEY, which agt's environment does not have: it starts without it$"
  AGT_E2E_KEY=$KV-again run agt jail start -a keyed
  is "with it, agt jail start gives it agt's value" "$OUT" "key=$KV-again"
  is "and it is no longer lost" "$(agt jail inspect keyed | grep -c secrets_lost)" 0
  agt down >/dev/null
  agt up >/dev/null
  run env -u AGT_E2E_KEY "$AGT" jail start -a keyed
  is "which agtd keeps again across its restarts" "$OUT" "key=$KV-again"
  agt jail rm keyed >/dev/null
else
  ok "an agent's key across agtd's restarts # SKIP this machine gives agtd no keyring"
fi

# --- agt down stops agtd; agt delete removes its state
agt jail run -d --name bg -- sleep 300 >/dev/null
PID=$(agtd_pid)
run agt down
is "agt down stops agtd" "$RC" 0
like "saying so, and that its running jail goes on" "$OUT" \
  "^agtd \(pid $PID\) stopped; its 1 running jail goes on under its keeper, and 'agt up' finds it again"
check "agtd is gone" sh -c "! kill -0 $PID 2>/dev/null"
check "and its socket answers no more" sh -c "! '$AGT' jail ls >/dev/null 2>&1"
run agt status
is "agt status with agtd stopped: a failure" "$RC" 1
is "its table says agtd does not answer, once" "$(grep '^agtd:' <<<"$OUT")" "agtd:    not answering (why: below, on stderr)"
like "and stderr says why" "$ERR" "^agt: agtd: .*agtd is not running; 'agt up' starts it$"
run agt stop
is "agt stop on local, agtd stopped already: fine" "$RC" 0
like "saying so" "$OUT" "^agtd is not running"
run agt delete --force
is "agt delete with agtd down and jails in its state: refused" "$RC" 1
like "saying why and what to do" "$ERR" "which may still run under their keepers: 'agt up', then 'agt delete' again"
run agt jail ls
is "a command needing agtd, with none running, fails" "$RC" 1
like "saying to run agt up" "$ERR" "agt up"
run agt up
is "agt up starts it again" "$RC" 0
like "and finds the jail still running" "$(agt jail ls)" '^bg +shell +running'
run agt delete
is "agt delete without a terminal to ask on: refused" "$RC" 2
like "saying to use --force" "$ERR" "no terminal to ask on, use --force"
check "the state is still there" test -d "$T/state/rootfs"
run agt delete --force
is "agt delete --force removes agtd's state" "$RC" 0
like "saying what it removed" "$OUT" "^agtd's state '$T/state' deleted \([0-9.]+ MiB on disk\)"
like "and what it kept: agtd's log" "$OUT" "; its log '$T/agtd.log' is kept; 'agt up' starts afresh$"
check "which is there" test -s "$T/agtd.log"
like "removing the jails first (they outlive agtd)" "$ERR" "^agt: [0-9]+ jails? removed$"
check "agtd is stopped" test -z "$(agtd_pid)"
check "and the state directory gone" test ! -e "$T/state"
check "the project's files are untouched" test -f "$T/projects/app/marker"

# --- errors say what to do: a missing rootfs names the command that builds it
run agt up
is "agt up on a fresh state" "$RC" 0
run agt jail run --rootfs default -- true
is "a run on a rootfs not built yet fails" "$RC" 1
like "naming the command that builds it, with a manifest path that works from anywhere" "$ERR" \
  "no rootfs 'default' in '$T/state/rootfs': build it: 'agt rootfs build $SRCDIR/rootfs/default.yaml'"
run agt jail run -- true
like "another rootfs: how to build or pick one" "$ERR" "no rootfs 'test' .*'agt rootfs ls', --rootfs REF, jail.rootfs"
run agt rootfs build
is "agt rootfs build without a manifest: a usage error" "$RC" 2
like "naming the default rootfs's manifest, as a path that works from anywhere" "$ERR" \
  "MANIFEST \(the default rootfs: build it: 'agt rootfs build $SRCDIR/rootfs/default.yaml'\)$"
run agt down
is "agt down at the end" "$RC" 0
