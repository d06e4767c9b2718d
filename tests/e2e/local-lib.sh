# shellcheck shell=bash
# Shared by the e2e tests of target local (local.sh, verify.sh): TAP (tap.sh), the
# prerequisites, a private temp dir $T and cgroup $CG, agt's environment for a private
# agtd that `agt up` starts (socket, state and log in $T, so it collides with nothing), and
# the exit trap: the agtd's jails removed (they outlive agtd), agtd stopped, its cgroups
# and $T removed, the TAP plan printed.  Set LOCAL_TEST (a word for names and messages)
# before sourcing it.
: "${LOCAL_TEST:?LOCAL_TEST must name the test}"
: "${AGT:?AGT must name the agt binary (meson sets it)}"
: "${AGTD:?AGTD must name the agtd binary (meson sets it)}"
SRCDIR=${SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

. "$SRCDIR/tests/e2e/tap.sh"

[ "$(id -u)" = 0 ] || bail "the $LOCAL_TEST test needs root (agtd runs the jails)"
[ "$(uname -s)" = Linux ] || bail "the $LOCAL_TEST test needs Linux"
[ -x "$AGT" ] || bail "no agt at $AGT"
[ -x "$AGTD" ] || bail "no agtd at $AGTD"

T=$(mktemp -d "/tmp/agt-e2e-$LOCAL_TEST.XXXXXX")
chmod 755 "$T"
CG=agt-e2e-$LOCAL_TEST-$$

# local_config: a project folder the jail's user may write ($T/projects/app) and agt's
# config for this agtd: its socket in $T, $T/projects mounted writable, the test rootfs.
local_config() {
  mkdir -p "$T/projects/app"
  chmod 777 "$T/projects/app"
  cat >"$T/config.yaml" <<CFG
agtd:
  socket: $T/agtd.sock
vm:
  mounts:
    - location: $T/projects
      writable: true
jail:
  rootfs: test
CFG
}

agtd_pid() { # the pid of the agtd answering on our socket, if any
  pgrep -f -- "--socket=$T/agtd.sock" | head -1
}
local_cleanup() {
  local rc=$? d p
  p=$(agtd_pid)
  if [ -n "$p" ]; then # jails outlive agtd: remove them first
    "$AGTD" ctl -s "$T/agtd.sock" jail ls 2>/dev/null | awk 'NR > 1 {print $1}' |
      while read -r j; do "$AGTD" ctl -s "$T/agtd.sock" jail rm "$j" --force >/dev/null; done
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  fi
  for d in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  if [ "$FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; then
    echo "# agtd log (last 20 lines):"
    tail -20 "$T/agtd.log" 2>/dev/null | sed 's/^/#   /'
  fi
  if ! grep -q " $T/" /proc/self/mountinfo; then
    rm -rf --one-file-system "$T"
  fi
  echo "1..$N"
  [ "$FAILED" -eq 0 ] && [ "$rc" -eq 0 ]
  exit $?
}
trap local_cleanup EXIT

# agt: target local, agtd's socket in $T (the test writes $AGT_CONFIG); `agt up` starts
# agtd with the rest
export AGT_CONFIG=$T/config.yaml AGT_TARGET=local
export AGT_AGTD=$AGTD AGT_AGTD_STATE=$T/state AGT_AGTD_LOG=$T/agtd.log AGT_AGTD_CGROUP=$CG
export XDG_CACHE_HOME=$T/cache
unset AGT_INSTANCE
