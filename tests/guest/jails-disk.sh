#!/usr/bin/env bash
# lima/provision/jails-disk.sh, the Lima VM's jails' disk made btrfs (a `mode: boot` script
# and again from agtd.sh), run on a loop device standing for the Lima disk: an empty disk
# gets one GPT partition named agt-jails, a btrfs labelled agt-jails and the UUID mark agtd
# looks for; a second run changes nothing; a partition a reboot left half made is made
# again; a disk holding anything else, or what blkid cannot tell, is refused and left as it
# was; no disk named, nothing done, and the rest of the boot commands still run.
. "$(dirname "$0")/lib.sh"
command -v mkfs.btrfs >/dev/null || bail "mkfs.btrfs is needed (apt-get install btrfs-progs)"
command -v sfdisk >/dev/null || bail "sfdisk is needed (util-linux)"
command -v partx >/dev/null || bail "partx is needed (util-linux)"
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

new_disk() { # new_disk FILE: D, a loop device on a sparse 512 MiB image, that shows
  # partitions (set here, not printed: LOOPS, which the end detaches, is this shell's)
  truncate -s 512M "$1"
  D=$(losetup -f --show -P "$1") || bail "losetup -P $1"
  LOOPS+=("$D")
}
run() { # run DEVICE: the script as the provisioning runs it, with /bin/sh; stdout in $T/out
  PARAM_AgtJailsDisk=vm-jails AGT_JAILS_DISK_DEVICE="$1" sh "$SCRIPT" >"$T/out" 2>"$T/err"
}
refused() { ! run "$1"; }
first_part() { lsblk -n -l -o PATH,TYPE "$1" | awk '$2 == "part" { print $1; exit }'; }
mkdir -p "$T/m" "$T/bin"

# Does this kernel show a loop device's partitions?  Some kernels are built without the
# partition table parsers: there, after every sfdisk, partx tells the kernel what one that
# reads GPT would have found (the real partitions, through BLKPG), through an sfdisk first
# in PATH that runs the real one and then partx.
new_disk "$T/probe.img"
echo 'type=linux' | sfdisk --quiet --label gpt "$D"
if [ -z "$(first_part "$D")" ]; then
  echo "# this kernel shows no partitions of $D ($(uname -r)): partx adds them after sfdisk"
  real=$(command -v sfdisk)
  cat >"$T/bin/sfdisk" <<EOF
#!/bin/sh
"$real" "\$@" || exit
for a; do case \$a in /dev/loop*) partx -u "\$a" 2>/dev/null ;; esac; done
exit 0
EOF
  chmod 755 "$T/bin/sfdisk"
  export PATH="$T/bin:$PATH"
  partx -u "$D"
  [ -n "$(first_part "$D")" ] || bail "no partition of $D shows, even through partx"
fi

# 1. An empty disk: partitioned, btrfs, marked, named done.
new_disk "$T/empty.img"
check "an empty disk is made" run "$D"
P=$(first_part "$D")
is "it prints the partition" "$(cat "$T/out")" "$P"
is "one GPT partition named agt-jails" \
  "$(blkid -p -o value -s PTTYPE "$D"):$(lsblk -n -l -o TYPE "$D" | grep -c part):$(blkid -p -o value -s PART_ENTRY_NAME "$P")" \
  "gpt:1:agt-jails"
is "btrfs labelled agt-jails" "$(blkid -p -o value -s TYPE "$P"):$(blkid -p -o value -s LABEL "$P")" "btrfs:agt-jails"
uuid=$(blkid -p -o value -s UUID "$P")
mount "$P" "$T/m"
is "the mark holds the file system's UUID" "$(cat "$T/m/.agt-jails-disk" 2>&1)" "$uuid"
echo kept >"$T/m/data"
umount "$T/m"

# 2. Run again (every boot): nothing changes, the data stays.
check "a second run succeeds" run "$D"
is "it prints the partition again" "$(cat "$T/out")" "$P"
is "same file system" "$(blkid -p -o value -s UUID "$P")" "$uuid"
mount "$P" "$T/m"
is "its data stays" "$(cat "$T/m/data" 2>&1)" "kept"
umount "$T/m"

# 3. A reboot between the partition and its file system: made then.
new_disk "$T/cut1.img"
echo 'type=linux, name=agt-jails-new' | sfdisk --quiet --label gpt "$D"
P=$(first_part "$D")
check "a partition a reboot left empty is made" run "$D"
is "btrfs, named agt-jails" "$(blkid -p -o value -s TYPE "$P"):$(blkid -p -o value -s PART_ENTRY_NAME "$P")" "btrfs:agt-jails"

# 4. A reboot between the file system and its mark: made again, with the mark.
new_disk "$T/cut2.img"
echo 'type=linux, name=agt-jails-new' | sfdisk --quiet --label gpt "$D"
P=$(first_part "$D")
mkfs.btrfs -q -f -K --mixed -L agt-jails "$P" >/dev/null 2>&1
old=$(blkid -p -o value -s UUID "$P")
check "a file system a reboot left without its mark is made again" run "$D"
uuid=$(blkid -p -o value -s UUID "$P")
mount "$P" "$T/m"
is "the mark holds the new file system's UUID" "$(cat "$T/m/.agt-jails-disk" 2>&1):$([ "$uuid" != "$old" ] && echo new)" "$uuid:new"
umount "$T/m"
is "named agt-jails" "$(blkid -p -o value -s PART_ENTRY_NAME "$P")" "agt-jails"

