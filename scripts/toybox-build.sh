#!/usr/bin/env bash
# toybox-build.sh: the jails' toybox, built static from Debian's source package.
#
#   scripts/toybox-build.sh [--force]     (./dev deps runs it; root, or sudo for apt)
#
# Fetches Debian's toybox source (apt-get source), applies Debian's patches, configures
# toybox's defconfig plus the applets agents use that are still in toys/pending (the shell
# among them: see CONFIG_EXTRA below), builds one static binary with musl (musl-gcc), checks
# it and installs it as
#
#   $AGT_TOYBOX_CACHE/<source version>-<config hash>/   (default /var/cache/agt/toybox)
#       toybox       the static binary
#       applets      `toybox` with no arguments: its applet list, one a line
#       config       the .config it was built with
#       BUILDINFO    version=, source=, sha256=, config=, debian_patches=
#   $AGT_TOYBOX_CACHE/current -> <source version>-<config hash>
#
# rootfs/default.yaml copies $AGT_TOYBOX_CACHE/current/toybox into the jails' base, so a new
# source version (a Debian security fix: `apt-get update`, then this script) gives a new
# directory and `agt rootfs update` rebuilds the base with it. A cache entry that exists and
# passes the checks is kept: a second run only checks.  Without a deb-src line for apt (a
# fresh Lima VM), it adds one: $AGT_TOYBOX_DEB_SRC_LIST (default
# /etc/apt/sources.list.d/agt-deb-src.sources).
#
# Why musl and not glibc: a static glibc binary still loads NSS modules at run time for user
# and group look-ups (ls -l, id, ps), and the jail has no matching glibc; musl reads
# /etc/passwd itself. toybox's own release binaries are built the same way.
set -euo pipefail

CACHE="${AGT_TOYBOX_CACHE:-/var/cache/agt/toybox}"
FORCE=0
[[ ${1:-} == --force ]] && FORCE=1

