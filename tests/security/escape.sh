#!/usr/bin/env bash
# The escape suite: tests/security/attack.c runs inside jails as a hostile agent would and
# tries each attack of reference/sandbox.md section 3; this script gives it what it needs
# (guest pids, a guest directory with a marker, guest services and sockets to reach for),
# checks from outside what only the outside can see, and measures other jails' start latency
# while one jail exhausts what it can.  One TAP line per attack; every "blocked:" and
# "ESCAPED:" line of the attack program is repeated as a comment, so the log is the evidence.
. "$(dirname "$0")/../guest/lib.sh"
: "${ATTACK:?ATTACK must name the static attack binary (meson sets it)}"
: "${FIRST_INSN:?FIRST_INSN must name the first-instruction probe (meson sets it)}"

command -v python3 >/dev/null || bail "the escape suite needs python3 (guest services to attack)"

# As the Lima guest runs it: machine settings of lima/provision/machine.sh (lib.sh applies
# them with AGT_TEST_MACHINE_SETTINGS=yes, as in CI) and realtime starts.
agtd_start --realtime-starts
m=$T/attack-rootfs.yaml
sed -e "s|@PROBE@|$PROBE|" -e "s|@ATTACK@|$ATTACK|" -e "s|@FIRST_INSN@|$FIRST_INSN|" \
  "$SRCDIR/tests/security/attack-rootfs.yaml" >"$m"
ctl rootfs build "$m" --no-download >"$T/rootfs.out" 2>&1 || {
  sed 's/^/# /' "$T/rootfs.out"
  bail "the attack rootfs did not build"
}
R=$(cut -d' ' -f1 "$T/rootfs.out")
ROOT=(--rootfs "$R")
# AGT_ESCAPE_LAYER=node (the test escape-node): every jail also stands on the Node.js layer
# agents use (npm's node-linux-ARCH, as agt builds it), stacked over the attack rootfs.
if [ "${AGT_ESCAPE_LAYER:-}" = node ]; then
  case "$(uname -m)" in
    x86_64) narch=x64 ;;
    aarch64) narch=arm64 ;;
    *) bail "no node for $(uname -m)" ;;
  esac
  node_version=$(sed -n 's/^  version: "\(.*\)"$/\1/p' "$SRCDIR/agents/node.yaml")
  printf '%s\n' "name: node-$node_version" "files:" \
    "  - path: /opt/agt/node/node_modules" "    tree: true" "    sources:" \
    "      - npm: node-linux-$narch@$node_version" "  - path: /usr/local/bin/node" \
    "    symlink: /opt/agt/node/node_modules/node-linux-$narch/bin/node" >"$T/node.yaml"
  ctl rootfs build "$T/node.yaml" >"$T/node.out" 2>&1 || {
    sed 's/^/# /' "$T/node.out"
    bail "the node layer did not build (npm and its registry are needed)"
  }
  ROOT+=(--layer "$(cut -d' ' -f1 "$T/node.out")")
  ctl jail run --name nodecheck "${ROOT[@]}" -- /usr/local/bin/node -e 'console.log(process.version)' >/dev/null
  ctl jail wait nodecheck >/dev/null
  is "the jails stand on the node layer: node $node_version runs in one" \
    "$(ctl jail logs nodecheck)" "v$node_version"
  ctl jail rm nodecheck >/dev/null
fi

# A file on the guest that no jail may reach; attacks that think they got out try to create
# $T/pwned-<verb> next to it.
echo guest-only >"$T/marker"

todo() {
  TAP_N=$((TAP_N + 1))
  echo "not ok $TAP_N - $1 # TODO $2"
}

# verdict NAME DESC [TODO-REASON]: judge the attack output in $T/NAME.out.
verdict() {
  local name=$1 desc=$2 why=${3:-} out=$T/$1.out nb ne
  nb=$(grep -c '^blocked: ' "$out")
  ne=$(grep -c '^ESCAPED: ' "$out")
  grep -E '^(blocked|ESCAPED|info): ' "$out" | sed 's/^/#   /'
  if [ "$ne" -eq 0 ] && [ "$nb" -gt 0 ] && grep -q '^summary: ' "$out"; then
    ok "$desc: $nb attempts blocked"
  elif [ -n "$why" ] && [ "$ne" -gt 0 ]; then
    todo "$desc: $ne escaped, $nb blocked" "$why"
  else
    not_ok "$desc: $ne escaped, $nb blocked"
    grep -v -E '^(blocked|ESCAPED|info): ' "$out" | head -20 | sed 's/^/#   other: /'
  fi
}

