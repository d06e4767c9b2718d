#!/usr/bin/env bash
# What a jail's keeper (guest/keeper/keeper.h) costs in memory and in cold start latency: N idle jails (`/bin/probe sleep 600`)
# on this tree's agtd, then on BASE_AGTD, an agtd built without keepers (its jails' inits are
# agtd's children and die with it), each measured by `agt-bench memory --only agtd` (the
# MemAvailable drop / N and the PSS of agtd's descendants / N: with keepers, the keepers are
# among them), then RUNS cold starts (`--warm 0`: agtd spawns the keeper on each start's
# path) through `agt-bench latency --only agtd`.  Prints the driver's figures for both.
#
#   BASE_AGTD=/path/to/old/agtd bench/keeper.sh [N]
#
# Root, Linux.  Memory figures mean something only on an otherwise idle machine: the load
# average and other agtds are printed.
set -euo pipefail

SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$SRCDIR/build}
N=${1:-100}
RUNS=${RUNS:-100}
: "${BASE_AGTD:?BASE_AGTD must name an agtd without keepers}"
PROBE=$BUILD/tests/guest/probe
DRIVER=$BUILD/bench/agt-bench
BENCH_UID=${BENCH_UID:-1000}

T=$(mktemp -d /tmp/agt-keeper-bench.XXXXXX)
chmod 755 "$T"
AGTD_PID=
CG=

stop_agtd() {
  [ -n "$AGTD_PID" ] || return 0
  kill -TERM "$AGTD_PID" 2>/dev/null || true
  wait "$AGTD_PID" 2>/dev/null || true
  AGTD_PID=
  for d in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  return 0
}
cleanup() {
  stop_agtd
  grep -q " $T/" /proc/self/mountinfo || rm -rf --one-file-system "$T"
}
trap cleanup EXIT

measure() { # LABEL AGTD
  local label=$1 agtd=$2 dir=$T/$1
  mkdir -p "$dir/ws"
  chown "$BENCH_UID:$BENCH_UID" "$dir/ws"
  CG=agt-keeper-bench-$$-$label
  "$agtd" serve --socket "$dir/agtd.sock" --state-dir "$dir/state" --cgroup "$CG" \
    --workspace-root "$dir" --warm 0 >>"$dir/agtd.log" 2>&1 &
  AGTD_PID=$!
  for _ in $(seq 1 200); do
    "$agtd" ctl -s "$dir/agtd.sock" hello >/dev/null 2>&1 && break
    sleep 0.05
  done
  sed "s|@PROBE@|$PROBE|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$dir/rootfs.yaml"
  cat >>"$dir/rootfs.yaml" <<EOM
  - path: /bin/stamp
    libs: false
    sources:
      - host: "$BUILD/bench/stamp"
EOM
  "$agtd" ctl -s "$dir/agtd.sock" rootfs build "$dir/rootfs.yaml" --no-download >"$dir/rootfs.out"
  local id
  id=$(cut -d' ' -f1 "$dir/rootfs.out")
  "$DRIVER" memory --only agtd --socket "$dir/agtd.sock" --rootfs "$id" \
    --root "$dir/state/rootfs/$id/root" --workspace "$dir/ws" --uid "$BENCH_UID" \
    --agtd-pid "$AGTD_PID" --count "$N" | sed "s/^/$label /"
  # cold starts (no prepared jails): the keeper's spawn is on their path
  "$DRIVER" latency --only agtd --socket "$dir/agtd.sock" --rootfs "$id" \
    --root "$dir/state/rootfs/$id/root" --workspace "$dir/ws" --uid "$BENCH_UID" \
    --agtd-pid "$AGTD_PID" --runs "$RUNS" --warmup 10 | grep -E '\.(p50|p99|n) ' | sed "s/^/$label /"
  stop_agtd
}

echo "load average $(cut -d' ' -f1-3 /proc/loadavg); other agtds: $(pgrep -x agtd | wc -l)"
measure with "$BUILD/guest/agtd"
measure without "$BASE_AGTD"
