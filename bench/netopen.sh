#!/usr/bin/env bash
# What network mode open costs against the default (allow: agtd's egress proxy), in memory and
# in start latency: on one agtd without prepared jails (`--warm 0`, so both modes start cold
# and alike but for the network), N idle jails (`/bin/probe sleep 600`) of each mode through
# `agt-bench memory --only agtd --net MODE` (the MemAvailable drop / N, which holds the
# kernel's side: an open jail's veth pair, its namespace's routes and conntrack; and the
# PSS of agtd's descendants / N), then RUNS cold starts of each mode through `agt-bench
# latency --only agtd --net MODE`.  Prints the driver's figures for both.
#
#   bench/netopen.sh [N]
#
# Root, Linux, and a machine set up for mode open (lima/provision/machine.sh: `just
# machine`).  Memory figures mean something only on an otherwise idle machine: the load
# average and other agtds are printed.
set -euo pipefail

SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$SRCDIR/build}
N=${1:-50}
RUNS=${RUNS:-100}
AGTD=$BUILD/guest/agtd
PROBE=$BUILD/tests/guest/probe
DRIVER=$BUILD/bench/agt-bench
BENCH_UID=${BENCH_UID:-1000}

[ -d /sys/class/net/agt0 ] || {
  echo "bench/netopen.sh: this machine is not set up for network mode open: as root, just machine" >&2
  exit 1
}
T=$(mktemp -d /tmp/agt-netopen-bench.XXXXXX)
chmod 755 "$T"
CG=agt-netopen-bench-$$
AGTD_PID=
ctl() { "$AGTD" ctl -s "$T/agtd.sock" "$@"; }
cleanup() {
  if [ -n "$AGTD_PID" ]; then
    ctl jail ls 2>/dev/null | awk 'NR > 1 {print $1}' | while read -r j; do
      ctl jail rm "$j" --force >/dev/null || echo "bench: could not remove jail $j" >&2
    done
    kill -TERM "$AGTD_PID" 2>/dev/null || true
    wait "$AGTD_PID" 2>/dev/null || true
  fi
  for d in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  grep -q " $T/" /proc/self/mountinfo || rm -rf --one-file-system "$T"
}
trap cleanup EXIT

mkdir -p "$T/ws"
chown "$BENCH_UID:$BENCH_UID" "$T/ws"
"$AGTD" serve --socket "$T/agtd.sock" --state-dir "$T/state" --cgroup "$CG" \
  --workspace-root "$T" --warm 0 --max-jails 1000 >>"$T/agtd.log" 2>&1 &
AGTD_PID=$!
for _ in $(seq 1 200); do
  ctl hello >/dev/null 2>&1 && break
  sleep 0.05
done
sed "s|@PROBE@|$PROBE|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$T/rootfs.yaml"
cat >>"$T/rootfs.yaml" <<EOM
  - path: /bin/stamp
    libs: false
    sources:
      - host: "$BUILD/bench/stamp"
EOM
ctl rootfs build "$T/rootfs.yaml" --no-download >"$T/rootfs.out"
ID=$(cut -d' ' -f1 "$T/rootfs.out")
COMMON=(--only agtd --socket "$T/agtd.sock" --rootfs "$ID" --root "$T/state/rootfs/$ID/root"
  --workspace "$T/ws" --uid "$BENCH_UID" --agtd-pid "$AGTD_PID" --disk $((64 << 20)))

echo "load average $(cut -d' ' -f1-3 /proc/loadavg); other agtds: $(($(pgrep -x agtd | wc -l) - 1))"
for mode in allow open; do
  "$DRIVER" memory "${COMMON[@]}" --net "$mode" --count "$N" | sed "s/^/$mode /"
done
for mode in allow open; do
  "$DRIVER" latency "${COMMON[@]}" --net "$mode" --runs "$RUNS" --warmup 10 |
    grep -E '\.(p50|p99|n) ' | sed "s/^/$mode /"
done
echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
