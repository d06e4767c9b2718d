#!/usr/bin/env bash
# The jails' disk (guest/jail/disk.h): the jails' writable layers on a file system of their own,
# apart from the records and logs; limits that never add up to more than the disk; space
# freed by jail rm usable when it answers; quotas never turned on on a file system agtd did
# not make.
. "$(dirname "$0")/lib.sh"
command -v mkfs.btrfs >/dev/null || bail "mkfs.btrfs is needed (apt-get install btrfs-progs)"
P2=
disk_finish() {
  local rc=$?
  [ -z "$P2" ] || { kill -TERM "$P2" 2>/dev/null; wait "$P2" 2>/dev/null; }
  agtd_stop
  for m in "$T/state2/jails" "$T/mine" "$T/layers" "$T/agts"; do
    grep -q " $m " /proc/self/mountinfo && umount "$m"
  done
  for d in /sys/fs/cgroup/*/"$CG-2" /sys/fs/cgroup/"$CG-2"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  (exit "$rc")
  finish
}
trap disk_finish EXIT

agtd_start --disk-size 2G
build_test_rootfs
R=$TEST_ROOTFS
cap=$(ctl --json status | sed -n 's/.*"size": \([0-9]*\).*/\1/p')
[ -n "$cap" ] || bail "agtd reports no jails' disk: $(ctl status)"
CAP_MIB=$(((cap - cap / 16) >> 20))
echo "# the jails' disk: $((cap >> 20)) MiB, $CAP_MIB MiB of it for limits"

# 1. Records and logs are not on the file system the jails write to.
ctl jail run --name r1 --rootfs "$R" --disk 256M -- /bin/sh -c 'echo hi; echo x > /home/agent/f' >/dev/null
ctl jail wait r1 >/dev/null
fs_of() { findmnt -n -o TARGET -T "$(readlink -f "$1")"; } # the mount a file is on
log_fs=$(fs_of "$STATE/jails/r1/console.log")
rec_fs=$(fs_of "$STATE/jails/r1/jail.json")
layer_fs=$(fs_of "$STATE/jails/r1/rw/upper/home/agent/f")
echo "# mounts: log on $log_fs, record on $rec_fs, the jail's writes on $layer_fs"
check "the jail's log is not on the jails' disk" test "$log_fs" != "$layer_fs"
check "nor its record" test "$rec_fs" != "$layer_fs"

# A jail without a disk limit of its own gets at most a tenth of the jails' disk (not the
# 10G default, more than this whole disk); one that names its limit keeps it.
disk_of() { ctl jail inspect "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["limits"]["disk"])'; }
ctl jail create --name d8 --rootfs "$R" -- /bin/true >/dev/null
ctl jail create --name d9 --rootfs "$R" --disk 300M -- /bin/true >/dev/null
d8=$(disk_of d8)
check "a jail without --disk gets at most a tenth of the disk ($d8 bytes)" \
  test "${d8:-0}" -gt 0 -a "${d8:-0}" -le $((cap / 10))
is "one with --disk 300M keeps it" "$(disk_of d9)" $((300 << 20))
ctl jail rm d8 >/dev/null
ctl jail rm d9 >/dev/null

# Eight default jails run at once (agt verify's eight) while the disk holds something already
# (r1's layer, btrfs's own metadata): with an eighth each, the eighth was refused.
started=0
for i in 1 2 3 4 5 6 7 8; do
  if out=$(ctl jail run --name "e$i" --rootfs "$R" -- probe sleep 60 2>&1); then
    started=$((started + 1))
  else
    echo "# e$i: $out"
  fi
done
is "eight jails without --disk run at once" "$started" 8
for i in 1 2 3 4 5 6 7 8; do ctl jail rm "e$i" --force >/dev/null 2>&1; done

# 2. One jail filling its layer takes nothing from another jail's log or writes: both fill
# theirs at once, each stops at its own quota (EDQUOT), never at a full disk (ENOSPC), and
# the other's log keeps every line.
half=$(((CAP_MIB - 256) / 2))
for j in f1 f2; do
  ctl jail run --name "$j" --rootfs "$R" --disk "${half}M" -- /bin/sh -c \
    'dd if=/dev/zero of=/home/agent/fill bs=1M count=4096 2>&1 | grep -v -e records -e copied; for i in $(seq 1 200); do echo line-$i; done' \
    >/dev/null || not_ok "start $j"
done
for j in f1 f2; do ctl jail wait "$j" >/dev/null; done
for j in f1 f2; do
  out=$(ctl jail logs "$j")
  like "$j stopped at its own limit (EDQUOT)" "$out" "Disk quota exceeded"
  check "$j never saw a full disk (ENOSPC)" test "$(printf '%s\n' "$out" | grep -c 'No space left')" = 0
  is "$j's log kept every line" "$(printf '%s\n' "$out" | grep -c '^line-')" 200
done

# 3. What running jails may write and what the disk holds never add up to more than the
# disk: a start that would overfill it is refused, saying so.  f1 and f2 (exited) hold about
# two thirds of it now.
out=$(ctl jail run --name over --rootfs "$R" --disk "${half}M" -- /bin/true 2>&1)
like "a jail whose limit would overfill the disk is refused" "$out" \
  "jail 'over' asks for $half MiB of disk \(its disk limit\), and of the jails' $CAP_MIB MiB disk 0 MiB are promised to running jails' limits and [0-9]+ MiB written"
out=$(ctl jail run --name over0 --rootfs "$R" --disk 0 -- /bin/true 2>&1)
like "and one without a limit (all of the disk)" "$out" "jail 'over0' asks for $CAP_MIB MiB"
check "neither left a record" test -z "$(ctl jail ls | grep '^over')"
used_mib() { stat -f -c '%b %f %S' "$STATE/layers" | awk '{ print int(($1 - $2) * $3 / 1048576) }'; }
room=$((CAP_MIB - $(used_mib)))
big=$((room - 100))
ctl jail run --name big --rootfs "$R" --disk "${big}M" -- probe sleep 60 >/dev/null
out=$(ctl jail create --name small --rootfs "$R" --disk 200M -- /bin/true 2>&1 &&
  ctl jail start small 2>&1)
like "a running jail's limit counts in full, whatever it wrote so far ($room MiB free for limits)" "$out" \
  "jail 'small' asks for 200 MiB of disk \(its disk limit\), and of the jails' $CAP_MIB MiB disk $big MiB are promised to running jails' limits"
ctl jail stop big 100 >/dev/null
ctl jail rm big >/dev/null
ctl jail rm small >/dev/null

# 4. Space freed by jail rm is free when rm answers (btrfs drops subvolumes in the
# background).
free_mib() { df -m --output=avail "$STATE/layers" | tail -1 | tr -d ' '; }
before=$(free_mib)
ctl jail rm f1 >/dev/null
after=$(free_mib)
check "jail rm gave back its layer's space at once ($before -> $after MiB free, ~$half MiB written)" \
  test "$after" -ge $((before + half * 3 / 4))
out=$(ctl jail run --name again --rootfs "$R" --disk "${half}M" -- /bin/sh -c \
  'dd if=/dev/zero of=/home/agent/fill bs=1M count=4096 2>&1')
ctl jail wait again >/dev/null
out=$(ctl jail logs again)
like "a new jail fills the freed space up to its own limit" "$out" "Disk quota exceeded"
check "without a full disk" test "$(printf '%s\n' "$out" | grep -c 'No space left')" = 0
for j in r1 f2 again; do ctl jail rm "$j" >/dev/null; done
is "no layer is left" "$(ls -A "$STATE/layers" | grep -vc '^\.w-\|^w-')" 0
agtd_stop

# 5. A btrfs agtd did not make: its quotas stay as they are.
theirs() { # theirs NAME: a btrfs of someone else's, mounted at $T/NAME
  truncate -s 1G "$T/$1.img"
  mkfs.btrfs -q -f "$T/$1.img" >/dev/null
  mkdir -p "$T/$1"
  mount -o loop "$T/$1.img" "$T/$1"
}
qgroups() { btrfs qgroup show "$1" >/dev/null 2>&1 && echo on || echo off; }
S2=$T/state2
theirs mine
mkdir -p "$S2"
mkdir -p "$S2/jails"
mount --bind "$T/mine" "$S2/jails"
AGTD_PID=
"$AGTD" serve --socket "$T/s2.sock" --state-dir "$S2" --cgroup "$CG-2" --workspace-root "$T" \
  --disk-size 1G >>"$T/agtd2.log" 2>&1 &
P2=$!
hello2() { "$AGTD" ctl -s "$T/s2.sock" hello >/dev/null 2>&1; }
check "a second agtd over a btrfs of someone else's answers" wait_until 10 hello2
is "agtd does not turn on quotas on a btrfs it did not make (under its records)" "$(qgroups "$T/mine")" off
kill -TERM "$P2"
wait "$P2"
P2=
umount "$S2/jails"
theirs layers
# a mark copied from a btrfs agt made: not this one's UUID
echo 01234567-89ab-cdef-0123-456789abcdef >"$T/layers/.agt-jails-disk"
agtd_start --layers-dir "$T/layers"
is "nor on its layers directory (a mark of another file system's)" "$(qgroups "$T/layers")" off
like "it runs without limits there, saying why" "$(ctl status)" \
  "agtd never turns quotas on on a file system it did not make \\(btrfs quota enable '$T/layers' turns them on\\)"
agtd_stop
rm "$T/layers/.agt-jails-disk"

# 5b. A btrfs agt made (the Lima VM's jails disk: lima/provision/agtd.sh formats it and writes
# its UUID into .agt-jails-disk): agtd's own, quotas turned on.
theirs agts
blkid -s UUID -o value "$T/agts.img" >"$T/agts/.agt-jails-disk"
agtd_start --layers-dir "$T/agts"
is "agtd turns quotas on on a btrfs agt made (its mark holds its UUID)" "$(qgroups "$T/agts")" on
like "and limits the jails there" "$(ctl status)" '"limits": true'
ctl jail run --name a1 --rootfs "$R" --disk 32M -- /bin/sh -c \
  'dd if=/dev/zero of=/home/agent/fill bs=1M count=64' >/dev/null
ctl jail wait a1 >/dev/null
like "a jail there stops at its limit" "$(ctl jail logs a1)" "Disk quota exceeded"
ctl jail rm a1 >/dev/null
check "the mark stays" test -f "$T/agts/.agt-jails-disk"
agtd_stop
umount "$T/agts"
btrfs quota enable "$T/layers"
btrfs subvolume create "$T/layers/their-subvolume" >/dev/null
mkdir -p "$T/layers/their-dir/upper"
agtd_start --layers-dir "$T/layers"
like "with quotas turned on by its owner, it limits the jails there" "$(ctl status)" '"limits": true'
check "its start-up sweep leaves the owner's subvolume alone" test -d "$T/layers/their-subvolume"
check "and the owner's directory" test -d "$T/layers/their-dir/upper"
out=$(ctl jail run --name lw --rootfs "$R" --workspace "$T/layers" -- /bin/true 2>&1)
like "the layers directory is no workspace" "$out" "holds the jails' layers directory|is the jails' layers"
out=$(ctl jail run --name lw --rootfs "$R" --workspace "$T/layers/their-dir" -- /bin/true 2>&1)
like "nor anything in it" "$out" "is inside the jails' layers directory"
ctl jail run --name t1 --rootfs "$R" --disk 32M -- /bin/sh -c \
  'dd if=/dev/zero of=/home/agent/fill bs=1M count=64' >/dev/null
ctl jail wait t1 >/dev/null
like "a jail there stops at its limit" "$(ctl jail logs t1)" "Disk quota exceeded"
ctl jail rm t1 >/dev/null
agtd_stop
umount "$T/mine" "$T/layers"

# 6. A state directory of an older agtd (its jails' records inside jails.img) is refused.
S3=$T/state3
mkdir -p "$S3"
: >"$S3/jails.img"
out=$("$AGTD" serve --socket "$T/s3.sock" --state-dir "$S3" --cgroup "$CG-3" 2>&1)
like "an older agtd's jails.img is refused at start, saying what to do" "$out" \
  "jails.img' is the jails' disk of an older agtd, which kept the jails' records on it"
