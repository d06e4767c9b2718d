#!/usr/bin/env bash
# release-formula.sh URL_BASE: make agt's release tarball with `meson dist` (from the
# committed tree, without running the tests) and write its url (URL_BASE/agt-VERSION.tar.xz)
# and sha256 into Formula/agt.rb.  Publish the tarball at that url, then commit the formula.
set -euo pipefail
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
base=${1:?usage: release-formula.sh URL_BASE (https://.../releases/download/vX.Y.Z)}
[[ $base == https://* ]] || { echo "release-formula.sh: URL_BASE must be https" >&2; exit 2; }
version=$(sed -n "s/^  version : '\(.*\)',\$/\1/p" "$ROOT/meson.build")
dir="$ROOT/build-dist"
[[ -f $dir/build.ninja ]] || meson setup "$dir" "$ROOT" -Dtests=false >/dev/null
meson dist -C "$dir" --no-tests --formats xztar
tarball="$dir/meson-dist/agt-$version.tar.xz"
sha=$(sha256sum "$tarball" | cut -d' ' -f1)
sed -i -e "s|^  url \".*\"\$|  url \"${base%/}/agt-$version.tar.xz\"|" \
  -e "s|^  sha256 \".*\"\$|  sha256 \"$sha\"|" "$ROOT/Formula/agt.rb"
echo "agt $version: $tarball"
echo "sha256 $sha, written into Formula/agt.rb with url ${base%/}/agt-$version.tar.xz"
