#!/usr/bin/env bash
# Target local, `agt rootfs update`: with no input changed nothing is rebuilt (the build's
# info.json is not touched); a new toybox build behind the manifest's "current" link gives a
# new build, and the update prints that input old -> new (its versioned path and hash), the
# libraries it brings and the applet links that moved; a jail started before keeps the old
# build, a jail started after gets the new one; an edited manifest is an input too; a
# manifest that went away is a clear error, and skipped with a note when no name is given.
#
# Needs root, Linux and the project's toybox build (scripts/toybox-build.sh, ./dev deps).
set -u

LOCAL_TEST=rootfs-update
. "$(dirname "${BASH_SOURCE[0]}")/local-lib.sh"
exec </dev/null

TOYBOX=${AGT_TOYBOX_CACHE:-/var/cache/agt/toybox}/current/toybox
[ -x "$TOYBOX" ] || bail "no toybox build at $TOYBOX: run scripts/toybox-build.sh (./dev deps does)"
[ -x /usr/bin/toybox ] || bail "no /usr/bin/toybox (apt-get install toybox): the 'new' build of this test"
[ -x /bin/busybox ] || bail "no /bin/busybox (apt-get install busybox-static)"

mkdir -p "$T/projects/app" "$T/toybox/A" "$T/toybox/B"
chmod 777 "$T/projects/app"
cat >"$T/config.yaml" <<CFG
agtd:
  socket: $T/agtd.sock
vm:
  mounts:
    - location: $T/projects
      writable: true
jail:
  rootfs: upd
CFG
agt() { "$AGT" "$@"; }

# The cache's layout: versioned directories and a "current" link, as scripts/toybox-build.sh
# makes them. A is the project's static build, B Debian's dynamic one (another binary, with
# libraries and other applets).
cp "$TOYBOX" "$T/toybox/A/toybox"
cp /usr/bin/toybox "$T/toybox/B/toybox"
ln -s A "$T/toybox/current"
write_manifest() { # $1: the content of /etc/motd
  cat >"$T/upd.yaml" <<YAML
name: upd
dirs: [/dev, /proc, { path: /tmp, mode: "1777" }, /work]
files:
  - path: /bin/toybox
    applets: toybox
    sources: [{ host: $T/toybox/current/toybox }]
  - path: /bin/busybox
    applets: busybox
    sources: [{ host: /bin/busybox }]
  - path: /bin/sh
    symlink: busybox
  - path: /etc/motd
    content: "$1\n"
YAML
}
write_manifest one
info_of() { cat "$T/state/rootfs/$1/info.json"; }

run agt -q up
[ "$RC" = 0 ] || bail "agt up: $ERR"
run agt rootfs build --no-download "$T/upd.yaml"
[ "$RC" = 0 ] || bail "the rootfs did not build: $ERR"
ID1=$(printf '%s\n' "$OUT" | awk '{print $1}')
like "built" "$ID1" '^[0-9a-f]{64}$'
info_of "$ID1" | grep -q '"inputs"' && ok "its info.json records the inputs" ||
  not_ok "its info.json records the inputs"
BEFORE=$(info_of "$ID1")

# --- nothing changed: nothing rebuilt
run agt rootfs update upd
is "update with nothing changed: exit 0" "$RC" 0
is "says so, naming the build" "$OUT" "upd: up to date (${ID1:0:12}), nothing rebuilt"
is "no build was made (info.json untouched)" "$(info_of "$ID1")" "$BEFORE"
is "the store holds one build" "$(agt rootfs ls -q)" "$ID1"
run agt rootfs update
is "without NAME: every name in the store, here the one" "$OUT" \
  "upd: up to date (${ID1:0:12}), nothing rebuilt"

# a jail on the old build, running through the update
cd "$T/projects/app" || bail "cd"
agt -q jail run -d --name old1 -- sleep 300 >/dev/null || bail "jail old1"

# --- a new toybox build behind "current"
ln -sfn B "$T/toybox/current"
run agt rootfs update upd
is "a changed input: exit 0" "$RC" 0
ID2=$(agt rootfs ls -q | grep -v "$ID1")
like "a new build" "$ID2" '^[0-9a-f]{64}$'
like "the first line: old -> new, and that running jails stay" "$(printf '%s\n' "$OUT" | head -1)" \
  "^upd: ${ID1:0:12} -> ${ID2:0:12} \([0-9]+ files, [0-9.]+ MB\); running jails stay on ${ID1:0:12}\$"
A_SHA=$(sha256sum "$T/toybox/A/toybox" | cut -c1-12)
B_SHA=$(sha256sum "$T/toybox/B/toybox" | cut -c1-12)
is "the toybox input: its versioned path and hash, old -> new" \
  "$(printf '%s\n' "$OUT" | grep '^  /bin/toybox:')" \
  "  /bin/toybox: host $T/toybox/current/toybox ($T/toybox/A/toybox) (sha256 $A_SHA) -> host $T/toybox/current/toybox ($T/toybox/B/toybox) (sha256 $B_SHA)"
like "the libraries the dynamic one brings" "$OUT" \
  '^  /usr/lib/[a-z0-9_-]+/libc\.so\.6: \(none\) -> host /.*libc\.so\.6 \(sha256 [0-9a-f]{12}\)$'
like "the applet links that moved" "$OUT" '^  /bin/toybox applets: [0-9]+ applet links to toybox'
unlike "inputs that did not change are not listed" "$OUT" '^  (/etc/motd|/bin/sh|/bin/busybox):'
run agt jail inspect old1 --json
like "the running jail stays on the old build" "$OUT" "\"rootfs\": *\"$ID1\""
agt -q jail run --name new1 -- /bin/toybox true >/dev/null
run agt jail inspect new1 --json
like "a new jail gets the new build" "$OUT" "\"rootfs\": *\"$ID2\""
run agt rootfs update upd
is "updated again with nothing changed: nothing rebuilt" "$OUT" \
  "upd: up to date (${ID2:0:12}), nothing rebuilt"

# --- the manifest itself is an input
write_manifest two
run agt rootfs update upd
like "an edited manifest: rebuilt" "$(printf '%s\n' "$OUT" | head -1)" "^upd: ${ID2:0:12} -> "
is "and only that entry changed" "$(printf '%s\n' "$OUT" | sed 1d | sed 's/sha256 [0-9a-f]*/sha256 X/g')" \
  "  /etc/motd: inline content (sha256 X) -> inline content (sha256 X)"

# --- back to the first toybox and manifest: the first build again, kept, not copied anew
ln -sfn A "$T/toybox/current"
write_manifest one
run agt rootfs update upd
like "an input back as it was: the earlier build reused" "$(printf '%s\n' "$OUT" | head -1)" \
  " -> ${ID1:0:12} .*an earlier build reused"

# --- the manifest went away
mv "$T/upd.yaml" "$T/upd.yaml.gone"
run agt rootfs update upd
is "a manifest that went away: exit 1" "$RC" 1
like "saying which build and which path, and what to do" "$OUT$ERR" \
  "upd: error: rootfs 'upd' \(${ID1:0:12}\) was built from '$T/upd.yaml', which is gone: build it again from a manifest \(agt rootfs build FILE\), or remove it \(agt rootfs rm ${ID1:0:12}\)"
run agt rootfs update
is "without a name, a build whose manifest went away is skipped: exit 0" "$RC" 0
like "with a note" "$OUT" "^upd: skipped: rootfs 'upd' \(${ID1:0:12}\) was built from '$T/upd.yaml', which is gone: "
run agt rootfs update nosuch
is "an unknown name: exit 1" "$RC" 1
like "saying so" "$ERR" "nosuch"
