#!/usr/bin/env bash
# agt verify --agent, end to end, target local: `agt up` starts a private agtd, then
# `agt verify --agent all` builds each agent's layers (npm, pinned by its profile) and runs
# real turns of every agent that speaks a model API, 2 jails of each at once, against the
# model server installed with agtd: each must write its file into its own workspace.  Then
# two profiles of the test's own: one that insists on a host besides the model (it must be
# reported as skipped, saying which host, never as passed), one that fails (it must fail).
#
# Needs root, Linux and npm's registry (the layers are built from it).  A missing
# prerequisite is a failure ("Bail out!"), never a skip.
set -u

LOCAL_TEST=verify-agents
. "$(dirname "${BASH_SOURCE[0]}")/local-lib.sh"
command -v npm >/dev/null || bail "missing npm (agtd builds the agents' layers with it; ./dev deps)"
command -v python3 >/dev/null || bail "missing python3 (the model server)"

printf 'agtd:\n  socket: %s\n' "$T/agtd.sock" >"$T/config.yaml"
cd "$T" || bail "cd $T"
run "$AGT" up
is "agt up starts agtd" "$RC" 0

# --- every agent: 2 jails of each at once, each writing its file
AGENTS="claude codex gemini opencode pi"
t0=$(date +%s)
run "$AGT" verify --agent all --timeout 10m
t1=$(date +%s)
is "agt verify --agent all exits 0" "$RC" 0
echo "# agt verify --agent all took $((t1 - t0)) s (its layers built on the way when missing); its table:"
printf '%s\n' "$OUT" | sed 's/^/#   /'
printf '%s\n' "$ERR" | grep -v ' turns done$' | sed 's/^/#   /'
for a in $AGENTS; do
  like "$a: its layers are there or were built" "$OUT" "^layers +$a +ok "
  is "$a: 2 jails started" "$(printf '%s\n' "$OUT" | grep -cE "^start +verify-[0-9a-f]{4}-[0-9]{2} +ok +$a started ")" 2
  is "$a: 2 turns, each writing its own name into its own workspace" \
    "$(printf '%s\n' "$OUT" | grep -cE "^turn +(verify-[0-9a-f]{4}-[0-9]{2}) +ok +$a wrote out\.txt = \1 into its workspace ")" 2
  like "$a: its row says both turns wrote their files offline" "$OUT" \
    "^agent +$a +ok +$a .*: 2 of 2 turns wrote their files offline, in [0-9.]+ to [0-9.]+ s; [1-9][0-9]* model requests"
done
is "10 jails, nothing failed, nothing skipped" \
  "$(printf '%s\n' "$OUT" | grep -oE '^verify: [0-9]+ jails, [0-9]+ checks, [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' |
    awk '{ print $2, ($4 == $6), $8, $10 }')" "10 1 0 0"
unlike "no row failed or was skipped" "$OUT" "^[a-z-]+ +[^ ]+ +(FAIL|skip) "
like "the turns ran at once" "$OUT" "^concurrent +- +ok +all 10 turns ran at once"
is "no jail is left in agtd" "$("$AGT" jail ls --json 2>/dev/null | tr -d ' \n')" "[]"

# --- an agent that cannot run offline is skipped, saying what it insists on; one that fails, fails
mkdir -p "$T/agents"
cat >"$T/agents/needs-login.yaml" <<'EOF'
name: needs-login
description: a test agent that insists on a login server before its turn
command: [/bin/sh]
batch: [/bin/sh, -c, "sleep 3; wget -q -O /dev/null http://login.agt-test.example/ || exit 4; echo {prompt}"]
api: openai-chat
EOF
cat >"$T/agents/broken.yaml" <<'EOF'
name: broken
description: a test agent that fails its turn with the model in reach
command: [/bin/sh]
batch: [/bin/sh, -c, "sleep 3; echo 'broken: no such model' >&2; exit 3; echo {prompt}"]
api: openai-chat
EOF
run "$AGT" verify --agent needs-login,broken --jails 1
is "a failing agent makes verify exit 1" "$RC" 1
like "the agent that needs a login server is skipped, naming the host" "$OUT" \
  "^turn +verify-[0-9a-f]{4}-01 +skip +needs-login cannot run offline here: it insists on login\.agt-test\.example:80 \(refused: only the model is on its allowlist\); needs-login exited 4 after"
like "and its agent row says skipped, never ok" "$OUT" \
  "^agent +needs-login +skip +skipped: needs-login cannot run offline: it insists on login\.agt-test\.example:80$"
like "the broken agent's turn fails, with its last words" "$OUT" \
  "^turn +verify-[0-9a-f]{4}-02 +FAIL +no out\.txt in its workspace .*broken exited 3 after .*its last words: 'broken: no such model'"
like "and its agent row fails" "$OUT" "^agent +broken +FAIL +0 of 1 turns wrote their files"
like "the sums count the skip apart" "$OUT" "^verify: 2 jails, [0-9]+ checks, [0-9]+ passed, 2 failed, 2 skipped"
like "the error names the failures only" "$ERR" "verify: 2 of [0-9]+ checks failed: turn verify-[0-9a-f]{4}-02: .*; agent broken: 0 of 1"

run "$AGT" verify --agent shell
is "an agent that speaks no model API: a usage error" "$RC" 2
like "saying so" "$ERR" "--agent shell: its profile \(.*shell\.yaml\) speaks no model API"
run "$AGT" verify --agent nosuch
is "an unknown agent: a usage error" "$RC" 2
like "saying so" "$ERR" "--agent nosuch: no agent profile of that name"

is "no jail is left in agtd after the failed run" "$("$AGT" jail ls --json 2>/dev/null | tr -d ' \n')" "[]"
is "no cgroup of the jails is left" "$(find /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG" -mindepth 1 -type d ! -name 'w-*' 2>/dev/null | wc -l)" 0
