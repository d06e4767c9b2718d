#!/usr/bin/env bash
# lima/agt.yaml, rendered by agt for every case it renders, read by the real Lima:
# `limactl validate` (Lima's own loader, defaults and checks) on each.  A template Lima
# refuses fails the test.  Cases: darwin (vz, virtiofs) and linux (qemu, 9p), x86_64 and
# aarch64, with and without mounts, with vm.image (and its digest) set, reverse-sshfs.
# And a control: a template Lima must refuse (an unused param) is refused, with Lima's
# message.  Helpers: lib.sh.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mkdir -p "$T/work/proj" "$T/work/data" "$T/out"
chown -R "$LUSER:" "$T/work" "$T/out"
IMAGE=$(lr_image)
MOUNTS=("  mounts:" "    - location: $T/work/proj" "      writable: true"
  "    - location: $T/work/data" "      mount_point: /data")
IMG=("  image: $IMAGE" "  image_digest: sha256:$(sha256sum "$IMAGE" | cut -d' ' -f1)")

# case NAME OS ARCH VMTYPE MOUNTTYPE [config lines...]: render, then validate
case_() {
  local name=$1 os=$2 arch=$3 vmtype=$4 mtype=$5 f="$T/out/$1.yaml"
  shift 5
  lr_config "$@"
  run agt template --for "$os" --arch "$arch" -o "$f"
  if [ "$RC" != 0 ]; then
    not_ok "$name: agt renders the template"
    printf '%s\n' "$ERR" | sed 's/^/#   /'
    return
  fi
  like "$name: rendered for $vmtype" "$(cat "$f")" "^vmType: $vmtype$"
  like "$name: with mountType $mtype" "$(cat "$f")" "^mountType: $mtype$"
  run limactl --log-format=json validate "$f"
  is "$name: limactl validate accepts it" "$RC" 0
  [ "$RC" = 0 ] || printf '%s\n' "$ERR" | sed 's/^/#   /'
}

case_ linux-x86_64 linux x86_64 qemu 9p
case_ linux-x86_64-mounts linux x86_64 qemu 9p "${MOUNTS[@]}"
case_ linux-x86_64-image linux x86_64 qemu 9p "${IMG[@]}"
case_ linux-x86_64-image-mounts linux x86_64 qemu 9p "${IMG[@]}" "${MOUNTS[@]}"
case_ linux-aarch64 linux aarch64 qemu 9p
case_ linux-reverse-sshfs linux x86_64 qemu reverse-sshfs "  mount_type: reverse-sshfs" "${MOUNTS[@]}"
case_ darwin-aarch64 darwin aarch64 vz virtiofs
case_ darwin-aarch64-mounts darwin aarch64 vz virtiofs "${MOUNTS[@]}"
case_ darwin-aarch64-image darwin aarch64 vz virtiofs "${IMG[@]}" "${MOUNTS[@]}"
case_ darwin-x86_64 darwin x86_64 vz virtiofs "${MOUNTS[@]}"
case_ darwin-qemu darwin aarch64 qemu 9p "  vm_type: qemu" "${MOUNTS[@]}"
like "the image case names the local image" "$(cat "$T/out/linux-x86_64-image.yaml")" "location: \"$IMAGE\""
like "the mounts case holds the project mount, writable" "$(cat "$T/out/linux-x86_64-mounts.yaml")" \
  "location: \"$T/work/proj\""
like "and the source tree, read-only" "$(cat "$T/out/linux-x86_64-mounts.yaml")" "location: \"$T/src\""

# The control: the check can fail.  A param no script uses is an error to Lima.
sed 's/^  AgtdSocket: /  AgtUnused: "x"\n  AgtdSocket: /' "$T/out/linux-x86_64.yaml" >"$T/out/bad.yaml"
chown "$LUSER:" "$T/out/bad.yaml"
check "(the control template has the unused param)" grep -q '^  AgtUnused: "x"$' "$T/out/bad.yaml"
run limactl --log-format=json validate "$T/out/bad.yaml"
is "limactl validate refuses a template with an unused param" "$RC" 1
like "with Lima's message" "$ERR" 'param` key `AgtUnused` is not used'