# attack NAME DESC [CREATE-OPTIONS...] -- VERB ARGS...: run the verb as a jail's agent.
attack() {
  local name=$1 desc=$2
  shift 2
  if ! ctl jail run --name "$name" "${ROOT[@]}" "$@" >/dev/null 2>"$T/$name.err"; then
    not_ok "$desc: the jail did not start"
    sed 's/^/#   /' "$T/$name.err"
    return
  fi
  ctl jail wait "$name" >"$T/$name.wait"
  ctl jail logs "$name" >"$T/$name.out"
  ctl jail rm "$name" >/dev/null
  verdict "$name" "$desc"
  revive "$desc"
}

# A dead agtd is a failure of the attack that killed it; a new one is started so that the
# rest of the suite still runs.
revive() {
  agtd_alive && return 0
  not_ok "agtd died during: $1 (restarted for the rest of the suite)"
  AGTD_PID=
  agtd_start --realtime-starts
}

jail_pid() {
  ctl --json jail inspect "$1" | sed -n 's/^ *"pid": \([0-9]*\).*/\1/p'
}

agtd_alive() {
  kill -0 "$AGTD_PID" 2>/dev/null && ctl hello >/dev/null 2>&1
}

# A sibling jail whose processes the attacks go after by their guest pids.
ctl jail run --name sib "${ROOT[@]}" -- /bin/attack sleep 3600 >/dev/null || bail "sibling jail"
SIB=$(jail_pid sib)
SIB_KIDS=$(cat /proc/"$SIB"/task/*/children 2>/dev/null)
OUTSIDE="$AGTD_PID $SIB $SIB_KIDS"
echo "# agtd is guest pid $AGTD_PID; the sibling jail's init $SIB, its agent $SIB_KIDS"

# E1-E7: the file system and process escapes.
attack chroot "E1 double chroot" -- /bin/attack chroot "$T"
attack fds "E2 leaked fds and cwd" -- /bin/attack fds "$T"
attack proc "E3 /proc of outside processes" -- /bin/attack proc "$T" $OUTSIDE
attack ptrace "E4 ptrace and process_vm_writev (init, own child, sibling jail, agtd)" -- \
  /bin/attack ptrace $OUTSIDE
attack mknod "E5 mknod char and block" -- /bin/attack mknod
attack mount "E6 mount, umount2, remount, pivot_root, new mount API" -- /bin/attack mount
attack handle "E7 open_by_handle_at / name_to_handle_at" -- /bin/attack handle "$T"

# E18: the mounts a request binds in.  Each source is writable by anyone on the guest, so
# only the mount can stop the jail's writes; a tmpfs mounted below the read-only one must be
# read-only in the jail too.  Paths with '..' or a symlink are refused before any jail runs.
MNT=$T/e18
mkdir -p "$MNT/ro/sub" "$MNT/rw" "$MNT/real"
echo file >"$MNT/file"
mount -t tmpfs -o size=1M,mode=0777 tmpfs "$MNT/ro/sub"
chmod 777 "$MNT/ro" "$MNT/rw"
chmod 666 "$MNT/file"
attack mounts "E18 extra mounts: writes, remount, umount, mount_setattr, open_tree" \
  --mount "$MNT/ro" --mount "$MNT/rw:rw" --mount "$MNT/file" --home persistent --user e18 -- \
  /bin/attack mounts "$MNT/ro" "$MNT/ro/sub" "$MNT/rw" "$MNT/file" /home/agent
is "E18 the read-only mount's source is unchanged on the guest" "$(ls -A "$MNT/ro" "$MNT/ro/sub" | tr '\n' ' ')" "$MNT/ro: sub  $MNT/ro/sub: "
check "E18 the writable mount was written through" test -e "$MNT/rw/agt-written"
umount "$MNT/ro/sub"
ln -s "$MNT/real" "$MNT/link"
ln -s / "$MNT/real/root"
for bad in "$MNT/ro/../rw" "$MNT/link" "$MNT/real/root/etc" "$MNT/./ro" "$STATE/jails"; do
  if ctl jail run --name e18bad "${ROOT[@]}" --mount "$bad" -- true >/dev/null 2>"$T/e18bad.err"; then
    not_ok "E18 a mount of '$bad' is refused"
    ctl jail rm e18bad --force >/dev/null 2>&1
  else
    ok "E18 a mount of '$bad' is refused: $(head -1 "$T/e18bad.err")"
  fi
done

# E8: unix sockets of the guest (one abstract socket made here, agtd's own socket path),
# AF_VSOCK, netlink.
GUEST_ABS=agt-sec-guest-$$
python3 - "$GUEST_ABS" "$T/unix-accepted" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind("\0" + sys.argv[1])
s.listen()
s.settimeout(600)
try:
    while True:
        c, _ = s.accept()
        open(sys.argv[2], "a").write("accepted\n")
        c.close()
except Exception:
    pass
PY
ABS_PID=$!
sleep 0.3
attack unix "E8 unix sockets of the guest, AF_VSOCK, netlink" -- \
  /bin/attack unix "@$GUEST_ABS" "$SOCK"
attack unix-none "E8 the same with network mode none" --net none -- \
  /bin/attack unix "@$GUEST_ABS" "$SOCK"
# Network mode open: a namespace of its own too (with a veth pair out), so the guest's
# abstract unix sockets are not in it.
if open_net_ready; then
  attack unix-open "E8 abstract sockets of the guest with network mode open" --net open -- \
    /bin/attack abstract "@$GUEST_ABS" "@/org/freedesktop/systemd1/notify"
else
  ok "E8 abstract sockets of the guest with network mode open # SKIP $OPEN_NET_SKIP"
fi
check "E8 the guest's abstract socket never accepted a connection from a jail" \
  test ! -e "$T/unix-accepted"

attack tty "E9 TIOCSTI and TIOCLINUX, high-bit variants" -- /bin/attack tty
attack tty-pty "E9 the same for a jail on a terminal (its own pty)" --tty -- /bin/attack tty

# E10: a jail keeps swapping its workspace entry "sub" between a directory and symlinks to
# / and to the test's directory, while new jails start with that entry as their workspace.
# No guest path other than the real directory may ever be mounted at a new jail's /work:
# checked from the guest, in /proc/PID/mountinfo of each new jail.
mkdir -p "$T/race/sub"
chown -R 4242:4242 "$T/race"
ctl jail run --name racer "${ROOT[@]}" --workspace "$T/race" -- /bin/attack race /work 300 \
  >/dev/null || not_ok "E10 the racing jail did not start"
started=0 refused=0 bad=0
for i in $(seq 1 200); do
  if ctl jail run --name "v$i" "${ROOT[@]}" --workspace "$T/race/sub" -- /bin/attack sleep 60 \
    >/dev/null 2>>"$T/race.err"; then
    pid=$(jail_pid "v$i")
    root=$(awk '$5 == "/work" { print $4 }' "/proc/$pid/mountinfo" 2>/dev/null)
    case "$root" in
    "$T/race/sub" | "$T/race/sub.root" | "$T/race/sub.up") started=$((started + 1)) ;;
    *)
      bad=$((bad + 1))
      echo "#   v$i: /work is the guest's '$root'"
      ;;
    esac
    ctl jail rm "v$i" --force >/dev/null 2>&1
  else
    refused=$((refused + 1))
  fi
  agtd_alive || break
done
touch "$T/race/stop"
ctl jail wait racer >/dev/null 2>&1
ctl jail logs racer 2>/dev/null | grep '^info' | sed 's/^/#   racer: /'
ctl jail rm racer >/dev/null 2>&1
sort "$T/race.err" 2>/dev/null | sed 's/v[0-9][0-9]*/vN/g' | uniq -c | sed 's/^/#   refused: /'
check "E10 agtd survived 200 jail starts racing a symlink swap on their workspace" agtd_alive
revive "E10"
is "E10 no new jail got a guest path other than its workspace at /work ($started started, $refused refused)" \
  "$bad" 0

# The hardening must not get in the agent's way: files move and link across directories
# under Landlock (which refuses that unless REFER is granted), fifos and sockets can be made.
out=$(ctl jail run --name moves "${ROOT[@]}" -- /bin/sh -c '
  mkdir -p /tmp/a /tmp/b /home/agent/x/y /work/w &&
  echo x >/tmp/a/f && mv /tmp/a/f /tmp/b/f && ln /tmp/b/f /tmp/a/g &&
  mv /home/agent/x/y /home/agent/z && mv /tmp/b /work/w/ && mkfifo /tmp/fifo &&
  echo moved' >/dev/null && ctl jail wait moves >/dev/null && ctl jail logs moves)
is "the agent still moves and links files across directories" "$out" "moved"
ctl jail rm moves >/dev/null

attack writes "E11 writes to /proc/sys, sysrq-trigger, /sys, cgroup files" -- /bin/attack writes
attack setuid "E12 setuid copies, no_new_privs, nosuid, capabilities" -- /bin/attack setuid
attack ns "E13 user and other namespaces, clone3" -- /bin/attack ns
attack syscalls "E13 bpf, perf, userfaultfd, io_uring, keyrings, kexec, modules, foreign ABIs" -- \
  /bin/attack syscalls

# E15 (part): realtime scheduling, which would take a CPU from everything else.  The run is
# served by a prepared jail, whose start runs realtime until the agent's exec.
attack realtime "E15 realtime scheduling after a realtime start: SCHED_FIFO, SCHED_RR, SCHED_DEADLINE, nice -5" \
  -- /bin/attack realtime
# The agent's own code must not run realtime either, not even its first instruction (libc's
# start-up would hide a short window: first-insn has none).
: >"$T/first-insn.out"
for i in $(seq 1 20); do
  ctl jail run --name "fi-$i" "${ROOT[@]}" -- /bin/first-insn >>"$T/first-insn.out" 2>&1
  ctl jail wait "fi-$i" >/dev/null
  ctl jail logs "fi-$i" >>"$T/first-insn.out"
  ctl jail rm "fi-$i" >/dev/null
done
grep '^first' "$T/first-insn.out" | sort | uniq -c | sed 's/^ */#   policies at the first instruction: /'
is "E15 20 agents saw SCHED_OTHER at their first instruction (of $(grep -c 'a prepared jail' "$T/first-insn.out") started by a prepared jail)" \
  "$(grep -c '^first 0$' "$T/first-insn.out")" 20

# E14: signals.  The agent is pid 2, right under the jail's init.
attack signals "E14 kill(-1), signals to the init, to agtd and to another jail" -- \
  /bin/attack signals $OUTSIDE
check "E14 agtd is alive after the signals" agtd_alive
revive "E14 signals"
like "E14 the sibling jail is still running" "$(ctl jail ls)" "^sib +shell +running"
attack proxy "E14 hang up rudely on agtd's egress proxy, 300 times" -- /bin/attack proxy 300
check "E14 agtd is alive after the proxy abuse" agtd_alive
revive "E14 proxy"

# E16: network bypass, against services this test runs on the guest's own loopback.
PORT=$((20000 + $$ % 20000))
UPORT=$((PORT + 1))
(cd "$T" && exec python3 -m http.server --bind 127.0.0.1 "$PORT") >"$T/http4.log" 2>&1 &
H4=$!
(cd "$T" && exec python3 -m http.server --bind ::1 "$PORT") >"$T/http6.log" 2>&1 &
H6=$!
python3 - "$UPORT" "$T/udp.log" <<'PY' &
import select, socket, sys
socks = []
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((addr, int(sys.argv[1])))
    socks.append(s)
while True:
    for s in select.select(socks, [], [])[0]:
        d, a = s.recvfrom(2048)
        open(sys.argv[2], "a").write("%r from %r\n" % (d, a))
        s.sendto(b"echo:" + d, a)
PY
U=$!
# up when both HTTP servers listen and both UDP sockets are bound
services_up() {
  [ "$(ss -Hltn "sport = :$PORT" | wc -l)" -ge 2 ] && [ "$(ss -Hlun "sport = :$UPORT" | wc -l)" -ge 2 ]
}
check "E16 the guest's services are up" wait_until 10 services_up
like "E16 the guest's HTTP service answers on the guest" \
  "$(python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$PORT/').status)")" \
  "^200$"
targets=""
for ip in $(hostname -I 2>/dev/null); do
  case $ip in
  *:*) targets="$targets [$ip]:22" ;;
  *) targets="$targets $ip:22" ;;
  esac
