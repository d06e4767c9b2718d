#!/usr/bin/env bash
# lima-e2e.sh: agt against a real Lima VM, booted on this machine under QEMU.
#
#   scripts/lima-e2e.sh            (root; `just lima-e2e`)
#
# Steps, each timed:  image (scripts/lima-image.sh: Debian 12 from Debian packages,
# cached) -> agt up (boots the VM; Lima's provisioning builds agtd in the guest from the
# mounted source tree; waits until agtd answers over SSH) -> the jails' disk (the Lima disk
# agt made is attached, btrfs, mounted on agtd's layers directory, with limits) ->
# agt verify --jails 2 -> a jail with a disk limit that hits it -> agt clone GOLD ->
# agt restore --force GOLD -> agt reset --force -> agt delete --force (the VM, then the
# gold one) -> no Lima disk left (limactl disk ls).  The first failing step ends the run (no retries); its
# exit status is the script's, and the VM's logs are printed.
#
# limactl refuses root, so agt (and limactl under it) run as the unprivileged user
# agtlima, created here if missing, with LIMA_HOME=/home/agtlima/.le and a copy of the
# source tree and of agt under /var/tmp/agt-lima-e2e (root's checkout may be unreadable to
# that user).
#
# Environment:
#   AGT_LIMA_PREFIX       Lima's install prefix (bin/limactl, share/lima/): that of
#                         $AGT_LIMACTL (the justfile's), else /var/cache/agt/lima/v2.2.0
#   AGT_LIMA_E2E_ACCEL    tcg (default: QEMU emulates the CPU) or kvm (Lima's choice: KVM
#                         whenever /dev/kvm exists).  docs/LIMA-E2E.md says why tcg.
#   AGT_LIMA_E2E_TIMEOUT  how long a boot may take (90m: TCG on a loaded machine is slow)
#   AGT_LIMA_E2E_KEEP=1   leave the VMs behind (for a look inside after a failure)
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
if [[ -n ${AGT_LIMA_PREFIX:-} ]]; then
  PREFIX="$AGT_LIMA_PREFIX"
elif [[ -n ${AGT_LIMACTL:-} ]]; then # the justfile's: PREFIX/bin/limactl
  PREFIX="$(dirname "$(dirname "$AGT_LIMACTL")")"
else
  PREFIX=/var/cache/agt/lima/v2.2.0
fi
ACCEL="${AGT_LIMA_E2E_ACCEL:-tcg}"
TIMEOUT="${AGT_LIMA_E2E_TIMEOUT:-90m}"
LUSER=agtlima
LHOME=/home/agtlima
E2E=/var/tmp/agt-lima-e2e
LIMA_HOME_DIR="$LHOME/.le"
VM=agt-e2e
GOLD=agt-e2e-gold

say() { printf 'agt-e2e: %s\n' "$*" >&2; }
die() {
  printf 'agt-e2e: error: %s\n' "$*" >&2
  exit 1
}

[[ $EUID -eq 0 ]] || die "run as root: it creates the user $LUSER and builds the image"
[[ -x $PREFIX/bin/limactl ]] || die "no limactl at $PREFIX/bin/limactl (./dev deps installs it; AGT_LIMA_PREFIX)"
[[ -f $PREFIX/share/lima/lima-guestagent.Linux-x86_64.gz || -f $PREFIX/share/lima/lima-guestagent.Linux-x86_64 ]] ||
  die "no guest agent in $PREFIX/share/lima (Lima needs it beside limactl)"
[[ -x $ROOT/build/host/agt ]] || die "no $ROOT/build/host/agt: just build"
case "$ACCEL" in
  tcg)
    # Lima picks KVM whenever /dev/kvm exists (it only stats it).  Given -machine, -accel
    # and -cpu here, it adds none of its own (appendArgsIfNoConflict in Lima's qemu.go).
    QEMU_ENV="qemu-system-x86_64 -machine q35,vmport=off -accel tcg,thread=multi,tb-size=512 -cpu max"
    ;;
  kvm) QEMU_ENV= ;;
  *) die "AGT_LIMA_E2E_ACCEL must be tcg or kvm, not '$ACCEL'" ;;
esac

# --- the user limactl runs as
if ! id "$LUSER" >/dev/null 2>&1; then
  say "creating user $LUSER"
  useradd --create-home --home-dir "$LHOME" --shell /bin/bash "$LUSER"
fi
[[ -d $LHOME ]] || die "$LUSER has no home $LHOME"

