#!/usr/bin/env bash
# The egress proxy's cost (part of `just bench`; docs/BENCH.md): the same client, inside a
# jail, reaches the same server on the guest's loopback directly (network mode open: the
# guest's network) and through agtd's proxy (mode allow, the server's address on the
# allowlist).  Reports connection setup, request round trips and bulk throughput side by side.
set -euo pipefail

SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$SRCDIR/build}
case $BUILD in /*) ;; *) BUILD=$SRCDIR/$BUILD ;; esac
AGTD=$BUILD/guest/agtd
NETBENCH=$BUILD/bench/netbench
PROBE=$BUILD/tests/guest/probe
ROUNDS=${BENCH_PROXY_ROUNDS:-300}
BYTES=${BENCH_PROXY_BYTES:-268435456}

die() {
  echo "bench: $*" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || die "the benchmarks need root"
for f in "$AGTD" "$NETBENCH" "$PROBE"; do [ -x "$f" ] || die "$f is missing: build first"; done

T=$(mktemp -d /tmp/agt-proxy-bench.XXXXXX)
chmod 755 "$T"
SOCK=$T/agtd.sock
CG=agt-pbench-$$
AGTD_PID=
SRV_PID=
cleanup() {
  [ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null
  if [ -n "$AGTD_PID" ]; then
    # jails outlive agtd (their keepers): remove them first
    ctl jail ls 2>/dev/null | awk 'NR > 1 {print $1}' | while read -r j; do
      ctl jail rm "$j" --force >/dev/null
    done
    kill -TERM "$AGTD_PID" 2>/dev/null
    wait "$AGTD_PID" 2>/dev/null || true
  fi
  for d in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  grep -q " $T/" /proc/self/mountinfo || rm -rf --one-file-system "$T"
}
trap cleanup EXIT
ctl() { "$AGTD" ctl -s "$SOCK" "$@"; }

"$AGTD" serve --socket "$SOCK" --state-dir "$T/state" --cgroup "$CG" --workspace-root "$T" \
  >"$T/agtd.log" 2>&1 &
AGTD_PID=$!
for _ in $(seq 1 200); do ctl hello >/dev/null 2>&1 && break; sleep 0.05; done
ctl hello >/dev/null || die "agtd did not start (log: $T/agtd.log)"
sed "s|@PROBE@|$PROBE|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$T/m.yaml"
cat >>"$T/m.yaml" <<EOM
  - path: /bin/netbench
    libs: false
    sources:
      - host: "$NETBENCH"
EOM
ROOT=$(ctl rootfs build "$T/m.yaml" --no-download | cut -d' ' -f1)

"$NETBENCH" serve 0 >"$T/server.out" 2>&1 &
SRV_PID=$!
for _ in $(seq 1 100); do grep -q serving "$T/server.out" && break; sleep 0.05; done
PORT=$(sed -n 's/^serving on 127.0.0.1:\([0-9]*\)$/\1/p' "$T/server.out")
[ -n "$PORT" ] || die "the benchmark server did not start: $(cat "$T/server.out")"

bench_in_jail() { # NAME ARGS... -> the client's output
  local name=$1
  shift
  ctl jail run --name "$name" --rootfs "$ROOT" "$@" >/dev/null
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
direct=$(measure direct --net open -- netbench run 127.0.0.1 "$PORT" "$ROUNDS" "$BYTES")
proxy=$(measure proxied --allow "127.0.0.1:$PORT" -- netbench run 127.0.0.1 "$PORT" "$ROUNDS" "$BYTES" 3128)

echo
echo "3. Egress proxy: one client in a jail, the same server on the guest's loopback,"
echo "   $ROUNDS connections, $ROUNDS round trips of 64 bytes, $((BYTES >> 20)) MiB bulk (load $(cut -d' ' -f1 /proc/loadavg))"
printf '   %-34s %12s %12s %12s\n' "" direct "via proxy" added
for m in "connect_us 1:new connection to first answer, p50 us" "connect_us 2:new connection to first answer, p99 us" \
  "rtt_us 1:round trip on a connection, p50 us" "rtt_us 2:round trip on a connection, p99 us"; do
  key=${m%% *}
  rest=${m#* }
  idx=${rest%%:*}
  label=${rest#*:}
  d=$(field "$direct" "$key" "$idx")
  p=$(field "$proxy" "$key" "$idx")
  printf '   %-34s %12s %12s %12s\n' "$label" "$d" "$p" "$(awk -v a="$d" -v b="$p" 'BEGIN { printf "%+.1f", b - a }')"
done
d=$(field "$direct" bulk_mib_s 1)
p=$(field "$proxy" bulk_mib_s 1)
printf '   %-34s %12s %12s %12s\n' "bulk throughput, MiB/s" "$d" "$p" "$(awk -v a="$d" -v b="$p" 'BEGIN { printf "%.0f%%", 100 * b / a }')"
