#!/usr/bin/env bash
# agt over SSH (part of `just bench`, run at the end of bench/run.sh, or alone; docs/BENCH.md
# section 4).  Stands up the limactl stand-in's VM exactly as the e2e tests do
# (tests/e2e/lib.sh: a private LIMA_HOME and config under a temp dir, `agt up`; the "VM" is
# a real OpenSSH sshd on 127.0.0.1 in front of a real agtd), then measures against that one
# sshd, as the same user with the same key, in one run:
#   1. `agt jail ls`, the whole command as a user runs it (process start, config, SSH
#      handshake, channel to agtd, request), against `ssh ... true` (OpenSSH's client, same
#      key, BatchMode, the same known_hosts), alternating; target: agt's p50 within 1.2x;
#      and through agt's connection keeper against `ssh` through a ControlMaster; target:
#      agt's p50 at most 10 ms and below ControlMaster's;
#   2. one jail.ls request over an already open connection (build/bench/agt-rpc-bench, which
#      links agt's own SSH transport); target: p50 under 1 ms.
# and prints one table.
#
# Needs root and Linux (the stand-in's VM runs agtd), ssh, sshd, python3.  Knobs (defaults):
#   BUILD               the meson build directory (build)
#   BENCH_SSH_RUNS      whole commands of each kind, after BENCH_SSH_WARMUP (50, 5)
#   BENCH_SSH_REQUESTS  requests over the open connection, after 100 unmeasured (2000)
#   BENCH_SSH_CONNECTS  connections set up and torn down in-process, timed step by step (30)
set -uo pipefail # not -e: tests/e2e/lib.sh's helpers test status codes themselves

SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$SRCDIR/build}
case $BUILD in /*) ;; *) BUILD=$SRCDIR/$BUILD ;; esac
export AGT=$BUILD/host/agt AGTD=$BUILD/guest/agtd PROBE=$BUILD/tests/guest/probe SRCDIR
DRIVER=$BUILD/bench/agt-rpc-bench
RUNS=${BENCH_SSH_RUNS:-50}
WARMUP=${BENCH_SSH_WARMUP:-5}
REQUESTS=${BENCH_SSH_REQUESTS:-2000}
CONNECTS=${BENCH_SSH_CONNECTS:-30}
TARGET_RATIO=1.2 # agt jail ls p50 at most 1.2x ssh true's
TARGET_REQ_US=1000
TARGET_KEPT_MS=10 # agt jail ls through its keeper: p50 at most 10 ms, and below ControlMaster's

die() {
  echo "bench: $*" >&2
  exit 1
}
[ "$(uname -s)" = Linux ] || die "the ssh benchmark needs Linux (the stand-in's VM)"
[ "$(id -u)" = 0 ] || die "the ssh benchmark needs root (the stand-in's VM runs agtd)"
for f in "$AGT" "$AGTD" "$PROBE" "$DRIVER"; do
  [ -x "$f" ] || die "$f is missing: build first (just build)"
done
command -v nsenter >/dev/null || die "missing nsenter (util-linux)"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# The stand-in's VM, exactly as the e2e tests stand it up: prerequisites, a private temp dir
# $T with LIMA_HOME, agt's cache and config (ssh.known_hosts $T/known_hosts, ssh.identity
# Lima's key), PATH with tests/fakes first.  lib.sh's exit trap stops every VM under
# LIMA_HOME (sshd, agtd) and removes $T; it also prints a TAP plan, dropped here.
# shellcheck disable=SC1091 # (lib.sh is found at run time)
. "$SRCDIR/tests/e2e/lib.sh"
bench_cleanup() {
  local rc=$?
  trap - EXIT
  # (exit "$rc") hands the status on, so lib.sh shows the VM's logs when the run failed
  ( (exit "$rc"); e2e_cleanup) 2>&1 | { grep -v '^1\.\.[0-9]*$' || true; } >&2
  [ ! -e "$T" ] || echo "bench: $T was not removed (mounts under it?)" >&2
  exit "$rc"
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

echo "bench: agt over SSH: starting the limactl stand-in's VM (agt up)" >&2
e2e_vm_up # bails on failure
PORT=$(lima_field "$VM" sshLocalPort)
VMUSER=$(AGT_FAKE_LIMACTL_ALLOW_ROOT=1 limactl list --json "$VM" |
  python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["config"]["user"]["name"])')
KEY=$LIMA_HOME/_config/user
[ -n "$PORT" ] && [ -n "$VMUSER" ] && [ -f "$KEY" ] || die "no SSH port, user or key for the VM"
# known_hosts for both clients: the VM's one host key (agt's config names this file)
ssh-keyscan -p "$PORT" -t ed25519 127.0.0.1 >"$T/known_hosts" 2>/dev/null
[ -s "$T/known_hosts" ] || die "ssh-keyscan got no host key from 127.0.0.1:$PORT"
# the VM's pid 1 (the first child of the driver, unshare), to reach agtd's socket directly
DRV=$(cat "$VMDIR/qemu.pid")
INIT=$(cut -d' ' -f1 "/proc/$DRV/task/$DRV/children" 2>/dev/null)
[ -n "$INIT" ] || die "the VM's init process was not found"

# The commands.  OpenSSH's client reads no config (-F /dev/null) and is given everything;
# agt reads its config file (identity, known_hosts) and ~/.ssh/config, as it always does.
SSHOPTS=(-F /dev/null -i "$KEY" -p "$PORT" -o BatchMode=yes -o IdentitiesOnly=yes
  -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$T/known_hosts"
  -o GlobalKnownHostsFile=/dev/null -o LogLevel=ERROR)
# The comparisons, each run the same number of times, alternating:
#   ssh    `ssh HOST true`, OpenSSH's defaults: sshd runs `true` through the user's shell
#   nosh   a session channel that starts no shell: the sftp subsystem (internal-sftp, in
#          sshd itself), which ends at EOF on stdin
#   bare   the same with libssh's key exchange (curve25519-sha256): the closest OpenSSH's
#          client comes to what agt does over the wire
#   cm     `ssh HOST true` through an OpenSSH ControlMaster (ControlPersist): the kept
#          connection agt's keeper is measured against
#   agt    `agt jail ls`, target ssh://, ssh.persist 0: agt's config, SSH, a channel to
#          agtd, the request
#   lima   the same, the default target lima:NAME: `limactl list --json` first
#   agtk   `agt jail ls`, target ssh://, through agt's connection keeper (the default)
#   limak  the same, target lima:NAME (no limactl list while the keeper runs)
#   list   `limactl list --json NAME` alone (the stand-in, a Python script)
NAMES=(ssh nosh bare cm agt lima agtk limak list)
# agt without its keeper: the same config with ssh.persist 0
sed 's/^ssh:$/ssh:\n  persist: 0/' "$AGT_CONFIG" >"$T/config-nokeeper.yaml"
grep -q '^  persist: 0$' "$T/config-nokeeper.yaml" || die "no ssh: section in $AGT_CONFIG"
cmd_of() { # NAME -> the command in CMD
  case $1 in
  ssh) CMD=(ssh "${SSHOPTS[@]}" "$VMUSER@127.0.0.1" true) ;;
  nosh) CMD=(ssh "${SSHOPTS[@]}" -s "$VMUSER@127.0.0.1" sftp) ;;
  bare) CMD=(ssh "${SSHOPTS[@]}" -o KexAlgorithms=curve25519-sha256 -s "$VMUSER@127.0.0.1" sftp) ;;
  cm) CMD=(ssh "${SSHOPTS[@]}" -o ControlMaster=auto -o "ControlPath=$T/cm-%C"
    -o ControlPersist=600 "$VMUSER@127.0.0.1" true) ;;
  agt) CMD=("$AGT" --config "$T/config-nokeeper.yaml" --target "ssh://$VMUSER@127.0.0.1:$PORT" jail ls) ;;
  lima) CMD=("$AGT" --config "$T/config-nokeeper.yaml" jail ls) ;;
  agtk) CMD=("$AGT" --target "ssh://$VMUSER@127.0.0.1:$PORT" jail ls) ;;
  limak) CMD=("$AGT" jail ls) ;;
  list) CMD=(limactl list --json "$VM") ;;
  esac
}
for n in "${NAMES[@]}"; do
  cmd_of "$n"
  "${CMD[@]}" >"$T/check.out" 2>&1 </dev/null || die "'${CMD[*]}' failed: $(tail -5 "$T/check.out")"
done
# what each client negotiates with this sshd
ALGOS_SSH=$(ssh -v "${SSHOPTS[@]}" "$VMUSER@127.0.0.1" true 2>&1 </dev/null |
  sed -n 's/^debug1: kex: algorithm: //p;s/^debug1: kex: server->client cipher: \([^ ]*\).*/\1/p' |
  paste -sd' ')
"$DRIVER" algos --port "$PORT" --user "$VMUSER" --known-hosts "$T/known_hosts" >"$T/algos" ||
  die "agt-rpc-bench algos failed"

