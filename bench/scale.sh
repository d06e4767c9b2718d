#!/usr/bin/env bash
# Scale (part of `just bench`, run at the end of bench/run.sh, or alone; docs/BENCH.md explains
# it).  A private agtd, as bench/run.sh starts it, then:
#   1. N idle jails (`probe sleep`, 1000), started one after another through agtd's socket;
#      agtd's RSS before and after;
#   2. with them running, `agt jail ls` (target local, agt's config pointing at this agtd's
#      socket) 50 times, the whole command as a user runs it: p50/p99 (target: p50 < 20 ms);
#   3. the idle jails removed, then 100 jails started at once from 16 client connections
#      (agt-bench burst): each start's round trip, p50/p99 (target: p99 <= 5x p50).
# Everything it started is removed at the end, also on failure: its jails (by name, through
# its own agtd), its agtd (by pid), its cgroups and its scratch directory.
#
# Needs root and Linux.  Knobs: BUILD (build), SCALE_JAILS (1000), SCALE_LS_RUNS (50),
# SCALE_LS_STALE_RUNS (5: agt jail ls runs each 2.1 s after the last, when agtd reads every
# jail's cgroup again, each with another client's hello),
# SCALE_BURST (100), SCALE_CLIENTS (16), SCALE_DISK (16 MiB: each jail's disk limit; the
# default, a tenth of the jails' disk, lets only 9 run), BENCH_UID (1000).
set -euo pipefail

SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$SRCDIR/bench/lib.sh"
AGT=$BUILD/host/agt
DRIVER=$BUILD/bench/agt-bench
JAILS=${SCALE_JAILS:-1000}
LS_RUNS=${SCALE_LS_RUNS:-50}
STALE_RUNS=${SCALE_LS_STALE_RUNS:-5}
BURST=${SCALE_BURST:-100}
CLIENTS=${SCALE_CLIENTS:-16}
DISK=${SCALE_DISK:-16777216}
BENCH_UID=${BENCH_UID:-1000}
TARGET_LS_MS=20
TARGET_BURST_RATIO=5

die() {
  echo "bench: scale: $*" >&2
  exit 1
}

[ "$(uname -s)" = Linux ] || die "the benchmark needs Linux"
[ "$(id -u)" = 0 ] || die "the benchmark needs root"
for f in "$AGT" "$AGTD" "$PROBE" "$DRIVER"; do
  [ -x "$f" ] || die "$f is missing: build first (just build)"
done

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
OTHERS=$( (pgrep -x agtd || true) | wc -l)
bench_scratch "bench: scale" agt-scale agt-scale
RES=$T/results
: >"$RES"

bench_agtd_start --max-jails $((JAILS + BURST + 16))
bench_rootfs
bench_workspace
COMMON=(--socket "$SOCK" --rootfs "$ROOTFS" --workspace "$WS" --disk "$DISK" --agtd-pid "$AGTD_PID")

# agt as a user runs it: its own config, target local, this agtd's socket
cat >"$T/config.yaml" <<CFG
target: local
agtd:
  socket: $SOCK
CFG

val() { awk -v k="$1" '$1 == k { print $2; exit }' "$RES"; }

echo "bench: scale: $JAILS idle jails" >&2
IDLE_RC=0
"$DRIVER" idle "${COMMON[@]}" --count "$JAILS" >>"$RES" 2>"$T/idle.err" || IDLE_RC=$?
IDLE_ERR=$(cat "$T/idle.err")
RUNNING=$( (ctl --json jail ls | grep -c '"name"') || true)
LOAD_IDLE=$(cut -d' ' -f1-3 /proc/loadavg)

