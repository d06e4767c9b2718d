#!/usr/bin/env bash
# agt against the real limactl, without a boot: agt creates the VM (Lima copies the image
# and builds the disk), reads the real `limactl list --json`, clones it, factory-resets
# it, deletes it; `agt up` on an image that cannot be had fails with Lima's own error and
# leaves nothing behind; Lima's refusals (a protected VM) come through; run as root, agt
# says why limactl refuses.  agt and limactl run as the unprivileged user (lib.sh).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IMAGE=$(lr_image)
lr_config "  image: $IMAGE" "  cpus: 2" "  memory: 2GiB" "  disk: 4GiB"
VM=agt_agent_sandbox
VMDIR=$T/lima/$VM

run agt doctor
like "agt doctor shows the real limactl's version, and the one agt is tested with" "$OUT" \
  "^host +limactl +ok +$LIMACTL, version ${LIMACTL_VERSION#v} \(agt is tested with $LIMACTL_VERSION\)$"

run agt config show
like "limactl in PATH: the target is the Lima VM" "$OUT" "^target: lima:$VM +# default: limactl found"
run agt status
is "status before create: exit 0" "$RC" 0
like "the VM does not exist" "$OUT" "$VM: does not exist"

# --- create
run agt up --no-start
is "agt up --no-start creates the VM" "$RC" 0
like "and says it is created, stopped" "$OUT" "^vm '$VM' created \(Stopped\); 'agt up' starts it$"
like "from the template" "$ERR" "creating vm '$VM' from $T/src/lima/agt.yaml"
like "showing Lima's progress" "$ERR" "agt: vm: Downloaded the image from \`$IMAGE\`"
is "the real limactl lists it as Stopped" "$(lima_field $VM status)" Stopped
check "Lima copied the image into the VM's disk" test -s "$VMDIR/disk"
check "the instance holds agt's rendered template" grep -q "^  AgtdSocket: \"/run/agt/agtd.sock\"$" "$VMDIR/lima.yaml"
check "with the configured image" grep -q "location: \"$IMAGE\"" "$VMDIR/lima.yaml"
disk_field() { # disk_field DISK FIELD: from the real `limactl disk ls --json DISK`
  limactl disk ls --json "$1" 2>/dev/null | python3 -c \
    'import json,sys; print(json.loads(sys.stdin.readline() or "{}").get(sys.argv[1], ""))' "$2"
}
disks() { limactl disk ls --json 2>/dev/null | python3 -c \
  'import json,sys; print(" ".join(json.loads(l)["name"] for l in sys.stdin))'; }
no_disk_lines() { grep -Ev -- '-jails|^additionalDisks:|^  (format|fsType):' "$1"; }
like "agt made the jails' disk first" "$ERR" "making the jails' disk '$VM-jails' \(51200 MiB, a Lima disk\)"
is "the real limactl lists it, vm.jails_disk big" "$(disk_field $VM-jails size)" $((50 << 30))
is "held by no VM while none runs" "$(disk_field $VM-jails instance)" ""
check "the instance's lima.yaml attaches it" grep -q "^- name: \"$VM-jails\"$" "$VMDIR/lima.yaml"

# what agt read from the real list --json, against that output itself
run agt status --json
is "agt status --json succeeds" "$RC" 0
printf '%s' "$OUT" >"$T/status.json"
limactl list --json $VM >"$T/list.json" 2>/dev/null
is "agt's view of the VM is limactl's (status, vmType, arch, cpus, memory, disk, dir)" \
  "$(python3 - "$T/status.json" "$T/list.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["vm"]
b = json.loads(open(sys.argv[2]).readline())
pairs = [("status", "status"), ("vm_type", "vmType"), ("arch", "arch"), ("cpus", "cpus"),
         ("memory", "memory"), ("disk", "disk"), ("dir", "dir")]
bad = ["%s=%r/%s=%r" % (x, a.get(x), y, b.get(y)) for x, y in pairs if a.get(x) != b.get(y)]
print(" ".join(bad) or "same")
PY
)" same
is "the values are the config's: 2 cpus, 2 GiB, 4 GiB, qemu, x86_64 or aarch64" \
  "$(python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["vm"]; print(v["cpus"], v["memory"], v["disk"], v["vm_type"], v["status"])' "$T/status.json")" \
  "2 2147483648 4294967296 qemu Stopped"
run agt status
like "agt status shows it" "$OUT" "^vm: +$VM: Stopped, qemu"

run agt up --no-start
is "agt up --no-start again succeeds" "$RC" 0
like "and creates nothing" "$OUT" "^vm '$VM' exists \(Stopped\); nothing to do$"
run agt stop
is "agt stop of the stopped VM succeeds" "$RC" 0
like "saying it was stopped already" "$OUT" "stopped already"
run limactl stop $VM
is "(the real limactl refuses to stop a stopped VM)" "$RC" 1
like "(with its own message)" "$ERR" 'expected status `Running`, got `Stopped`'
run agt jail ls
is "a jail command on the stopped VM fails" "$RC" 1
like "saying how to start it" "$ERR" "vm '$VM' is Stopped: 'agt up' starts it"

