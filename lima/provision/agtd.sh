#!/bin/bash
# agt: provisioning of the agent VM (Lima `mode: system`: root, at every boot, so every
# step is idempotent and cheap when there is nothing to do).
#   1. the packages agtd needs to build and run, and those the default jail rootfs copies
#      from the guest (rootfs/default.yaml): busybox, bash, ripgrep, git, CA certificates,
#      opencode from npm, and toybox built static from the distribution's source package
#      (scripts/toybox-build.sh: cached by source version, a second boot only checks it);
#   2. agtd and the model server agt verify runs (libexec/agt/model-server), built from the
#      agt source tree that agt mounts read-only at $PARAM_AgtSourceDir;
#   3. the machine-wide settings agtd's jails are better off with (machine.sh, beside this
#      file: cgroup favordynmods, console loglevel, the bridge, firewall and NAT of network
#      mode open), as the oneshot service agt-machine that runs at every boot before agtd
#      (after the network and the resolver, whose upstream servers open jails get); agtd
#      itself changes nothing machine-wide;
#   4. the jails' disk: the Lima disk $PARAM_AgtJailsDisk that agt made for this VM
#      (additionalDisks, `format: false`: Lima leaves it alone), made btrfs while empty by
#      jails-disk.sh (beside this file; also a `mode: boot` script, so usually done before
#      Lima's boot scripts ran; `fsType: btrfs` lets Lima mount it at /mnt/lima-NAME),
#      mounted by systemd on agtd's layers directory /var/lib/agt/layers before agtd
#      starts, and grown to its partition (after `limactl disk resize`).  A VM made before
#      agt gave it such a disk has no AgtJailsDisk: agtd keeps its image inside the root
#      disk there;
#   5. agtd as a systemd service listening on $PARAM_AgtdSocket, whose group is the Lima
#      user's group, so that user (the one agt logs in as over SSH) may use it, with
#      --realtime-starts: this VM exists for the jails, so their starts may outrank the rest.
set -eux -o pipefail

user="{{.User}}"
src="${PARAM_AgtSourceDir}"
sock="${PARAM_AgtdSocket}"
roots="${PARAM_AgtWorkspaceRoots}"
build=/var/cache/agt/build
npm_prefix=/var/cache/agt/npm
opencode_version=1.18.34
export DEBIAN_FRONTEND=noninteractive

packages=(
  build-essential meson ninja-build pkg-config
  libuv1-dev libyaml-dev libjansson-dev libssh-dev libseccomp-dev libssl-dev
  libcurl4-openssl-dev
  toybox busybox-static bash-static ripgrep git ca-certificates nodejs npm btrfs-progs
  musl-tools dpkg-dev file
  iproute2 nftables
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi

case "$(uname -m)" in
  x86_64) oc_arch=x64 ;;
  aarch64) oc_arch=arm64 ;;
  *) echo "agt: no opencode build for $(uname -m)" >&2; exit 1 ;;
esac
oc_pkg="$npm_prefix/node_modules/opencode-linux-$oc_arch"
if ! grep -q "\"version\": *\"$opencode_version\"" "$oc_pkg/package.json" 2>/dev/null; then
  npm install --prefix "$npm_prefix" --no-save --no-audit --no-fund "opencode-linux-$oc_arch@$opencode_version"
fi

if [ ! -f "$src/meson.build" ] || [ ! -d "$src/guest" ]; then
  echo "agt: no agt source tree at $src: agt mounts it there (vm.agt_source in its config)" >&2
  exit 1
fi
bash "$src/scripts/toybox-build.sh"

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$src" --buildtype=release -Dtests=false
fi
ninja -C "$build" guest/agtd guest/model-server
changed=0
if ! cmp -s "$build/guest/agtd" /usr/local/sbin/agtd; then
  install -m 0755 "$build/guest/agtd" /usr/local/sbin/agtd.new
  mv -f /usr/local/sbin/agtd.new /usr/local/sbin/agtd
  changed=1
fi

# the model server agt verify runs, where verify looks for it from agtd's path
install -D -m 0755 "$build/guest/model-server" /usr/local/libexec/agt/model-server.new
mv -f /usr/local/libexec/agt/model-server.new /usr/local/libexec/agt/model-server

