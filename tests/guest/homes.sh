#!/usr/bin/env bash
# Agent homes, lockdown and mounts (guest/jail/home.h, guest/jail/jail_mounts.c): a persistent home
# outlives its jails and is shared by two at once; an ephemeral one leaves nothing behind;
# mounts are read-only unless asked, through every mount below them, and bad paths are
# refused with what and where.
. "$(dirname "$0")/lib.sh"

agtd_start
build_test_rootfs
R=$TEST_ROOTFS

run() { ctl jail run --rootfs "$R" "$@" >/dev/null; }
waitj() { ctl --json jail wait "$1" | grep -o '"exit_code": [0-9]*' | grep -o '[0-9]*$'; }

# --- persistent homes ---------------------------------------------------------------
run --name p1 --agent shell --home persistent --user alice -- /bin/sh -c \
  'echo token-1 > "$HOME/login.json" && mkdir -p "$HOME/.cfg" && echo s > "$HOME/.cfg/settings"'
is "a jail writes into its persistent home" "$(waitj p1)" 0
ctl jail rm p1 >/dev/null
out=$(ctl home inspect alice shell)
like "home.inspect lists the home's files once its jail is gone" "$out" '"login.json"'
like "home.inspect says where the home is, on agtd's disk" "$out" "\"path\": \"$STATE/(layers/\\.homes|homes)/alice/shell\""
like "home.inspect counts the files" "$out" '"files": 2'
HOME_DIR=$(printf '%s\n' "$out" | sed -n 's/.*"path": "\(.*\)".*/\1/p' | head -1)
is "the home is a directory on the guest" "$(cat "$HOME_DIR/login.json" 2>/dev/null)" token-1

run --name p2 --agent shell --home persistent --user alice -- /bin/sh -c \
  'cat "$HOME/login.json" > /work/seen; id -u > /work/uid'
is "the next jail of the same user and agent starts" "$(waitj p2)" 0
is "... and finds the login the first one left" \
  "$(cat "$(ctl --json jail inspect p2 | sed -n 's/.*"workspace": "\(.*\)".*/\1/p')/seen")" token-1
owner=$(stat -c %u "$HOME_DIR")
is "the home belongs to the jail's user" \
  "$(cat "$(ctl --json jail inspect p2 | sed -n 's/.*"workspace": "\(.*\)".*/\1/p')/uid")" "$owner"

# a persistent home comes with a prepared jail's claim: such runs start warm too
warm() { ctl status | python3 -c "import json,sys; w=json.load(sys.stdin)['warm']; print(w['$1'])"; }
wait_ready() {
  for _ in $(seq 1 200); do
    [ "$(warm ready)" = "$(warm target)" ] && [ "$(warm ready)" != 0 ] && return 0
    sleep 0.05
  done
  return 1
}
check "agtd has prepared jails ready" wait_ready
out=$(ctl jail run --rootfs "$R" --name pw --home persistent --user alice -- /bin/sh -c \
  'cat "$HOME/login.json"; id -u; grep " /home/agent " /proc/self/mountinfo')
like "a jail with a persistent home takes a prepared jail" "$out" "^pw started in [0-9.]+ ms \(a prepared jail\)$"
waitj pw >/dev/null
logs=$(ctl jail logs pw)
like "... and finds its home there" "$logs" "^token-1$"
like "... as its user" "$logs" "^$owner$"
like "... nosuid and nodev" "$logs" " /home/agent [^ ]*nosuid,nodev"

run --name q1 --agent shell --home persistent --user bob -- /bin/sh -c \
  'ls -A "$HOME" > /work/ls'
waitj q1 >/dev/null
is "another user's home of the same agent is another, empty one" \
  "$(cat "$STATE/workspaces/q1/ls")" ""

# two jails of the same home at once: both write, nothing is lost
run --name c1 --agent shell --home persistent --user alice -- /bin/sh -c \
  'for i in $(seq 1 200); do echo "c1 $i" >> "$HOME/c1.log"; done; sleep 3'
run --name c2 --agent shell --home persistent --user alice -- /bin/sh -c \
  'for i in $(seq 1 200); do echo "c2 $i" >> "$HOME/c2.log"; done; sleep 3'
