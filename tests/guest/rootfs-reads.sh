#!/usr/bin/env bash
# rootfs builds read host files as the client that asks, not as root: a member of agtd's
# socket group may build from what it may read, and is refused, with a clear error, a
# manifest, a source, a tree or a library it may not read (a root-only file never lands in
# a rootfs, where a jail would read it); root still reads everything; the store stays
# root's. agtd keeps serving after each refusal.
. "$(dirname "$0")/lib.sh"

command -v setpriv >/dev/null || bail "setpriv is needed (apt-get install util-linux)"
GRP=agt-test-grp
MEMBER=agt-test-member
groupadd -f "$GRP" || bail "groupadd $GRP"
id "$MEMBER" >/dev/null 2>&1 ||
  useradd --system --no-create-home --gid "$GRP" --shell /usr/sbin/nologin "$MEMBER" ||
  bail "useradd $MEMBER"
MUID=$(id -u "$MEMBER")
member_ctl() { setpriv --reuid="$MEMBER" --regid="$GRP" --init-groups "$AGTD" ctl -s "$SOCK" "$@"; }

P=$T/pub
mkdir -p "$P/private"
chmod 755 "$P"
chmod 700 "$P/private"
echo "public text" >"$P/public"
chmod 644 "$P/public"
echo "SECRET-$$-root-only" >"$P/secret"
chmod 600 "$P/secret"
echo "SECRET-$$-in-a-private-dir" >"$P/private/data"
chmod 644 "$P/private/data"
manifest() { # NAME, then the files: entries (YAML lines)
  local name=$1
  shift
  { printf 'name: %s\nfiles:\n' "$name"; printf '%s\n' "$@"; } >"$P/$name.yaml"
  chmod 644 "$P/$name.yaml"
}
store_has_secret() { grep -rqs "SECRET-$$" "$STATE/rootfs"; }

agtd_start --group "$GRP"
is "the member reaches agtd" "$(member_ctl hello | cut -d, -f1 | cut -d' ' -f1)" agtd

manifest ok '  - path: /etc/public' '    sources: [{ host: '"$P/public"' }]'
out=$(member_ctl rootfs build "$P/ok.yaml" --no-download 2>&1)
like "a member builds from files it may read" "$out" '^[0-9a-f]{64} ok '
id_ok=$(printf '%s\n' "$out" | cut -d' ' -f1)
is "the build's files are root's, not the member's" \
  "$(stat -c %U "$STATE/rootfs/$id_ok/root/etc/public" 2>&1)" root

# a root-only file named as a host source
manifest shadow '  - path: /etc/stolen' '    sources: [{ host: '"$P/secret"' }]'
out=$(member_ctl rootfs build "$P/shadow.yaml" --no-download 2>&1)
rc=$?
check "a 0600 root file in a member's manifest is refused (rc $rc)" test "$rc" -ne 0
like "saying which file, where, and whose rights" "$out" \
  "$P/shadow.yaml:4:[0-9]+: /etc/stolen: '$P/secret' is not readable by uid $MUID, who asked for this build \(Permission denied\)"
check "and nothing of it is in the store" sh -c "! grep -rqs SECRET-$$ '$STATE/rootfs'"
is "no build of that name exists" "$(ctl rootfs ls | awk '$2 == "shadow"' | wc -l)" 0

# a tree, and a library, in a directory the member cannot enter
manifest tree '  - path: /opt/private' '    tree: true' '    sources: [{ host: '"$P/private"' }]'
out=$(member_ctl rootfs build "$P/tree.yaml" --no-download 2>&1)
check "a tree the member may not read is refused" test $? -ne 0
like "saying so" "$out" "'$P/private' is not readable by uid $MUID"
manifest lib '  - path: /etc/public' '    sources: [{ host: '"$P/public"' }]'
printf 'libraries:\n  - %s\n' "$P/private/data" >>"$P/lib.yaml"
out=$(member_ctl rootfs build "$P/lib.yaml" --no-download 2>&1)
check "a library in a directory the member may not enter is refused" test $? -ne 0
like "saying which" "$out" "lib.yaml:6:5: library '$P/private/data' .*: Permission denied"
check "nothing of the private directory is in the store" sh -c "! grep -rqs SECRET-$$ '$STATE/rootfs'"

# the manifest itself
manifest mine '  - path: /etc/public' '    sources: [{ host: '"$P/public"' }]'
chmod 600 "$P/mine.yaml"
out=$(member_ctl rootfs build "$P/mine.yaml" --no-download 2>&1)
check "a manifest the member may not read is refused" test $? -ne 0
like "saying so" "$out" "mine.yaml.*Permission denied"
unlike() {
  if printf '%s\n' "$2" | grep -Eq -- "$3"; then not_ok "$1"; else ok "$1"; fi
}
unlike "quoting none of it" "$out" "/etc/public"

like "agtd still serves the member" "$(member_ctl hello)" "^agtd "
# root may read what it likes, and its build's thread is root again after the refusals
out=$(ctl rootfs build "$P/shadow.yaml" --no-download 2>&1)
like "root's own build of the same manifest works" "$out" '^[0-9a-f]{64} shadow '
out=$(member_ctl rootfs build "$P/ok.yaml" --no-download 2>&1)
like "and the member's builds still work after it" "$out" "^$id_ok ok "
