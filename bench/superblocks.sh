#!/usr/bin/env bash
# What a jail's superblocks cost every memory cgroup (docs/BENCH.md, section 9).  Every
# superblock registers a memcg-aware shrinker, and the kernel keeps for each memory cgroup
# one 520-byte unit (a kmalloc-1k object) per 64 shrinker ids, for the most ids the machine
# has had at once since boot (mm/shrinker.c).  This script starts a private agtd and N idle
# jails (`probe sleep 600`) and prints:
#   - the file systems one jail mounts of its own (device numbers its mount table has and
#     the guest's has not), and the same for one bwrap sandbox as bench/run.sh starts it;
#   - the kmalloc-1k objects 100 new empty memory cgroups take, per cgroup, before the jails
#     and with them: 1 object of 1 KiB per 64 shrinker ids of the high-water mark, so
#     the objects times 64 estimate that mark.
# The mark never goes down: once the machine has had more superblocks than the N jails
# add, the second reading does not move (run it on a freshly booted machine to see a jail's
# own share).  Needs root and Linux.  Knobs: BUILD (build), SUPERBLOCKS_N (1000),
# BENCH_UID (1000), BENCH_DISK (16 MiB: each jail's disk limit, as bench/run.sh).
set -euo pipefail

SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$SRCDIR/bench/lib.sh"
N=${SUPERBLOCKS_N:-1000}
BENCH_UID=${BENCH_UID:-1000}
DISK=${BENCH_DISK:-16777216}

die() {
  echo "bench: superblocks: $*" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || die "needs root"
[ "$(uname -s)" = Linux ] || die "needs Linux"
for f in "$AGTD" "$PROBE"; do [ -x "$f" ] || die "$f is missing: build first (just build)"; done
case $N in '' | *[!0-9]* | 0) die "SUPERBLOCKS_N: '$N' is not a count of jails (1..1000)" ;; esac
[ "$N" -le 1000 ] || die "SUPERBLOCKS_N: $N is more than agtd's --max-jails here (1000)"
if [ -d /sys/fs/cgroup/memory ]; then
  MEMCG_ROOT=/sys/fs/cgroup/memory # cgroup v1
else
  MEMCG_ROOT=/sys/fs/cgroup
  grep -qw memory "$MEMCG_ROOT/cgroup.subtree_control" ||
    die "the memory controller is not enabled in $MEMCG_ROOT/cgroup.subtree_control"
fi

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
PROBES=()
# the probe cgroups memcg_cost makes, if it stops half-way
remove_probes() {
  local d
  for d in "${PROBES[@]}"; do [ -d "$d" ] && rmdir "$d"; done
}
bench_scratch "bench: superblocks" agt-superblocks agt-superblocks remove_probes

kmalloc_1k() { awk '$1 == "kmalloc-1k" {print $2}' /proc/slabinfo; }

# kmalloc-1k objects per new empty memory cgroup: 100 made at once, five times; prints the
# median, the least and the most (others making or removing memory cgroups meanwhile move
# it: on a busy machine the spread shows it)
memcg_cost() {
  local i r a b
  for r in 1 2 3 4 5; do
    a=$(kmalloc_1k)
    for i in $(seq 1 100); do
      mkdir "$MEMCG_ROOT/$CG-probe-$i"
      PROBES+=("$MEMCG_ROOT/$CG-probe-$i")
    done
    b=$(kmalloc_1k)
    for i in $(seq 1 100); do rmdir "$MEMCG_ROOT/$CG-probe-$i"; done
    PROBES=()
    awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f\n", (b - a) / 100 }'
  done | sort -n | awk '{ v[NR] = $1 } END { printf "%s %s %s", v[3], v[1], v[5] }'
}

# own_superblocks MOUNTINFO-TEXT: the file systems a jail mounted of its own
. "$SRCDIR/tests/guest/mountinfo.sh"

bench_agtd_start --max-jails 1100
bench_rootfs
bench_workspace

before=$(memcg_cost)

# One jail that shows its mount table, then N idle ones.
ctl jail run --name show --rootfs "$ROOTFS" --workspace "$WS" --disk "$DISK" -- \
  /bin/cat /proc/self/mountinfo >/dev/null
ctl jail wait show >/dev/null
agtd_own=$(own_superblocks "$(ctl jail logs show)")
ctl jail rm show >/dev/null
bwrap_own=-
if BWRAP=$(command -v bwrap); then
  bwrap_own=$(own_superblocks "$(setpriv --reuid "$BENCH_UID" --regid "$BENCH_UID" --clear-groups \
    "$BWRAP" --unshare-all --die-with-parent --new-session --ro-bind "$ROOT" / --proc /proc \
    --dev /dev --tmpfs /tmp --bind "$WS" /work --chdir /work cat /proc/self/mountinfo)")
fi

t0=$(date +%s%N)
for i in $(seq 1 "$N"); do
  ctl jail run --name "i$i" --rootfs "$ROOTFS" --workspace "$WS" --disk "$DISK" -- \
    /bin/probe sleep 600 >/dev/null || die "jail i$i did not start"
done
t1=$(date +%s%N)
with=$(memcg_cost)
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

echo "superblocks: $(date -u '+%Y-%m-%d %H:%M UTC'), kernel $(uname -r), $N idle jails of $AGTD"
echo "load average at start: $LOAD_START, with the jails: $LOAD_END; other agtd processes: $(($(pgrep -xc agtd) - 1))"
echo "file systems one jail mounts of its own:         agtd: $agtd_own($(wc -w <<<"$agtd_own"))"
echo "                                                bwrap: $bwrap_own($(wc -w <<<"$bwrap_own"))"
echo "  (each new ipc namespace has an mqueue superblock too, in no mount table)"
read -r b0 b1 b2 <<<"$before"
read -r w0 w1 w2 <<<"$with"
echo "kmalloc-1k objects per new empty memory cgroup, median (least-most) of 5 x 100:"
echo "  before the jails $b0 ($b1-$b2), with $N jails $w0 ($w1-$w2)"
awk -v b="$b0" -v w="$w0" 'BEGIN {
  printf "  shrinker ids high-water (x64): about %d before, %d with the jails\n", b * 64, w * 64 }'
echo "started the $N jails in $(((t1 - t0) / 1000000)) ms"
