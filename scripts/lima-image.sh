#!/usr/bin/env bash
# lima-image.sh: build a Debian 12 (bookworm) guest image for Lima from Debian packages,
# on this machine, with debootstrap; print the directory that holds it.
#
#   scripts/lima-image.sh [CACHE_DIR]      (root; CACHE_DIR: /var/cache/agt/lima-image)
#
# The result, in CACHE_DIR/<key>/ (key: a hash of this script and of the package list of
# lima/provision/agtd.sh, so the image is rebuilt only when one of them changes):
#   disk.qcow2   the root file system (ext4, no partition table: the kernel mounts /dev/vda)
#   vmlinuz      the kernel (linux-image-amd64: the cloud flavour has no 9p, which Lima's
#                qemu mounts need; its config says "# CONFIG_NET_9P is not set")
#   initrd.img   its initramfs
#   cmdline      the kernel's command line
#   config.yaml  the agt config lines that select it (vm.image, vm.kernel, vm.initrd, ...)
# CACHE_DIR/current points at the newest one.
#
# Lima boots it with direct kernel boot (images[].kernel/initrd); cloud-init (NoCloud)
# does what Lima's cidata asks: the user, its SSH key, the 9p mounts, the network
# (netplan v2 -> systemd-networkd).  The packages lima/provision/agtd.sh installs are
# installed here too, so that provisioning under TCG is not mostly downloads; it still
# runs in full (it builds agtd in the guest from the mounted source tree).
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
CACHE="${1:-/var/cache/agt/lima-image}"
SUITE=bookworm
MIRROR=http://deb.debian.org/debian
SIZE=8G

say() { printf 'agt: %s\n' "$*" >&2; }
die() {
  printf 'agt: error: %s\n' "$*" >&2
  exit 1
}

[[ $EUID -eq 0 ]] || die "lima-image.sh needs root (debootstrap, chroot, mkfs.ext4 -d)"
[[ $(uname -m) == x86_64 ]] || die "lima-image.sh builds an x86_64 image; this is $(uname -m)"
for t in debootstrap mkfs.ext4 qemu-img sha256sum; do
  command -v "$t" >/dev/null || die "$t is missing (./dev deps installs it)"
done

# What the guest needs for Lima (pkg/cidata of Lima v2.2: cloud-init NoCloud, sshd, sudo,
# systemd + logind + dbus, udev for /dev/disk/by-label/cidata, netplan v2, iptables for the
# host resolver, rsync, growpart/resize2fs) and a kernel with 9p.
BASE_PACKAGES=(
  systemd-sysv udev dbus libpam-systemd systemd-resolved
  linux-image-amd64 initramfs-tools
  cloud-init cloud-guest-utils netplan.io
  openssh-server sudo iproute2 iptables kmod rsync tzdata ca-certificates procps less
)
# lima/provision/agtd.sh's own list, read from it so the two never drift apart.
mapfile -t PROVISION_PACKAGES < <(sed -n '/^packages=(/,/^)/p' "$ROOT/lima/provision/agtd.sh" |
  sed '1d;$d' | tr ' ' '\n' | sed '/^$/d')
