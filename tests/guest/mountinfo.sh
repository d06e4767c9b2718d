# Sourced by tests/guest/lib.sh and bench/superblocks.sh.

# The file systems a jail mounted of its own, from its mount table ($1, the text of a
# /proc/PID/mountinfo): the type of each device number in it that the guest's own mount
# table has not, once each, sorted, on one line.  Each is a superblock, and each superblock
# costs every memory cgroup on the machine (docs/BENCH.md, section 9).
own_superblocks() {
  local guest
  guest=$(awk '{print $3}' /proc/self/mountinfo | sort -u | tr '\n' ' ')
  printf '%s\n' "$1" | awk -v guest="$guest" '
    BEGIN { n = split(guest, g, " "); for (i = 1; i <= n; i++) seen[g[i]] = 1 }
    $3 ~ /^[0-9]+:[0-9]+$/ && !($3 in seen) {
      seen[$3] = 1
      for (i = 7; i < NF && $i != "-"; i++) {}
      print $(i + 1)
    }' | sort | tr '\n' ' '
}
