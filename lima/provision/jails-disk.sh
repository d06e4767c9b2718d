#!/bin/sh
# agt: make the jails' disk (the Lima disk $PARAM_AgtJailsDisk agt made for this VM,
# additionalDisks with `format: false`) a btrfs, once, when it is still empty: one GPT
# partition, as Lima lays out its disks, a btrfs on it, and the file system's UUID in
# .agt-jails-disk at its root (agtd turns quotas on only on a btrfs agt made).  Idempotent:
# a disk that holds the file system already is left alone; one that holds anything else is
# refused, never formatted.
#
# It runs twice per boot, the same file:
#   - as a Lima `mode: boot` script (cloud-init's bootcmd, /bin/sh, before Lima's own boot
#     scripts): on an image that has mkfs.btrfs, the disk is ready before Lima's
#     05-lima-disks.sh mounts it at /mnt/lima-NAME, so that script finds it at the first
#     boot already;
#   - from agtd.sh (`mode: system`, after the packages): on an image without mkfs.btrfs at
#     its first boot, this run makes it (and Lima's disk script, which ran before, logged
#     that it had nothing to mount: a warning, once).
# POSIX sh: bootcmd runs it with /bin/sh.
set -eu

disk="${PARAM_AgtJailsDisk:-}"
[ -n "$disk" ] || exit 0

say() { echo "agt jails-disk.sh: $*" >&2; }

# The one disk besides the root file system's (Lima's cidata is a CD-ROM): agt's template
# attaches no other, and Lima names a disk's device only in its own, internal variables.
# AGT_JAILS_DISK_DEVICE names it instead (tests/guest/jails-disk.sh: a loop device).
dev="${AGT_JAILS_DISK_DEVICE:-}"
if [ -z "$dev" ]; then
  root_src="$(findmnt -n -o SOURCE /)"
  root_disk="$(lsblk -n -o PKNAME "$root_src" | head -n 1)"
  [ -n "$root_disk" ] || root_disk="$(basename "$root_src")"
  others=""
  n=0
  for name in $(lsblk -d -n -o NAME,TYPE | awk '$2 == "disk" { print $1 }'); do
    if [ "$name" != "$root_disk" ]; then
      others="$others $name"
      n=$((n + 1))
    fi
  done
  if [ "$n" -ne 1 ]; then
    say "the jails' disk '$disk': this VM has $n disks besides its root disk ($root_disk):${others:- none}; agt attaches exactly one (limactl disk ls on the host)"
    exit 1
  fi
  dev="/dev/${others# }"
fi
# its first partition (vdb1; loop0p1)
first_part() { lsblk -n -l -o PATH,TYPE "$dev" | awk '$2 == "part" { print $1; exit }'; }
part="$(first_part)"

fs_type() { blkid -p -o value -s TYPE "$1" 2>/dev/null || true; }

if [ -n "$part" ] && [ -n "$(fs_type "$part")" ]; then
  [ "$(fs_type "$part")" = btrfs ] && exit 0
  say "$part (the jails' disk '$disk') holds a $(fs_type "$part") file system, not agt's btrfs; agt formats only an empty disk"
  exit 1
fi
if ! command -v mkfs.btrfs >/dev/null 2>&1; then
  # this image has no btrfs-progs yet: agtd.sh runs this again once it is installed
  say "no mkfs.btrfs yet: the jails' disk '$disk' is made by the provisioning"
  exit 0
fi
if [ -z "$part" ]; then
  # agt formats only a disk that holds nothing: no partition table, no file system
  if [ -n "$(blkid -p -o value -s PTTYPE "$dev" 2>/dev/null || true)" ] || [ -n "$(fs_type "$dev")" ]; then
    say "$dev (the jails' disk '$disk') holds data agt did not put there; agt formats only an empty disk"
    exit 1
  fi
  echo 'type=linux' | sfdisk --quiet --label gpt "$dev"
  udevadm settle 2>/dev/null || true
  i=0
  while [ -z "$part" ] && [ "$i" -lt 50 ]; do
    sleep 0.2
    i=$((i + 1))
    part="$(first_part)"
  done
  if [ -z "$part" ] || [ ! -b "$part" ]; then
    say "no partition on $dev after partitioning it"
    exit 1
  fi
fi
# an empty partition: the one made above, or one whose mkfs a reboot cut short
# (-K: no discard of a fresh disk; mixed block groups, as agtd's own image: a disk full of
# one jail's data still has room for metadata once that data is gone)
mkfs.btrfs -q -f -K --mixed -m single -d single -L agt-jails "$part"
uuid="$(blkid -p -o value -s UUID "$part")"
mnt="$(mktemp -d /run/agt-jails-disk.XXXXXX)"
mount -t btrfs -o nosuid,nodev "$part" "$mnt"
printf '%s\n' "$uuid" >"$mnt/.agt-jails-disk.new"
mv -f "$mnt/.agt-jails-disk.new" "$mnt/.agt-jails-disk"
umount "$mnt"
rmdir "$mnt"
say "made the jails' disk '$disk': btrfs $uuid on $part"
