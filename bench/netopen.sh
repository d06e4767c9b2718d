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
# shellcheck source=bench/lib.sh
. "$SRCDIR/bench/lib.sh"
N=${1:-50}
RUNS=${RUNS:-100}
DRIVER=$BUILD/bench/agt-bench
BENCH_UID=${BENCH_UID:-1000}

[ -d /sys/class/net/agt0 ] || {
  echo "bench/netopen.sh: this machine is not set up for network mode open: as root, just machine" >&2
  exit 1
}
bench_scratch bench agt-netopen-bench agt-netopen-bench
bench_workspace
bench_agtd_start --warm 0 --max-jails 1000
bench_rootfs "$BUILD/bench/stamp:/bin/stamp"
COMMON=(--only agtd --socket "$SOCK" --rootfs "$ROOTFS" --root "$ROOT"
  --workspace "$WS" --uid "$BENCH_UID" --agtd-pid "$AGTD_PID" --disk $((64 << 20)))

echo "load average $(cut -d' ' -f1-3 /proc/loadavg); other agtds: $(($(pgrep -x agtd | wc -l) - 1))"
for mode in allow open; do
  "$DRIVER" memory "${COMMON[@]}" --net "$mode" --count "$N" | sed "s/^/$mode /"
done
for mode in allow open; do
  "$DRIVER" latency "${COMMON[@]}" --net "$mode" --runs "$RUNS" --warmup 10 |
    grep -E '\.(p50|p99|n) ' | sed "s/^/$mode /"
done
echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
