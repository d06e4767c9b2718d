#!/usr/bin/env bash
# Side-by-side benchmarks of agtd and bubblewrap (`just bench`; docs/BENCH.md explains them).
#
# Starts a private agtd exactly as the guest tests do, builds the small test rootfs (plus the
# bench payload) in its store, and gives bwrap that same tree as its read-only root.  Then
# bench/agt-bench (build/bench) measures, in one run:
#   1. jail start latency: sequential starts of a payload that prints CLOCK_MONOTONIC, agtd
#      and bwrap alternating;
#   2. memory per idle jail: N jails of each running `probe sleep 600`, MemAvailable drop / N.
# and this script prints one table with both tools side by side; then bench/proxy.sh,
# bench/ssh.sh, bench/scale.sh and bench/memparts.sh.
#
# Needs root and Linux.  Environment knobs (defaults in parentheses):
#   BUILD          the meson build directory (build)
#   BENCH_RUNS     measured starts per tool (200)      BENCH_WARMUP  unmeasured starts first (20)
#   BENCH_COUNTS   jail counts for the memory test ("100 1000"; up to 1000)
#   BENCH_DISK     each agtd jail's disk limit in bytes (16 MiB, the least agtd takes: the
#                  default, a tenth of the jails' disk, lets only 9 jails run at once)
#   BENCH_UID      the non-root user both run the payload as (1000)
#   BENCH_SETTLE_MS  wait before each memory reading, which then waits until steady (1000)
#   BENCH_SOLO_RUNS  diagnostic passes: agtd alone, back-to-back and 50 ms apart (100 each)
#   BENCH_KEEP     keep the scratch directory (unset)
#   BENCH_ONLY     the parts to run, of: latency memory proxy ssh scale memparts (all); e.g.
#                  BENCH_ONLY=memory BENCH_COUNTS=1000 for section 2 alone
set -euo pipefail

SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$SRCDIR/bench/lib.sh"
STAMP=$BUILD/bench/stamp
DRIVER=$BUILD/bench/agt-bench
RUNS=${BENCH_RUNS:-200}
WARMUP=${BENCH_WARMUP:-20}
COUNTS=${BENCH_COUNTS:-100 1000}
DISK=${BENCH_DISK:-16777216}
BENCH_UID=${BENCH_UID:-1000}
SETTLE_MS=${BENCH_SETTLE_MS:-1000}
SOLO_RUNS=${BENCH_SOLO_RUNS:-100}
ONLY=${BENCH_ONLY:-latency memory proxy ssh scale memparts}
TARGET_RATIO=0.33 # agtd's start p50 at most a third of bwrap's
MEM_TARGET_RATIO=1.0 # an idle jail's MemAvailable drop at most bwrap's (issue 17.1)

die() {
  echo "bench: $*" >&2
  exit 1
}
want() { [[ " $ONLY " == *" $1 "* ]]; }
for p in $ONLY; do
  case $p in latency | memory | proxy | ssh | scale | memparts) ;;
  *) die "BENCH_ONLY: '$p' is not one of latency memory proxy ssh scale memparts" ;; esac
done

[ "$(uname -s)" = Linux ] || die "the benchmarks need Linux"
[ "$(id -u)" = 0 ] || die "the benchmarks need root (agtd makes namespaces, mounts and cgroups)"
for f in "$AGTD" "$PROBE" "$STAMP" "$DRIVER"; do
  [ -x "$f" ] || die "$f is missing: build first (just build)"
done
BWRAP=$(command -v bwrap) || die "bubblewrap is not installed (apt-get install bubblewrap)"

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
OTHERS=$( (pgrep -x agtd || true; pgrep -x bwrap || true) | wc -l) # someone else's jails add noise
bench_scratch bench agt-bench agt-bench
RES=$T/results

# ---- agtd, as the guest tests run it ----
bench_agtd_start --max-jails 1100

# ---- the rootfs: the guest tests' manifest plus the payload at /bin/stamp ----
bench_rootfs "$STAMP:/bin/stamp"
[ -x "$ROOT/bin/stamp" ] && [ -x "$ROOT/bin/probe" ] ||
  die "the rootfs at $ROOT lacks /bin/stamp or /bin/probe"

