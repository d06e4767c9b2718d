#!/usr/bin/env bash
# Network mode open: the internet, not the guest.  An open jail has a network namespace of
# its own, joined to the guest's bridge agt0 by a veth pair, and the machine's firewall
# (lima/provision/machine.sh) refuses what it must not reach: the guest's loopback and its
# other addresses, link-local and metadata addresses, other jails.  A refusal is a refusal
# (a TCP reset), never a drop, so that an agent fails at once.  "The internet" is a network
# namespace of this test's own, routed from the guest (nothing outside the machine is
# reachable where the tests run).
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || bail "python3 is needed for the test's listeners"
command -v ip >/dev/null || bail "ip (iproute2) is needed for the test's namespaces"

# unlike DESCRIPTION TEXT PATTERN (grep -E): ok when nothing matches
unlike() {
  if printf '%s\n' "$2" | grep -Eq -- "$3"; then
    not_ok "$1"
    printf '%s\n' "$2" | grep -E -- "$3" | head -5 | sed 's/^/#   got: /'
  else
    ok "$1"
  fi
}

# agtd refuses the mode, with what to run, where the machine is not set up for it: a second
# agtd in a network namespace of its own (no bridge, no firewall, no forwarding there).
B=$T/b
mkdir -p "$B"
unshare -n "$AGTD" serve --socket "$B/agtd.sock" --state-dir "$B/state" --cgroup "$CG-b" \
  --workspace-root "$T" --warm 0 >>"$B/agtd.log" 2>&1 &
BPID=$!
wait_until 20 "$AGTD" ctl -s "$B/agtd.sock" hello >/dev/null 2>&1 || not_ok "the second agtd started"
out=$("$AGTD" ctl -s "$B/agtd.sock" jail run --name r1 --net open -- /bin/true 2>&1)
like "mode open on a machine not set up for it is refused" "$out" \
  "network mode open needs the machine set up for it, and it has no bridge agt0"
like "and the error says what to run" "$out" "run lima/provision/machine.sh"
is "and no jail was made" "$("$AGTD" ctl -s "$B/agtd.sock" jail ls | awk 'NR > 1' | wc -l)" 0
kill -TERM "$BPID"
wait "$BPID" 2>/dev/null

if ! open_net_ready; then
  ok "# SKIP the rest: $OPEN_NET_SKIP"
  exit 0
fi

# The test's world: a guest address of its own (not a private one, on the guest's end of
# the link to "the internet"), and "the internet" at 203.0.113.2, which also holds a
# link-local address (169.254.77.77) routed from the guest, as a cloud's metadata service is.
INET_NS=agt-inet-$$
VA=agti$$a
VB=agti$$b
GUEST_ADDR=198.51.100.7
LL=169.254.77.77
net_cleanup() {
  [ -n "${LPIDS:-}" ] && kill $LPIDS 2>/dev/null
  ip route del "$LL/32" 2>/dev/null
  ip link del "$VA" 2>/dev/null
  ip netns del "$INET_NS" 2>/dev/null
  return 0
}
trap 'rc=$?; net_cleanup; (exit $rc); finish' EXIT
ip netns add "$INET_NS" || bail "cannot create a network namespace"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VB" netns "$INET_NS"
ip addr add 203.0.113.1/28 dev "$VA"
ip addr add "$GUEST_ADDR/32" dev "$VA"
ip link set "$VA" up
ip -n "$INET_NS" addr add 203.0.113.2/28 dev "$VB"
ip -n "$INET_NS" addr add "$LL/32" dev "$VB"
ip -n "$INET_NS" link set "$VB" up
ip -n "$INET_NS" link set lo up
ip route add "$LL/32" dev "$VA"

# listen HOST PORT LOG: accept connections, log each peer, answer "hello"
listen() {
  exec python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
print("listening", flush=True)
while True:
    c, a = s.accept()
    open(sys.argv[3], "a").write("%s\n" % a[0])
    c.sendall(b"hello\n")
    c.close()
' "$@"
}
: >"$T/guest.log"
: >"$T/inet.log"
listen 0.0.0.0 47101 "$T/guest.log" >"$T/guest.out" &
LPIDS=$!
listen_inet() { exec ip netns exec "$INET_NS" bash -c "$(declare -f listen); listen 0.0.0.0 47102 '$T/inet.log'"; }
listen_inet >"$T/inet.out" &
LPIDS="$LPIDS $!"
wait_until 10 grep -q listening "$T/guest.out" || bail "the guest's listener did not start"
wait_until 10 grep -q listening "$T/inet.out" || bail "the internet's listener did not start"
reach() { python3 -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 3).recv(9)' "$@"; }
check "control: the guest reaches its own listener on 127.0.0.1" reach 127.0.0.1 47101
check "control: and on its address $GUEST_ADDR" reach "$GUEST_ADDR" 47101
check "control: the guest reaches the link-local service $LL" reach "$LL" 47102
: >"$T/guest.log"
: >"$T/inet.log"