running=$(ctl --json jail ls | grep -c '"state": "running"')
is "two jails of the same user and agent run at once" "$running" 2
r=$(ctl home reset alice shell 2>&1)
like "home.reset is refused while a jail uses the home" "$r" "in use by jail 'c[12]'"
waitj c1 >/dev/null
waitj c2 >/dev/null
is "both wrote their files into the shared home" \
  "$(cat "$HOME_DIR/c1.log" "$HOME_DIR/c2.log" | wc -l)" 400
r=$(ctl home reset alice shell)
like "home.reset empties the home once no jail runs in it" "$r" '"removed_files": 4'
is "... which is empty then" "$(ls -A "$HOME_DIR")" ""
is "... and still the jail user's" "$(stat -c %u "$HOME_DIR")" "$owner"

# the jail's disk limit holds for its home too (a subvolume with a quota on the jails' disk)
run --name d1 --disk 16M --home persistent --user dora -- /bin/sh -c \
  'dd if=/dev/zero of="$HOME/fill" bs=1M count=48 > /work/dd 2>&1; echo "dd=$?" >> /work/dd'
waitj d1 >/dev/null
like "a jail cannot write more than its --disk into its persistent home" \
  "$(cat "$STATE/workspaces/d1/dd")" "Disk quota exceeded"
r=$(ctl jail run --rootfs "$R" --name bad1 --home persistent -- true 2>&1)
like "a persistent home without a user is refused" "$r" "needs 'user'"
r=$(ctl jail run --rootfs "$R" --name bad2 --home persistent --user ../x -- true 2>&1)
like "a user that is no name is refused" "$r" "home user"

# the home follows the jail's user: a workspace owner's uid, kept for root's workspaces,
# given to another owner (files and all), and back at the next start of the first jail
mkdir -p "$T/ws3000" "$T/ws3001"
chown 3000:3000 "$T/ws3000"
chown 3001:3001 "$T/ws3001"
run --name u1 --workspace "$T/ws3000" --home persistent --user erin -- /bin/sh -c \
  'echo mine > "$HOME/f"; id -u > /work/uid'
waitj u1 >/dev/null
EH=$(dirname "$HOME_DIR")/../erin/shell
is "a home made by a jail on a user's workspace is that user's" "$(stat -c %u "$EH")" 3000
run --name u2 --home persistent --user erin -- /bin/sh -c 'cat "$HOME/f"; id -u'
waitj u2 >/dev/null
is "a jail on a workspace of its own takes the home's user" \
  "$(ctl jail logs u2 | tr '\n' ' ')" "mine 3000 "
run --name u3 --workspace "$T/ws3001" --home persistent --user erin -- /bin/sh -c \
  'cat "$HOME/f" && echo more >> "$HOME/f" && echo wrote'
waitj u3 >/dev/null
is "a jail of another workspace owner gets the home, files and all" \
  "$(ctl jail logs u3 | tr '\n' ' ')" "mine wrote "
is "(owned by it now)" "$(stat -c %u "$EH/f")" 3001
ctl jail start u1 >/dev/null
waitj u1 >/dev/null
is "the first jail started again gets it back" "$(stat -c %u "$EH" "$EH/f" | sort -u)" 3000

# --- lockdown: an ephemeral home that leaves nothing ------------------------------------
run --name l1 --agent shell --lockdown -- /bin/sh -c \
  'echo "lockdown-marker-$((6 * 7))" > "$HOME/secret"; cat "$HOME/secret" > /work/back; mount | grep " /home/agent " > /work/mnt
   stat -c "%d %a %U" /home/agent /tmp > /work/devs; cat /proc/self/mountinfo > /work/mountinfo'
is "a lockdown jail runs" "$(waitj l1)" 0
is "its home is writable while it runs" "$(cat "$STATE/workspaces/l1/back")" lockdown-marker-42
like "its home is a tmpfs" "$(cat "$STATE/workspaces/l1/mnt")" 'tmpfs'
# a directory of the jail's one tmpfs, as /tmp is: no file system of its own
devs=$(cut -d' ' -f1 "$STATE/workspaces/l1/devs" | sort -u | wc -l)
is "its home is the same tmpfs as its /tmp (0700, the agent's)" \
  "$devs $(cut -d' ' -f2- "$STATE/workspaces/l1/devs" | tr '\n' ' ')" "1 700 agent 1777 root "
is "a lockdown jail mounts four file systems of its own" \
  "$(own_superblocks "$(cat "$STATE/workspaces/l1/mountinfo")")" "devpts overlay proc tmpfs "