# --- timing
declare -a STEP_NAMES=() STEP_SECS=()
T0=$SECONDS
FAILED=
step() { # step NAME COMMAND...
  local name="$1" t=$SECONDS rc=0
  shift
  say "=== $name: $*"
  "$@" || rc=$?
  STEP_NAMES+=("$name")
  STEP_SECS+=($((SECONDS - t)))
  say "=== $name: $((SECONDS - t))s, exit $rc"
  if [[ $rc -ne 0 ]]; then
    FAILED="$name (exit $rc)"
    return "$rc"
  fi
}
summary() {
  local i
  printf '\n%-28s %8s\n' step seconds
  for i in "${!STEP_NAMES[@]}"; do
    printf '%-28s %8s\n' "${STEP_NAMES[$i]}" "${STEP_SECS[$i]}"
  done
  printf '%-28s %8s\n' total $((SECONDS - T0))
  if [[ -n $FAILED ]]; then
    printf 'FAILED at %s\n' "$FAILED"
  else
    printf 'PASS\n'
  fi
}

# agt (and limactl under it) as $LUSER, in $E2E, with only this environment.
as_user() {
  local env=(HOME="$LHOME" USER="$LUSER" LOGNAME="$LUSER" PATH="$PREFIX/bin:/usr/local/bin:/usr/bin:/bin"
    LIMA_HOME="$LIMA_HOME_DIR" AGT_CONFIG="$E2E/config.yaml")
  [[ -n $QEMU_ENV ]] && env+=(QEMU_SYSTEM_X86_64="$QEMU_ENV")
  (cd "$E2E" && runuser -u "$LUSER" -- env -i "${env[@]}" "$@")
}
agt() { as_user "$E2E/agt" "$@"; }
limactl() { as_user "$PREFIX/bin/limactl" "$@"; }

# The Lima disks of this LIMA_HOME (agt makes one per VM for the jails' layers).
disks() { limactl --tty=false disk ls --json 2>/dev/null | sed -n 's/^{"name":"\([^"]*\)".*/\1/p'; }
del_disks() {
  local d
  for d in $(disks); do limactl --tty=false disk delete --force "$d" >/dev/null 2>&1 || true; done
}

show_logs() {
  local d f
  for d in "$LIMA_HOME_DIR/$VM" "$LIMA_HOME_DIR/$GOLD"; do
    [[ -d $d ]] || continue
    for f in ha.stderr.log serial.log; do
      [[ -f $d/$f ]] || continue
      say "--- last lines of $d/$f"
      tail -n 40 "$d/$f" >&2 || true
    done
  done
  if limactl list "$VM" 2>/dev/null | grep -q Running; then
    say "--- the guest's /var/log/cloud-init-output.log (last lines)"
    limactl shell --workdir / "$VM" sudo tail -n 60 /var/log/cloud-init-output.log >&2 || true
  fi
}
finish() {
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    [[ -n $FAILED ]] || FAILED="setup (exit $rc)"
    show_logs
  fi
  if [[ ${AGT_LIMA_E2E_KEEP:-0} != 1 ]]; then
    limactl --tty=false delete --force "$VM" "$GOLD" >/dev/null 2>&1 || true
    del_disks
  fi
  summary
  exit "$rc"
}
trap finish EXIT

# --- the image
IMG=
build_image() {
  IMG="$(bash "$ROOT/scripts/lima-image.sh")"
}
step image build_image

