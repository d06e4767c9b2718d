#!/usr/bin/env bash
# Agent homes, mounts and lockdown through agt, target local: a login written into $HOME
# is there in the next jail of the agent; agt agents home shows the home and --reset empties
# it (asking first); jail.mounts (the user's file, then the repository's overlay, which may
# mount only its own files) and --add-dir bind directories read-only unless said, and a bad
# one is refused naming the file:line or the flag; --lockdown passes no variable, makes no
# mount, reaches only the agent's own default hosts, starts each run with the clean home its
# profile names (clean_home) and nothing of the persistent one, and leaves nothing behind.
#
# Needs root and Linux (agtd).  A missing prerequisite is a failure ("Bail out!").
set -u

: "${PROBE:?PROBE must name the static probe binary (meson sets it)}"
LOCAL_TEST=homes
. "$(dirname "${BASH_SOURCE[0]}")/local-lib.sh"
[ -x "$PROBE" ] || bail "no probe at $PROBE"
exec </dev/null

P=$T/projects
mkdir -p "$P/app/.git" "$P/app/.agt" "$P/app/shared" "$P/data" "$P/rw" "$P/extra"
chmod 777 "$P/app" "$P/rw" "$P/data" "$P/app/shared"
echo data-file >"$P/data/f"
echo shared-file >"$P/app/shared/f"
echo extra-file >"$P/extra/f"
cat >"$T/config.yaml" <<CFG
agtd:
  socket: $T/agtd.sock
vm:
  mounts:
    - location: $P
      writable: true
jail:
  rootfs: test
  env:
    - SECRET_TOKEN
  mounts:
    - $P/data
    - path: $P/rw
      writable: true
agents:
  shell:
    allow:
      - example.com
CFG
cat >"$P/app/.agt/config.yaml" <<CFG
jail:
  mounts:
    - shared
CFG
export SECRET_TOKEN=s3cr3t-value
agt() { "$AGT" "$@"; }

run agt -q up
[ "$RC" = 0 ] || bail "agt up failed: $ERR"
sed "s|@PROBE@|$PROBE|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$T/test-rootfs.yaml"
run agt rootfs build --no-download "$T/test-rootfs.yaml"
[ "$RC" = 0 ] || bail "the test rootfs did not build: $ERR"
cd "$P/app" || bail "cd"

# --- persistent homes (jail.home: persistent, the default) --------------------------
run agt jail run --rm -- /bin/sh -c 'echo login-1 > "$HOME/login.json"; echo "S=$SECRET_TOKEN"'
is "a jail writes its login into its home" "$RC" 0
is "(a normal jail gets jail.env)" "$OUT" "S=s3cr3t-value"
run agt jail run --rm -- /bin/sh -c 'cat "$HOME/login.json"'
is "the next jail of the same agent finds it" "$OUT" login-1

run agt agents home shell
is "agt agents home shell" "$RC" 0
like "names the home on the target" "$OUT" "^home of [a-z0-9._-]+'s shell: $T/state/(layers/\\.homes|homes)/[a-z0-9._-]+/shell$"
like "its size and files" "$OUT" "^size: .* in 1 file$"
like "and lists them" "$OUT" "^  login.json$"
run agt agents home --json shell
like "--json gives agtd's answer" "$OUT" '"files": 1'
run agt agents home opencode
like "an agent never run has no home yet" "$OUT" "not made yet"
run agt agents home --reset shell
is "--reset without a terminal and without -y is refused" "$RC" 2
like "saying how" "$ERR" "no terminal to ask on, use -y"
run agt jail run --rm -- /bin/sh -c 'cat "$HOME/login.json"'
is "... and the login is still there" "$OUT" login-1
run agt agents home --reset -y shell
is "--reset -y empties it" "$RC" 0
like "saying what went" "$OUT" "emptied: 1 files"
run agt jail run --rm -- /bin/sh -c 'ls -A "$HOME"'
is "the next jail's home is empty" "$OUT" ""
run agt agents home "../x"
is "a bad agent name is refused" "$RC" 2
run agt agents home nosuch
is "a name that is no agent's profile is refused" "$RC" 1
like "saying so, not that its home is not made yet" "$ERR" "no agent profile 'nosuch', nor a home of it"