echo "bench: scale: agt jail ls x $LS_RUNS with $RUNNING jails" >&2
cpu_ms() { awk '{ printf "%d", ($14 + $15) * 1000 / '"$(getconf CLK_TCK)"' }' "/proc/$1/stat"; }
LS_ERR=
CPU0=$(cpu_ms "$AGTD_PID")
for i in $(seq 1 "$LS_RUNS"); do
  t0=$(date +%s%N)
  if ! "$AGT" --config "$T/config.yaml" jail ls >"$T/ls.out" 2>"$T/ls.err"; then
    LS_ERR="run $i: $(head -3 "$T/ls.err")"
    break
  fi
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000)) >>"$T/ls.us"
done
CPU1=$(cpu_ms "$AGTD_PID")
LS_LINES=$(($(wc -l <"$T/ls.out") - 1))
# the same, each run once every jail's cgroup figures are older than agtd keeps them (2 s),
# as a person runs it now and then: agtd answers from the figures it has and reads every
# jail's cgroup again in its threadpool (guest/jail/jail_usage.h).  agtd's CPU time is taken
# over all of them and a second after the last, so it includes those reads; and with each
# listing, started with it, another client's hello (agtd ctl hello, a process of its own),
# timed: what the read costs the others (on agtd's loop, it held up a hello that came
# during it).
echo "bench: scale: agt jail ls x $STALE_RUNS, each after 2.1 s" >&2
: >"$T/stale.us"
: >"$T/hello.us"
sleep 2.1
STALE_C0=$(cpu_ms "$AGTD_PID")
for i in $(seq 1 "$STALE_RUNS"); do
  [ "$i" = 1 ] || sleep 2.1
  (
    h0=$(date +%s%N)
    ctl hello >/dev/null && echo $((($(date +%s%N) - h0) / 1000)) >>"$T/hello.us"
  ) &
  HELLO_PID=$!
  t0=$(date +%s%N)
  if ! "$AGT" --config "$T/config.yaml" jail ls >"$T/ls.out" 2>"$T/ls.err"; then
    LS_ERR="stale run $i: $(head -3 "$T/ls.err")"
    break
  fi
  t1=$(date +%s%N)
  wait "$HELLO_PID" || { LS_ERR="stale run $i: agtd did not answer hello"; break; }
  echo $(((t1 - t0) / 1000)) >>"$T/stale.us"
done
sleep 1
STALE_CPU=$(($(cpu_ms "$AGTD_PID") - STALE_C0))
# agtd ctl hello alone, with nothing else asked of agtd: its own cost
: >"$T/hello0.us"
for i in $(seq 1 "$STALE_RUNS"); do
  t0=$(date +%s%N)
  ctl hello >/dev/null
  echo $((($(date +%s%N) - t0) / 1000)) >>"$T/hello0.us"
done
pct() { # file p -> nearest-rank percentile of microseconds, in ms
  sort -n "$1" | awk -v p="$2" '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
    i = int(p / 100 * NR + 0.999999); if (i < 1) i = 1; printf "%.1f", v[i] / 1000 }'
}
LS50=$( [ -s "$T/ls.us" ] && pct "$T/ls.us" 50 || echo -)
LS99=$( [ -s "$T/ls.us" ] && pct "$T/ls.us" 99 || echo -)
LS_N=$( [ -s "$T/ls.us" ] && wc -l <"$T/ls.us" || echo 0)
ST50=$( [ -s "$T/stale.us" ] && pct "$T/stale.us" 50 || echo -)
ST_N=$( [ -s "$T/stale.us" ] && wc -l <"$T/stale.us" || echo 0)
HE50=$( [ -s "$T/hello.us" ] && pct "$T/hello.us" 50 || echo -)
HE100=$( [ -s "$T/hello.us" ] && pct "$T/hello.us" 100 || echo -)
HE0=$( [ -s "$T/hello0.us" ] && pct "$T/hello0.us" 50 || echo -)

echo "bench: scale: removing the idle jails" >&2
t0=$(date +%s%N)
RM_FAIL=0
ctl jail ls | awk 'NR > 1 {print $1}' | while read -r j; do
  ctl jail rm "$j" --force >/dev/null || { echo "bench: scale: could not remove jail $j" >&2; exit 1; }
done || RM_FAIL=1
RM_S=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')

echo "bench: scale: $BURST jails started at once from $CLIENTS clients" >&2
LOAD_BURST=$(cut -d' ' -f1-3 /proc/loadavg)
BURST_RC=0
"$DRIVER" burst "${COMMON[@]}" --count "$BURST" --clients "$CLIENTS" >>"$RES" 2>"$T/burst.err" || BURST_RC=$?
BURST_ERR=$(cat "$T/burst.err")
LEFT_JAILS=$( (ctl --json jail ls | grep -c '"name"') || true)

bench_agtd_kill
LEFT_PROCS=$( (grep -l "/$CG/" /proc/[0-9]*/cgroup 2>/dev/null || true) | wc -l)
LEFT_MOUNTS=$(grep -c " $T/" /proc/self/mountinfo || true)

