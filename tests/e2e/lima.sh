#!/usr/bin/env bash
# agt end to end, with no Lima: agt -> tests/fakes/limactl (Lima's documented contract) ->
# a real OpenSSH sshd on 127.0.0.1 -> a real agtd, whose jails really run.
#
#   agt up -> agt jail run -> agt jail ls -> agt stop -> agt clone gold -> agt reset ->
#   agt restore gold -> agt delete, each checked; on the way: idempotence, limactl's refusals and messages,
#   the workspace through the VM's mount, a dropped connection, the ssh:// target with
#   known_hosts, the Lima host key pin, the local target.
#
# Needs root and Linux (the stand-in's VM is a pid+mount namespace running sshd and agtd).
# A missing prerequisite is a failure ("Bail out!"), never a skip.  Helpers: lib.sh.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LOCAL_PID=
e2e_cleanup_hook() {
  local d
  if [ -n "$LOCAL_PID" ]; then
    kill -TERM "$LOCAL_PID" 2>/dev/null
    wait "$LOCAL_PID" 2>/dev/null
  fi
  for d in /sys/fs/cgroup/*/"agt-e2e-$$" /sys/fs/cgroup/"agt-e2e-$$"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
}

# --- limactl refuses root; agt quotes limactl's own words
run agt up
check "agt up fails when limactl refuses to run" test "$RC" -ne 0
like "the error quotes limactl's message" "$ERR" "limactl list exited with status 1: limactl: must not run as the root user"
like "and says what to do instead" "$ERR" "run agt as your own user, or use --target local"
export AGT_FAKE_LIMACTL_ALLOW_ROOT=1 # CI runs as root; the stand-in allows it when told

# --- config and template
run agt config show
like "config show: the target defaults to the Lima VM, since limactl is on PATH" "$OUT" "^target: lima:$VM +# default: limactl found"
like "config show: the mount, with the file and line it came from" "$OUT" "- location: $WORK +# $AGT_CONFIG:4:7"
run agt template
is "agt template succeeds" "$RC" 0
like "the template is for qemu on Linux" "$OUT" "^vmType: qemu$"
like "it mounts the project directory, writable" "$OUT" "location: \"$WORK\""
like "it tells agtd the workspace root" "$OUT" "AgtWorkspaceRoots: \"$WORK\""
like "containerd is off" "$OUT" "^  system: false"
like "it attaches the jails' disk, unformatted by Lima" "$OUT" \
  "^additionalDisks:
- name: \"$VM-jails\"
  format: false
  fsType: \"btrfs\"$"
like "and names it to the provisioning" "$OUT" "AgtJailsDisk: \"$VM-jails\""

run agt status
is "status before up: exit 0" "$RC" 0
like "status before up: the VM does not exist" "$OUT" "$VM: does not exist"

# --- agt up
t0=$(date +%s)
run agt up
is "agt up creates and starts the VM" "$RC" 0
like "agt up says agtd answers, and through what" "$OUT" "^vm '$VM' is up: agtd [0-9.]+ at lima:$VM \(root@127\.0\.0\.1:[0-9]+\)"
like "agt up shows progress while Lima boots" "$ERR" "agt: vm: .*READY"
like "agt up said it creates the VM from the template" "$ERR" "creating vm '$VM' from $SRCDIR/lima/agt.yaml"
is "limactl lists the VM as Running" "$(lima_field $VM status)" Running
check "the instance holds the rendered template" grep -q "AgtWorkspaceRoots: \"$WORK\"" "$VMDIR/lima.yaml"
PORT1=$(lima_field $VM sshLocalPort)
disk_field() { # disk_field DISK FIELD: from `limactl disk ls --json DISK`
  limactl disk ls --json "$1" 2>/dev/null | python3 -c \
    'import json,sys; print(json.loads(sys.stdin.readline() or "{}").get(sys.argv[1], ""))' "$2"
}
disks() { limactl disk ls --json 2>/dev/null | python3 -c \
  'import json,sys; print(" ".join(json.loads(l)["name"] for l in sys.stdin))'; }
like "agt up made the jails' disk first" "$ERR" "making the jails' disk '$VM-jails' \(51200 MiB, a Lima disk\)"
is "it is a Lima disk of vm.jails_disk's size" "$(disk_field $VM-jails size)" $((50 << 30))
is "the running VM holds it" "$(disk_field $VM-jails instance)" "$VM"
is "agt up asked for a raw disk" "$(disk_field $VM-jails format)" raw
run agt up
is "a second agt up succeeds" "$RC" 0
unlike "and starts nothing" "$ERR" "starting vm"
is "the VM keeps its SSH port" "$(lima_field $VM sshLocalPort)" "$PORT1"

run agt status
like "status: the VM's state" "$OUT" "^vm: +$VM: Running, qemu"
like "status: agtd's version" "$OUT" "^agtd: +[0-9.]+ at lima:$VM"
run agt status --json
is "status --json is JSON with the VM and agtd" \
  "$(printf '%s' "$OUT" | python3 -c 'import json,sys; o=json.load(sys.stdin); print(o["vm"]["status"], "agtd_version" in o["agtd"])')" "Running True"

run agt shell -- sh -c 'echo in-the-vm; exit 7'
is "agt shell runs a command in the VM and exits with its status" "$RC" 7
is "and passes its output on" "$OUT" in-the-vm

# --- a rootfs, then jails that really run
sed "s|@PROBE@|$PROBE|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$WORK/test-rootfs.yaml"
run agt rootfs build --no-download "$WORK/test-rootfs.yaml"
is "agt rootfs build builds the test rootfs in the VM" "$RC" 0
like "and prints its id and name" "$OUT" "^[0-9a-f]{64} test "
run agt rootfs ls
like "agt rootfs ls lists it" "$OUT" " test "

run agt jail run -d --name j1 --rootfs test --workspace "$WORK/proj" -- /bin/sh -c 'echo hello-from-jail >/work/out; echo done-j1'
is "agt jail run starts a jail" "$RC" 0
like "and says when it started" "$OUT" "^j1 started in [0-9.]+ ms"
for _ in $(seq 1 50); do
  [ -f "$WORK/proj/out" ] && break
  sleep 0.1
done
is "the jail wrote into the workspace the VM mounts" "$(cat "$WORK/proj/out" 2>/dev/null)" hello-from-jail
for _ in $(seq 1 50); do
  agt jail ls | grep -Eq '^j1 +shell +exited' && break
  sleep 0.1
done
run agt jail logs j1
like "agt jail logs shows its output" "$OUT" "^done-j1$"

(cd "$WORK/proj" && "$AGT" jail run -d --name j2 --rootfs test -- /bin/sh -c 'ls /work; sleep 300') >"$T/j2.out" 2>&1
like "without --workspace, a jail started in a mounted directory gets it" "$(sleep 0.5; agt jail logs j2)" "^out$"

# mounts and homes through the VM: --add-dir maps a host path through vm.mounts, a path
# outside them is refused with the lines that fix it; agt agents home asks agtd over SSH
mkdir -p "$WORK/shared" "$T/outside"
echo shared-through-the-vm >"$WORK/shared/f"
run agt jail run --rm --rootfs test --add-dir "$WORK/shared" -- /bin/sh -c \
  "cat $WORK/shared/f; echo kept > \$HOME/kept"
is "--add-dir: a directory of the VM's mount is in the jail" "$OUT" shared-through-the-vm
run agt jail run --rm --rootfs test --add-dir "$T/outside" -- true
like "--add-dir outside the VM's mounts is refused, saying what to add" "$ERR" \
  "--add-dir '$T/outside' is not in a directory the VM mounts, so no jail can see it"
run agt agents home shell
like "agt agents home shows the home in the VM" "$OUT" "^  kept$"

run agt jail ls
is "agt jail ls succeeds" "$RC" 0
like "it lists j1, exited 0" "$OUT" "^j1 +shell +exited +0 "
like "it lists j2, running" "$OUT" "^j2 +shell +running "
run agt jail ls --json
is "agt jail ls --json is a JSON list of the jails" \
  "$(printf '%s' "$OUT" | python3 -c 'import json,sys; print(" ".join(sorted(j["name"] for j in json.load(sys.stdin))))')" "j1 j2"
[ "$RC" = 0 ] || echo "#   agt jail ls --json: exit $RC: $ERR"
run agt jail inspect j1
like "agt jail inspect shows the command" "$OUT" '"argv": \['
run agt jail inspect nosuch
is "inspect of a missing jail fails" "$RC" 1
like "with agtd's message" "$ERR" "no jail named 'nosuch'"
run agt jail stop --grace 500 j2
like "agt jail stop stops a running jail" "$OUT" "^j2: exited \(exit code"
run agt jail rm j1
like "agt jail rm removes a jail" "$OUT" "^j1 removed$"
unlike "it is gone from the list" "$(agt jail ls)" "^j1 "

# --- the Lima host key pin: a different key while the same host agent runs is refused
PIN=$XDG_CACHE_HOME/agt/hostkeys/$VM
check "agt pinned the VM's host key" grep -q "^$(lima_field $VM hostAgentPID) " "$PIN"
cp "$PIN" "$T/pin.saved"
sed -i 's/SHA256:.*/SHA256:not-the-real-key/' "$PIN"
new_connections
run agt jail ls
is "a changed host key under the same host agent is refused" "$RC" 1
like "and said so" "$ERR" "changed while the same Lima host agent"
cp "$T/pin.saved" "$PIN"

# --- the ssh:// target: known_hosts, never accepted silently
TARGET=ssh://root@127.0.0.1:$PORT1
run agt --target "$TARGET" jail ls
is "ssh:// with the host key not in known_hosts fails" "$RC" 1
like "and says how to add it" "$ERR" "not in $T/known_hosts, and agt never accepts one unchecked.*ssh-keyscan -p $PORT1 127.0.0.1"
check "nothing was added to known_hosts" test ! -s "$T/known_hosts"
ssh-keyscan -p "$PORT1" -t ed25519 127.0.0.1 >"$T/known_hosts" 2>/dev/null
run agt --target "$TARGET" jail ls
is "ssh:// with the key in known_hosts works" "$RC" 0
like "and reaches the same agtd" "$OUT" "^j2 +shell +exited"
ssh-keygen -q -t ed25519 -N "" -f "$T/otherkey" >/dev/null
echo "[127.0.0.1]:$PORT1 $(cut -d' ' -f1,2 "$T/otherkey.pub")" >"$T/known_hosts"
new_connections
run agt --target "$TARGET" jail ls
is "ssh:// with a different key in known_hosts fails" "$RC" 1
like "and calls it a change" "$ERR" "host key of root@127.0.0.1:$PORT1 has CHANGED"

# --- a dropped connection is reported clearly
agt jail run -d --name j3 --rootfs test -- /bin/sh -c 'while :; do echo tick; sleep 0.2; done' >/dev/null
"$AGT" jail logs -f j3 >"$T/follow.out" 2>"$T/follow.err" &
FOLLOW=$!
for _ in $(seq 1 50); do
  grep -q tick "$T/follow.out" && break
  sleep 0.1
done
like "agt jail logs -f follows a running jail" "$(cat "$T/follow.out")" "^tick$"
# the VM's sshd: its listener, and the processes serving our connection
kids() { cat "/proc/$1/task/$1/children" 2>/dev/null; }
L=$(cat "$VMDIR/vm/sshd.pid")
KIDS=$(kids "$L")
GRANDKIDS=$(for k in $KIDS; do kids "$k"; done)
# shellcheck disable=SC2086
kill $L $KIDS $GRANDKIDS 2>/dev/null
for _ in $(seq 1 100); do
  kill -0 "$FOLLOW" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$FOLLOW" 2>/dev/null; then
  kill "$FOLLOW"
  not_ok "agt jail logs -f ends when the connection drops"
else
  ok "agt jail logs -f ends when the connection drops"
fi
wait "$FOLLOW"
is "with status 1" "$?" 1
like "saying the connection dropped, and that connecting again failed" "$(cat "$T/follow.err")" \
  "the ssh connection to root@127\.0\.0\.1:$PORT1 dropped: .*connecting again failed"

# --- the local target (agtd on this machine, no SSH)
"$AGTD" serve --socket "$T/local.sock" --state-dir "$T/local-state" --cgroup "agt-e2e-$$" \
  --workspace-root "$T" >"$T/local-agtd.log" 2>&1 &
LOCAL_PID=$!
for _ in $(seq 1 100); do
  [ -S "$T/local.sock" ] && break
  sleep 0.05
done
printf 'agtd:\n  socket: %s\n' "$T/local.sock" >"$T/local.yaml"
run env AGT_CONFIG="$T/local.yaml" "$AGT" --target local up
is "agt up with the local target checks that agtd answers" "$RC" 0
like "and says so" "$OUT" "^agtd [0-9.]+ answers at local$"
run env AGT_CONFIG="$T/local.yaml" "$AGT" --target local reset
is "agt reset with the local target is refused" "$RC" 2
like "since there is no VM, saying what to do instead" "$ERR" \
  "drives a Lima VM, and the target is 'local', which has none: 'agt delete' removes agtd's state"
run env AGT_CONFIG="$T/local.yaml" "$AGT" --target local status
is "the local target reaches agtd through its socket" "$RC" 0
like "and shows it" "$OUT" "^agtd: +[0-9.]+ at local"
kill -TERM "$LOCAL_PID"
wait "$LOCAL_PID" 2>/dev/null
LOCAL_PID=

# --- agt stop
run agt stop
is "agt stop stops the VM" "$RC" 0
like "and says so" "$OUT" "^vm '$VM' stopped$"
is "limactl lists it as Stopped" "$(lima_field $VM status)" Stopped
check "no pid files are left" test -z "$(ls "$VMDIR"/*.pid 2>/dev/null)"
run agt stop
is "agt stop of a stopped VM succeeds" "$RC" 0
like "and says it was stopped already" "$OUT" "stopped already"
run limactl stop $VM
is "(limactl itself refuses to stop a stopped VM)" "$RC" 1
like "(with its own message)" "$ERR" 'expected status `Running`, got `Stopped`'
run agt jail ls
is "a jail command on a stopped VM fails" "$RC" 1
like "saying how to start it" "$ERR" "vm '$VM' is Stopped: 'agt up' starts it"
run agt status
like "status of a stopped VM" "$OUT" "$VM: Stopped"

# the jails' disk holds the jails' layers (in a real VM): something to copy
printf 'layers of the jails of %s\n' "$VM" |
  dd of="$LIMA_HOME/_disks/$VM-jails/datadisk" conv=notrunc status=none
is "the stopped VM holds its jails' disk no more" "$(disk_field $VM-jails instance)" ""

# --- agt clone gold (the source is stopped: it stays stopped)
run agt clone gold
is "agt clone gold succeeds" "$RC" 0
is "gold exists, stopped" "$(lima_field gold status)" Stopped
is "the source is still stopped" "$(lima_field $VM status)" Stopped
check "gold has the source's settings, but for its jails' disk" \
  cmp -s <(grep -Ev -- '-jails|^additionalDisks:|^  (format|fsType):' "$VMDIR/lima.yaml") \
  <(grep -Ev -- '-jails|^additionalDisks:|^  (format|fsType):' "$LIMA_HOME/gold/lima.yaml")
like "gold has a jails' disk of its own" "$(grep -A1 '^additionalDisks' "$LIMA_HOME/gold/lima.yaml")" \
  '"name": "gold-jails"'
like "named to its provisioning" "$(grep AgtJailsDisk: "$LIMA_HOME/gold/lima.yaml")" '"gold-jails"'
check "a copy of the source's jails' disk, as it was" \
  cmp -n 4096 "$LIMA_HOME/_disks/$VM-jails/datadisk" "$LIMA_HOME/_disks/gold-jails/datadisk"
run agt clone gold
is "cloning onto an existing VM fails" "$RC" 1
like "saying it exists" "$ERR" "vm 'gold' exists already"
run agt --instance gold up
is "the clone starts" "$RC" 0
GOLDPORT=$(lima_field gold sshLocalPort)
check "with its own SSH port ($GOLDPORT, the source had $PORT1)" test "$GOLDPORT" != "$PORT1"
like "and the source's disk: the rootfs built before" "$(agt --instance gold rootfs ls)" " test "
is "it holds its own jails' disk" "$(disk_field gold-jails instance)" gold
run agt --instance gold stop
is "gold stops" "$RC" 0

# --- a clone of a running VM: stopped for the copy, started again
agt up >/dev/null 2>&1
run agt clone gold2
is "agt clone of a running VM succeeds" "$RC" 0
like "it stopped the source for the copy" "$ERR" "stopping vm '$VM' to clone it"
like "and started it again" "$ERR" "starting vm '$VM' again"
is "the source runs again" "$(lima_field $VM status)" Running
is "gold2 exists, stopped" "$(lima_field gold2 status)" Stopped
is "with a jails' disk of its own" "$(disk_field gold2-jails name)" gold2-jails

# --- agt reset: a fresh disk, the same settings
run agt reset
is "agt reset without a terminal or --force refuses" "$RC" 2
like "saying why" "$ERR" "no terminal to ask on, use --force"
is "and the VM still runs" "$(lima_field $VM status)" Running
run agt reset --force
is "agt reset --force resets the VM" "$RC" 0
is "it is stopped after the reset" "$(lima_field $VM status)" Stopped
check "its settings stay" test -f "$VMDIR/lima.yaml" -a -f "$VMDIR/lima-version"
check "its disk is gone" test ! -e "$VMDIR/disk"
like "its jails' disk is made afresh" "$ERR" "the jails' disk '$VM-jails' made afresh \(51200 MiB\)"
is "empty (Lima keeps additional disks through a factory reset; agt does not)" \
  "$(head -c 32 "$LIMA_HOME/_disks/$VM-jails/datadisk" | tr -d '\0')" ""
is "of the same size" "$(disk_field $VM-jails size)" $((50 << 30))
# a VM whose jails' disk is gone cannot start: said plainly, before Lima tries
limactl disk delete --force $VM-jails >/dev/null 2>&1 # the VM names it: --force
run agt up
is "agt up of a VM whose jails' disk is gone fails" "$RC" 1
like "saying what is gone and what to do" "$ERR" \
  "vm '$VM' cannot start: its jails' disk, the Lima disk '$VM-jails', is gone \(limactl disk ls\); 'agt reset' makes an empty one"
run agt reset --force
is "agt reset makes the missing jails' disk" "$(disk_field $VM-jails name)" "$VM-jails"
run agt up
is "agt up boots the reset VM" "$RC" 0
unlike "on a fresh disk: no rootfs any more" "$(agt rootfs ls)" " test "
unlike "and no jails" "$(agt jail ls)" "^j2 "

# --- agt restore: back to the gold image, started (tests/lima/restore.sh holds the copy
# and swap to the real limactl, without a boot)
agt --instance gold up >/dev/null 2>&1
run agt restore --force gold
is "restore from a running gold VM is refused" "$RC" 1
like "saying what to do" "$ERR" "gold vm 'gold' is running: a gold image is copied stopped; 'agt --instance gold stop' first"
is "and the working VM still runs" "$(lima_field $VM status)" Running
agt --instance gold stop >/dev/null 2>&1
run agt restore --force gold
is "agt restore --force gold succeeds" "$RC" 0
like "it copies gold under a temporary name first" "$ERR" "copying vm 'gold' to '$VM\.restoring'"
like "then stops the working VM" "$ERR" "stopping vm '$VM'"
like "says it restored it" "$OUT" "^vm '$VM' restored from 'gold'; starting it$"
like "and starts it until agtd answers" "$OUT" "^vm '$VM' is up: agtd [0-9.]+ at lima:$VM"
is "the VM runs" "$(lima_field $VM status)" Running
like "on gold's disk: the rootfs built before the reset is back" "$(agt rootfs ls)" " test "
is "gold is still there, stopped" "$(lima_field gold status)" Stopped
is "no temporary VM is left" "$(AGT_FAKE_LIMACTL_ALLOW_ROOT=1 limactl list -q 2>/dev/null | tr '\n' ' ')" "$VM gold gold2 "
is "the restored VM has the copy of gold's jails' disk" "$(disk_field $VM.restoring-jails instance)" "$VM"
check "a copy of gold's" \
  cmp -n 4096 "$LIMA_HOME/_disks/gold-jails/datadisk" "$LIMA_HOME/_disks/$VM.restoring-jails/datadisk"
is "the replaced VM's jails' disk went with it" "$(disks)" "$VM.restoring-jails gold-jails gold2-jails"

# --- a Broken VM (its host agent died, its driver runs on): agt up recovers it
kill -KILL "$(cat "$VMDIR/ha.pid")"
for _ in $(seq 1 50); do
  [ "$(lima_field $VM status)" = Broken ] && break
  sleep 0.1
done
is "with its host agent killed, limactl lists the VM as Broken" "$(lima_field $VM status)" Broken
new_connections
run agt jail ls
like "a jail command says how to recover" "$ERR" "is Broken \(.*host agent.*\): 'agt stop --force', then 'agt up'"
run agt up
is "agt up recovers a Broken VM" "$RC" 0
like "by stopping it by force first" "$ERR" "is Broken .*stopping it by force first"
is "it runs again" "$(lima_field $VM status)" Running

# --- two agt up at once: the second waits for the first, never stops a VM still starting.
# A gated ssh-keygen (the host agent makes the VM's host keys with it) holds the VM in
# Lima's transient Broken state (host agent up, driver not yet) until $T/gate exists.
mkdir -p "$T/slow"
printf '#!/bin/sh\nwhile [ ! -e %s/gate ]; do sleep 0.1; done\nexec %s "$@"\n' "$T" \
  "$(command -v ssh-keygen)" >"$T/slow/ssh-keygen"
chmod 755 "$T/slow/ssh-keygen"
# Processes by their command line: one pgrep, not a tr and a grep for each of the machine's
# processes (thousands of them while other jails run: minutes of forks on a busy machine).
agtds() { # the agtds serving this VM's state
  pgrep -fc -- "^$AGTD serve .*$VMDIR/disk/agt" || true
}
wait_for_text() { # wait_for_text PATTERN FILE...: up to 20 s
  for _ in $(seq 1 200); do
    cat "${@:2}" 2>/dev/null | grep -Eq "$1" && return 0
    sleep 0.1
  done
  return 1
}
run agt stop
is "(agt stop stops the VM)" "$RC" 0
rm -f "$T/gate"
PATH=$T/slow:$PATH "$AGT" up >"$T/up1.out" 2>"$T/up1.err" &
UP1=$!
PATH=$T/slow:$PATH "$AGT" up >"$T/up2.out" 2>"$T/up2.err" &
UP2=$!
check "one agt up waits for the other" wait_for_text "waiting for another agt up of vm '$VM' \(pid [0-9]+\)" "$T/up1.err" "$T/up2.err"
touch "$T/gate"
wait "$UP1"
RC1=$?
wait "$UP2"
RC2=$?
is "the first of two agt up at once succeeds" "$RC1" 0
is "so does the second" "$RC2" 0
unlike "neither stopped the VM by force" "$(cat "$T/up1.err" "$T/up2.err")" "stopping it by force"
is "the VM runs" "$(lima_field $VM status)" Running
is "with one agtd" "$(agtds)" 1

# --- a start in progress outside agt (limactl start): agt up waits for it
run agt stop
is "(agt stop stops the VM)" "$RC" 0
rm -f "$T/gate"
PATH=$T/slow:$PATH AGT_FAKE_LIMACTL_ALLOW_ROOT=1 limactl start "$VM" >/dev/null 2>"$T/lstart.err" &
LSTART=$!
for _ in $(seq 1 100); do
  [ "$(lima_field $VM status)" = Broken ] && break
  sleep 0.1
done
is "(while it starts, limactl lists the VM as Broken)" "$(lima_field $VM status)" Broken
"$AGT" up >"$T/up3.out" 2>"$T/up3.err" &
UP3=$!
check "agt up during that start says the VM is starting" wait_for_text "vm '$VM' is starting \(Broken: host agent is running but driver is not" "$T/up3.err"
touch "$T/gate"
wait "$UP3"
is "and succeeds once it is up" "$?" 0
unlike "without stopping it by force" "$(cat "$T/up3.err")" "stopping it by force"
wait "$LSTART"
is "the limactl start it waited for succeeds too" "$?" 0
is "with one agtd" "$(agtds)" 1

# --- agt up --timeout bounds the wait for agtd
for p in $(pgrep -f -- "^$AGTD serve .*$VMDIR/disk/agt"); do
  kill -KILL "$p"
done
t0=$(date +%s)
run agt up --timeout 3s
t1=$(date +%s)
is "agt up with the VM running and agtd dead fails" "$RC" 1
like "saying agtd does not answer within the timeout" "$ERR" "agtd does not answer: not within --timeout 3s"
check "within about the timeout ($((t1 - t0)) s)" test $((t1 - t0)) -le 15
agt stop --force >/dev/null 2>&1
agt up >/dev/null 2>&1
is "(the VM runs again)" "$(lima_field $VM status)" Running

# --- agt delete
run agt delete
is "agt delete without a terminal or --force refuses" "$RC" 2
is "and the VM is still there" "$(lima_field $VM status)" Running
run agt delete --force
is "agt delete --force deletes the VM" "$RC" 0
like "and says so" "$OUT" "^vm '$VM' deleted$"
check "its directory is gone" test ! -e "$VMDIR"
run limactl list --json $VM
is "limactl no longer lists it" "$RC" 1
run agt delete --force
is "deleting it again succeeds" "$RC" 0
like "saying it does not exist" "$OUT" "does not exist"
agt --instance gold delete --force >/dev/null 2>&1
agt --instance gold2 delete --force >/dev/null 2>&1
is "no VM is left" "$(AGT_FAKE_LIMACTL_ALLOW_ROOT=1 limactl list -q 2>/dev/null)" ""
is "no Lima disk is left: each went with its VM" "$(disks)" ""

# --- a VM made before agt gave the jails a disk of their own keeps working
agt template | sed -e '/^additionalDisks:/,/^  fsType:/d' -e 's/AgtJailsDisk: ".*"/AgtJailsDisk: ""/' \
  >"$T/old.yaml"
limactl create --name=old "$T/old.yaml" >/dev/null 2>&1
run agt --instance old up
is "agt up starts a VM without a jails' disk" "$RC" 0
like "saying where agtd keeps the jails' layers there" "$ERR" \
  "note: vm 'old' was made before agt gave the jails a Lima disk of their own: agtd keeps their writable layers in an image inside its root disk"
is "and makes no disk for it" "$(disks)" ""
run agt --instance old clone old2
is "it clones" "$RC" 0
is "without a disk" "$(disks)" ""
run agt --instance old delete --force
is "and is deleted" "$RC" 0
agt --instance old2 delete --force >/dev/null 2>&1
is "(no VM is left)" "$(AGT_FAKE_LIMACTL_ALLOW_ROOT=1 limactl list -q 2>/dev/null)" ""
left=$(pgrep -fc -- "$LIMA_HOME" || true)
is "no process of the stand-in's VMs is left" "$left" 0
is "no mount is left" "$(grep -c " $T/" /proc/self/mountinfo)" 0