# --- mounts ---------------------------------------------------------------------------
run agt jail run --rm --add-dir "$P/extra" -- /bin/sh -c "
  cat $P/data/f $P/app/shared/f $P/extra/f
  echo w > $P/rw/out && echo rw-ok
  { echo w > $P/data/new; } 2>/dev/null || echo ro-refused
  { echo w > $P/app/shared/new; } 2>/dev/null || echo overlay-ro-refused"
is "jail.mounts, the overlay's and --add-dir are all in the jail" \
  "$(printf '%s\n' "$OUT" | head -3 | tr '\n' ' ')" "data-file shared-file extra-file "
like "a writable mount takes writes" "$OUT" "rw-ok"
like "a mount is read-only unless said" "$OUT" "ro-refused"
like "the overlay's mount too" "$OUT" "overlay-ro-refused"
is "the write reached the directory" "$(cat "$P/rw/out")" w
like "the run says which mounts it has, and from where" "$ERR" \
  "agt: jail shell-[0-9a-f]+: $P/app/shared at the same path, read-only \\(jail.mounts \\($P/app/.agt/config.yaml:3:7\\)\\)"
like "... and the flag's" "$ERR" "$P/extra at the same path, read-only \\(--add-dir\\)"

run agt jail run --rm --add-dir "$P/nope" -- true
is "a missing --add-dir is refused" "$RC" 1
like "naming the flag and the path" "$ERR" "--add-dir '$P/nope': No such file or directory"
run agt jail run --rm --add-dir /var -- true
like "a path agtd refuses names the flag that asked for it" "$ERR" "mounts\\[3\\].*not under a workspace root.*\\(the mount from --add-dir\\)"
chmod 777 "$P/extra"
run agt jail run --rm --add-dir "$P/extra:rw" -- /bin/sh -c "echo w > $P/extra/rw-ok && echo ok"
is "--add-dir PATH:rw is writable" "$OUT" ok

cp "$T/config.yaml" "$T/config.good"
sed -i "s|^    - $P/data\$|&\n    - $P/missing|" "$T/config.yaml"
run agt jail run --rm -- true
like "a missing jail.mounts path names its file:line:column" "$ERR" \
  "jail.mounts \\($T/config.yaml:[0-9]+:[0-9]+\\) '$P/missing': No such file or directory"
cp "$T/config.good" "$T/config.yaml"
printf 'jail:\n  mounts:\n    - ~/.ssh\n' >"$P/app/.agt/config.yaml"
run agt jail run --rm -- true
is "an overlay mounting outside its repository is refused" "$RC" 2
like "naming the line and why" "$ERR" \
  "$P/app/.agt/config.yaml:3:7: 'jail.mounts' entry '~/.ssh' is outside the repository"
printf 'jail:\n  mounts:\n    - ../data\n' >"$P/app/.agt/config.yaml"
run agt jail run --rm -- true
is "... through '..' too" "$RC" 2
printf 'jail:\n  mounts:\n    - shared\n' >"$P/app/.agt/config.yaml"
run agt config show
like "agt config show lists jail.mounts with their origins" "$OUT" \
  "^    - path: $P/app/shared +# $P/app/.agt/config.yaml:3:7$"

# --- lockdown -------------------------------------------------------------------------
run agt jail run --lockdown --name lock1 -- /bin/sh -c '
  echo "S=${SECRET_TOKEN:-}"
  ls '"$P"'/data 2>&1 | head -1
  echo "lockdown-$((6 * 7))-home" > "$HOME/mark" && [ -s "$HOME/mark" ] && echo home-written
  wget -q -O /dev/null http://example.com/ 2>&1; echo "wget=$?"'
is "a lockdown jail runs" "$RC" 0
like "it gets no secret variable of jail.env" "$OUT" "^S=$"
like "no configured mount" "$OUT" "No such file or directory"
like "its home is writable while it runs" "$OUT" "^home-written$"
like "agt says what it left out" "$ERR" "lockdown: the 1 variable of jail.env not passed"
like "... the mounts" "$ERR" "lockdown: the 3 mounts of jail.mounts not made"
like "... and the hosts of the config" "$ERR" "lockdown: 1 host of agents.shell.allow from the config not allowed"
run agt jail net lock1
like "a host outside the agent's defaults is refused" "$OUT" "example.com.*not on the jail's allowlist"
is "nothing it wrote into its home is left after it exits" \
  "$(grep -rl 'lockdown-42-home' "$T/state" 2>/dev/null | wc -l)" 0