# 5. A disk made before the partition had a name (agtd.sh's, or this script's of 964d7c8):
# left alone.
new_disk "$T/old.img"
echo 'type=linux' | sfdisk --quiet --label gpt "$D"
P=$(first_part "$D")
mkfs.btrfs -q -f -K --mixed -L agt-jails "$P" >/dev/null 2>&1
uuid=$(blkid -p -o value -s UUID "$P")
mount "$P" "$T/m"
echo "$uuid" >"$T/m/.agt-jails-disk"
echo kept >"$T/m/data"
umount "$T/m"
check "a disk made before the partition's name is used as it is" run "$D"
is "it prints its partition" "$(cat "$T/out")" "$P"
mount "$P" "$T/m"
is "same file system, its data kept" "$(blkid -p -o value -s UUID "$P"):$(cat "$T/m/data" 2>&1)" "$uuid:kept"
umount "$T/m"

# 6. A disk holding a file system of its own (no partition): refused, untouched.
new_disk "$T/ext4.img"
mkfs.ext4 -q "$D"
before=$(blkid -p -o value -s UUID "$D")
check "a disk holding ext4 is refused" refused "$D"
like "it says why" "$(cat "$T/err")" "holds data agt did not put there \(ext4\); agt formats only an empty disk"
is "the ext4 is left as it was" "$(blkid -p -o value -s TYPE "$D"):$(blkid -p -o value -s UUID "$D")" "ext4:$before"

# 7. A disk blkid finds two file systems on (it answers "ambivalent", and nothing on its
# standard output): refused, not taken for empty.
new_disk "$T/two.img"
mkfs.ext4 -q "$D"
truncate -s 512M "$T/btrfs.img"
mkfs.btrfs -q -f "$T/btrfs.img" >/dev/null 2>&1
dd if="$T/btrfs.img" of="$D" bs=4096 skip=16 seek=16 count=1 conv=notrunc status=none # its superblock
rm -f "$T/btrfs.img"
before=$(head -c 1M "$D" | md5sum)
blkid -p "$D" >/dev/null 2>&1
is "(blkid calls it ambivalent)" "$?" 8
check "a disk with two file systems' signatures is refused" refused "$D"
like "it says blkid cannot tell" "$(cat "$T/err")" "blkid cannot tell what $D .* holds \(exit 8\)"
is "the disk is left as it was (its first MiB)" "$(head -c 1M "$D" | md5sum)" "$before"

# 8. A partition holding another file system: refused, untouched.
new_disk "$T/part.img"
echo 'type=linux' | sfdisk --quiet --label gpt "$D"
P=$(first_part "$D")
mkfs.ext4 -q "$P"
check "a partition holding ext4 is refused" refused "$D"
like "it names the file system" "$(cat "$T/err")" "holds a ext4 file system, not agt's btrfs"
is "the partition keeps its ext4" "$(blkid -p -o value -s TYPE "$P")" "ext4"

# 9. A partition agt did not name, holding no file system agt knows (another system's, a
# reboot of an agt before the name): refused, never formatted.
new_disk "$T/other.img"
printf 'size=16M, type=linux, name=data\ntype=linux\n' | sfdisk --quiet --label gpt "$D"
P=$(first_part "$D")
printf 'payload' | dd of="$P" bs=1M seek=1 conv=notrunc status=none
check "a partition agt did not make is refused" refused "$D"
like "it says so" "$(cat "$T/err")" "holds a partition agt did not make \(named 'data', no file system\)"
is "nothing written to it" "$(blkid -p -o value -s TYPE "$P"):$(dd if="$P" bs=1M skip=1 count=1 status=none | head -c 7)" ":payload"

# 10. A partition table with no partition (something agt did not write): refused.
new_disk "$T/table.img"
echo 'label: dos' | sfdisk --quiet "$D"
check "a partition table without partitions is refused" refused "$D"
is "the table stays dos" "$(blkid -p -o value -s PTTYPE "$D")" "dos"

# 11. No jails' disk named (a VM from before): nothing done.
new_disk "$T/none.img"
check "no disk named: success" env -u PARAM_AgtJailsDisk AGT_JAILS_DISK_DEVICE="$D" sh "$SCRIPT"
is "and the disk untouched" "$(blkid -p -o value -s PTTYPE "$D")" ""

# 12. As cloud-init runs bootcmd: every entry's lines in one /bin/sh script, this file's
# followed by the next entry's.  The script's exit ends it alone.
printf '%s\n%s\n' "$(cat "$SCRIPT")" 'echo the next boot command' >"$T/bootcmd.sh"
out=$(env -u PARAM_AgtJailsDisk sh "$T/bootcmd.sh" 2>&1)
is "the boot commands after it run (no disk named)" "$out" "the next boot command"
new_disk "$T/boot.img"
out=$(PARAM_AgtJailsDisk=vm-jails AGT_JAILS_DISK_DEVICE="$D" sh "$T/bootcmd.sh" 2>/dev/null)
is "the boot commands after it run (a disk made)" "$out" "$(first_part "$D")
the next boot command"