# ---- the table ----
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else print "-" }'; }
R0=$(val idle.agtd_rss_before_kib)
R1=$(val idle.agtd_rss_after_kib)
STARTED=$(val idle.started)
B50=$(val burst.rtt_ms.p50)
B99=$(val burst.rtt_ms.p99)
BR=$(ratio "$B99" "$B50")
echo
echo "5. Scale — $(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), $(nproc) CPUs," \
  "$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r)"
echo "load average at start: $LOAD_START, with the idle jails: $LOAD_IDLE, before the burst: $LOAD_BURST;"
echo "other agtd processes at start: $OTHERS; each jail's disk limit $((DISK >> 20)) MiB"
if awk -v l="${LOAD_START%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n) }'; then
  echo "WARNING: the machine was busy (load ${LOAD_START%% *} on $(nproc) CPUs): every figure below is noisy"
fi
echo "   idle jails: $STARTED of $JAILS started in $(val idle.start_s) s; running when agt jail ls ran: $RUNNING"
[ "$IDLE_RC" = 0 ] || echo "   the idle jails' start FAILED: $IDLE_ERR"
echo "   agtd RSS: $R0 KiB before, $R1 KiB with them:" \
  "$(awk -v a="$R0" -v b="$R1" -v n="${STARTED:-0}" 'BEGIN { if (n > 0 && b > 0) printf "%.1f", (b - a) / n; else print "-" }') KiB per jail"
echo "   MemAvailable: $(val idle.memavailable_before_kib) -> $(val idle.memavailable_after_kib) KiB" \
  "($(awk -v a="$(val idle.memavailable_before_kib)" -v b="$(val idle.memavailable_after_kib)" -v n="${STARTED:-0}" 'BEGIN { if (n > 0 && b > 0) printf "%.0f", (a - b) / n; else print "-" }') KiB per jail, whole machine, other load included)"
echo "   agt jail ls (target local, whole command), $LS_N runs, listing $LS_LINES jails:" \
  "p50 $LS50 ms, p99 $LS99 ms — target p50 < $TARGET_LS_MS ms:" \
  "$(awk -v a="$LS50" -v t="$TARGET_LS_MS" -v n="$LS_N" -v r="$LS_RUNS" 'BEGIN { print (n == r && a != "-" && a < t) ? "met" : "missed" }')"
echo "   agtd's CPU time (user + system) over those calls: $((CPU1 - CPU0)) ms," \
  "$(awk -v c="$((CPU1 - CPU0))" -v n="$LS_N" 'BEGIN { if (n > 0) printf "%.1f", c / n; else print "-" }') ms per jail.ls"
echo "   agt jail ls each after 2.1 s (every jail's cgroup read again), $ST_N runs: p50 $ST50 ms;" \
  "agtd's CPU time $(awk -v c="$STALE_CPU" -v n="$ST_N" 'BEGIN { if (n > 0) printf "%.1f", c / n; else print "-" }') ms per jail.ls, the read included"
echo "   agtd ctl hello started with each of those: p50 $HE50 ms, max $HE100 ms (alone: p50 $HE0 ms)"
[ -z "$LS_ERR" ] || echo "   agt jail ls FAILED: $LS_ERR"
echo "   removing them all: $RM_S s$([ "$RM_FAIL" = 0 ] || echo ", with FAILURES (above)")"
echo "   burst: $(val burst.started) of $BURST started from $(val burst.clients) clients in $(val burst.wall_s) s;" \
  "start round trip p50 $B50 ms, p99 $B99 ms, p99/p50 $BR — target <= $TARGET_BURST_RATIO:" \
  "$(awk -v r="$BR" -v t="$TARGET_BURST_RATIO" -v rc="$BURST_RC" 'BEGIN { print (rc == 0 && r != "-" && r <= t) ? "met" : "missed" }')"
[ "$BURST_RC" = 0 ] || echo "   the burst FAILED: $BURST_ERR"
echo "   left behind: $LEFT_JAILS jails, $LEFT_PROCS processes, $LEFT_MOUNTS mounts"
[ "$IDLE_RC" = 0 ] && [ -z "$LS_ERR" ] && [ "$BURST_RC" = 0 ] && [ "$RM_FAIL" = 0 ] ||
  die "a step failed (above)"
[ "$LEFT_JAILS" = 0 ] && [ "$LEFT_PROCS" = 0 ] && [ "$LEFT_MOUNTS" = 0 ] || die "the benchmark left things behind"
