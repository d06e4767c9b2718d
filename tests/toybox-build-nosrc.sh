#!/usr/bin/env bash
# scripts/toybox-build.sh when apt has no source index for toybox (a fresh Lima VM has no
# deb-src line): it must say why it stops, never end without a word (apt-get source fails
# there, and under pipefail that ended the script silently, the Lima VM's provisioning with
# it).  apt-get is a stand-in that fails `source` as apt does; the deb-src list it would add
# is a file of the test's, there already, so the script stops at once, saying so.
set -u
T=$(mktemp -d /tmp/agt-toybox-nosrc.XXXXXX)
trap 'rm -rf "$T"' EXIT
SRCDIR=${SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
mkdir "$T/bin"
cat >"$T/bin/apt-get" <<'EOS'
#!/bin/sh
case "$1" in
  source) echo "E: You must put some 'deb-src' URIs in your sources.list" >&2; exit 100 ;;
  *) exit 0 ;;
esac
EOS
for t in dpkg-source musl-gcc make file; do printf '#!/bin/sh\nexit 0\n' >"$T/bin/$t"; done
chmod 0755 "$T/bin"/*
: >"$T/agt-deb-src.sources"
echo "1..2"
out=$(PATH="$T/bin:$PATH" AGT_TOYBOX_CACHE="$T/cache" AGT_TOYBOX_DEB_SRC_LIST="$T/agt-deb-src.sources" \
  bash "$SRCDIR/scripts/toybox-build.sh" 2>&1)
rc=$?
if [ "$rc" -ne 0 ]; then echo "ok 1 - it fails"; else echo "not ok 1 - it fails (exit $rc)"; fi
want="agt: toybox: error: apt has no source package of toybox, though $T/agt-deb-src.sources exists"
if [ "$out" = "$want" ]; then
  echo "ok 2 - saying why"
else
  echo "not ok 2 - saying why"
  printf '#   got:  %s\n#   want: %s\n' "$out" "$want"
  exit 1
fi
