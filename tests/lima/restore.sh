#!/usr/bin/env bash
# agt restore GOLD on the real limactl, without a boot (--no-start; the start after the
# swap is `agt up`, which needs a booted VM): the working VM replaced by a copy of the
# gold one, made under a temporary name first; the refusals (gold missing, Broken, the
# working VM itself, no terminal, a VM left by an interrupted restore); a copy that fails
# leaves the working VM as it was.  agt and limactl run as the unprivileged user (lib.sh).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IMAGE=$(lr_image)
lr_config "  image: $IMAGE" "  cpus: 2" "  memory: 2GiB" "  disk: 4GiB"
VM=agt_agent_sandbox
VMDIR=$T/lima/$VM
GOLD=$T/lima/gold
vsize() { as_lima qemu-img info --output=json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["virtual-size"])'; }

run agt up --no-start
is "the working VM is created" "$RC" 0
run agt clone gold
is "gold is cloned from it" "$RC" 0
# the working VM moves on from gold: its disk grows (the copy in the restore must undo it)
as_lima qemu-img resize -q "$VMDIR/disk" 6G
is "(the working VM's disk now differs from gold's: 6 GiB)" "$(vsize "$VMDIR/disk")" $((6 << 30))
cp "$VMDIR/disk" "$T/disk.before"

# --- refusals, each leaving the working VM as it was
run agt restore nosuch
is "restore from a gold VM that does not exist fails" "$RC" 1
like "saying so, and how to make one" "$ERR" "gold vm 'nosuch' does not exist \('agt clone nosuch' makes it from the VM\)"
run agt restore "$VM"
is "restore from the working VM itself is refused" "$RC" 2
like "saying why" "$ERR" "is the working VM itself"
mkdir "$T/lima/broken" && chown "$LUSER:" "$T/lima/broken"
is "(a directory without lima.yaml is a Broken VM to Lima)" "$(lima_field broken status)" Broken
run agt --instance broken status
like "agt status gives Lima's reason in words" "$OUT" "error: open $T/lima/broken/lima.yaml: No such file or directory"
run agt restore broken
is "restore from a Broken gold VM is refused" "$RC" 1
like "saying what to do" "$ERR" "gold vm 'broken' is Broken: 'agt --instance broken stop --force' first"
rmdir "$T/lima/broken"
run agt restore gold
is "restore without a terminal or --force refuses" "$RC" 2
like "saying why" "$ERR" "vm '$VM' not restored: no terminal to ask on, use --force"
check "the working VM is unchanged" cmp -s "$VMDIR/disk" "$T/disk.before"

# a VM left by an interrupted restore (the replaced one) is never deleted by agt
run agt clone "$VM.replaced"
is "(a VM named like the one a restore renames aside)" "$RC" 0
run agt restore --force gold
is "restore refuses while that VM exists" "$RC" 1
like "saying what it may hold and what to do" "$ERR" "vm '$VM.replaced' exists: an earlier restore stopped half-way"
is "it is still there" "$(lima_field "$VM.replaced" status)" Stopped
agt --instance "$VM.replaced" delete --force >/dev/null 2>&1

# a copy that fails: the working VM stays as it was, and no copy is left
chmod 000 "$GOLD/disk"
run agt restore --force --no-start gold
chmod 644 "$GOLD/disk"
is "restore fails when Lima cannot copy the gold VM" "$RC" 1
like "with Lima's error, saying the working VM is unchanged" "$ERR" \
  "vm '$VM' is unchanged: cannot copy vm 'gold': limactl clone exited with status 1: .*permission denied"
check "the working VM's disk is as it was" cmp -s "$VMDIR/disk" "$T/disk.before"
is "it is listed, Stopped" "$(lima_field $VM status)" Stopped
is "no copy is left" "$(limactl list -q 2>/dev/null | sort | tr '\n' ' ')" "$VM gold "
check "no directory of a copy is left" test ! -e "$T/lima/$VM.restoring"

# a copy an interrupted restore left under the temporary name is replaced
run agt clone "$VM.restoring"
is "(a VM named like the restore's temporary copy)" "$RC" 0

# --- the restore
t0=$(date +%s%N)
run agt restore --force --no-start gold
t1=$(date +%s%N)
is "agt restore --force --no-start gold succeeds" "$RC" 0
like "and says so" "$OUT" "^vm '$VM' restored from 'gold'; 'agt up' starts it$"
like "it deleted the copy an earlier restore left" "$ERR" "deleting '$VM.restoring', the copy an earlier restore left"
like "it copied gold under the temporary name first" "$ERR" "copying vm 'gold' to '$VM.restoring'"
check "the working VM's disk is now gold's" cmp -s "$VMDIR/disk" "$GOLD/disk"
is "(4 GiB again)" "$(vsize "$VMDIR/disk")" $((4 << 30))
no_disk_lines() { grep -Ev -- '-jails|^additionalDisks:|^  (format|fsType):' "$1"; }
check "its settings are gold's, but for its jails' disk" \
  cmp -s <(no_disk_lines "$VMDIR/lima.yaml") <(no_disk_lines "$GOLD/lima.yaml")
like "which is a copy of gold's" "$(grep -A1 '^additionalDisks' "$VMDIR/lima.yaml")" "$VM.restoring-jails"
is "it is listed, Stopped" "$(lima_field $VM status)" Stopped
is "its directory is its own name's" "$(lima_field $VM dir)" "$VMDIR"
is "gold is still there, stopped" "$(lima_field gold status)" Stopped
is "nothing else is left (no temporary copy, no replaced VM)" "$(limactl list -q 2>/dev/null | sort | tr '\n' ' ')" "$VM gold "
echo "# restore (copy of a 4 GiB sparse qcow2, rename, delete): $(((t1 - t0) / 1000000)) ms"

# --- with no working VM, restore makes it from gold
agt delete --force >/dev/null 2>&1
run agt restore --no-start gold
is "restore with no working VM succeeds without asking" "$RC" 0
check "the working VM is a copy of gold" cmp -s "$VMDIR/disk" "$GOLD/disk"