# --- agt, the source tree, the config, all readable by $LUSER
setup() {
  rm -rf "$E2E"
  mkdir -p "$E2E/src"
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -xf - -C "$E2E/src"
  install -m 0755 "$ROOT/build/host/agt" "$E2E/agt"
  # a project in a writable mount, as a user's: a jail's workspace is one (agt jail run)
  mkdir -p "$E2E/work/project"
  cat >"$E2E/config.yaml" <<EOF
target: lima
vm:
  name: $VM
  cpus: 2
  memory: 4GiB
  disk: 20GiB
  template: $E2E/src/lima/agt.yaml
  agt_source: $E2E/src
  image: $IMG/disk.qcow2
  kernel: $IMG/vmlinuz
  kernel_cmdline: "$(cat "$IMG/cmdline")"
  initrd: $IMG/initrd.img
  mounts:
    - location: $E2E/work
      writable: true
lima:
  limactl: $PREFIX/bin/limactl
  home: $LIMA_HOME_DIR
  start_timeout: $TIMEOUT
EOF
  # This machine's local CAs (e.g. a TLS-intercepting egress proxy's) are the guest's too,
  # or npm in the guest's provisioning fails with "self-signed certificate in certificate
  # chain".  Lima's own way: caCerts, here in its override.yaml, which it merges into every
  # instance of this LIMA_HOME.
  mkdir -p "$LIMA_HOME_DIR/_config" "$E2E/ca"
  rm -f "$LIMA_HOME_DIR/_config/override.yaml"
  shopt -s nullglob
  local crts=(/usr/local/share/ca-certificates/*.crt /usr/local/share/ca-certificates/*/*.crt) c
  shopt -u nullglob
  if [[ ${#crts[@]} -gt 0 ]]; then
    {
      printf '# the host'"'"'s local CAs (scripts/lima-e2e.sh)\ncaCerts:\n  files:\n'
      for c in "${crts[@]}"; do
        install -m 0644 "$c" "$E2E/ca/$(basename "$c")"
        printf '  - %s\n' "$E2E/ca/$(basename "$c")"
      done
    } >"$LIMA_HOME_DIR/_config/override.yaml"
    say "the guest trusts the host's local CAs: ${crts[*]}"
  fi
  chown -R "$LUSER:" "$E2E" "$LIMA_HOME_DIR"
  # what an earlier run left behind
  limactl --tty=false delete --force "$VM" "$GOLD" >/dev/null 2>&1 || true
  del_disks
  say "limactl $(limactl --version), QEMU: ${QEMU_ENV:-as Lima picks it}"
}
step setup setup

step "agt up" agt up --timeout "$TIMEOUT"

# The jails' disk: the Lima disk agt made ($VM-jails), attached to the VM, made btrfs by the
# provisioning and mounted on agtd's layers directory, agtd's limits on.
# Lima's own disk script mounted it too (at the first boot already: jails-disk.sh ran before
# it, as a `mode: boot` script) and logged no failure.
jails_disk() { # jails_disk [DISK-NAME]
  local disk="${1:-$VM-jails}" ls mnt st
  ls="$(limactl --tty=false disk ls --json)"
  say "limactl disk ls: $ls"
  grep -q "\"name\":\"$disk\".*\"instance\":\"$VM\"" <<<"$ls" ||
    { say "no Lima disk $disk attached to $VM"; return 1; }
  mnt="$(limactl shell --workdir / "$VM" findmnt -n -o SOURCE,FSTYPE /var/lib/agt/layers)"
  say "the guest's /var/lib/agt/layers: $mnt"
  [[ $mnt == /dev/vd?1\ *btrfs ]] || { say "agtd's layers are not on the jails' disk"; return 1; }
  limactl shell --workdir / "$VM" sudo cat /var/lib/agt/layers/.agt-jails-disk >&2
  mnt="$(limactl shell --workdir / "$VM" findmnt -n -o SOURCE,FSTYPE "/mnt/lima-$disk" || true)"
  say "the guest's /mnt/lima-$disk (Lima's mount): ${mnt:-none}"
  [[ $mnt == /dev/vd?1\ *btrfs ]] || { say "Lima did not mount the jails' disk"; return 1; }
  if limactl shell --workdir / "$VM" sudo grep 'Failed to execute.*05-lima-disks' \
    /var/log/cloud-init-output.log >&2; then
    say "Lima's disk script failed at a boot"
    return 1
  fi
  st="$(agt status --json 2>&1 || true)"
  grep -q '"limits": *true' <<<"$st" || { say "agtd has no disk limits: $st"; return 1; }
}
step "the jails' disk" jails_disk
step "agt verify --jails 2" agt verify --jails 2 --timeout 60m

# A jail with a 64 MiB disk limit writes 128 MiB: it stops at its quota (EDQUOT) on the
# jails' disk.
disk_limit() {
  local out
  out="$(agt jail run --rm --no-tty --name e2e-disk --disk 64M --workspace "$E2E/work/project" -- /bin/sh -c \
    'dd if=/dev/zero of=/home/agent/fill bs=1M count=128; echo "dd exit $?"' 2>&1)" || true
  printf '%s\n' "$out" | tail -n 5 >&2
  grep -q 'Disk quota exceeded' <<<"$out"
}
step "jail --disk 64M hits its limit" disk_limit
step "agt clone $GOLD" agt clone "$GOLD"
step "agt restore $GOLD" agt restore --force "$GOLD"
step "the jails' disk, restored" jails_disk "$VM.restoring-jails"
step "agt reset" agt reset --force
step "agt delete" agt delete --force
step "agt delete (gold)" agt --instance "$GOLD" delete --force
no_disk_left() {
  local left
  left="$(disks)"
  say "Lima disks left: ${left:-none}"
  [[ -z $left ]]
}
step "no Lima disk left" no_disk_left