# ---- 1. whole commands, alternating (and which goes first) ----
echo "bench: $RUNS runs each of ${NAMES[*]} (after $WARMUP warm-up), alternating" >&2
timed() { # NAME: run it once; its wall time in microseconds appended to $T/t.NAME
  local t0 t1
  cmd_of "$1"
  t0=$EPOCHREALTIME
  "${CMD[@]}" >/dev/null 2>"$T/err" </dev/null || die "'${CMD[*]}' failed: $(tail -5 "$T/err")"
  t1=$EPOCHREALTIME
  echo $((${t1/./} - ${t0/./})) >>"$T/t.$1"
}
BEGIN=$EPOCHREALTIME
for i in $(seq 1 $((WARMUP + RUNS))); do
  for k in $(seq 0 $((${#NAMES[@]} - 1))); do
    timed "${NAMES[$(((i + k) % ${#NAMES[@]}))]}"
  done
  [ "$i" = "$WARMUP" ] && for n in "${NAMES[@]}"; do : >"$T/t.$n"; done
done
WALL1=$(awk -v a="${BEGIN/./}" -v b="${EPOCHREALTIME/./}" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')

# ---- 2. requests over an open connection: agt's SSH transport, then agtd's socket ----
echo "bench: $CONNECTS connections in-process, then $REQUESTS jail.ls over one open connection" >&2
"$DRIVER" ssh --host 127.0.0.1 --port "$PORT" --user "$VMUSER" --identity "$KEY" \
  --known-hosts "$T/known_hosts" --connects "$CONNECTS" --runs "$REQUESTS" >"$T/rpc.ssh" ||
  die "agt-rpc-bench ssh failed"
echo "bench: $REQUESTS jail.ls on agtd's socket, no SSH (inside the VM's mount namespace)" >&2
nsenter -t "$INIT" -m -- "$DRIVER" unix --runs "$REQUESTS" >"$T/rpc.unix" ||
  die "agt-rpc-bench unix failed"

# ---- tear down, and check that nothing is left ----
cmd_of cm
# its options: CMD without "ssh" before them and the host and command after them
ssh -O exit "${CMD[@]:1:$((${#CMD[@]} - 3))}" "$VMUSER@127.0.0.1" >/dev/null 2>&1 ||
  echo "bench: the ControlMaster did not exit" >&2
"$AGT" delete --force >/dev/null 2>&1 || echo "bench: agt delete --force failed" >&2
LEFT_PROCS=0
for f in /proc/[0-9]*/cmdline; do # expanded before any tr or grep below starts
  tr '\0' ' ' 2>/dev/null <"$f" | grep -qF -- "$LIMA_HOME" && LEFT_PROCS=$((LEFT_PROCS + 1))
done
LEFT_MOUNTS=$(grep -c " $T/" /proc/self/mountinfo)

# ---- the table ----
stats() { # FILE -> "p50 p99 mean" in ms (input: microseconds; nearest rank)
  sort -n "$1" | awk '{ v[NR] = $1; s += $1 }
    function r(p) { k = int(p / 100 * NR); if (k < p / 100 * NR) k++; return v[k > 0 ? k : 1] }
    END { printf "%.1f %.1f %.1f", r(50) / 1e3, r(99) / 1e3, s / NR / 1e3 }'
}
val() { awk -v k="$1" '$1 == k { print $2; exit }' "$2"; }
num() { awk -v k="$1" '$1 == k { printf "%.1f", $2; exit }' "$2"; } # val, to 0.1
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
row() { printf '%-58s %9s %9s %9s  %s\n' "$@"; }

read -r S50 _ _ <<<"$(stats "$T/t.ssh")"
read -r B50 _ _ <<<"$(stats "$T/t.bare")"
echo
echo "4. agt over SSH — $(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), $(nproc) CPUs," \
  "load $LOAD_START at start, $(cut -d' ' -f1-3 /proc/loadavg) at end"
echo "   the limactl stand-in's VM: OpenSSH sshd on 127.0.0.1:$PORT in front of agtd; user" \
  "$VMUSER, Lima's ed25519 key, known_hosts checked by both clients"
echo "   OpenSSH client $(ssh -V 2>&1 | sed 's/^OpenSSH_\([^ ,]*\).*/\1/'): ${ALGOS_SSH:-?};" \
  "agt: libssh $(val libssh "$T/algos" | cut -d/ -f1): $(val kex "$T/algos") $(val cipher_in "$T/algos")"
echo
echo "   whole commands, ms: $RUNS runs each after $WARMUP warm-up, alternating (${WALL1} s);" \
  "agtd has no jails (jail.ls reply: $(val reply_bytes "$T/rpc.ssh") bytes)"
read -r C50 _ _ <<<"$(stats "$T/t.cm")"
row "command" "p50" "p99" "mean" "p50 / ssh true, / bare ssh   target: agt <= ${TARGET_RATIO}x ssh true"
for m in "ssh:ssh HOST true (OpenSSH's defaults)" \
  "nosh:ssh -s HOST sftp (no shell, no rc files)" \
  "bare:ssh -s HOST sftp -o KexAlgorithms=curve25519-sha256" \
  "agt:agt --target ssh://$VMUSER@127.0.0.1:$PORT jail ls, ssh.persist 0" \
  "lima:agt jail ls (target lima:$VM), ssh.persist 0" \
  "list:limactl list --json (the stand-in, Python)"; do
  n=${m%%:*}
  read -r a50 a99 amean <<<"$(stats "$T/t.$n")"
  r=$(ratio "$a50" "$S50")
  case $n in
  agt | lima)
    v=$(awk -v r="$r" -v t="$TARGET_RATIO" 'BEGIN { print (r != "-" && r <= t) ? "target met" : "target missed" }')
    [ "$n" = lima ] && v="$v (includes limactl list)"
    v="${r}x, $(ratio "$a50" "$B50")x   $v"
    ;;
  ssh) v="" ;;
  *) v="${r}x   (diagnostic)" ;;
  esac
  row "${m#*:}" "$a50" "$a99" "$amean" "$v"
done
echo
echo "   kept connections, ms (the same runs): OpenSSH's ControlMaster against agt's keeper"
row "command" "p50" "p99" "mean" "p50 / ControlMaster   target: agt p50 <= ${TARGET_KEPT_MS} ms and < ControlMaster's"
for m in "cm:ssh -o ControlMaster=auto -o ControlPersist=600 HOST true" \
  "agtk:agt --target ssh://$VMUSER@127.0.0.1:$PORT jail ls (keeper)" \
  "limak:agt jail ls (target lima:$VM, keeper)"; do
  n=${m%%:*}
  read -r a50 a99 amean <<<"$(stats "$T/t.$n")"
  case $n in
  cm) v="" ;;
  *) v="$(ratio "$a50" "$C50")x   $(awk -v a="$a50" -v c="$C50" -v t="$TARGET_KEPT_MS" \
    'BEGIN { print (a <= t && a < c) ? "target met" : "target missed" }')" ;;
  esac
  row "${m#*:}" "$a50" "$a99" "$amean" "$v"