agtd_start
build_test_rootfs
R=$TEST_ROOTFS

# jail B: open, listening on its own address
ctl jail run --name b --rootfs "$R" --net open -- /bin/sh -c \
  'ip -4 -o addr show eth0; while true; do echo b | nc -l -p 47103; done' >/dev/null ||
  not_ok "run jail b"
wait_until 10 sh -c "'$AGTD' ctl -s '$SOCK' jail logs b | grep -q inet" || not_ok "jail b printed its address"
BADDR=$(ctl jail logs b | sed -n 's/.* inet \([0-9.]*\)\/.*/\1/p' | head -1)
like "an open jail has an address of agt0's network" "$BADDR" '^10\.213\.[0-9]+\.[0-9]+$'
like "jail exec joins the jail's network namespace" "$(ctl jail exec b -- ip -4 -o addr show eth0)" \
  " inet $BADDR/"

# jail A: open; every attempt bounded, so that a drop shows as a timeout
guest_main=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
targets="127.0.0.1:47101 $GUEST_ADDR:47101 10.213.0.1:47101 $LL:47102 169.254.169.254:80 $BADDR:47103"
[ -n "$guest_main" ] && targets="$targets $guest_main:47101"
ctl jail run --name a --rootfs "$R" --net open -- /bin/sh -c "
  for t in $targets; do timeout 10 probe net tcp \${t%:*} \${t#*:} || echo \"timed out: \$t\"; done
  timeout 10 probe net tcp 203.0.113.2 47102
  cat /etc/resolv.conf" >/dev/null || not_ok "run jail a"
ctl jail wait a >/dev/null
out=$(ctl jail logs a)
for t in $targets; do
  like "an open jail is refused at once by ${t%:*}" "$out" "^failed: tcp ${t%:*}: Connection refused$"
done
like "an open jail reaches the internet" "$out" "^reached: tcp 203.0.113.2 port 47102$"
is "the internet sees the guest's address on its link (NAT)" "$(cat "$T/inet.log")" 203.0.113.1
is "the guest's listener saw no jail" "$(cat "$T/guest.log")" ""
check "the guest cannot connect into an open jail either" sh -c "! python3 -c 'import socket; socket.create_connection((\"$BADDR\", 47103), 3)' 2>/dev/null"
is "an open jail's resolvers are the machine's" "$(printf '%s\n' "$out" | grep -E '^(#|nameserver)')" \
  "$(cat /run/agt-open/resolv.conf)"

# DNS through the resolver machine.sh found, where the guest gets answers from it
ns=$(awk '$1 == "nameserver" { print $2; exit }' /run/agt-open/resolv.conf)
dns_q() {
  python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
s.sendto(bytes.fromhex("123401000001000000000000076578616d706c6503636f6d0000010001"), (sys.argv[1], 53))
s.recv(512)' "$1"
}
if [ -n "$ns" ] && dns_q "$ns" 2>/dev/null; then
  out=$(ctl jail run --name d --rootfs "$R" --net open -- /bin/sh -c 'nslookup example.com 2>&1' >/dev/null &&
    ctl jail wait d >/dev/null && ctl jail logs d)
  like "an open jail gets answers from the resolver" "$out" "(Address|can't find|NXDOMAIN)"
  unlike "and no timeout" "$out" "timed out|no servers could be reached"
else
  ok "# SKIP the resolver ($ns) does not answer the guest either"
fi

# mode allow is as before: a namespace without a way out
out=$(ctl jail run --name p --rootfs "$R" -- /bin/sh -c 'ip -4 -o addr; timeout 10 probe net tcp 203.0.113.2 47102' >/dev/null &&
  ctl jail wait p >/dev/null && ctl jail logs p)
unlike "a jail in mode allow has no eth0" "$out" "eth0"
like "and no direct way out" "$out" "^failed: tcp 203.0.113.2"

# jail port reaches an open jail's own port, as any jail's (it was refused while open jails
# shared the guest's network)
ctl jail port b 47103 0 >"$T/port.out" 2>"$T/port.err" &
PORTER=$!
LPIDS="$LPIDS $PORTER"
wait_until 10 grep -q forwarding "$T/port.out"
LPORT=$(sed -n 's/^forwarding 127.0.0.1:\([0-9]*\) .*/\1/p' "$T/port.out")
if [ -n "$LPORT" ]; then
  is "jail port reaches an open jail's port" \
    "$(python3 -c 'import socket, sys; print(socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5).makefile().readline().strip())' "$LPORT")" b
else
  not_ok "jail port reaches an open jail's port"
  sed 's/^/#   /' "$T/port.err"
fi
kill "$PORTER" 2>/dev/null

# the veth pair goes with the jail
ctl jail rm b --force >/dev/null
check "the guest's end of a removed jail's veth pair is gone" \
  wait_until 10 sh -c "! ip -o link show master agt0 | grep -q 'agtj$(echo "$BADDR" | awk -F. '{ print $3 * 256 + $4 }')@'"