run agt jail inspect --json lock1
like "the jail is a lockdown one" "$OUT" '"lockdown": true'
like "with an ephemeral home" "$OUT" '"home": "ephemeral"'
agt jail rm lock1 >/dev/null

run agt jail run --name open1 -- /bin/sh -c 'wget -q -O /dev/null http://example.com/ 2>&1; true'
run agt jail net open1
unlike "(without lockdown the same host is not refused by the allowlist)" "$OUT" "not on the jail's allowlist"
agt jail rm open1 >/dev/null

run agt jail create --lockdown --name lock2 opencode
run agt jail inspect --json lock2
like "lockdown opencode reaches only its default hosts" "$(printf '%s' "$OUT" | tr -d ' \n')" \
  '"allow":\["opencode.ai:443","models.opencode.ai:443","registry.npmjs.org:443"\]'
agt jail rm lock2 >/dev/null

# A lockdown home is staged from the profile's clean copy (clean_home) at every start: the
# agent sees those files, the jail user's, and nothing of its persistent home, which the
# run leaves as it was.  A profile of the user's (beside the config) names them.
mkdir -p "$T/agents"
cat >"$T/agents/locked.yaml" <<'PROFILE'
name: locked
description: a shell whose clean home holds two settings files
runtime: none
command: [/bin/sh]
home: [.locked]
clean_home:
  - path: .locked.json
    content: |
      {"hasCompletedOnboarding": true}
  - path: .locked/conf/settings.toml
    content: |
      update_check = false
PROFILE
run agt jail run --rm locked -- -c 'mkdir -p "$HOME/.locked" && echo persistent-token > "$HOME/.locked/token" && echo ok'
is "(a normal run of the profile keeps a token in its persistent home)" "$OUT" ok
run agt jail run --lockdown --name lock3 locked -- -c '
  cd "$HOME" && find . | sort
  cat .locked.json .locked/conf/settings.toml
  stat -c "%a %u" .locked .locked/conf .locked/conf/settings.toml .locked.json | sort -u
  id -u
  echo changed > .locked.json; echo new > extra'
want_home='. ./.locked ./.locked.json ./.locked/conf ./.locked/conf/settings.toml {"hasCompletedOnboarding": true} '
is "a lockdown jail runs with its clean home" "$RC" 0
is "its home holds the profile's clean_home files, and nothing of the persistent home" \
  "$(printf '%s\n' "$OUT" | head -6 | tr '\n' ' ')" "$want_home"
like "... with their content" "$OUT" "^update_check = false$"
uid=$(printf '%s\n' "$OUT" | tail -1)
is "... directories 0700 and files 0600, the jail user's" \
  "$(printf '%s\n' "$OUT" | sed -n '8,9p' | tr '\n' ' ')" "600 $uid 700 $uid "
like "agt says how many files the throwaway home got" "$ERR" \
  "lockdown: a throwaway home \\(2 files of the profile's clean_home\\)"
run agt jail start --attach lock3
is "the next start of the jail stages the clean copy again (what the run changed is gone)" \
  "$(printf '%s\n' "$OUT" | head -6 | tr '\n' ' ')" "$want_home"
agt jail rm lock3 >/dev/null
run agt agents home locked
like "the persistent home is untouched: its token" "$OUT" "^  \\.locked/token$"
unlike "... and nothing of the lockdown runs" "$OUT" "extra|\\.locked\\.json|settings\\.toml"
is "... its content as it was" \
  "$(cat "$T"/state/*/.homes/*/locked/.locked/token "$T"/state/homes/*/locked/.locked/token 2>/dev/null)" \
  persistent-token
