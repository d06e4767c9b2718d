# shellcheck shell=bash disable=SC2034  # sourced: the tests use what it sets
# Shared by the tests that run the real limactl (Lima as ./dev deps builds it, named by
# AGT_LIMACTL): TAP (tests/e2e/tap.sh), the prerequisites, the unprivileged user that runs
# limactl and agt (limactl refuses root, and CI runs as root), a private directory that
# user owns with LIMA_HOME, agt's config and cache in it, and helpers.  Nothing here boots
# a VM: `limactl create` copies the image and builds the disk, which is all that clone,
# factory-reset and delete need.  A missing prerequisite is a failure ("Bail out!").
set -u

: "${AGT:?AGT must name the agt binary (meson sets it)}"
SRCDIR=${SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
. "$SRCDIR/tests/e2e/tap.sh"

[ "$(id -u)" = 0 ] || bail "these tests need root (to create and become the user that runs limactl)"
[ "$(uname -s)" = Linux ] || bail "these tests need Linux"
# the justfile's pin gives the default, as it does to ./dev
LIMACTL_VERSION=$(sed -n 's/^lima_version := "\(.*\)"/\1/p' "$SRCDIR/justfile")
LIMACTL=${AGT_LIMACTL:-/var/cache/agt/lima/$LIMACTL_VERSION/bin/limactl}
[ -n "$LIMACTL" ] && [ -x "$LIMACTL" ] ||
  bail "no limactl at '$LIMACTL' (AGT_LIMACTL): ./dev deps builds Lima into /var/cache/agt/lima"
for p in qemu-img runuser python3; do
  command -v "$p" >/dev/null || bail "missing $p (./dev deps installs it)"
done
[ -x "$AGT" ] || bail "no agt at $AGT"
LUSER=$(bash "$SRCDIR/scripts/lima-user.sh") || bail "cannot create the user that runs limactl"

# Short: Lima refuses an instance whose socket path would reach 108 bytes.
T=$(mktemp -d /tmp/agt-lr.XXXXXX)
# agt and what it renders from, where the user can read them wherever this clone lives
mkdir -p "$T/bin" "$T/src/guest" "$T/home" "$T/work"
cp "$AGT" "$T/bin/agt"
cp -R "$SRCDIR/lima" "$T/src/lima"
cp "$SRCDIR/meson.build" "$T/src/meson.build"
cp "$SRCDIR/guest/meson.build" "$T/src/guest/meson.build"
chown -R "$LUSER:" "$T"
chmod 755 "$T"
cd "$T" || bail "cd $T"

# A test may define lr_cleanup_hook: it runs first when the test ends.
lr_cleanup() {
  local rc=$? d
  if declare -F lr_cleanup_hook >/dev/null; then
    lr_cleanup_hook
  fi
  for d in "$T"/lima/*/; do
    [ -f "$d/lima.yaml" ] || continue
    as_lima "$LIMACTL" --tty=false delete --force "$(basename "$d")" >/dev/null 2>&1
  done
  if [ "$FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; then
    for f in "$T"/lima/*/ha.stderr.log; do
      [ -f "$f" ] || continue
      echo "# --- $f (last 15 lines)"
      tail -15 "$f" | sed 's/^/#   /'
    done
  fi
  rm -rf --one-file-system "$T"
  echo "1..$N"
  [ "$FAILED" -eq 0 ] && [ "$rc" -eq 0 ]
  exit $?
}
trap lr_cleanup EXIT

# as_lima CMD...: CMD as the unprivileged user, in $T, with a clean environment: its own
# HOME, LIMA_HOME and caches under $T, limactl in PATH (as on a Mac with Lima installed).
LPATH=$T/bin:$(dirname "$LIMACTL"):/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
as_lima() {
  runuser -u "$LUSER" -- env -i HOME="$T/home" PATH="$LPATH" LIMA_HOME="$T/lima" \
    XDG_CACHE_HOME="$T/cache" XDG_CONFIG_HOME="$T/xdg" AGT_CONFIG="$T/config.yaml" \
    LANG=C.UTF-8 "$@"
}
agt() { as_lima "$T/bin/agt" "$@"; }
limactl() { as_lima "$LIMACTL" --tty=false "$@"; }

# lima_field NAME FIELD: a top-level field of the real `limactl list --json NAME`
lima_field() {
  limactl list --json "$1" 2>/dev/null | python3 -c 'import json,sys
for line in sys.stdin:
    o = json.loads(line)
    print(o.get(sys.argv[1], ""))' "$2"
}

# A small local disk image: Lima copies images[].location at create time, and a qcow2
# made here needs no network.  No VM boots from it in these tests.
lr_image() {
  as_lima qemu-img create -q -f qcow2 "$T/image.qcow2" 1G || bail "qemu-img create failed"
  echo "$T/image.qcow2"
}

# lr_config [YAML lines...]: agt's config: the template and source tree under $T, the rest
# as given.
lr_config() {
  {
    echo "vm:"
    echo "  template: $T/src/lima/agt.yaml"
    echo "  agt_source: $T/src"
    printf '%s\n' "$@"
  } >"$T/config.yaml"
  chown "$LUSER:" "$T/config.yaml"
}
