# bench/lib.sh: the plumbing the benches share (sourced by bench/*.sh, never run): a scratch
# directory, a private agtd in it as the guest tests start one, the small test rootfs, and a
# cleanup on exit that removes all of it, also on failure.  The caller sets SRCDIR before it
# sources this (which sets BUILD, AGTD and PROBE), and BENCH_UID where it makes a workspace;
# the functions set T, SOCK, STATE, CG, AGTD_PID, ROOTFS, ROOT and WS.
#
#   bench_scratch TAG DIR CGROUP [HOOK]  T=/tmp/DIR.XXXXXX, agtd's cgroup CGROUP-$$; messages
#                                        start "TAG: "; HOOK (a function) runs first on exit
#   bench_agtd_start [FLAGS...]          agtd serve in T with FLAGS added; waits for its hello
#   bench_agtd_stop                      removes agtd's jails, then stops it
#   bench_agtd_kill                      stops agtd, its jails left as they are
#   bench_rootfs [HOST:PATH...]          builds tests/guest/test-rootfs.yaml, plus each HOST
#                                        binary at PATH in the jail
#   bench_workspace                      WS=T/ws, owned by BENCH_UID
#
# BENCH_KEEP (set) keeps the scratch directory.

# Sourced right after the caller sets SRCDIR: the build (BUILD, made absolute), and agtd and
# the test probe in it.
BUILD=${BUILD:-$SRCDIR/build}
case $BUILD in /*) ;; *) BUILD=$SRCDIR/$BUILD ;; esac
AGTD=$BUILD/guest/agtd
PROBE=$BUILD/tests/guest/probe

bench_lib_die() {
  echo "$BENCH_TAG: $*" >&2
  exit 1
}

ctl() { "$AGTD" ctl -s "$SOCK" "$@"; }

bench_scratch() { # TAG DIR CGROUP [HOOK]
  BENCH_TAG=$1
  BENCH_HOOK=${4:-}
  T=$(mktemp -d "/tmp/$2.XXXXXX")
  chmod 755 "$T"
  SOCK=$T/agtd.sock
  STATE=$T/state
  CG=$3-$$
  AGTD_PID=
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}

bench_agtd_start() { # FLAGS...
  "$AGTD" serve --socket "$SOCK" --state-dir "$STATE" --cgroup "$CG" --workspace-root "$T" \
    "$@" >>"$T/agtd.log" 2>&1 &
  AGTD_PID=$!
  for _ in $(seq 1 200); do
    ctl hello >/dev/null 2>&1 && break
    kill -0 "$AGTD_PID" 2>/dev/null || bench_lib_die "agtd exited at start"
    sleep 0.05
  done
  ctl hello >/dev/null 2>&1 || bench_lib_die "agtd did not answer hello"
}

bench_agtd_stop() {
  [ -n "$AGTD_PID" ] || return 0
  # jails outlive agtd (their keepers): this agtd's jails are removed first
  { ctl jail ls 2>/dev/null || true; } | awk 'NR > 1 {print $1}' | while read -r j; do
    ctl jail rm "$j" --force >/dev/null || echo "$BENCH_TAG: could not remove jail $j" >&2
  done
  bench_agtd_kill
}

bench_agtd_kill() {
  [ -n "$AGTD_PID" ] || return 0
  kill -TERM "$AGTD_PID" 2>/dev/null || true
  wait "$AGTD_PID" 2>/dev/null || true
  AGTD_PID=
}

bench_rootfs() { # HOST:PATH...
  local f
  sed "s|@PROBE@|$BUILD/tests/guest/probe|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$T/rootfs.yaml"
  # (files: is the manifest's last section, so an appended entry joins its list)
  for f in "$@"; do
    printf '  - path: %s\n    libs: false\n    sources:\n      - host: "%s"\n' \
      "${f#*:}" "${f%%:*}" >>"$T/rootfs.yaml"
  done
  ctl rootfs build "$T/rootfs.yaml" --no-download >"$T/rootfs.out" 2>&1 ||
    bench_lib_die "the rootfs did not build: $(cat "$T/rootfs.out")"
  ROOTFS=$(cut -d' ' -f1 "$T/rootfs.out")
  ROOT=$STATE/rootfs/$ROOTFS/root
}

bench_workspace() {
  WS=$T/ws
  mkdir "$WS"
  chown "$BENCH_UID:$BENCH_UID" "$WS"
}

bench_cleanup() {
  local rc=$? d
  set +e # every step is taken, whatever one before it did
  [ -z "$BENCH_HOOK" ] || "$BENCH_HOOK" || true
  bench_agtd_stop
  for d in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  if [ "$rc" -ne 0 ] && [ -f "$T/agtd.log" ]; then
    echo "$BENCH_TAG: agtd log (last 20 lines):" >&2
    tail -20 "$T/agtd.log" | sed 's/^/  /' >&2
  fi
  if [ -n "${BENCH_KEEP:-}" ]; then
    echo "$BENCH_TAG: kept $T" >&2
  elif ! grep -q " $T/" /proc/self/mountinfo; then
    rm -rf --one-file-system "$T"
  else
    echo "$BENCH_TAG: mounts under $T remain; not removing it" >&2
  fi
  exit "$rc"
}
