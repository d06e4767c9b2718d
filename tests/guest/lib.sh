# Shared by the guest tests: TAP output, a private agtd per test file, and helpers.
# Guest tests need root and Linux.  A missing prerequisite is a failure ("Bail out!"),
# never a skip.
set -u

: "${AGTD:?AGTD must name the agtd binary (meson sets it)}"
: "${PROBE:?PROBE must name the static probe binary (meson sets it)}"
SRCDIR=${SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

T=$(mktemp -d /tmp/agt-test.XXXXXX)
chmod 755 "$T"
SOCK=$T/agtd.sock
STATE=$T/state
CG=agt-test-$$
AGTD_PID=
TAP_N=0
TAP_FAILED=0

ok() {
  TAP_N=$((TAP_N + 1))
  echo "ok $TAP_N - $*"
}

not_ok() {
  TAP_N=$((TAP_N + 1))
  TAP_FAILED=$((TAP_FAILED + 1))
  echo "not ok $TAP_N - $*"
}

# check DESCRIPTION COMMAND...: ok when the command succeeds.
check() {
  local desc=$1
  shift
  if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}

# is DESCRIPTION GOT WANT
is() {
  if [ "$2" = "$3" ]; then
    ok "$1"
  else
    not_ok "$1"
    echo "#   got:  '$2'"
    echo "#   want: '$3'"
  fi
}

# like DESCRIPTION TEXT PATTERN (grep -E)
like() {
  if printf '%s\n' "$2" | grep -Eq -- "$3"; then
    ok "$1"
  else
    not_ok "$1"
    printf '%s\n' "$2" | head -20 | sed 's/^/#   got: /'
    echo "#   want match: $3"
  fi
}

bail() {
  echo "Bail out! $*"
  exit 1
}

[ "$(id -u)" = 0 ] || bail "guest tests need root (real namespaces, mounts and cgroups)"
[ "$(uname -s)" = Linux ] || bail "guest tests need Linux"

# With AGT_TEST_MACHINE_SETTINGS=yes (.ci/run sets it: CI's machine is thrown away) the
# guest tests run on a machine set up as agt's guest is: the machine-wide settings of
# lima/provision/machine.sh (agtd changes none itself).  They are not applied by default:
# they write /etc/sysctl.d and turn on a cgroup flag that stays on until reboot, which a
# test run on a developer's own machine must not do.  MACHINE_DYNMODS_BEFORE: whether the
# kernel's cgroup flag favordynmods was on before.
MACHINE_DYNMODS_BEFORE=$(grep -E ' - cgroup2? ' /proc/self/mountinfo | grep -c favordynmods)
machine_settings() {
  "$SRCDIR/lima/provision/machine.sh" || bail "lima/provision/machine.sh failed"
}
[ "${AGT_TEST_MACHINE_SETTINGS:-no}" != yes ] || machine_settings
# Whether this machine is set up for network mode open (machine.sh's bridge and firewall):
# agtd refuses the mode otherwise, and the tests of it skip, saying so.
open_net_ready() { [ -d /sys/class/net/agt0 ] && nft list table inet agt >/dev/null 2>&1; }
OPEN_NET_SKIP="this machine is not set up for network mode open (lima/provision/machine.sh; the tests run it with AGT_TEST_MACHINE_SETTINGS=yes)"

ctl() { "$AGTD" ctl -s "$SOCK" "$@"; }

# wait_until SECONDS COMMAND...: poll every 0.1 s until COMMAND succeeds; 1 when the time
# runs out (the caller's check then fails)
wait_until() {
  local n=$(($1 * 10))
  shift
  for _ in $(seq 1 "$n"); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}

agtd_start() {
  "$AGTD" serve --socket "$SOCK" --state-dir "$STATE" --cgroup "$CG" --workspace-root "$T" \
    "$@" >>"$T/agtd.log" 2>&1 &
  AGTD_PID=$!
  for _ in $(seq 1 200); do
    ctl hello >/dev/null 2>&1 && return 0
    kill -0 "$AGTD_PID" 2>/dev/null || break
    sleep 0.05
  done
  sed 's/^/# agtd: /' "$T/agtd.log"
  bail "agtd did not start"
}

agtd_stop() {
  [ -n "$AGTD_PID" ] || return 0
  kill -TERM "$AGTD_PID" 2>/dev/null
  wait "$AGTD_PID" 2>/dev/null
  AGTD_PID=
}

# A small rootfs for tests: toybox and busybox userland plus the probe.
build_test_rootfs() {
  local m=$T/test-rootfs.yaml
  sed "s|@PROBE@|$PROBE|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$m"
  ctl rootfs build "$m" --no-download >"$T/rootfs.out" 2>&1 || {
    sed 's/^/# /' "$T/rootfs.out"
    bail "the test rootfs did not build"
  }
  TEST_ROOTFS=$(cut -d' ' -f1 "$T/rootfs.out")
}

# Mounts, processes and cgroups this test's agtd left behind.
leftovers() {
  # (agtd's own mount of the jails' disk at $STATE/layers stays while agtd runs)
  grep " $T/" /proc/self/mountinfo | grep -vc " $STATE/layers "
}

# own_superblocks MOUNTINFO-TEXT (tests/guest/mountinfo.sh)
. "$SRCDIR/tests/guest/mountinfo.sh"

# Processes in this test's jails' cgroups (not in agtd's prepared jails, w-*).
jail_procs() {
  grep -l "/$CG/" /proc/[0-9]*/cgroup 2>/dev/null | xargs -r grep -L "/$CG/w-" 2>/dev/null |
    wc -l
}

cgroup_dirs() {
  local n=0 d
  for d in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do
    [ -d "$d" ] || continue
    n=$((n + $(find "$d" -mindepth 1 -type d ! -name 'w-*' | wc -l)))
  done
  echo "$n"
}

# A test host standing in for a model provider: a network namespace of this test's own,
# joined to the guest by a veth pair (guest 10.211.0.1, provider 10.211.0.2), running the
# OpenAI-compatible test server on 10.211.0.2:8080.
PROV_NS=
PROVIDER=10.211.0.2
provider_start() {
  PROV_NS=agt-prov-$$
  local a=agtp$$a b=agtp$$b
  ip netns add "$PROV_NS" || bail "cannot create a network namespace (ip netns add)"
  ip link add "$a" type veth peer name "$b" || bail "cannot create a veth pair"
  ip link set "$b" netns "$PROV_NS"
  ip addr add 10.211.0.1/24 dev "$a"
  ip link set "$a" up
  ip -n "$PROV_NS" addr add "$PROVIDER/24" dev "$b"
  ip -n "$PROV_NS" link set "$b" up
  ip -n "$PROV_NS" link set lo up
  ip netns exec "$PROV_NS" python3 "$SRCDIR/guest/tools/model_server.py" --host "$PROVIDER" \
    --port 8080 --log "$T/model.log" >"$T/model.out" 2>&1 &
  PROV_PID=$!
  for _ in $(seq 1 100); do
    grep -q listening "$T/model.out" 2>/dev/null && return 0
    sleep 0.05
  done
  bail "the test model server did not start"
}

provider_stop() {
  [ -n "$PROV_NS" ] || return 0
  kill "$PROV_PID" 2>/dev/null
  wait "$PROV_PID" 2>/dev/null
  ip link del "agtp$$a" 2>/dev/null
  ip netns del "$PROV_NS" 2>/dev/null
  PROV_NS=
}

# Jails outlive agtd (their keepers hold them): a test ends by removing its jails.
remove_all_jails() {
  [ -n "$AGTD_PID" ] || return 0
  ctl jail ls 2>/dev/null | awk 'NR > 1 {print $1}' | while read -r j; do
    ctl jail rm "$j" --force >/dev/null || echo "# jail rm $j --force failed"
  done
}

# The /proc/PID directories of the processes named $1 (their comm). A read, not $(cat): a
# fork per process takes tens of seconds on a machine running thousands of them.
procs_named() {
  local p comm
  for p in /proc/[0-9]*; do
    { read -r comm <"$p/comm"; } 2>/dev/null || continue
    [ "$comm" != "$1" ] || echo "$p"
  done
}

# Keepers of this test's jails still running once agtd is gone (a test that failed half-way):
# each holds its jail's directory (under $STATE) at fd 8 (guest/keeper/keeper.h).
kill_keepers() {
  local p d
  for p in $(procs_named agt-keeper); do
    d=$(readlink "$p/fd/8" 2>/dev/null) || continue
    case $d in "$STATE"/*)
      echo "# killing the keeper ${p#/proc/} of $d"
      kill -KILL "${p#/proc/}"
      ;;
    esac
  done
}

finish() {
  local rc=$?
  # a loop device the test attached itself (no autoclear: nothing else would detach it)
  [ -n "${TEST_LOOP_DEV:-}" ] && losetup -d "$TEST_LOOP_DEV"
  provider_stop
  remove_all_jails
  agtd_stop
  kill_keepers
  for d in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  if [ "$TAP_FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; then
    echo "# agtd log (last 30 lines):"
    tail -30 "$T/agtd.log" 2>/dev/null | sed 's/^/#   /'
  fi
  if ! grep -q " $T/" /proc/self/mountinfo; then
    rm -rf --one-file-system "$T"
  fi
  echo "1..$TAP_N"
  [ "$TAP_FAILED" -eq 0 ] && [ "$rc" -eq 0 ]
  exit $?
}
trap finish EXIT
# killed by meson's timeout (SIGTERM): clean up all the same (bash runs no EXIT trap then)
trap 'exit 143' TERM
