#!/usr/bin/env bash
# The real opencode in a jail of the stand-in's VM, reached from this machine through
# agt jail port: `agt jail run -d opencode` (its profile runs opencode serve on the jail's
# 127.0.0.1:4096), wait for its "listening on" line in the jail's logs (a connection made
# before it hangs), then HTTP requests to its API through the forwarded port.  Its network
# defaults come from the config (agents.opencode, the user's file and the repository's
# overlay appended), checked against a test HTTP server and with agt jail net.
#
# Needs root and Linux, curl, and opencode ($AGT_OPENCODE_BIN, else the copy ./dev
# installs).  A missing prerequisite is a failure.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
exec </dev/null

: "${AGT_OPENCODE_BIN:=/var/cache/agt/npm/node_modules/opencode-linux-x64/bin/opencode}"
[ -x "$AGT_OPENCODE_BIN" ] || bail "opencode is not installed at $AGT_OPENCODE_BIN (run ./dev deps)"
export AGT_OPENCODE_BIN # the VM's agtd takes opencode from there when it builds the rootfs
command -v curl >/dev/null || bail "curl is needed (apt-get install curl)"
want=$("$AGT_OPENCODE_BIN" --version 2>/dev/null)

MODEL_PID=
PORTER=
e2e_cleanup_hook() {
  [ -n "$PORTER" ] && kill "$PORTER" 2>/dev/null
  [ -n "$MODEL_PID" ] && kill "$MODEL_PID" 2>/dev/null
  return 0
}

# a test HTTP server standing in for a model provider the user configured
python3 "$SRCDIR/guest/tools/model_server.py" --host 127.0.0.1 --port 0 --log "$T/model.log" >"$T/model.out" 2>&1 &
MODEL_PID=$!
wait_until 10 grep -q listening "$T/model.out" || bail "the test model server did not start"
MPORT=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$T/model.out")

# opencode's needs in the user's config, the provider in the repository's overlay
cat >>"$AGT_CONFIG" <<EOF
agents:
  opencode:
    net: allow
    allow:
      - models.dev:443
      - opencode.ai:443
      - "*.opencode.ai:443"
      - registry.npmjs.org:443
EOF
mkdir -p "$WORK/.agt"
cat >"$WORK/.agt/config.yaml" <<EOF
agents:
  opencode:
    allow:
      - 127.0.0.1:$MPORT
EOF

run agt config show
like "config show: the user's allowlist for opencode" "$OUT" "^      - models\.dev:443 +# $AGT_CONFIG:[0-9]+:9"
like "and the repository's entry after it" "$OUT" "^      - 127\.0\.0\.1:$MPORT +# $WORK/\.agt/config\.yaml:4:9"
like "and the mode" "$OUT" "^    net: allow +# $AGT_CONFIG:"

e2e_vm_up
cp "$SRCDIR/rootfs/default.yaml" "$WORK/default.yaml"
run agt rootfs build --no-download "$WORK/default.yaml"
if [ "$RC" != 0 ]; then
  printf '%s\n' "$ERR" | tail -20 | sed 's/^/# /'
  bail "the default rootfs did not build"
fi
ok "the default rootfs builds in the VM ($OUT)"

run agt jail run -d --name oc opencode
is "agt jail run -d opencode starts opencode serve" "$RC" 0
check "its logs say it listens" wait_until 60 sh -c "'$AGT' jail logs oc | grep -q 'listening on'"
like "on the jail's loopback, port 4096" "$(agt jail logs oc)" "listening on http://127\.0\.0\.1:4096"
like "detached, it runs headless, without a terminal" "$(agt jail inspect oc)" '"tty": false'
is "with the network: opencode's defaults, then both config files, in order, each host once" \
  "$(agt jail inspect oc | python3 -c 'import json,sys; n=json.load(sys.stdin)["network"]; print(n["mode"], " ".join(n["allow"]))')" \
  "allow opencode.ai:443 models.opencode.ai:443 registry.npmjs.org:443 models.dev:443 *.opencode.ai:443 127.0.0.1:$MPORT"

"$AGT" jail port oc 4096 0 >"$T/port.out" 2>"$T/port.err" &
PORTER=$!
check "agt jail port listens" wait_until 10 grep -q '^forwarding 127.0.0.1:[0-9]* to port 4096 in jail oc' "$T/port.out"
LPORT=$(sed -n 's/^forwarding 127.0.0.1:\([0-9]*\) .*/\1/p' "$T/port.out")
out=$(curl -s -m 20 "http://127.0.0.1:$LPORT/global/health")
like "GET /global/health through the forwarded port: opencode serve answers" "$out" \
  "\"healthy\":true,\"version\":\"$want\""
is "GET /session: its API answers (no sessions yet)" "$(curl -s -m 20 "http://127.0.0.1:$LPORT/session")" "[]"
like "GET /path: it runs as the jail's user, in /work" "$(curl -s -m 20 "http://127.0.0.1:$LPORT/path")" \
  '"home":"/home/agent".*"directory":"/work"'
kill -INT "$PORTER"
wait "$PORTER"
is "ctrl-c ends agt jail port with status 0" "$?" 0
PORTER=

# the jail's network: the provider from the overlay is reachable through agtd's proxy
run agt jail exec oc -- busybox wget -q -O - "http://127.0.0.1:$MPORT/v1/models"
is "the provider listed in the config answers from inside the jail" "$RC" 0
like "with its models" "$OUT" '"id": "mock"'
run agt jail exec oc -- busybox wget -q -O - http://example.org/
is "a host not listed is refused" "$RC" 1
run agt jail net oc
like "agt jail net shows the allowed request" "$OUT" "^closed +GET +127\.0\.0\.1:$MPORT \(127\.0\.0\.1\) up [0-9]+ down [0-9]+"
like "and the refused one, with the reason" "$OUT" "^blocked +GET +example\.org:80: host not on the jail's allowlist"

run agt jail stop --grace 2000 oc
like "agt jail stop stops opencode" "$OUT" "^oc: exited"
agt jail rm oc >/dev/null
is "no jail is left" "$(agt jail ls --json)" "[]"
