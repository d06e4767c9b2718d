#!/usr/bin/env bash
# agt doctor against tests/fakes/limactl (the Lima stand-in, as tests/e2e/lima.sh uses it):
# no limactl; a VM that does not exist; a healthy VM; a stopped one; a config that does not
# parse; target local, where the VM rows do not apply.  Each row's result and, for a
# failure, the command that fixes it.
#
# Needs root and Linux (the stand-in's VM runs agtd).  A missing prerequisite is a failure
# ("Bail out!"), never a skip.
set -u

: "${AGT:?AGT must name the agt binary (meson sets it)}"
: "${AGTD:?AGTD must name the agtd binary (meson sets it)}"
: "${PROBE:?PROBE must name the static probe binary (meson sets it)}"
SRCDIR=${SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
FAKES=$SRCDIR/tests/fakes

. "$SRCDIR/tests/e2e/tap.sh"

[ "$(id -u)" = 0 ] || bail "the doctor test needs root (the stand-in's VM runs agtd)"
[ "$(uname -s)" = Linux ] || bail "the doctor test needs Linux"
for p in python3 ssh ssh-keygen unshare mount; do
  command -v "$p" >/dev/null || bail "missing $p"
done
[ -x "$AGT" ] || bail "no agt at $AGT"
[ -x "$AGTD" ] || bail "no agtd at $AGTD"
[ -x "$FAKES/limactl" ] || bail "no tests/fakes/limactl"

T=$(mktemp -d /tmp/agt-e2e-doctor.XXXXXX)
chmod 755 "$T"
mkdir -p "$T/work" "$T/xdg"
LOCAL_PID=

cleanup() {
  local rc=$? d
  if [ -d "$T/lima" ]; then
    for d in "$T"/lima/*/; do
      [ -f "$d/lima.yaml" ] || continue
      AGT_FAKE_LIMACTL_ALLOW_ROOT=1 "$FAKES/limactl" delete --force "$(basename "$d")" >/dev/null 2>&1
    done
  fi
  if [ -n "$LOCAL_PID" ]; then
    kill -TERM "$LOCAL_PID" 2>/dev/null
    wait "$LOCAL_PID" 2>/dev/null
  fi
  for d in /sys/fs/cgroup/*/"agt-e2e-doctor-$$" /sys/fs/cgroup/"agt-e2e-doctor-$$"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  if ! grep -q " $T/" /proc/self/mountinfo; then
    rm -rf --one-file-system "$T"
  fi
  echo "1..$N"
  [ "$FAILED" -eq 0 ] && [ "$rc" -eq 0 ]
  exit $?
}
trap cleanup EXIT

export LIMA_HOME=$T/lima
export XDG_CACHE_HOME=$T/cache
export XDG_CONFIG_HOME=$T/xdg
export AGT_CONFIG=$T/config.yaml
export AGT_FAKE_AGTD=$AGTD
export AGT_FAKE_LIMACTL_ALLOW_ROOT=1
unset AGT_TARGET AGT_INSTANCE
cat >"$AGT_CONFIG" <<EOF
# the doctor test: the rootfs the jails use is the test one
vm:
  mounts:
    - location: $T/work
      writable: true
jail:
  rootfs: test
EOF
cd "$T/work" || bail "cd $T/work"

row() { # row AREA CHECK: the line of the table, and the fix line under it if any after " | "
  # (one line: like's grep -E would take a pattern's two lines as two patterns, either enough)
  printf '%s\n' "$OUT" | awk -v a="$1" -v c="$2" '
    $1 == a && $2 == c { r = $0; if ((getline) > 0 && $1 == "fix:") r = r " | " $0; print r; exit }'
}
VM=agt_agent_sandbox

# --- no limactl at all, target lima
run env PATH=/usr/bin:/bin "$AGT" --target lima doctor
is "no limactl: doctor exits 1" "$RC" 1
like "the limactl row fails, saying how to install Lima" "$(row host limactl)" \
  "^host +limactl +FAIL +'limactl' is not in PATH \(lima\.limactl; agt is tested with Lima v[0-9.]+\) +\| +fix: install Lima 2\.x"
like "the error counts the failures" "$ERR" "^agt: doctor: [0-9]+ checks? failed"

export PATH=$FAKES:$PATH

# --- a VM that does not exist yet
run "$AGT" doctor
is "no VM yet: doctor exits 1" "$RC" 1
like "the header" "$OUT" "^AREA +CHECK +RESULT +DETAIL$"
like "limactl is found, with its version" "$(row host limactl)" "^host +limactl +ok +$FAKES/limactl, version 2\.2\.0"
like "and the version agt is tested with (the justfile's pin)" "$(row host limactl)" \
  "\(agt is tested with $(sed -n 's/^lima_version := "\(.*\)"/\1/p' "$SRCDIR/justfile")\)$"
like "the config parses" "$(row host config)" "^host +config +ok +$AGT_CONFIG parses; target lima:$VM"
like "free disk is reported" "$(row host disk)" "^host +disk +(ok|warn) +[0-9.]+ [KMGT]iB free on "
like "the VM row fails: it does not exist; the fix is agt up" "$(row vm state)" \
  "^vm +state +FAIL +vm '$VM' does not exist +\| +fix: agt up$"
like "agtd is not checked while the VM does not run" "$(row vm agtd)" "^vm +agtd +skip +not checked: the vm is not running"
like "nor the guest" "$(row guest rootfs)" "^guest +rootfs +skip +not checked"

# --- a healthy VM
run "$AGT" up
is "agt up starts the VM" "$RC" 0
sed "s|@PROBE@|$PROBE|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$T/work/test-rootfs.yaml"
run "$AGT" rootfs build --no-download "$T/work/test-rootfs.yaml"
is "the test rootfs builds in the VM" "$RC" 0
run "$AGT" doctor
is "a healthy VM: doctor exits 0" "$RC" 0
echo "# the healthy VM's table:"
printf '%s\n' "$OUT" | sed 's/^/#   /'
unlike "no row fails" "$OUT" "^[a-z]+ +[a-z ]+ +FAIL "
like "Lima's key row" "$OUT" "^host +lima key +ok +$LIMA_HOME/_config/user$"
like "the VM runs" "$(row vm state)" "^vm +state +ok +vm '$VM' is Running \(qemu [a-z0-9_]+, ssh port [0-9]+\)"
like "agtd answers over SSH" "$(row vm agtd)" "^vm +agtd +ok +agtd answers at lima:$VM \(root@127\.0\.0\.1:[0-9]+\)"
like "the versions match" "$(row vm versions)" "^vm +versions +ok +agt ([0-9.]+) and agtd \1, protocol 1"
like "the guest has the namespaces" "$(row guest namespaces)" "^guest +namespaces +ok +cgroup ipc mnt net pid "
like "and overlayfs" "$(row guest overlayfs)" "^guest +overlayfs +ok"
like "the cgroup version is agtd's" "$(row guest cgroup)" "^guest +cgroup +(ok +v2|warn +v1)"
like "each jail has a disk limit" "$OUT" "^guest +jail disk +ok +btrfs, [0-9]+ MiB, a quota per jail"
like "the rootfs of jail.rootfs is built" "$(row guest rootfs)" "^guest +rootfs +ok +'test' is built"
like "favordynmods is reported" "$(row guest dynmods)" "^guest +dynmods +(ok +the kernel's cgroup flag favordynmods is on|warn +favordynmods is off)"
like "the console loglevel is reported" "$OUT" "^guest +console log +(ok|warn) +console loglevel [0-9]+"
like "network mode open's machine settings are reported" "$OUT" "^guest +open net +(ok +network mode open is set up|(ok|warn) +network mode open is refused: )"
like "realtime starts are reported" "$(row guest realtime)" "^guest +realtime +(ok|warn) +starts "
like "the summary" "$OUT" "^doctor: [0-9]+ ok, 0 failed, [0-9]+ warnings?, 0 not checked$"

# --- a stopped VM
run "$AGT" stop
is "agt stop stops it" "$RC" 0
run "$AGT" doctor
is "a stopped VM: doctor exits 1" "$RC" 1
like "the VM row fails; the fix is agt up" "$(row vm state)" \
  "^vm +state +FAIL +vm '$VM' is Stopped +\| +fix: agt up$"
like "agtd is not checked" "$(row vm agtd)" "^vm +agtd +skip +not checked: the vm is not running"
like "nor the versions" "$(row vm versions)" "^vm +versions +skip "
like "nor the guest's namespaces" "$(row guest namespaces)" "^guest +namespaces +skip "
like "the host rows still pass" "$(row host limactl)" "^host +limactl +ok "
like "the summary counts one failure" "$OUT" "^doctor: [0-9]+ ok, 1 failed, [0-9]+ warnings?, 10 not checked$"

# --- a config that does not parse: doctor still runs, and says where
printf 'vm:\n  cpu: 3\n' >"$T/bad.yaml"
run env AGT_CONFIG="$T/bad.yaml" "$AGT" doctor
is "a bad config: doctor exits 1" "$RC" 1
like "the config row names the file, line and key" "$(row host config)" \
  "^host +config +FAIL +$T/bad\.yaml:2:3: unknown key 'vm\.cpu' \(see docs/CONFIG\.md\) +\| +fix: correct the file"
like "and the other rows are still there" "$(row vm state)" "^vm +state +FAIL +vm '$VM' is Stopped"

run "$AGT" delete --force
is "agt delete removes the VM" "$RC" 0

# --- target local: the VM rows do not apply
"$AGTD" serve --socket "$T/local.sock" --state-dir "$T/local-state" --cgroup "agt-e2e-doctor-$$" \
  >"$T/local-agtd.log" 2>&1 &
LOCAL_PID=$!
for _ in $(seq 1 100); do
  [ -S "$T/local.sock" ] && break
  sleep 0.05
done
printf 'agtd:\n  socket: %s\njail:\n  rootfs: test\n' "$T/local.sock" >"$T/local.yaml"
run env AGT_CONFIG="$T/local.yaml" "$AGT" --target local doctor
is "target local: doctor exits 1 (no rootfs built)" "$RC" 1
like "limactl does not apply" "$(row host limactl)" "^host +limactl +n/a +target local"
like "Lima's key row" "$OUT" "^host +lima key +n/a +target local$"
like "nor the VM" "$(row vm state)" "^vm +state +n/a +target local$"
like "agtd answers on this machine" "$(row local agtd)" "^local +agtd +ok +agtd answers at local"
like "the guest rows are this machine's" "$(row guest namespaces)" "^guest +namespaces +ok "
like "an agtd on this machine starts at normal priority by default, and that is no warning" \
  "$(row guest realtime)" "^guest +realtime +ok +starts at normal priority \(agtd serve --realtime-starts to change: machine-wide\)$"
like "the missing rootfs fails, with its fix" "$(row guest rootfs)" \
  "^guest +rootfs +FAIL +no rootfs named 'test' \(jail\.rootfs\) +\| +fix: agt verify \(builds it\), or agt rootfs build $SRCDIR/rootfs/default\.yaml$"
run env AGT_CONFIG="$T/local.yaml" "$AGT" --target local doctor --json
is "doctor --json: exit 1 too" "$RC" 1
is "its rows as JSON: the rootfs row's result and fix" \
  "$(printf '%s\n' "$OUT" | python3 -c 'import json,sys
r = [x for x in json.load(sys.stdin) if x["check"] == "rootfs"][0]
print(r["area"], r["result"], r["fix"])')" \
  "guest FAIL agt verify (builds it), or agt rootfs build $SRCDIR/rootfs/default.yaml"
kill -TERM "$LOCAL_PID"
wait "$LOCAL_PID" 2>/dev/null
LOCAL_PID=
run env AGT_CONFIG="$T/local.yaml" "$AGT" --target local doctor
like "with no agtd, the agtd row fails and says agt up starts it" "$(row local agtd)" \
  "^local +agtd +FAIL +no answer: .* +\| +fix: agt up \(as root: it starts agtd"
like "the rows that need agtd are not checked, not failed" "$(row local versions)$(row guest rootfs)" \
  "^local +versions +skip +not checked: agtd does not answer(guest +rootfs +skip +not checked: agtd does not answer)$"
like "and the sums say so" "$OUT" "^doctor: [0-9]+ ok, 1 failed, "
