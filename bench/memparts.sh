#!/usr/bin/env bash
# Where an idle jail's memory goes (docs/BENCH.md, section 2): bench/memparts (build/bench)
# makes N of one part of a jail at a time, holds them, and reads MemAvailable, Slab,
# SUnreclaim and Percpu before and with them:
#   netns   a network namespace
#   mntns   a mount namespace holding only an overlay (lower: /usr here; upper and work on
#           a btrfs of the script's own), pivoted into, as a jail's root is
#   subvol  a btrfs subvolume with a qgroup limit (quotas on), as a jail's writable layer
#   cgroup  a directory in each of the v1 hierarchies agtd uses (memory, pids, cpu), or the
#           unified hierarchy on cgroup v2
#   procs   an idle process (a paused fork of the small driver): what any process costs
# (the jail's init and its keeper are measured by bench/run.sh, PSS, and bench/keeper.sh).
# Needs root and Linux.  Knobs: BUILD (build), MEMPARTS_N (200).  It makes a 2 GiB sparse
# btrfs image under its scratch directory, loop-mounts it, and removes all of it at the end,
# also on failure.
set -euo pipefail

SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$SRCDIR/bench/lib.sh"
DRIVER=$BUILD/bench/memparts
N=${MEMPARTS_N:-200}

die() {
  echo "bench: memparts: $*" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || die "needs root"
[ -x "$DRIVER" ] || die "$DRIVER is missing: build first (just build)"
command -v mkfs.btrfs >/dev/null || die "mkfs.btrfs is missing (btrfs-progs)"

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
OTHERS=$( (pgrep -x agtd || true) | wc -l)
MNT=
LOOP=
unmount_btrfs() {
  if [ -n "$MNT" ] && mountpoint -q "$MNT"; then
    umount "$MNT" || echo "bench: memparts: could not unmount $MNT" >&2
  fi
  [ -z "$LOOP" ] || losetup -d "$LOOP" 2>/dev/null || true
}
bench_scratch "bench: memparts" agt-memparts agt-memparts unmount_btrfs
MNT=$T/btrfs

truncate -s 2G "$T/img"
mkfs.btrfs -q "$T/img" >/dev/null
LOOP=$(losetup --find --show "$T/img")
mkdir "$MNT"
mount "$LOOP" "$MNT"
btrfs quota enable "$MNT"
mkdir "$MNT/scratch" "$MNT/sv"

if [ -f /sys/fs/cgroup/cgroup.controllers ]; then CGS=(.); else CGS=(memory pids cpu); fi
RES=$T/res
"$DRIVER" netns "$N" >>"$RES"
"$DRIVER" mntns "$N" /usr "$MNT/scratch" >>"$RES"
"$DRIVER" subvol "$N" "$MNT/sv" >>"$RES"
"$DRIVER" cgroup "$N" "${CGS[@]}" >>"$RES"
"$DRIVER" procs "$N" >>"$RES"

val() { awk -v k="$1" '$1 == k { print $2; exit }' "$RES"; }
echo
echo "Memory by part — $(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), $(nproc) CPUs, kernel $(uname -r)"
echo "load average at start: $LOAD_START, at end: $(cut -d' ' -f1-3 /proc/loadavg); other agtd processes: $OTHERS"
echo "N = $N of each, KiB per one (whole machine: others' work moves MemAvailable)"
printf '%-8s %14s %10s %12s %8s %s\n' part MemAvailable Slab SUnreclaim Percpu unsettled
for m in netns mntns subvol cgroup procs; do
  printf '%-8s %14s %10s %12s %8s %s\n' "$m" "$(val "$m.memavailable_kib_each")" \
    "$(val "$m.slab_kib_each")" "$(val "$m.sunreclaim_kib_each")" "$(val "$m.percpu_kib_each")" \
    "$(val "$m.unsettled")"
done
echo "(cgroup: one directory in each of: ${CGS[*]})"
