#!/usr/bin/env bash
# Per-jail network policy: deny by default, egress only through agtd's proxy to allowed
# hosts, every decision logged; no direct way out (TCP, UDP, DNS, ICMP, IPv6).
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || bail "python3 is needed for the test provider"
command -v ip >/dev/null || bail "ip (iproute2) is needed for the test provider's namespace"
agtd_start
build_test_rootfs
R=$TEST_ROOTFS
provider_start
P=$PROVIDER

run() {
  local name=$1
  shift
  ctl jail run --name "$name" --rootfs "$R" "$@" >/dev/null || not_ok "run $name"
  ctl jail wait "$name" >/dev/null
  ctl jail logs "$name"
}

# allow: the listed host works through the proxy, others are refused and logged
out=$(run a1 --allow "$P:8080" -- /bin/sh -c "
  wget -q -O - http://$P:8080/v1/models; echo; echo rc=\$?
  wget -q -O - http://$P:9999/ 2>&1; echo rc=\$?
  wget -q -O - http://10.211.0.1:22/ 2>&1; echo rc=\$?")
like "an allowed host answers through the proxy" "$out" '"id": "mock"'
like "another port of the same host is refused" "$out" "403 Forbidden"
net=$(ctl jail net a1)
like "the allowed request is logged with its bytes" "$net" "^closed +GET +$P:8080 \($P\) up [0-9]+ down [0-9]+"
like "the refused port is logged with the reason" "$net" "^blocked +GET +$P:9999: host not on the jail's allowlist"
like "the refused host is logged" "$net" "^blocked +GET +10.211.0.1:22"

# CONNECT tunnels, and the same refusal every time
out=$(run a2 --allow "$P:8080" -- /bin/sh -c "
  (printf 'CONNECT $P:8080 HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.0\r\n\r\n'; sleep 1) | nc 127.0.0.1 3128; echo
  for i in 1 2 3; do (printf 'CONNECT example.org:443 HTTP/1.1\r\n\r\n'; sleep 0.5) | nc 127.0.0.1 3128 | head -1; done")
like "CONNECT to an allowed host tunnels" "$out" "HTTP/1.1 200 Connection established"
like "and reaches it" "$out" '"object": "list"'
is "a refused CONNECT gets the same 403 every time" "$(printf '%s\n' "$out" | grep -c "^HTTP/1.1 403 Forbidden")" 3

# no direct way out, even with the proxy variables unset
out=$(run d1 --allow "$P:8080" -- /bin/sh -c "
  unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY
  wget -q -O - http://$P:8080/ 2>&1; echo wget rc=\$?
  probe net tcp $P 8080; probe net udp $P 53; probe net udp 10.211.0.1 53
  probe net icmp $P 0; probe net raw $P 0
  probe net tcp fd00::1 80; probe net udp ::ffff:10.211.0.2 53")
like "plain wget without the proxy fails" "$out" "wget rc=1"
is "direct TCP, UDP, DNS, ICMP, raw and IPv6 all fail" "$(printf '%s\n' "$out" | grep -c '^failed:')" 7
check "nothing reached the network directly" test -z "$(printf '%s\n' "$out" | grep '^reached')"
check "there is no resolver in the jail" test -z "$(run d2 -- /bin/sh -c 'cat /etc/resolv.conf 2>/dev/null')"

# a name that resolves to a private address is refused unless the address is listed
out=$(run p1 --allow localhost:8080 -- /bin/sh -c 'wget -q -O - http://localhost:8080/ 2>&1')
like "a private address reached by name is refused" "$out" "403 Forbidden"
like "with the reason in the log" "$(ctl jail net p1)" "localhost:8080 \(127.0.0.1\): the address is private"
out=$(run p2 --allow "*.invalid" -- /bin/sh -c 'wget -q -O - http://x.invalid/ 2>&1')
like "a wildcard entry lets the name through to resolution" "$(ctl jail net p2)" "x.invalid:80: cannot resolve"

# none: loopback only, no proxy
out=$(run n1 --net none -- /bin/sh -c "env | grep -ci proxy; wget -q -O - -Y on http://$P:8080/ 2>&1; probe net tcp 127.0.0.1 3128")
like "mode none sets no proxy variables" "$out" "^0$"
like "and has no proxy to reach" "$out" "failed: tcp 127.0.0.1: Connection refused"

# two jails, two allowlists, enforced independently at the same time
ctl jail run --name x1 --rootfs "$R" --allow "$P:8080" -- /bin/sh -c "sleep 1; wget -q -O - http://$P:8080/v1/models" >/dev/null
ctl jail run --name x2 --rootfs "$R" --allow "other.test:8080" -- /bin/sh -c "sleep 1; wget -q -O - http://$P:8080/v1/models 2>&1" >/dev/null
ctl jail wait x1 >/dev/null
ctl jail wait x2 >/dev/null
like "jail x1's list lets it through" "$(ctl jail logs x1)" '"id": "mock"'
like "jail x2's list does not" "$(ctl jail logs x2)" "403 Forbidden"

# the connection limit: over it, 429 with a reason
out2=$(run c2 --allow "$P:8080" -- /bin/sh -c "
  for i in \$(seq 1 70); do (printf 'CONNECT $P:8080 HTTP/1.1\r\n\r\n'; sleep 2) | nc 127.0.0.1 3128 > /tmp/c\$i & done
  sleep 1; cat /tmp/c* | grep -c 'Too Many'; wait")
like "connections past the jail's limit (64) are refused" "$out2" "^[1-9]"
like "and logged" "$(ctl jail net c2)" "too many connections from this jail"

like "agtd is still serving" "$(ctl hello)" "^agtd "
for j in a1 a2 d1 d2 p1 p2 n1 x1 x2 c2; do ctl jail rm "$j" >/dev/null; done
is "no process is left" "$(jail_procs)" 0
