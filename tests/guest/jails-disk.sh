#!/usr/bin/env bash
# lima/provision/jails-disk.sh, the Lima VM's jails' disk made btrfs (a `mode: boot` script
# and again from agtd.sh), run on a loop device standing for the Lima disk: an empty disk
# gets one GPT partition, a btrfs labelled agt-jails and the UUID mark agtd looks for; a
# second run changes nothing; a disk holding anything else is refused and left as it was;
# no disk named, nothing done.
. "$(dirname "$0")/lib.sh"
command -v mkfs.btrfs >/dev/null || bail "mkfs.btrfs is needed (apt-get install btrfs-progs)"
command -v sfdisk >/dev/null || bail "sfdisk is needed (util-linux)"
SCRIPT="$SRCDIR/lima/provision/jails-disk.sh"
LOOPS=()
jd_finish() {
  local rc=$?
  grep -q " $T/m " /proc/self/mountinfo && umount "$T/m"
  for l in "${LOOPS[@]}"; do losetup -d "$l"; done
  (exit "$rc")
  finish
}
trap jd_finish EXIT

new_disk() { # new_disk FILE: a sparse 512 MiB image on a loop device that shows partitions
  truncate -s 512M "$1"
  local l
  l=$(losetup -f --show -P "$1") || bail "losetup -P $1"
  LOOPS+=("$l")
  echo "$l"
}
run() { # run DEVICE: the script as the provisioning runs it, with /bin/sh
  PARAM_AgtJailsDisk=vm-jails AGT_JAILS_DISK_DEVICE="$1" sh "$SCRIPT" 2>"$T/err"
}
mkdir -p "$T/m"
skip() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N # SKIP $*"; }

# Does this kernel show a loop device's partitions?  (Some kernels are built without
# partition table support: then what needs a partition is skipped here, and checked in a
# real Lima VM by just lima-e2e.)
D=$(new_disk "$T/probe.img")
echo 'type=linux' | sfdisk --quiet --label gpt "$D"
udevadm settle 2>/dev/null || true
if [ -n "$(lsblk -n -l -o TYPE "$D" | grep part)" ]; then PARTS=yes; else PARTS=; fi
[ -n "$PARTS" ] || echo "# this kernel shows no partitions of $D ($(uname -r)): the checks that need one are skipped"

if [ -n "$PARTS" ]; then
# 1. An empty disk: partitioned, btrfs, marked.
D=$(new_disk "$T/empty.img")
check "an empty disk is made" run "$D"
P=$(lsblk -n -l -o PATH,TYPE "$D" | awk '$2 == "part" { print $1; exit }')
is "one GPT partition" "$(blkid -p -o value -s PTTYPE "$D"):$(lsblk -n -l -o TYPE "$D" | grep -c part)" "gpt:1"
is "btrfs labelled agt-jails" "$(blkid -p -o value -s TYPE "$P"):$(blkid -p -o value -s LABEL "$P")" "btrfs:agt-jails"
uuid=$(blkid -p -o value -s UUID "$P")
mount "$P" "$T/m"
is "the mark holds the file system's UUID" "$(cat "$T/m/.agt-jails-disk" 2>&1)" "$uuid"
echo kept >"$T/m/data"
umount "$T/m"

# 2. Run again (every boot): nothing changes, the data stays.
check "a second run succeeds" run "$D"
is "same file system" "$(blkid -p -o value -s UUID "$P")" "$uuid"
mount "$P" "$T/m"
is "its data stays" "$(cat "$T/m/data" 2>&1)" "kept"
umount "$T/m"

else
  D=$(new_disk "$T/empty.img")
  check "an empty disk: refused when its partition does not show" bash -c "! PARAM_AgtJailsDisk=vm-jails AGT_JAILS_DISK_DEVICE=$D sh $SCRIPT 2>$T/err"
  like "it says so" "$(cat "$T/err")" "no partition on $D after partitioning it"
  for c in "made" "one GPT partition" "btrfs" "the mark" "second run" "same fs" "data stays"; do
    skip "an empty disk: $c (no partitions on this kernel)"
  done
fi

# 3. A disk holding a file system of its own (no partition): refused, untouched.
D=$(new_disk "$T/ext4.img")
mkfs.ext4 -q "$D"
before=$(blkid -p -o value -s UUID "$D")
check "a disk holding ext4 is refused" bash -c "! PARAM_AgtJailsDisk=vm-jails AGT_JAILS_DISK_DEVICE=$D sh $SCRIPT 2>$T/err"
like "it says why" "$(cat "$T/err")" "holds data agt did not put there; agt formats only an empty disk"
is "the ext4 is left as it was" "$(blkid -p -o value -s TYPE "$D"):$(blkid -p -o value -s UUID "$D")" "ext4:$before"

# 4. A partition holding another file system: refused, untouched.
if [ -n "$PARTS" ]; then
D=$(new_disk "$T/part.img")
echo 'type=linux' | sfdisk --quiet --label gpt "$D"
udevadm settle 2>/dev/null || true
P=$(lsblk -n -l -o PATH,TYPE "$D" | awk '$2 == "part" { print $1; exit }')
[ -n "$P" ] || bail "no partition on $D"
mkfs.ext4 -q "$P"
check "a partition holding ext4 is refused" bash -c "! PARAM_AgtJailsDisk=vm-jails AGT_JAILS_DISK_DEVICE=$D sh $SCRIPT 2>$T/err"
like "it names the file system" "$(cat "$T/err")" "holds a ext4 file system, not agt's btrfs"
is "the partition keeps its ext4" "$(blkid -p -o value -s TYPE "$P")" "ext4"
else
  for c in "refused" "names the file system" "left as it was"; do
    skip "a partition holding ext4: $c (no partitions on this kernel)"
  done
fi

# 5. A partition table with no partition (something agt did not write): refused.
D=$(new_disk "$T/table.img")
echo 'label: dos' | sfdisk --quiet "$D"
check "a partition table without partitions is refused" bash -c "! PARAM_AgtJailsDisk=vm-jails AGT_JAILS_DISK_DEVICE=$D sh $SCRIPT 2>$T/err"
is "the table stays dos" "$(blkid -p -o value -s PTTYPE "$D")" "dos"

# 6. No jails' disk named (a VM from before): nothing done.
D=$(new_disk "$T/none.img")
check "no disk named: success" env -u PARAM_AgtJailsDisk AGT_JAILS_DISK_DEVICE="$D" sh "$SCRIPT"
is "and the disk untouched" "$(blkid -p -o value -s PTTYPE "$D")" ""