# The workspace: owned by the bench user, so agtd's jails run as it too.
bench_workspace

# bwrap gets agtd's own seccomp filter (the driver links guest/child/jail_seccomp.c).
"$DRIVER" seccomp "$T/seccomp.bpf" >"$RES"

COMMON=(--socket "$SOCK" --rootfs "$ROOTFS" --root "$ROOT" --workspace "$WS" --bwrap "$BWRAP"
  --seccomp "$T/seccomp.bpf" --uid "$BENCH_UID" --agtd-pid "$AGTD_PID")

echo "bench: checking that both jails look the same from inside" >&2
"$DRIVER" check "${COMMON[@]}" >>"$RES"
if want latency; then
  echo "bench: start latency, $RUNS starts each after $WARMUP warm-up" >&2
  "$DRIVER" latency "${COMMON[@]}" --runs "$RUNS" --warmup "$WARMUP" >>"$RES"
  echo "bench: start latency, agtd alone, $SOLO_RUNS starts back-to-back and 50 ms apart (diagnostic)" >&2
  "$DRIVER" latency "${COMMON[@]}" --only agtd --runs "$SOLO_RUNS" --warmup 5 >"$T/solo"
  "$DRIVER" latency "${COMMON[@]}" --only agtd --runs "$SOLO_RUNS" --warmup 5 --gap-ms 50 >"$T/spaced"
fi
want memory || COUNTS=
for n in $COUNTS; do
  case $n in '' | *[!0-9]* | 0) die "BENCH_COUNTS: '$n' is not a count of jails (1..1000)" ;; esac
  [ "$n" -le 1000 ] || die "BENCH_COUNTS: $n is more than agtd's --max-jails here (1000)"
done
for n in $COUNTS; do
  echo "bench: memory, $n idle jails each" >&2
  "$DRIVER" memory "${COMMON[@]}" --count "$n" --settle-ms "$SETTLE_MS" --disk "$DISK" >>"$RES"
done
AGTD_RSS_END=$(awk '/^VmRSS:/ {print $2}' "/proc/$AGTD_PID/status")

# Nothing may be left behind: no jail, no payload, no mount, once agtd has stopped (its
# prepared jails and its disk of the jails' writable layers go with it).
LEFT_JAILS=$( (ctl --json jail ls | grep -c '"name"') || true)
bench_agtd_kill
# (ours only: processes in this agtd's cgroups, and bwraps given this run's directory)
LEFT_PROCS=$(( $( (grep -l "/$CG/" /proc/[0-9]*/cgroup 2>/dev/null || true) | wc -l) +
  $( (pgrep -f "bwrap .*$T/" || true) | wc -l) ))
LEFT_MOUNTS=$(grep -c " $T/" /proc/self/mountinfo || true)

