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
set -eu -o pipefail

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
kernel.printk = 3 4 1 7"
if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
  printf '%s\n' "$want" >"$conf.new"
  mv -f "$conf.new" "$conf"
fi
sysctl -q -p "$conf"
