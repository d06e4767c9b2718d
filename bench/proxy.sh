#!/usr/bin/env bash
# The egress proxy's cost (part of `just bench`; docs/BENCH.md): the same client, inside a
# jail, reaches the same server directly (network mode open: through the guest's bridge and
# NAT) and through agtd's proxy (mode allow, the server's address on the allowlist).  The
# server stands in for the internet: a network namespace of the bench's own, joined to the
# guest by a veth pair (guest 203.0.113.17, server 203.0.113.18), since an open jail does not
# reach the guest's own addresses.  Needs the machine set up for mode open (`just machine`).
# Reports connection setup, request round trips and bulk throughput side by side.
set -euo pipefail

SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$SRCDIR/bench/lib.sh"
NETBENCH=$BUILD/bench/netbench
ROUNDS=${BENCH_PROXY_ROUNDS:-300}
BYTES=${BENCH_PROXY_BYTES:-268435456}

die() {
  echo "bench: $*" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || die "the benchmarks need root"
for f in "$AGTD" "$NETBENCH" "$PROBE"; do [ -x "$f" ] || die "$f is missing: build first"; done
[ -d /sys/class/net/agt0 ] ||
  die "the machine is not set up for network mode open (the direct runs): as root, just machine"

SRV_PID=
SRV_NS=agt-pbench-$$
SRV=203.0.113.18
remove_server() {
  [ -z "$SRV_PID" ] || kill "$SRV_PID" 2>/dev/null || true
  ip link del "agtpb$$" 2>/dev/null || true
  ip netns del "$SRV_NS" 2>/dev/null || true
}
bench_scratch bench agt-proxy-bench agt-pbench remove_server

bench_agtd_start
bench_rootfs "$NETBENCH:/bin/netbench"

ip netns add "$SRV_NS"
ip link add "agtpb$$" type veth peer name eth0 netns "$SRV_NS"
ip addr add 203.0.113.17/28 dev "agtpb$$"
ip link set "agtpb$$" up
ip -n "$SRV_NS" addr add "$SRV/28" dev eth0
ip -n "$SRV_NS" link set eth0 up
ip -n "$SRV_NS" link set lo up
ip netns exec "$SRV_NS" "$NETBENCH" serve 0 "$SRV" >"$T/server.out" 2>&1 &
SRV_PID=$!
for _ in $(seq 1 100); do grep -q serving "$T/server.out" && break; sleep 0.05; done
PORT=$(sed -n "s/^serving on $SRV:\([0-9]*\)\$/\1/p" "$T/server.out")
[ -n "$PORT" ] || die "the benchmark server did not start: $(cat "$T/server.out")"

bench_in_jail() { # NAME ARGS... -> the client's output
  local name=$1
  shift
  ctl jail run --name "$name" --rootfs "$ROOTFS" "$@" >/dev/null
  ctl jail wait "$name" >/dev/null
  ctl jail logs "$name"
  ctl jail rm "$name" >/dev/null
}
field() { printf '%s\n' "$1" | awk -v k="$2" -v i="$3" '$1 == k { print $(i + 1) }'; }
# One run each: a bulk transfer that ends early is a failure of the bench, never retried.
measure() { # NAME ARGS...
  local out
  out=$(bench_in_jail "$1" "${@:2}")
  [ -n "$(field "$out" bulk_mib_s 1)" ] || die "$1: the run did not complete: $out"
  printf '%s\n' "$out"
}
# PAIRS runs of each, alternating (direct, proxied, direct, ...), so that load from others on
# the machine falls on both alike; every run is shown, and the table has the medians.
PAIRS=${BENCH_PROXY_PAIRS:-5}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
: >"$T/direct.all"
: >"$T/proxy.all"
echo
echo "3. Egress proxy: $PAIRS runs each, alternating (bulk MiB/s, round trip p50 us):"
# agtd's loop thread: CPU time, time spent runnable but waiting for a CPU, and wakeups
# (/proc/PID/task/TID/schedstat), summed over the proxied runs
sched() { cat "/proc/$AGTD_PID/task/$AGTD_PID/schedstat"; }
wait_ns=0
slices=0
cpu_ns=0
for i in $(seq 1 "$PAIRS"); do
  d=$(measure "direct-$i" --net open -- netbench run "$SRV" "$PORT" "$ROUNDS" "$BYTES")
  read -r c0 w0 s0 <<<"$(sched)"
  p=$(measure "proxied-$i" --allow "$SRV:$PORT" -- netbench run "$SRV" "$PORT" "$ROUNDS" "$BYTES" 3128)
  read -r c1 w1 s1 <<<"$(sched)"
  cpu_ns=$((cpu_ns + c1 - c0))
  wait_ns=$((wait_ns + w1 - w0))
  slices=$((slices + s1 - s0))
  printf '%s\n' "$d" >>"$T/direct.all"
  printf '%s\n' "$p" >>"$T/proxy.all"
  printf '   run %d: direct %8s %7s   via proxy %8s %7s   (load %s)\n' "$i" "$(field "$d" bulk_mib_s 1)" \
    "$(field "$d" rtt_us 1)" "$(field "$p" bulk_mib_s 1)" "$(field "$p" rtt_us 1)" "$(cut -d' ' -f1 /proc/loadavg)"
done
med() { # FILE KEY INDEX: the median over the runs
  awk -v k="$2" -v i="$3" '$1 == k { print $(i + 1) }' "$1" | median
}

echo
echo "   One client in a jail, the same server (its own namespace, a veth pair), $ROUNDS connections,"
echo "   $ROUNDS round trips of 64 bytes, $((BYTES >> 20)) MiB bulk; medians of $PAIRS runs"
printf '   %-34s %12s %12s %12s\n' "" direct "via proxy" added
for m in "connect_us 1:new connection to first answer, p50 us" "connect_us 2:new connection to first answer, p99 us" \
  "rtt_us 1:round trip on a connection, p50 us" "rtt_us 2:round trip on a connection, p99 us"; do
  key=${m%% *}
  rest=${m#* }
  idx=${rest%%:*}
  label=${rest#*:}
  d=$(med "$T/direct.all" "$key" "$idx")
  p=$(med "$T/proxy.all" "$key" "$idx")
  printf '   %-34s %12s %12s %12s\n' "$label" "$d" "$p" "$(awk -v a="$d" -v b="$p" 'BEGIN { printf "%+.1f", b - a }')"
done
d=$(med "$T/direct.all" bulk_mib_s 1)
p=$(med "$T/proxy.all" bulk_mib_s 1)
printf '   %-34s %12s %12s %12s\n' "bulk throughput, MiB/s" "$d" "$p" "$(awk -v a="$d" -v b="$p" 'BEGIN { printf "%.0f%%", 100 * b / a }')"
echo
echo "   agtd's loop thread over the proxied runs (jail start and rm included): $((cpu_ns / 1000000)) ms of CPU,"
echo "   $slices times on a CPU, waiting $((wait_ns / 1000000)) ms in all for one, $(awk -v w="$wait_ns" -v s="$slices" 'BEGIN { printf "%.1f", s ? w / s / 1000 : 0 }') us on average"

# What the relay's method costs, on its own (no agtd, no jail): read/write buffer sizes
# against splice() through a pipe.
if [ -x "$BUILD/bench/relaycost" ]; then
  echo
  echo "   A relay between two loopback connections, 1 GiB, by method (bench/relaycost.c):"
  "$BUILD/bench/relaycost" 1073741824 | sed 's/^/   /'
fi
