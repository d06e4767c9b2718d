#!/bin/sh
# agt: make the jails' disk (the Lima disk $PARAM_AgtJailsDisk agt made for this VM,
# additionalDisks with `format: false`) a btrfs, once, when it is still empty: one GPT
# partition, as Lima lays out its disks, a btrfs labelled agt-jails on it, and the file
# system's UUID in .agt-jails-disk at its root (agtd turns quotas on only on a btrfs agt
# made).  Idempotent: a disk that holds that file system already is left alone; one that
# holds anything else, or that blkid cannot tell, is refused, never formatted.  On success
# it prints the partition (agtd.sh mounts it).
#
# The partition is named agt-jails-new until the file system and its mark are on it, then
# agt-jails: a reboot anywhere in between leaves a partition this script knows for its own
# and makes again (an empty or half-made file system, nothing of a jail's), where a partition
# agt did not name is never formatted.  (Disks made before the name: their partition holds
# the btrfs labelled agt-jails already, and is left alone.)  udev neither probes the disk
# nor re-reads its partition table meanwhile: the script holds a lock on it, as systemd asks
# of partitioning tools (BSD flock on the whole disk's node).
#
# It runs twice per boot, the same file:
#   - as a Lima `mode: boot` script (cloud-init's bootcmd, /bin/sh, before Lima's own boot
#     scripts): on an image that has mkfs.btrfs, the disk is ready before Lima's
#     05-lima-disks.sh mounts it at /mnt/lima-NAME, so that script finds it at the first
#     boot already;
#   - from agtd.sh (`mode: system`, after the packages): on an image without mkfs.btrfs at
#     its first boot, this run makes it (and Lima's disk script, which ran before, logged
#     that it had nothing to mount: a warning, once).
# POSIX sh: bootcmd runs it with /bin/sh.  cloud-init makes one script of all bootcmd
# entries, this file's lines among them: the subshell keeps its exits and `set -eu` to
# itself, so the entries after it still run.
(
  set -eu

  disk="${PARAM_AgtJailsDisk:-}"
  [ -n "$disk" ] || exit 0

  say() { echo "agt jails-disk.sh: $*" >&2; }
  die() {
    say "$*"
    exit 1
  }

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
    [ "$n" -eq 1 ] ||
      die "the jails' disk '$disk': this VM has $n disks besides its root disk ($root_disk):${others:- none}; agt attaches exactly one (limactl disk ls on the host)"
    dev="/dev/${others# }"
  fi
  [ -b "$dev" ] || die "the jails' disk '$disk': $dev is not a block device"

  # probe DEVICE: blkid's low-level probe, into p_type (file system), p_pttype (partition
  # table), p_label, p_uuid and p_name (GPT partition name); all "" when blkid finds nothing.
  # Whatever else blkid answers (signatures of more than one file system, a device it cannot
  # read) stops the script: it never counts as an empty disk.
  probe() {
    rc=0
    out="$(blkid -p -o export "$1")" || rc=$?
    case $rc in
    0) ;;
    2) out= ;;
    *) die "blkid cannot tell what $1 (the jails' disk '$disk') holds (exit $rc); agt formats only a disk it knows to be empty (wipefs $1 shows what is there)" ;;
    esac
    p_type="$(printf '%s\n' "$out" | sed -n 's/^TYPE=//p')"
    p_pttype="$(printf '%s\n' "$out" | sed -n 's/^PTTYPE=//p')"
    p_label="$(printf '%s\n' "$out" | sed -n 's/^LABEL=//p')"
    p_uuid="$(printf '%s\n' "$out" | sed -n 's/^UUID=//p')"
    p_name="$(printf '%s\n' "$out" | sed -n 's/^PART_ENTRY_NAME=//p')"
  }
  # the disk's partitions (vdb1; loop0p1), from sysfs: udev waits on the lock
  parts() { lsblk -n -l -o PATH,TYPE "$dev" | awk '$2 == "part" { print $1 }'; }

  exec 9<"$dev"
  flock -w 60 9 || die "the jails' disk '$disk': $dev stayed locked for 60 s"

  part="$(parts | head -n 1)"
  nparts="$(parts | wc -l)"
  if [ -n "$part" ]; then
    probe "$part"
    if [ "$p_name" != agt-jails-new ]; then
      if [ "$p_type" = btrfs ] && [ "$p_label" = agt-jails ]; then
        echo "$part"
        exit 0
      fi
      [ -z "$p_type" ] ||
        die "$part (the jails' disk '$disk') holds a $p_type file system${p_label:+ labelled $p_label}, not agt's btrfs; agt formats only an empty disk"
      die "$part (the jails' disk '$disk') holds a partition agt did not make (named '$p_name', no file system); agt formats only an empty disk (wipefs -a $dev empties it)"
    fi
    # agt's, cut short by a reboot: made again
    [ "$nparts" -eq 1 ] ||
      die "$dev (the jails' disk '$disk') has $nparts partitions; agt makes one"
  else
    probe "$dev"
    [ -z "$p_pttype" ] && [ -z "$p_type" ] ||
      die "$dev (the jails' disk '$disk') holds data agt did not put there (${p_type:-a $p_pttype partition table}); agt formats only an empty disk"
  fi
  if ! command -v mkfs.btrfs >/dev/null 2>&1; then
    # this image has no btrfs-progs yet: agtd.sh runs this again once it is installed
    say "no mkfs.btrfs yet: the jails' disk '$disk' is made by the provisioning"
    exit 0
  fi
  if [ -z "$part" ]; then
    # (sfdisk takes no lock of its own here: this script holds it)
    echo 'type=linux, name=agt-jails-new' | LOCK_BLOCK_DEVICE=0 sfdisk --quiet --label gpt "$dev" >&2
    i=0
    while [ -z "$part" ] && [ "$i" -lt 50 ]; do
      part="$(parts | head -n 1)"
      [ -n "$part" ] || sleep 0.2
      i=$((i + 1))
    done
    [ -n "$part" ] && [ -b "$part" ] || die "no partition on $dev after partitioning it"
  fi
  # (-K: no discard of a fresh disk; mixed block groups, as agtd's own image: a disk full of
  # one jail's data still has room for metadata once that data is gone)
  mkfs.btrfs -q -f -K --mixed -m single -d single -L agt-jails "$part" >&2
  probe "$part"
  [ "$p_type" = btrfs ] && [ -n "$p_uuid" ] || die "no btrfs on $part after mkfs.btrfs"
  mnt="$(mktemp -d /run/agt-jails-disk.XXXXXX)"
  mount -t btrfs -o nosuid,nodev "$part" "$mnt"
  printf '%s\n' "$p_uuid" >"$mnt/.agt-jails-disk.new"
  mv -f "$mnt/.agt-jails-disk.new" "$mnt/.agt-jails-disk"
  umount "$mnt"
  rmdir "$mnt"
  # done: the partition's name says so (the kernel keeps its partitions as they are)
  LOCK_BLOCK_DEVICE=0 sfdisk --quiet --no-reread --no-tell-kernel --part-label "$dev" 1 agt-jails >&2
  say "made the jails' disk '$disk': btrfs $p_uuid on $part"
  exec 9<&-
  # the file system's links (/dev/disk/by-uuid) for what mounts it next
  udevadm settle --timeout=30 2>/dev/null || true
  echo "$part"
)
