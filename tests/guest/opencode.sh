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
  wget -Y off -q -O - http://127.0.0.1:4096/global/health; echo
  wget -Y off -q -O - "http://127.0.0.1:4096/path" | grep -o "\"home\":\"[^\"]*\""
  kill %1' >/dev/null
out=$(ctl jail wait srv)
logs=$(ctl jail logs srv)
like "the serve jail exits 0" "$out" "exit code 0"
like "opencode serve answers on the jail's loopback" "$logs" "\"healthy\":true,\"version\":\"$want\""
like "its home is the jail user's" "$logs" "\"home\":\"/home/agent\""

# opencode serve in a jail, reached from this machine through jail port (its default
# command is serve on the jail's 127.0.0.1:4096); wait for its "listening" line first.
ctl jail run --name fwd --rootfs "$ROOT" --agent opencode >/dev/null
for _ in $(seq 1 150); do ctl jail logs fwd | grep -q "listening on" && break; sleep 0.2; done
"$AGTD" ctl -s "$SOCK" jail port fwd 4096 0 >"$T/port.out" 2>&1 &
porter=$!
for _ in $(seq 1 50); do grep -q forwarding "$T/port.out" && break; sleep 0.1; done
lport=$(sed -n 's/^forwarding 127.0.0.1:\([0-9]*\) .*/\1/p' "$T/port.out")
out=$(curl -s -m 10 "http://127.0.0.1:$lport/global/health")
like "jail port reaches opencode serve inside the jail" "$out" "\"healthy\":true"
out=$(curl -s -m 10 "http://127.0.0.1:$lport/session")
is "and its API answers (no sessions yet)" "$out" "[]"
kill $porter 2>/dev/null
ctl jail rm fwd --force >/dev/null

# On a terminal the opencode profile runs opencode's own TUI, as if run by hand: attach
# through a real pty (tmux) and see its prompt and working directory.
if command -v tmux >/dev/null; then
  TM="tmux -L agt-oc-$$"
  $TM new-session -d -s tui -x 120 -y 35 \
    "$AGTD ctl -s $SOCK jail run --name tui --rootfs $ROOT --agent opencode --attach; sleep 30"
  for _ in $(seq 1 150); do $TM capture-pane -p -t tui | grep -q "Ask anything" && break; sleep 0.2; done
  screen=$($TM capture-pane -p -t tui)
  like "opencode's TUI runs on the jail's terminal" "$screen" "Ask anything"
  like "in the jail's /work" "$screen" "/work"
  $TM kill-server 2>/dev/null
  ctl jail rm tui --force >/dev/null
else
  not_ok "tmux is needed to check opencode's TUI (apt-get install tmux)"
fi

# A real agent turn against the test model server, reachable only because it is on the
# jail's allowlist: its write tool writes a file into the jail's workspace.
command -v ip >/dev/null || bail "ip (iproute2) is needed for the test provider's namespace"
provider_start
CFG='{"$schema":"https://opencode.ai/config.json","provider":{"local":{"npm":"@ai-sdk/openai-compatible","name":"Local test model","options":{"baseURL":"http://'$PROVIDER':8080/v1","apiKey":"sk-local"},"models":{"mock":{"name":"Mock","tool_call":true}}}},"model":"local/mock","small_model":"local/mock","autoupdate":false,"share":"disabled","permission":{"bash":"allow","edit":"allow","webfetch":"deny"}}'
ctl jail run --name turn --rootfs "$ROOT" --agent opencode --allow "$PROVIDER:8080" \
  --env OPENCODE_CONFIG_CONTENT="$CFG" -- opencode run --dir /work "AGT-WRITE out.txt turn-ok" >/dev/null
like "opencode run completes a turn through the proxy" "$(ctl jail wait turn)" "exit code 0"
is "its tool call wrote the file into the jail's workspace" \
  "$(cat "$STATE/workspaces/turn/out.txt" 2>/dev/null)" "turn-ok"
like "the model saw the tool's result" "$(ctl jail logs turn)" "done: tool ran"
like "the proxy logged the model requests" "$(ctl jail net turn)" "^closed +POST +$PROVIDER:8080"

ctl jail run --name noturn --rootfs "$ROOT" --agent opencode \
  --env OPENCODE_CONFIG_CONTENT="$CFG" -- opencode run --dir /work "AGT-WRITE out.txt nope" >/dev/null
like "without the provider on its allowlist the turn fails" "$(ctl jail wait noturn)" "exit code [1-9]"
like "cleanly, saying why" "$(ctl jail logs noturn)" "Forbidden: agt: host not on the jail's allowlist"
check "and wrote nothing" test ! -e "$STATE/workspaces/noturn/out.txt"

for j in ver srv turn noturn; do ctl jail rm "$j" >/dev/null; done
is "no mount is left" "$(leftovers)" 0
is "no cgroup is left" "$(cgroup_dirs)" 0
