# shellcheck shell=bash disable=SC2034  # sourced: the tests use what it sets
# Shared by the e2e tests: TAP output (tap.sh), the prerequisites, a private directory with the
# stand-in's LIMA_HOME, agt's cache and config in it, and helpers.  Each test sources it,
# then calls e2e_vm_up when it needs the VM running.
#
# Needs root and Linux (the stand-in's VM is a pid+mount namespace running sshd and agtd).
# A missing prerequisite is a failure ("Bail out!"), never a skip.
set -u

: "${AGT:?AGT must name the agt binary (meson sets it)}"
: "${AGTD:?AGTD must name the agtd binary (meson sets it)}"
: "${PROBE:?PROBE must name the static probe binary (meson sets it)}"
SRCDIR=${SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
FAKES=$SRCDIR/tests/fakes

. "$SRCDIR/tests/e2e/tap.sh"

[ "$(id -u)" = 0 ] || bail "the e2e test needs root (the stand-in's VM runs agtd, which needs root)"
[ "$(uname -s)" = Linux ] || bail "the e2e test needs Linux"
for p in python3 ssh ssh-keygen ssh-keyscan unshare mount; do
  command -v "$p" >/dev/null || bail "missing $p"
done
[ -x /usr/sbin/sshd ] || command -v sshd >/dev/null || bail "missing sshd (openssh-server)"
[ -x "$AGT" ] || bail "no agt at $AGT"
[ -x "$AGTD" ] || bail "no agtd at $AGTD"
[ -x "$PROBE" ] || bail "no probe at $PROBE"
[ -f "$SRCDIR/tests/guest/test-rootfs.yaml" ] || bail "no tests/guest/test-rootfs.yaml"
[ -x "$FAKES/limactl" ] || bail "no tests/fakes/limactl"

T=$(mktemp -d /tmp/agt-e2e.XXXXXX)
chmod 755 "$T"
WORK=$T/work
mkdir -p "$WORK/proj" "$T/xdg"
chmod 777 "$WORK/proj" # the jail's agent runs as an unprivileged user

# A test may define e2e_cleanup_hook: it runs first when the test ends.
e2e_cleanup() {
  local rc=$? d
  if declare -F e2e_cleanup_hook >/dev/null; then
    e2e_cleanup_hook
  fi
  if [ -d "$T/lima" ]; then
    for d in "$T"/lima/*/; do
      [ -f "$d/lima.yaml" ] || continue
      AGT_FAKE_LIMACTL_ALLOW_ROOT=1 "$FAKES/limactl" delete --force "$(basename "$d")" >/dev/null 2>&1
    done
  fi
  if [ "$FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; then
    for f in "$T"/lima/*/vm/*.log "$T"/lima/*/ha.stderr.log; do
      [ -f "$f" ] || continue
      echo "# --- $f (last 15 lines)"
      tail -15 "$f" | sed 's/^/#   /'
    done
  fi
  if ! grep -q " $T/" /proc/self/mountinfo; then
    rm -rf --one-file-system "$T"
  fi
  echo "1..$N"
  [ "$FAILED" -eq 0 ] && [ "$rc" -eq 0 ]
  exit $?
}
trap e2e_cleanup EXIT

export LIMA_HOME=$T/lima
export XDG_CACHE_HOME=$T/cache
export XDG_CONFIG_HOME=$T/xdg
export XDG_RUNTIME_DIR=$T/run # agt's connection keepers: gone with $T
mkdir -m 700 "$XDG_RUNTIME_DIR"
# new_connections: agt's commands after this make a new SSH connection (and check the host
# key, and limactl's state, again) instead of reusing a keeper's; the keepers end by
# themselves once their sockets are gone
new_connections() { rm -rf "$XDG_RUNTIME_DIR/agt"; }
export AGT_CONFIG=$T/config.yaml
export AGT_FAKE_AGTD=$AGTD
export PATH=$FAKES:$PATH
unset AGT_TARGET AGT_INSTANCE AGT_FAKE_LIMACTL_ALLOW_ROOT
cat >"$AGT_CONFIG" <<EOF
# e2e: the project directory the VM mounts, and the files the ssh:// target uses
vm:
  mounts:
    - location: $WORK
      writable: true
ssh:
  known_hosts: $T/known_hosts
  identity: $LIMA_HOME/_config/user
EOF
: >"$T/known_hosts"
# a project directory inside the mount: the workspace of jails run from here (a mount itself
# holds projects and is not one)
cd "$WORK/proj" || bail "cd $WORK/proj"

agt() { "$AGT" "$@"; }
lima_field() { # lima_field NAME FIELD: from `limactl list --json NAME`
  AGT_FAKE_LIMACTL_ALLOW_ROOT=1 limactl list --json "$1" 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    o = json.loads(line)
    print(o.get(sys.argv[1], ""))' "$2"
}
VM=agt_agent_sandbox
VMDIR=$LIMA_HOME/$VM

# e2e_vm_up: the VM running (agt up), or bail.
e2e_vm_up() {
  export AGT_FAKE_LIMACTL_ALLOW_ROOT=1 # CI runs as root; the stand-in allows it when told
  run agt up
  if [ "$RC" != 0 ]; then
    printf '%s\n' "$ERR" | tail -20 | sed 's/^/# /'
    bail "agt up failed"
  fi
}

# e2e_test_rootfs: the test rootfs (toybox, busybox, the probe) built in the VM, as "test".
e2e_test_rootfs() {
  sed "s|@PROBE@|$PROBE|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$WORK/test-rootfs.yaml"
  run agt rootfs build --no-download "$WORK/test-rootfs.yaml"
  if [ "$RC" != 0 ]; then
    printf '%s\n' "$ERR" | tail -20 | sed 's/^/# /'
    bail "the test rootfs did not build"
  fi
}