done
attack net "E16 network bypass (mode allow: the default)" -- /bin/attack net "$PORT" "$UPORT" $targets
attack net-none "E16 network bypass (mode none)" --net none -- \
  /bin/attack net "$PORT" "$UPORT" $targets
is "E16 the guest's UDP service received nothing from the jails" "$(cat "$T/udp.log" 2>/dev/null)" ""
is "E16 the guest's HTTP services saw only the guest's own request" \
  "$(cat "$T/http4.log" "$T/http6.log" | grep -c '"GET ')" 1
kill "$H4" "$H6" "$U" 2>/dev/null

# E17: cross-jail reach.  Two jails at once, each leaving files, an abstract socket and SysV
# IPC objects, each looking for the other's; then the same in network mode open.
WSD=$STATE/workspaces
modes=allow
if open_net_ready; then modes="allow open"; else ok "E17 in network mode open # SKIP $OPEN_NET_SKIP"; fi
for mode in $modes; do
  ctl jail run --name "xa-$mode" "${ROOT[@]}" --net "$mode" -- \
    /bin/attack xjail "A$mode" "B$mode" "$WSD/xb-$mode" 4 >/dev/null
  ctl jail run --name "xb-$mode" "${ROOT[@]}" --net "$mode" -- \
    /bin/attack xjail "B$mode" "A$mode" "$WSD/xa-$mode" 4 >/dev/null
  for j in "xa-$mode" "xb-$mode"; do
    ctl jail wait "$j" >/dev/null
    ctl jail logs "$j" >"$T/$j.out"
  done
  check "E17 ($mode) both jails left their files in their own workspaces" \
    test -e "$WSD/xa-$mode/xjail-A$mode" -a -e "$WSD/xb-$mode/xjail-B$mode"
  verdict "xa-$mode" "E17 jail A cannot reach jail B (network mode $mode)"
  verdict "xb-$mode" "E17 jail B cannot reach jail A (network mode $mode)"
  ctl jail rm "xa-$mode" >/dev/null
  ctl jail rm "xb-$mode" >/dev/null