# ---- the table ----
val() { awk -v k="$1" '$1 == k { print $2; exit }' "${2:-$RES}"; }
check_line() { # tool field
  awk -v k="check.$1" -v f="$2:" '$1 == k && $2 == f { $1 = ""; $2 = ""; sub(/^ +/, ""); print }' "$RES" |
    tr -s ' \t' ' '
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
verdict() { # ratio [target]
  awk -v r="$1" -v t="${2:-$TARGET_RATIO}" 'BEGIN { print (r != "-" && r <= t) ? "target met" : "target missed" }'
}
row() { printf '%-54s %13s %11s %10s  %s\n' "$@"; }

CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then CGV=v2; else CGV=v1; fi
echo
echo "agt bench: agtd vs bubblewrap — $(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname)"
echo "machine: $(nproc) x $CPU, $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)," \
  "kernel $(uname -r), cgroup $CGV; $("$BWRAP" --version)"
echo "load average at start: $LOAD_START, at end: $(cut -d' ' -f1-3 /proc/loadavg);" \
  "other agtd/bwrap processes at start: $OTHERS (other work on the machine adds noise)"
if awk -v l="${LOAD_START%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n) }'; then
  echo "WARNING: the machine was busy (load ${LOAD_START%% *} on $(nproc) CPUs): every figure below is noisy"
fi
echo "both: same rootfs tree (${ROOTFS:0:12}, read-only), workspace rw at /work, fresh /proc, minimal /dev,"
echo "      tmpfs /tmp, new mount/pid/ipc/uts/net/cgroup namespaces, uid $BENCH_UID, no caps,"
echo "      no_new_privs, agtd's seccomp filter ($(val seccomp.instructions) BPF instructions)"
for tool in agtd bwrap; do
  printf '%-6s inside: Uid %s | CapEff %s | NoNewPrivs %s | Seccomp %s\n' "$tool" \
    "$(check_line $tool Uid)" "$(check_line $tool CapEff)" "$(check_line $tool NoNewPrivs)" \
    "$(check_line $tool Seccomp)"
done
if want latency; then
echo
echo "1. Jail start latency, ms: $(val lat.agtd_start_ms.n) sequential starts each (after $WARMUP warm-up), alternating"
echo "   agtd: jail.run over agtd's socket; bwrap: posix_spawn of bwrap; payload: static /bin/stamp"
echo "   bwrap column, every row: spawn of bwrap -> the payload's first clock read"
echo "   before every start of either tool the driver waits until agtd's prepared jails are built"
echo "   again, so that neither start shares the machine with that work ($(val lat.unsettled) starts waited in vain)"
echo "   agtd starts served by a prepared jail: $(val lat.agtd_warm_starts) of $(val lat.agtd_start_ms.n)"
row "metric" "agtd" "bwrap" "agtd/bwrap" "target: agtd/bwrap <= $TARGET_RATIO"
B50=$(val lat.bwrap_exec_ms.p50)
B99=$(val lat.bwrap_exec_ms.p99)
for m in "agtd_start_ms:start_ms (agtd: request in -> exec confirmed)" \
  "agtd_rtt_ms:client round trip of jail.run" \
  "agtd_exec_ms:client request -> payload's first clock read"; do
  k=${m%%:*}
  label=${m#*:}
  for p in p50 p99; do
    a=$(val "lat.$k.$p")
    if [ "$p" = p50 ]; then b=$B50; else b=$B99; fi
    r=$(ratio "$a" "$b")
    if [ "$p" = p50 ]; then v=$(verdict "$r"); else v="(p99: no target)"; fi
    row "$p $label" "$a" "$b" "$r" "$v"
  done
done
row "mean client request -> payload's first clock read" "$(val lat.agtd_exec_ms.mean)" \
  "$(val lat.bwrap_exec_ms.mean)" \
  "$(ratio "$(val lat.agtd_exec_ms.mean)" "$(val lat.bwrap_exec_ms.mean)")" ""
row "p50 / p99 jail.rm of an exited jail (not in the above)" \
  "$(val lat.agtd_rm_ms.p50)/$(val lat.agtd_rm_ms.p99)" "-" "" "(bwrap: nothing to remove)"
for f in solo:"back-to-back" spaced:"50 ms apart"; do
  for p in p50 p99; do
    a=$(val "lat.agtd_start_ms.$p" "$T/${f%%:*}")
    if [ "$p" = p50 ]; then b=$B50; else b=$B99; fi
    row "$p start_ms, agtd alone, ${f#*:} (diagnostic)" "$a" "$b" "$(ratio "$a" "$b")" \
      "(not the headline: see docs/BENCH.md)"
  done
done
fi
if want memory; then
echo
echo "2. Memory per idle jail (payload: /bin/probe sleep 600): MemAvailable drop / N, KiB"
echo "   (whole machine: kernel objects, page tables, agtd's own growth; other load adds noise;"
echo "    each reading waits until MemAvailable is steady to 1 MiB, at most 15 s)"
row "metric" "agtd" "bwrap" "agtd/bwrap" ""
for n in $COUNTS; do
  a=$(val "mem.agtd.$n.kib_per_jail")
  b=$(val "mem.bwrap.$n.kib_per_jail")
  u=$(($(val "mem.agtd.$n.unsettled") + $(val "mem.bwrap.$n.unsettled")))
  note="$(verdict "$(ratio "$a" "$b")" "$MEM_TARGET_RATIO") (<= $MEM_TARGET_RATIO)"
  [ "$u" = 0 ] || note="$note; $u readings never settled: noisy"
  # A drop below the jail processes' own PSS cannot be right: something else freed memory.
  if awk -v a="$a" -v b="$b" -v pa="$(val "mem.agtd.$n.pss_kib_per_jail")" \
    -v pb="$(val "mem.bwrap.$n.pss_kib_per_jail")" 'BEGIN { exit !(a < pa || b < pb) }'; then
    note="not credible: below the processes' PSS (noisy, rerun on a quiet machine)"
  fi
  row "N=$n: MemAvailable drop per jail" "$a" "$b" "$(ratio "$a" "$b")" "$note"
  a=$(val "mem.agtd.$n.pinned_kib_per_jail")
  b=$(val "mem.bwrap.$n.pinned_kib_per_jail")
  row "N=$n: unreclaimable memory growth per jail" "$a" "$b" "$(ratio "$a" "$b")" \
    "(anon+shmem+SUnreclaim+stacks+page tables+percpu)"
  a=$(val "mem.agtd.$n.pss_kib_per_jail")
  b=$(val "mem.bwrap.$n.pss_kib_per_jail")
  for tool in agtd bwrap; do
    parts=
    for f in AnonPages Shmem SUnreclaim KernelStack PageTables Percpu; do
      parts="$parts $f $(val "mem.$tool.$n.${f}_kib_per_jail")"
    done
    echo "   N=$n: $tool's unreclaimable growth per jail by part, KiB:$parts"
  done
  row "N=$n: PSS of the jail's processes per jail" "$a" "$b" "$(ratio "$a" "$b")" \
    "procs/jail: $(val "mem.agtd.$n.procs_per_jail") vs $(val "mem.bwrap.$n.procs_per_jail")"
  row "N=$n: agtd RSS before -> with N jails" \
    "$(val "mem.agtd.$n.agtd_rss_before_kib")->$(val "mem.agtd.$n.agtd_rss_after_kib")" "-" "" \
    "(+$(awk -v a="$(val "mem.agtd.$n.agtd_rss_before_kib")" -v b="$(val "mem.agtd.$n.agtd_rss_after_kib")" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }') KiB/jail)"
  row "N=$n: time to start / clean up all, s" \
    "$(val "mem.agtd.$n.start_s")/$(val "mem.agtd.$n.cleanup_s")" \
    "$(val "mem.bwrap.$n.start_s")/$(val "mem.bwrap.$n.cleanup_s")" "" ""
done
fi
echo
echo "agtd RSS at the end: $AGTD_RSS_END KiB; left behind: $LEFT_JAILS jails, $LEFT_PROCS processes, $LEFT_MOUNTS mounts"
want latency && echo "latency phase wall time: $(val lat.wall_s) s"
[ "$LEFT_JAILS" = 0 ] && [ "$LEFT_PROCS" = 0 ] && [ "$LEFT_MOUNTS" = 0 ] || die "the benchmark left things behind"

# 3. The egress proxy against a direct connection (bench/proxy.sh).
! want proxy || BUILD=$BUILD bash "$SRCDIR/bench/proxy.sh"

# 4. agt over SSH: `agt jail ls` against `ssh HOST true`, and a request over an open
#    connection (bench/ssh.sh).
! want ssh || BUILD=$BUILD bash "$SRCDIR/bench/ssh.sh"

# 5. Scale: 1000 idle jails and `agt jail ls` among them, then 100 starts at once from 16
#    clients (bench/scale.sh).
! want scale || BUILD=$BUILD bash "$SRCDIR/bench/scale.sh"

# 6. Where an idle jail's memory goes: one part at a time (bench/memparts.sh).
! want memparts || BUILD=$BUILD bash "$SRCDIR/bench/memparts.sh"