# jail.agent names any profile that loads, the user's own too
cp "$T/config.yaml" "$T/config.good"
sed -i 's/^jail:$/jail:\n  agent: locked/' "$T/config.yaml"
run agt jail run --name ja1 -- /bin/sh -c 'cat "$HOME/.locked/token"'
is "jail.agent may name a profile of the user's" "$OUT" persistent-token
run agt jail inspect --json ja1
like "... whose jail it is" "$OUT" '"agent": "locked"'
agt jail rm ja1 >/dev/null
sed -i 's/^  agent: locked$/  agent: nosuch/' "$T/config.yaml"
run agt jail run --rm -- true
is "an unknown jail.agent is refused" "$RC" 2
like "... naming the config's file:line:column, the agents and where a profile goes" "$ERR" \
  "jail.agent \\($T/config.yaml:[0-9]+:10\\): no agent profile 'nosuch' \\(agents: .*locked.*\\); a profile of your own goes in $T/agents/nosuch.yaml"
sed -i 's/^  agent: nosuch$/  agent: node/' "$T/config.yaml"
run agt jail run --rm -- true
like "a runtime profile is not an agent" "$ERR" "jail.agent \\($T/config.yaml:[0-9]+:10\\): not an agent but a runtime: 'node'"
run agt jail run --rm shell -- -c 'echo flag-wins'
is "an agent named on the command line still wins over jail.agent" "$OUT" flag-wins
cp "$T/config.good" "$T/config.yaml"
printf '  - path: .locked.json\n    content: again\n' >>"$T/agents/locked.yaml"
run agt jail run --lockdown --rm locked -- -c true
is "a profile naming a clean_home file twice is refused" "$RC" 2
like "... naming its file:line:column" "$ERR" \
  "$T/agents/locked.yaml:[0-9]+:11: clean_home\\[2\\]: '\\.locked\\.json' clashes with '\\.locked\\.json'"
rm "$T/agents/locked.yaml"
# agtd checks home_files itself (a client other than agt): each refused, naming why
bad_home_files() { # PARAMS-JSON: the error agtd answers jail.create with
  python3 - "$T/agtd.sock" "$1" <<'PY'
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
def call(i, method, params):
    data = json.dumps({"id": i, "method": method, "params": params}).encode()
    s.sendall(struct.pack(">I", len(data)) + data)
    hdr = s.recv(4, socket.MSG_WAITALL)
    body = b""
    while len(body) < struct.unpack(">I", hdr)[0]:
        body += s.recv(65536)
    return json.loads(body)
call(1, "hello", {"version": 1})
r = call(2, "jail.create", json.loads(sys.argv[2]))
print(r.get("error", {}).get("message", "created: %s" % r.get("result", {}).get("name")))
PY
}
hf() { printf '{"name": "hf", "rootfs": "test", "workspace": "%s", %s}' "$P/app" "$1"; }
like "agtd: home_files without an ephemeral home are refused" \
  "$(bad_home_files "$(hf '"home_files": [{"path": "a", "content": "x"}]')")" \
  "'home_files' go with an ephemeral 'home' only"
for path in ../x /etc/passwd a//b a/./b ""; do
  like "agtd: a home file '$path' is refused" \
    "$(bad_home_files "$(hf '"lockdown": true, "home_files": [{"path": "'"$path"'", "content": "x"}]')")" \
    "home_files\\[0\\] '.*' must be"
done
like "agtd: a file where another needs a directory is refused" \
  "$(bad_home_files "$(hf '"lockdown": true, "home_files": [{"path": "a", "content": "x"}, {"path": "a/b", "content": "y"}]')")" \
  "home_files\\[1\\] 'a/b' clashes with 'a'"
big=$(head -c 70000 /dev/zero | tr '\0' x)
like "agtd: a file over 64 KiB is refused" \
  "$(bad_home_files "$(hf '"lockdown": true, "home_files": [{"path": "a", "content": "'"$big"'"}]')")" \
  "home_files\\[0\\] 'a' is too large"

for flag in "--env A=b" "--add-dir $P/extra" "--allow example.org" "--net open"; do
  # shellcheck disable=SC2086  # the flag and its value are two words
  run agt jail run --lockdown $flag -- true
  like "--lockdown refuses ${flag%% *}" "$ERR" "${flag%% *}( open)? with --lockdown"
done