done

# E15: resource exhaustion.  Other jails' start latency (agtd's own start_ms, from the request
# to the agent's exec) before and during a fork bomb, a memory hog, disk fillers of /tmp and
# /dev/shm and an fd exhauster, all at once; agtd must answer hello throughout.  The two
# attackers that burn CPU get a quarter of the machine each, so that the attack takes half of
# it: with the default of a whole core each, two attackers on a 2-vCPU guest own the machine,
# and every process on it slows down, jailed or not.
p99() { sort -n | awk '{ v[NR] = $1 } END { i = int(NR * 0.99 + 0.999); if (i < 1) i = 1; printf "%.2f", v[i] }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] }'; }
latency() {
  local tag=$1 n=$2 i
  : >"$T/lat-$tag"
  for i in $(seq 1 "$n"); do
    ctl jail run --name "lat-$tag-$i" "${ROOT[@]}" -- /bin/attack sleep 0 2>"$T/lat.err" |
      sed -n 's/.* started in \([0-9.]*\) ms.*/\1/p' >>"$T/lat-$tag"
    [ -s "$T/lat.err" ] && sed "s/^/#   start lat-$tag-$i failed: /" "$T/lat.err"
    ctl jail wait "lat-$tag-$i" >/dev/null 2>&1
    ctl jail rm "lat-$tag-$i" >/dev/null 2>&1
  done
}
hello_loop() {
  rm -f "$T/hello-stop"
  while [ ! -e "$T/hello-stop" ]; do
    t0=$(date +%s%N)
    if ctl hello >/dev/null 2>&1; then echo $((($(date +%s%N) - t0) / 1000000)); else echo fail; fi
    sleep 0.1
  done >"$T/hello-$1.log"
}
figures() {
  echo "#   $1: median $(median <"$T/lat-$2") ms, p99 $(p99 <"$T/lat-$2") ms ($(wc -l <"$T/lat-$2") starts)"
}
hello_figures() {
  echo "#   agtd hello during $1: $(grep -vc fail "$T/hello-$1.log") answered, max $(grep -v fail "$T/hello-$1.log" | sort -n | tail -1) ms, $(grep -c fail "$T/hello-$1.log") failed"
}
N=100
CPUQ=$(($(nproc) * 1000 / 4))
latency warmup 10 # let the jails of the attacks above finish cleaning up
latency before $N
HOLD=120
ctl jail run --name bomb "${ROOT[@]}" --pids 64 --cpu "$CPUQ" -- /bin/attack forkbomb "$HOLD" \
  >/dev/null