is "nothing it wrote into its home is left on the guest after it exits" \
  "$(grep -rl lockdown-marker-42 "$STATE" 2>/dev/null | grep -v '/workspaces/l1/back$' | wc -l)" 0
like "jail.inspect says lockdown" "$(ctl --json jail inspect l1)" '"lockdown": true'
r=$(ctl jail run --rootfs "$R" --name l2 --lockdown --mount "$T" -- true 2>&1)
like "lockdown refuses mounts" "$r" "'lockdown' takes no 'mounts'"
r=$(ctl jail run --rootfs "$R" --name l3 --lockdown --net open -- true 2>&1)
like "lockdown refuses the open network" "$r" "not open"
r=$(ctl jail run --rootfs "$R" --name l4 --lockdown --home persistent --user alice -- true 2>&1)
like "lockdown refuses a persistent home" "$r" "ephemeral home"

# --- mounts ---------------------------------------------------------------------------
mkdir -p "$T/data/sub" "$T/rw"
echo ro-content >"$T/data/file"
echo single >"$T/one.txt"
# a mount below the read-only one: it must be read-only in the jail too
mount -t tmpfs -o size=1M tmpfs "$T/data/sub"
echo sub-content >"$T/data/sub/f"
# writable by anyone: what stops the jail's writes is the mount, not the permissions
chmod 777 "$T/data" "$T/data/sub" "$T/rw"
chmod 666 "$T/one.txt"
run --name m1 --mount "$T/data" --mount "$T/rw:rw" --mount "$T/one.txt" -- /bin/sh -c "
  cat $T/data/file > /work/read
  cat $T/one.txt > /work/one
  { echo x > $T/data/new; } 2> /work/ro-err; echo \$? > /work/ro-rc
  echo x > $T/data/sub/new 2>/dev/null; echo \$? > /work/sub-rc
  echo x > $T/one.txt 2>/dev/null; echo \$? > /work/one-rc
  mount -o remount,rw $T/data 2> /work/remount-err; echo \$? > /work/remount-rc
  umount $T/data 2>/dev/null; echo \$? > /work/umount-rc
  echo written > $T/rw/out"
W=$STATE/workspaces/m1
is "a jail with mounts runs" "$(waitj m1)" 0
umount "$T/data/sub"
is "a mount shows its files at the same path" "$(cat "$W/read")" ro-content
is "a file can be mounted" "$(cat "$W/one")" single
isnt_zero() { [ "$(cat "$1")" != 0 ]; }
check "a mount is read-only unless writable" isnt_zero "$W/ro-rc"
like "... the write fails read-only" "$(cat "$W/ro-err")" 'Read-only'
check "a mount below a read-only mount is read-only too" isnt_zero "$W/sub-rc"
check "a read-only file mount cannot be written" isnt_zero "$W/one-rc"
check "the jail cannot remount a read-only mount read-write" isnt_zero "$W/remount-rc"
check "the jail cannot unmount a mount (to see what is under it)" isnt_zero "$W/umount-rc"
is "a writable mount is written through to the guest" "$(cat "$T/rw/out" 2>/dev/null)" written
is "the read-only source is unchanged" "$(ls "$T/data")" "$(printf 'file\nsub')"

# bad paths: what and where
ln -s "$T/data" "$T/link"
mkdir -p "$T/real"
ln -s /etc "$T/real/etc-link"
refused() { # DESCRIPTION PATTERN MOUNT
  local r
  r=$(ctl jail run --rootfs "$R" --name bad --mount "$3" -- true 2>&1)
  like "$1" "$r" "$2"
}
refused "a mount through a symlink is refused" "mounts\\[0\\].*(symbolic|symlink|Too many levels)" "$T/link"
refused "a mount of a symlink below is refused" "mounts\\[0\\]" "$T/real/etc-link/passwd"
refused "a mount with '..' is refused" "mounts\\[0\\] '$T/data/../rw' has an empty, '.' or '..' component" "$T/data/../rw"
refused "a relative mount is refused" "not an absolute path" "data"
refused "a mount outside the workspace roots is refused" "not under a workspace root" /var
refused "a mount of agtd's state is refused" "state directory" "$STATE/jails"
refused "a mount that does not exist is refused" "mounts\\[0\\].*No such file" "$T/nope"
refused "a mount over the jail's system paths is refused" "over the jail's" /usr/lib
check "no jail named bad was left behind" sh -c "! ctl jail inspect bad >/dev/null 2>&1"

is "no mount of this test's jails is left on the guest" "$(leftovers)" 0
