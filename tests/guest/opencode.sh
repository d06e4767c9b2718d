#!/usr/bin/env bash
# The real opencode binary in a jail built from the default manifest: --version, and
# `opencode serve` answering on the jail's loopback.
. "$(dirname "$0")/lib.sh"

: "${AGT_OPENCODE_BIN:=/var/cache/agt/npm/node_modules/opencode-linux-x64/bin/opencode}"
[ -x "$AGT_OPENCODE_BIN" ] || bail "opencode is not installed at $AGT_OPENCODE_BIN (run ./dev deps)"
export AGT_OPENCODE_BIN
want=$("$AGT_OPENCODE_BIN" --version 2>/dev/null)

agtd_start
out=$(ctl rootfs build "$SRCDIR/rootfs/default.yaml" --no-download 2>&1) || {
  printf '%s\n' "$out" | sed 's/^/# /'
  bail "the default rootfs did not build"
}
ROOT=$(printf '%s' "$out" | cut -d' ' -f1)
ok "the default rootfs builds ($out)"

ctl jail run --name ver --rootfs "$ROOT" --agent opencode -- opencode --version >/dev/null
like "opencode --version exits 0 in the jail" "$(ctl jail wait ver)" "exit code 0"
is "and prints the installed version" "$(ctl jail logs ver)" "$want"

# serve: wait for its "listening" line before connecting (a connection made earlier hangs,
# see reference/opencode.md), then ask its health endpoint over the jail's loopback.
ctl jail run --name srv --rootfs "$ROOT" --agent opencode -- /bin/sh -c '
  opencode serve --hostname 127.0.0.1 --port 4096 > /tmp/serve.log 2>&1 &
  i=0
  until grep -q "listening on" /tmp/serve.log; do
    sleep 0.2; i=$((i + 1))
    if [ $i -gt 300 ]; then echo "serve never listened"; cat /tmp/serve.log; exit 3; fi
  done
  wget -q -O - http://127.0.0.1:4096/global/health; echo
  wget -q -O - "http://127.0.0.1:4096/path" | grep -o "\"home\":\"[^\"]*\""
  kill %1' >/dev/null
out=$(ctl jail wait srv)
logs=$(ctl jail logs srv)
like "the serve jail exits 0" "$out" "exit code 0"
like "opencode serve answers on the jail's loopback" "$logs" "\"healthy\":true,\"version\":\"$want\""
like "its home is the jail user's" "$logs" "\"home\":\"/home/agent\""

ctl jail rm ver >/dev/null
ctl jail rm srv >/dev/null
is "no mount is left" "$(leftovers)" 0
is "no cgroup is left" "$(cgroup_dirs)" 0