ctl jail run --name hog "${ROOT[@]}" --memory 64M --cpu "$CPUQ" -- /bin/attack memhog 256 "$HOLD" \
  >/dev/null
ctl jail run --name fill-tmp "${ROOT[@]}" --tmp 64M --disk 128M -- \
  /bin/attack diskfill 1024 "$HOLD" /tmp /dev/shm /home/agent >/dev/null
ctl jail run --name fds "${ROOT[@]}" --pids 64 -- /bin/attack fdbomb 32 "$HOLD" >/dev/null
hello_loop attacks &
HELLO=$!
sleep 2
latency during $N
still=$(ctl jail ls | grep -cE '^(bomb|hog|fill-tmp|fds) .* running')
files=$(cut -f1 /proc/sys/fs/file-nr)
touch "$T/hello-stop"
wait "$HELLO"
before_p99=$(p99 <"$T/lat-before")
during_p99=$(p99 <"$T/lat-during")
echo "# start latency of other jails (ms), attackers with cpu $CPUQ of $(($(nproc) * 1000)):"
figures "before the attacks" before
figures "during the attacks" during
hello_figures attacks
echo "#   open files on the guest during the attacks: $files"
is "E15 all $N starts succeeded before and during the attacks" \
  "$(wc -l <"$T/lat-before") $(wc -l <"$T/lat-during")" "$N $N"