install -D -m 0755 "$src/lima/provision/machine.sh" /usr/local/libexec/agt/machine.sh.new
mv -f /usr/local/libexec/agt/machine.sh.new /usr/local/libexec/agt/machine.sh
machine_unit=/etc/systemd/system/agt-machine.service
cat >"$machine_unit.new" <<UNIT
[Unit]
Description=agt's machine-wide settings for agtd's jails (cgroup favordynmods, console loglevel, network mode open)
Before=agtd.service
Wants=network-online.target
After=network-online.target systemd-resolved.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/libexec/agt/machine.sh

[Install]
WantedBy=multi-user.target
UNIT
if ! cmp -s "$machine_unit.new" "$machine_unit"; then
  mv -f "$machine_unit.new" "$machine_unit"
  systemctl daemon-reload
else
  rm -f "$machine_unit.new"
fi
systemctl enable agt-machine.service
/usr/local/libexec/agt/machine.sh

jails_disk="${PARAM_AgtJailsDisk:-}"
layers_dir=/var/lib/agt/layers
layers_unit=
if [ -n "$jails_disk" ]; then
  # made btrfs, if still empty, by jails-disk.sh: at this boot's start already (Lima `mode:
  # boot`) when the image had mkfs.btrfs, else now that the packages are in.  It names the
  # partition on the jails' disk itself: a search by label would also find agtd's own image
  # (<state>/layers.img, labelled agt-jails too) or a copy's disk.
  part="$(sh "$src/lima/provision/jails-disk.sh")"
  if [ -z "$part" ]; then
    echo "agt: the jails' disk '$jails_disk': jails-disk.sh named no partition" >&2
    exit 1
  fi
  uuid="$(blkid -p -o value -s UUID "$part")"
  # mounted by systemd at every boot before agtd (RequiresMountsFor below); Lima mounts the
  # same file system at /mnt/lima-NAME too, from its boot script
  layers_unit="$(systemd-escape -p --suffix=mount "$layers_dir")"
  cat >"/etc/systemd/system/$layers_unit.new" <<UNIT
[Unit]
Description=the jails' disk (Lima disk $jails_disk): agtd's jails' writable layers

[Mount]
What=/dev/disk/by-uuid/$uuid
Where=$layers_dir
Type=btrfs
Options=nosuid,nodev

[Install]
WantedBy=local-fs.target
UNIT
  if ! cmp -s "/etc/systemd/system/$layers_unit.new" "/etc/systemd/system/$layers_unit"; then
    mv -f "/etc/systemd/system/$layers_unit.new" "/etc/systemd/system/$layers_unit"
    systemctl daemon-reload
  else
    rm -f "/etc/systemd/system/$layers_unit.new"
  fi
  install -d -m 0711 /var/lib/agt  # agtd's state directory, as agtd makes it
  install -d -m 0700 "$layers_dir"
  systemctl enable "$layers_unit"
  systemctl start "$layers_unit"
  # the partition grows with the disk (growpart, at Lima's boot), the file system here
  btrfs filesystem resize max "$layers_dir" >/dev/null
fi

group="$(id -gn "$user")"
args="serve --socket \"$sock\" --state-dir /var/lib/agt --group \"$group\" --realtime-starts"
IFS=: read -r -a dirs <<<"$roots"
for d in "${dirs[@]}"; do
  [ -n "$d" ] && args="$args --workspace-root \"$d\""
done
unit=/etc/systemd/system/agtd.service
cat >"$unit.new" <<UNIT
[Unit]
Description=agtd, agt's jail daemon
After=local-fs.target network-online.target agt-machine.service
${layers_unit:+RequiresMountsFor=$layers_dir}
Wants=agt-machine.service

[Service]
ExecStart=/usr/local/sbin/agtd $args
Environment=AGT_OPENCODE_BIN=$oc_pkg/bin/opencode
Restart=on-failure
Delegate=yes
# Jails outlive agtd under their keepers (children of agtd): a stop or restart of the
# service ends agtd only.
KillMode=process

[Install]
WantedBy=multi-user.target
UNIT
if ! cmp -s "$unit.new" "$unit"; then
  mv -f "$unit.new" "$unit"
  systemctl daemon-reload
  changed=1
else
  rm -f "$unit.new"
fi
systemctl enable agtd.service
if [ "$changed" = 1 ]; then
  systemctl restart agtd.service
else
  systemctl start agtd.service
fi