done
echo
echo "   inside one agt process (agt-rpc-bench ssh, $(val connect_ms.n "$T/rpc.ssh") connections), ms:"
row "step" "p50" "p99" "mean" ""
for m in "connect_ms:TCP connect, key exchange, host key check, auth" \
  "channel_hello_ms:direct-streamlocal channel to agtd, hello" \
  "first_req_ms:the first jail.ls on it" "close_ms:close (channel EOF, disconnect)"; do
  k=${m%%:*}
  note=
  [ "$k" = channel_hello_ms ] && note="min $(num "$k.min" "$T/rpc.ssh"); above ~40: a delayed-ACK stall"
  row "${m#*:}" "$(num "$k.p50" "$T/rpc.ssh")" "$(num "$k.p99" "$T/rpc.ssh")" \
    "$(num "$k.mean" "$T/rpc.ssh")" "$note"
done
read -r _ _ AMEAN <<<"$(stats "$T/t.agt")"
REST=$(awk -v a="$AMEAN" 'BEGIN { r = a }
  $1 ~ /^(connect|channel_hello|first_req|close)_ms\.mean$/ { r -= $2 }
  END { printf "%.1f", r }' "$T/rpc.ssh")
row "the rest of agt jail ls: exec, libraries, config, output" "" "" "$REST" \
  "(agt's mean minus the steps' means)"
echo
echo "   one jail.ls over an open connection, us: $(val req_us.n "$T/rpc.ssh") requests after 100 unmeasured"
row "path" "p50" "p99" "mean" "target: p50 < ${TARGET_REQ_US} us"
R50=$(num req_us.p50 "$T/rpc.ssh")
row "agt's SSH transport (libssh channel, bridge thread)" "$R50" "$(num req_us.p99 "$T/rpc.ssh")" \
  "$(num req_us.mean "$T/rpc.ssh")" \
  "$(awk -v a="$R50" -v t="$TARGET_REQ_US" 'BEGIN { print (a < t) ? "target met" : "target missed" }')"
row "agtd's unix socket, no SSH (in the VM)" "$(num req_us.p50 "$T/rpc.unix")" \
  "$(num req_us.p99 "$T/rpc.unix")" "$(num req_us.mean "$T/rpc.unix")" "(diagnostic)"
echo
echo "   left behind after agt delete: $LEFT_PROCS processes of the VM, $LEFT_MOUNTS mounts"
[ "$LEFT_PROCS" = 0 ] && [ "$LEFT_MOUNTS" = 0 ] || die "the ssh benchmark left things behind"