is "E15 the four attacking jails were still running when the measurement ended" "$still" 4
# The target is reported, and a miss is a TODO rather than a failure: it is a timing on a
# machine others share, and a slow start is not a jail getting past its limits.  What keeps
# it (docs/SECURITY.md, Resource attacks): starts run realtime (guest/jail/start_prio.h, with
# --realtime-starts), and the memory hog's OOM kills stay off the serial console (the console
# loglevel of lima/provision/machine.sh).
if awk -v a="$during_p99" -v b="$before_p99" 'BEGIN { exit !(a < 2 * b) }'; then
  ok "E15 start latency p99 during the attacks ($during_p99 ms) < 2 x before ($before_p99 ms)"
else
  todo "E15 start latency p99 during the attacks ($during_p99 ms) < 2 x before ($before_p99 ms)" \
    "target missed on this run (a timing; see docs/SECURITY.md, Resource attacks)"
fi
is "E15 agtd answered every hello during the attacks" "$(grep -c fail "$T/hello-attacks.log")" 0
for j in bomb hog fill-tmp fds; do
  ctl jail stop "$j" 10000 >/dev/null 2>&1
  ctl jail logs "$j" >"$T/$j.out"
  ctl jail rm "$j" --force >/dev/null 2>&1
done
verdict bomb "E15 fork bomb (pids 64)"
verdict hog "E15 memory hog (memory 64M)"
verdict fill-tmp "E15 disk filler in /tmp (tmp 64M), /dev/shm and the root's upper layer (disk 128M)"
verdict fds "E15 fd exhauster (32 processes)"

# Nothing was created on the guest by any attack.
is "no attack left a file on the guest" "$(ls "$T" | grep -c '^pwned-')" 0

# agtd dies: its jails go on under their keepers (guest/keeper/keeper.h), never unsupervised: the
# init's parent is its keeper, and when the keeper dies the jail dies with it
# (PR_SET_PDEATHSIG on each init).
ctl jail run --name orphan "${ROOT[@]}" -- /bin/attack sleep 3600 >/dev/null
ipid=$(python3 "$SRCDIR/tests/guest/rpc.py" "$SOCK" jail.inspect '{"name": "orphan"}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
kpid=$(awk '/^PPid:/ {print $2}' "/proc/$ipid/status")
kill -KILL "$AGTD_PID"
wait "$AGTD_PID" 2>/dev/null
AGTD_PID=
sleep 0.5
is "after agtd's death the jail's init is supervised by its keeper" \
  "$(cat "/proc/$(awk '/^PPid:/ {print $2}' "/proc/$ipid/status")/comm" 2>/dev/null)" agt-keeper
agtd_start --realtime-starts
like "the restarted agtd finds the jail running" "$(ctl jail ls)" "^orphan +shell +running"
wait_gone() { for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done; return 1; }
kill -KILL "$kpid"
check "a jail whose keeper dies dies with it" wait_gone "$ipid"
like "and the record says so" "$(ctl jail wait orphan)" "exit code 137"
like "with the reason" "$(ctl jail inspect orphan)" "its keeper died"
for j in sib orphan; do ctl jail rm "$j" --force >/dev/null; done
kill "$ABS_PID" 2>/dev/null
is "no mount is left" "$(leftovers)" 0
is "no jail process is left" "$(jail_procs)" 0