# --- clone
run agt clone gold
is "agt clone gold succeeds" "$RC" 0
like "and says how to start the clone" "$OUT" "^vm '$VM' cloned to 'gold'; 'agt --instance gold up' starts it$"
is "gold is listed, Stopped" "$(lima_field gold status)" Stopped
check "gold has the source's settings, but for its jails' disk" \
  cmp -s <(no_disk_lines "$VMDIR/lima.yaml") <(no_disk_lines "$T/lima/gold/lima.yaml")
is "gold's jails' disk is its own (the real limactl list --json)" \
  "$(lima_field gold config | python3 -c 'import ast,sys; c=ast.literal_eval(sys.stdin.read()); print(c["additionalDisks"][0]["name"], c["param"]["AgtJailsDisk"])')" \
  "gold-jails gold-jails"
is "a copy of the source's (limactl disk import)" "$(disk_field gold-jails size)" $((50 << 30))
check "and a copy of its disk" cmp -s "$VMDIR/disk" "$T/lima/gold/disk"
is "the source is still Stopped" "$(lima_field $VM status)" Stopped
run agt clone gold
is "cloning onto an existing VM fails" "$RC" 1
like "saying it exists" "$ERR" "vm 'gold' exists already"
run agt --instance nosuch clone gold3
is "cloning a VM that does not exist fails" "$RC" 1
like "saying so" "$ERR" "vm 'nosuch' does not exist"
run agt clone 'not/a name'
is "a clone name Lima would refuse is refused first" "$RC" 2

# --- factory reset
run agt reset
is "agt reset without a terminal or --force refuses" "$RC" 2
like "saying why" "$ERR" "no terminal to ask on, use --force"
check "and the disk is still there" test -s "$VMDIR/disk"
run agt reset --force
is "agt reset --force resets the VM" "$RC" 0
like "and says so" "$OUT" "^vm '$VM' reset; 'agt up' boots it afresh$"
check "its disk is gone" test ! -e "$VMDIR/disk"
check "its settings stay" test -f "$VMDIR/lima.yaml" -a -f "$VMDIR/lima-version"
is "it is listed, Stopped" "$(lima_field $VM status)" Stopped
check "gold keeps its disk" test -s "$T/lima/gold/disk"
like "the jails' disk is made afresh" "$ERR" "the jails' disk '$VM-jails' made afresh \(51200 MiB\)"
is "(there, of the same size)" "$(disk_field $VM-jails size)" $((50 << 30))
is "the Lima disks: the VM's and gold's" "$(disks)" "$VM-jails gold-jails"

# --- Lima's refusals come through: a protected VM
limactl protect $VM >/dev/null 2>&1
run agt delete --force
is "agt delete of a protected VM fails" "$RC" 1
like "with Lima's own message" "$ERR" "cannot delete vm '$VM': limactl delete exited with status 1: .*instance is protected to prohibit accidental removal"
limactl unprotect $VM >/dev/null 2>&1

# --- delete
run agt delete
is "agt delete without a terminal or --force refuses" "$RC" 2
check "and the VM is still there" test -d "$VMDIR"
run agt delete --force
is "agt delete --force deletes the VM" "$RC" 0
like "and says so" "$OUT" "^vm '$VM' deleted$"
check "its directory is gone" test ! -e "$VMDIR"
run limactl list --json $VM
is "the real limactl no longer lists it" "$RC" 1
run agt delete --force
is "deleting it again succeeds" "$RC" 0
like "saying it does not exist" "$OUT" "does not exist"
run agt --instance gold delete --force
is "gold is deleted too" "$RC" 0
is "no Lima disk is left: each went with its VM" "$(disks)" ""

# --- an image that cannot be had: Lima's own error, and nothing left behind
lr_config "  image: $T/no-such-image.qcow2" "  cpus: 2" "  memory: 2GiB" "  disk: 4GiB"
run agt up
is "agt up with an image that cannot be had fails" "$RC" 1
like "with Lima's own error" "$ERR" \
  "agt: cannot create vm '$VM': limactl create exited with status 1: failed to download \`$T/no-such-image.qcow2\`: .*no such file or directory"
like "after removing the half-created VM Lima leaves" "$ERR" "removed the half-created vm '$VM'"
check "so no directory is left" test ! -e "$VMDIR"
is "nor the jails' disk made for it" "$(disks)" ""
run agt up
like "a second agt up renders and creates again (not a start of the old one)" "$ERR" "cannot create vm '$VM': limactl create exited"
is "no VM is left" "$(limactl list -q 2>/dev/null)" ""

# --- root: limactl refuses it, and agt says what to do
printf 'vm:\n  template: %s\n  agt_source: %s\nlima:\n  limactl: %s\n' "$T/src/lima/agt.yaml" "$T/src" "$LIMACTL" >"$T/root.yaml"
run env AGT_CONFIG="$T/root.yaml" LIMA_HOME="$T/rootlima" "$AGT" --target lima status
is "as root, agt status on the Lima target fails" "$RC" 1
like "quoting limactl, and saying what to do" "$ERR" \
  "limactl list exited with status 1: limactl: must not run as the root user \(Lima's VMs belong to a user: run agt as your own user, or use --target local\)"