[[ ${#PROVISION_PACKAGES[@]} -gt 5 ]] || die "cannot read the package list of lima/provision/agtd.sh"

key="$({
  cat "${BASH_SOURCE[0]}"
  printf '%s\n' "${PROVISION_PACKAGES[@]}"
} | sha256sum | cut -c1-16)"
out="$CACHE/$SUITE-$key"
if [[ -f $out/disk.qcow2 && -f $out/vmlinuz && -f $out/initrd.img && -f $out/cmdline && -f $out/config.yaml ]]; then
  say "image present: $out"
  ln -sfn "$(basename "$out")" "$CACHE/current"
  printf '%s\n' "$out"
  exit 0
fi

mkdir -p "$CACHE"
chmod 0755 "$CACHE"
work="$(mktemp -d "$CACHE/.build.XXXXXX")"
cleanup() {
  # the chroot's mounts live in the private mount namespace below: nothing to unmount here
  rm -rf "$work"
}
trap cleanup EXIT
rootfs="$work/rootfs"

say "debootstrap $SUITE into $rootfs"
# Downloaded packages are kept in $CACHE/debs for the next build.
mkdir -p "$CACHE/debs/partial"
debootstrap --variant=minbase --include=apt-utils,gnupg --cache-dir="$CACHE/debs" \
  "$SUITE" "$rootfs" "$MIRROR" >&2

cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
EOF
# No daemon starts inside the chroot.
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
chmod 0755 "$rootfs/usr/sbin/policy-rc.d"

say "installing ${#BASE_PACKAGES[@]} base and ${#PROVISION_PACKAGES[@]} provisioning packages"
# A private mount namespace: /proc, /sys and /dev of the chroot vanish with it.
unshare --mount --propagation private bash -euo pipefail -c '
  r="$1"; debs="$2"; shift 2
  mount -t proc proc "$r/proc"
  mount --bind "$debs" "$r/var/cache/apt/archives"
  mount -t sysfs sysfs "$r/sys"
  mount --bind /dev "$r/dev"
  mount --bind /dev/pts "$r/dev/pts"
  chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" </dev/null
' _ "$rootfs" "$CACHE/debs" "${BASE_PACKAGES[@]}" "${PROVISION_PACKAGES[@]}" >&2

rm -f "$rootfs/usr/sbin/policy-rc.d"

# Per-VM identity is made at first boot: machine-id by systemd, host keys by cloud-init.
: >"$rootfs/etc/machine-id"
rm -f "$rootfs/var/lib/dbus/machine-id" "$rootfs"/etc/ssh/ssh_host_*
printf 'localhost\n' >"$rootfs/etc/hostname"
printf '/dev/vda / ext4 defaults,discard 0 1\n' >"$rootfs/etc/fstab"
# Lima's cidata is NoCloud; asking for nothing else spares the probes of other clouds.
cat >"$rootfs/etc/cloud/cloud.cfg.d/90-agt-lima.cfg" <<'EOF'
datasource_list: [NoCloud, None]
EOF
# systemd-networkd renders netplan's files; resolved serves DNS from DHCP.
chroot "$rootfs" systemctl enable systemd-networkd.service systemd-resolved.service >&2
ln -sfn ../run/systemd/resolve/stub-resolv.conf "$rootfs/etc/resolv.conf"

kver="$(basename "$(ls -d "$rootfs"/lib/modules/*)")"
[[ -f $rootfs/boot/vmlinuz-$kver && -f $rootfs/boot/initrd.img-$kver ]] ||
  die "no kernel or initrd for $kver in the image"
for m in 9p 9pnet_virtio virtio_blk virtio_scsi sr_mod isofs; do
  find "$rootfs/lib/modules/$kver" -name "$m.ko*" | grep -q . ||
    grep -q "/$m.ko" "$rootfs/lib/modules/$kver/modules.builtin" ||
    die "kernel $kver has no module $m"
done
cp "$rootfs/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$rootfs/boot/initrd.img-$kver" "$work/initrd.img"

say "ext4 file system ($SIZE, sparse) from the tree, then qcow2"
mkfs.ext4 -q -F -L agt-root -d "$rootfs" "$work/disk.raw" "$SIZE" >&2
qemu-img convert -f raw -O qcow2 "$work/disk.raw" "$work/disk.qcow2" >&2
rm -f "$work/disk.raw"

cmdline="root=/dev/vda rw console=ttyS0 net.ifnames=0"
printf '%s\n' "$cmdline" >"$work/cmdline"
cat >"$work/config.yaml" <<EOF
# agt config lines selecting the Debian $SUITE image built by scripts/lima-image.sh
# (kernel $kver), for agt's config file (docs/CONFIG.md).
vm:
  image: $out/disk.qcow2
  kernel: $out/vmlinuz
  kernel_cmdline: "$cmdline"
  initrd: $out/initrd.img
EOF

rm -rf "$rootfs"
mkdir -p "$out"
mv "$work"/disk.qcow2 "$work"/vmlinuz "$work"/initrd.img "$work"/cmdline "$work"/config.yaml "$out/"
chmod 0755 "$out"
chmod 0644 "$out"/*
ln -sfn "$(basename "$out")" "$CACHE/current"
say "image built: $out ($(du -sh "$out" | cut -f1))"
printf '%s\n' "$out"
