#!/bin/bash
# agt: the machine-wide settings of the agent VM.  agtd changes nothing machine-wide; what
# its jails are better off with is set here, by the VM's provisioning (agtd.sh installs this
# script and runs it at every boot before agtd, as the systemd unit agt-machine), and `agt
# doctor` reports each.  On target local (agtd on your own machine) nothing runs this: run it
# yourself, as root, if you want the same (the guest tests do with
# AGT_TEST_MACHINE_SETTINGS=yes, which .ci/run sets).
#   1. the kernel's cgroup flag favordynmods: moving a process between cgroups then costs
#      microseconds instead of an RCU grace period, which prepared jails need (docs/PROTOCOL.md);
#      fork and exit get a little dearer everywhere, and from Linux 6.18 the flag cannot be
#      turned off again until reboot.  Set by reconfiguring the mounted cgroup2 hierarchy with
#      its own options plus this one (cgroup v1 only: a cgroup2 superblock made and dropped).
#   2. the console loglevel 3 (/etc/sysctl.d/60-agt.conf, kernel.printk): kernel messages of
#      level 3 (errors) and above go to the kernel log and the journal, not to the console,
#      where printing a jail's out-of-memory kill on a serial console holds a CPU for
#      milliseconds.
#   3. the way out of jails in network mode open (docs/SECURITY.md, Network mode open): the
#      bridge agt0 (10.213.0.1/16), to which agtd attaches each open jail's veth pair (an
#      isolated port: jails do not reach each other); IPv4 forwarding (net.ipv4.ip_forward in
#      60-agt.conf); the nftables tables `inet agt` (what a jail may reach: the internet, not
#      the guest, its loopback, the private, link-local and metadata addresses or the other
#      jails; refused with a TCP reset or an ICMP error, never dropped, so a client fails at
#      once) and `ip agt_nat` (masquerade); and /run/agt-open/resolv.conf, the resolvers
#      (the guest's upstream ones, never a loopback address) that open jails get as their
#      /etc/resolv.conf and may reach on port 53.  Addresses a jail may reach despite the
#      rules: `nft add element inet agt allow4 { ADDR }` (the set starts empty).  The bridge
#      comes last: agtd refuses mode open until it, the tables and the resolvers are there.
set -eu -o pipefail
[ "$(id -u)" = 0 ] || { echo "lima/provision/machine.sh: run it as root" >&2; exit 1; }

mp=$(findmnt -rn -t cgroup2 -o TARGET | head -1 || true)
if grep -E ' - cgroup2? ' /proc/self/mountinfo | grep -q favordynmods; then
  :
elif [ -n "$mp" ]; then
  opts=$(findmnt -rn -o FS-OPTIONS --target "$mp" -t cgroup2 | head -1)
  mount -o "remount,$opts,favordynmods" "$mp"
else
  tmp=$(mktemp -d)
  mount -t cgroup2 -o favordynmods none "$tmp"
  umount "$tmp"
  rmdir "$tmp"
fi

conf=/etc/sysctl.d/60-agt.conf
want="# agt (lima/provision/machine.sh): kernel errors to the kernel log, not the console
kernel.printk = 3 4 1 7
# agt (lima/provision/machine.sh): jails in network mode open reach the internet through NAT
net.ipv4.ip_forward = 1"
if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
  printf '%s\n' "$want" >"$conf.new"
  mv -f "$conf.new" "$conf"
fi
sysctl -q -p "$conf"

# 3. network mode open.  The resolvers: systemd-resolved's upstream ones when it runs (the
# guest's own /etc/resolv.conf names its stub, 127.0.0.53), else /etc/resolv.conf's; only
# IPv4 addresses that are not loopback (a jail's 127.0.0.1 is its own).
bridge=agt0
net=10.213.0.0/16
gw=10.213.0.1/16
src=/etc/resolv.conf
[ ! -s /run/systemd/resolve/resolv.conf ] || src=/run/systemd/resolve/resolv.conf
dns=$(awk '$1 == "nameserver" && $2 ~ /^[0-9.]+$/ && $2 !~ /^127\./ { print $2 }' "$src" | sort -u)
[ -n "$dns" ] || echo "agt machine.sh: no resolver in $src that a jail can reach (only loopback ones): jails in network mode open will have no DNS" >&2
dns_set=$(printf '%s\n' $dns | paste -sd, -)

nft -f - <<NFT
table inet agt
delete table inet agt
table ip agt_nat
delete table ip agt_nat
table inet agt {
  # addresses open jails may reach although the rules below refuse them
  set allow4 { type ipv4_addr; flags interval; }
  # the resolvers open jails may reach on port 53
  set dns4 { type ipv4_addr; ${dns_set:+elements = { $dns_set \}} }
  chain input {
    type filter hook input priority filter; policy accept;
    iifname "$bridge" goto refuse
  }
  chain forward {
    type filter hook forward priority filter; policy accept;
    iifname "$bridge" jump from_jail
    oifname "$bridge" ct state established,related accept
    oifname "$bridge" goto refuse
  }
  chain output {
    type filter hook output priority filter; policy accept;
    oifname "$bridge" tcp flags & (syn | ack) == syn reject with tcp reset
  }
  chain from_jail {
    ip daddr @dns4 meta l4proto { tcp, udp } th dport 53 accept
    ip daddr @allow4 accept
    oifname "$bridge" goto refuse
    meta nfproto ipv6 goto refuse
    fib daddr type { local, broadcast, multicast, anycast } goto refuse
    ip daddr { 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/3 } goto refuse
    accept
  }
  chain refuse {
    meta l4proto tcp reject with tcp reset
    reject with icmpx admin-prohibited
  }
}
table ip agt_nat {
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr $net oifname != "$bridge" masquerade
  }
}
NFT

mkdir -p /run/agt-open
printf '# agt (lima/provision/machine.sh): the resolvers of jails in network mode open\n' >/run/agt-open/resolv.conf.new
for a in $dns; do printf 'nameserver %s\n' "$a"; done >>/run/agt-open/resolv.conf.new
mv -f /run/agt-open/resolv.conf.new /run/agt-open/resolv.conf

if [ ! -d "/sys/class/net/$bridge" ]; then
  ip link add "$bridge" type bridge
fi
# no IPv6 on the bridge: open jails have none
[ ! -e "/proc/sys/net/ipv6/conf/$bridge" ] || sysctl -q -w "net.ipv6.conf.$bridge.disable_ipv6=1"
ip addr replace "$gw" dev "$bridge"
ip link set "$bridge" up