say() { printf 'agt: toybox: %s\n' "$*"; }
die() {
  printf 'agt: toybox: error: %s\n' "$*" >&2
  exit 1
}
as_root() {
  if [[ $EUID -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

# Applets from toys/pending that agents' scripts use, on top of toybox's defconfig (which
# holds every applet its author calls finished). sh is toysh (its builtins, cd, export, set,
# eval, source, wait..., come with CONFIG_SH: they are USE_SH() in sh.c); the rest are
# the text and file tools LLM-written scripts call (diff, expr, tr, dd, bc, fold, getopt,
# hexdump/hd, xzcat, stty) and gzip (off by default in lsb/: tar -z runs it). Left out: vi
# and more (interactive; busybox has them), the daemons, network and system administration
# applets (a jail has no use for them).
CONFIG_EXTRA=(
  SH DIFF EXPR TR DD BC FOLD GETOPT HEXDUMP HD XZCAT STTY GZIP
)
# Applets of defconfig left out: the password and login tools need crypt(), which Debian's
# musl does not ship, and have no use in a jail (no setuid, no passwords).
CONFIG_OFF=(MKPASSWD PASSWD SU LOGIN)
# Applets the check insists on (the shell and the tools the test suites' scripts run).
REQUIRED_APPLETS=(sh cat ls cp mv rm mkdir sed grep find xargs sort uniq head tail cut tr wc
  diff expr env printf test date sleep tar gzip sha256sum id chmod ln readlink)

for tool in apt-get dpkg-source musl-gcc make sha256sum file; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing (./dev deps installs it)"
done

# The source version apt would fetch (the newest in the source index); nothing when apt has
# no source index (apt-get source fails then: under pipefail that would end the script
# without a word).
find_dsc() {
  { apt-get source --print-uris toybox 2>/dev/null || true; } |
    awk '$2 ~ /^toybox_.*\.dsc$/ { print $2 }' | head -n 1
}
dsc="$(find_dsc)"
if [[ -z $dsc ]]; then
  # No deb-src line: add one for this machine's suite (the same file as ./dev's), once.
  DEB_SRC_LIST=${AGT_TOYBOX_DEB_SRC_LIST:-/etc/apt/sources.list.d/agt-deb-src.sources}
  suite="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
  [[ -n $suite ]] || die "no VERSION_CODENAME in /etc/os-release: add a deb-src line for apt yourself"
  [[ -e $DEB_SRC_LIST ]] && die "apt has no source package of toybox, though $DEB_SRC_LIST exists"
  say "adding $DEB_SRC_LIST (deb-src for $suite), then apt-get update"
  if [[ $(. /etc/os-release && echo "$ID") == ubuntu && -f /etc/apt/sources.list.d/ubuntu.sources ]]; then
    # Ubuntu (the Lima VM): the same archives as its binary packages, as source.
    { echo "# Added by agt: source packages (toybox for the jails)."
      sed 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/ubuntu.sources; } |
      as_root tee "$DEB_SRC_LIST" >/dev/null
  else
    printf '%s\n' "# Added by agt: Debian's source packages (toybox for the jails, the macOS cross build)." \
      "Types: deb-src" "URIs: http://deb.debian.org/debian" "Suites: $suite" "Components: main" \
      "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" | as_root tee "$DEB_SRC_LIST" >/dev/null
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
  dsc="$(find_dsc)"
  [[ -n $dsc ]] || die "apt has no source package of toybox even with $DEB_SRC_LIST"
fi
version="${dsc#toybox_}"
version="${version%.dsc}"
config_key="$(printf '%s\n' "${CONFIG_EXTRA[@]}" -- "${CONFIG_OFF[@]}" | sha256sum | cut -c1-8)"
key="$version-$config_key"
dest="$CACHE/$key"

check() { # DIR: the binary is static, runs, has its shell and the applets
  local dir="$1" bin="$1/toybox" out a
  [[ -x $bin ]] || die "$bin is missing"
  out="$(file -b "$bin")"
  [[ $out == *"statically linked"* ]] || die "$bin is not static: $out"
  out="$("$bin" sh -c 'x=ok; for a in 1 2; do x="$x$a"; done; echo "$x $((6 * 7))"')" ||
    die "$bin sh -c failed"
  [[ $out == "ok12 42" ]] || die "$bin sh -c gave '$out', wanted 'ok12 42'"
  "$bin" | tr -s ' \n' '\n\n' | sed '/^$/d' >"$dir/applets.new"
  for a in "${REQUIRED_APPLETS[@]}"; do
    grep -qx -- "$a" "$dir/applets.new" || die "$bin has no applet '$a'"
  done
}

if [[ $FORCE -eq 0 && -f $dest/BUILDINFO && -L $CACHE/current && $(readlink "$CACHE/current") == "$key" ]]; then
  check "$dest"
  rm -f "$dest/applets.new"
  say "present: $dest/toybox ($(sed -n "s/^version=//p" "$dest/BUILDINFO"), $(wc -l <"$dest/applets") applets)"
  exit 0
fi

work="$(mktemp -d /tmp/agt-toybox.XXXXXX)"
[[ -n ${AGT_TOYBOX_KEEP:-} ]] || trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
say "fetching Debian's source package $dsc (apt-get source)"
# apt-get source downloads as _apt when it can, which needs a directory _apt may write.
chown _apt "$work" 2>/dev/null || true
debian_part=applied
if ! (cd "$work" && apt-get source -q --download-only toybox >"$work/apt.log" 2>&1); then
  # This happens where the mirror serves a source package only in part (seen: the
  # .debian.tar.xz of toybox 0.8.9+dfsg-1 answered 404 while its .dsc and .orig.tar.xz did
  # not). Then the upstream part is built alone, checked against the .dsc, and said so:
  # Debian's patches are missing from that build, and BUILDINFO and the version say it.
  orig="$(awk '$3 ~ /\.orig\.tar\./ { print $3; exit }' "$work/$dsc" 2>/dev/null || true)"
  if [[ -f $work/$dsc && -n $orig && -f $work/$orig ]] && ! grep -q "$orig" <(grep -i '^E:' "$work/apt.log"); then
    sed -n 's/^E: //p' "$work/apt.log" | head -n 3 | while read -r line; do say "warning: $line"; done
    want="$(sed -n '/^Checksums-Sha256:/,/^[^ ]/p' "$work/$dsc" | awk -v f="$orig" '$3 == f { print $1 }')"
    have="$(sha256sum "$work/$orig" | cut -d' ' -f1)"
    [[ -n $want && $want == "$have" ]] || die "$orig: sha256 $have, the .dsc says ${want:-nothing}"
    say "warning: Debian's part of $dsc could not be fetched: building the upstream source $orig alone (sha256 checked against the .dsc), without Debian's patches"
    mkdir "$work/src"
    tar -xf "$work/$orig" -C "$work/src" --strip-components=1
    debian_part="missing (the mirror did not serve it)"
  else
    cat "$work/apt.log" >&2
    die "apt-get source toybox failed"
  fi
elif ! (cd "$work" && dpkg-source -x "$dsc" src >"$work/dpkg-source.log" 2>&1); then
  cat "$work/dpkg-source.log" >&2
  die "dpkg-source -x $dsc failed"
fi
if [[ $debian_part == applied ]]; then
  patches="$(sed '/^#/d;/^$/d' "$work/src/debian/patches/series" 2>/dev/null | tr '\n' ' ' || true)"
  patches="${patches:-none}"
else
  patches="not applied: Debian's part $debian_part"
  version="$version (upstream part only)"
fi
say "source unpacked; Debian's patches: $patches"

# musl-gcc sees only musl's headers; toybox also needs the kernel's (linux/, asm/).
arch_inc="/usr/include/$(gcc -print-multiarch)"
mkdir -p "$work/kinc"
for d in linux asm-generic mtd; do
  [[ -d /usr/include/$d ]] && ln -s "/usr/include/$d" "$work/kinc/$d"
done
[[ -d $arch_inc/asm ]] || die "no kernel headers at $arch_inc/asm (install linux-libc-dev)"
ln -s "$arch_inc/asm" "$work/kinc/asm"

cd "$work/src"
say "configuring: defconfig + ${CONFIG_EXTRA[*]} - ${CONFIG_OFF[*]}"
make defconfig >"$work/config.log" 2>&1 || {
  cat "$work/config.log" >&2
  die "make defconfig failed"
}
for opt in "${CONFIG_EXTRA[@]}"; do
  grep -q "^# CONFIG_$opt is not set\$\|^CONFIG_$opt=y\$" .config || die "toybox $version has no CONFIG_$opt"
  sed -i "s/^# CONFIG_$opt is not set\$/CONFIG_$opt=y/" .config
done
for opt in "${CONFIG_OFF[@]}"; do
  grep -q "^CONFIG_$opt=y\$" .config || die "toybox $version's defconfig has no CONFIG_$opt=y"
  sed -i "s/^CONFIG_$opt=y\$/# CONFIG_$opt is not set/" .config
done
{ yes '' || true; } | make oldconfig >>"$work/config.log" 2>&1 || {
  cat "$work/config.log" >&2
  die "make oldconfig failed"
}
for opt in "${CONFIG_EXTRA[@]}"; do
  grep -q "^CONFIG_$opt=y\$" .config || die "CONFIG_$opt did not stay set after make oldconfig"
done
for opt in "${CONFIG_OFF[@]}"; do
  ! grep -q "^CONFIG_$opt=y\$" .config || die "CONFIG_$opt came back after make oldconfig"
done

say "building static with musl ($(nproc) jobs; about a minute)"
CC=musl-gcc CFLAGS="-Os -isystem $work/kinc" LDFLAGS="--static" CPUS="$(nproc)" \
  make toybox >"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log" >&2
  die "make toybox failed (the whole log: keep it with AGT_TOYBOX_KEEP=1)"
}

mkdir -p "$work/out"
cp toybox "$work/out/toybox"
cp .config "$work/out/config"
check "$work/out"
mv "$work/out/applets.new" "$work/out/applets"
sha="$(sha256sum "$work/out/toybox" | cut -d' ' -f1)"
{
  echo "version=$version"
  echo "source=$dsc"
  echo "sha256=$sha"
  echo "config=defconfig + ${CONFIG_EXTRA[*]} - ${CONFIG_OFF[*]}"
  echo "debian_patches=$patches"
  echo "compiler=musl-gcc $(dpkg-query -W -f='${Version}' musl-tools 2>/dev/null || echo '?')"
} >"$work/out/BUILDINFO"

as_root mkdir -p "$CACHE"
as_root rm -rf "$dest.tmp"
as_root cp -R "$work/out" "$dest.tmp"
as_root chmod -R go-w,a+rX "$dest.tmp"
as_root rm -rf "$dest"
as_root mv "$dest.tmp" "$dest"
as_root ln -sfn "$key" "$CACHE/current.tmp"
as_root mv -T "$CACHE/current.tmp" "$CACHE/current"
say "built $dest/toybox ($version, static, $(wc -l <"$dest/applets") applets, sha256 ${sha:0:12})"
