#!/usr/bin/env bash
# agt verify end to end, target local: `agt up` starts a private agtd (its own socket, state,
# cgroup and log, so it collides with nothing), then the real `agt verify --jails 3` runs
# the real opencode in 3 jails against the model server installed with agtd (beside it in
# the build tree) and must pass every check.  Then the test breaks things from outside:
# agtd installed elsewhere without its model server (verify says so), then with
# tests/fakes/faulty_model_server.py as its model server, whose faults (a refused turn, a
# file leaked into another workspace, a mount left behind) verify must each catch.
#
# Needs root and Linux (agtd), and the opencode binary (./dev deps installs it).  A missing
# prerequisite is a failure ("Bail out!"), never a skip.
set -u

LOCAL_TEST=verify
. "$(dirname "${BASH_SOURCE[0]}")/local-lib.sh"
case "$(uname -m)" in
  aarch64 | arm64) arch=arm64 ;;
  *) arch=x64 ;;
esac
: "${AGT_OPENCODE_BIN:=/var/cache/agt/npm/node_modules/opencode-linux-$arch/bin/opencode}"
export AGT_OPENCODE_BIN
[ -x "$AGT_OPENCODE_BIN" ] || bail "opencode is not installed at $AGT_OPENCODE_BIN (run ./dev deps)"
command -v python3 >/dev/null || bail "missing python3 (the test model server)"

printf 'agtd:\n  socket: %s\n' "$T/agtd.sock" >"$T/config.yaml"
cd "$T" || bail "cd $T"

# The jail names of the last run's table, in order.
names() { printf '%s\n' "$OUT" | awk '$1 == "start" { print $2 }'; }

# --- agt up starts agtd for target local, and reuses it
run "$AGT" up
is "agt up (target local, no agtd running) succeeds" "$RC" 0
like "it says it started agtd" "$ERR" "starting agtd: $AGTD serve --socket=$T/agtd.sock --state-dir=$T/state"
like "and that agtd answers" "$OUT" "^agtd [0-9.]+ answers at local$"
like "its pid on stdout, with how to stop it" "$OUT" "^agtd started \(pid [0-9]+\); 'agt down' stops it$"
AGTD_PID=$(printf '%s\n' "$OUT" | sed -n 's/^agtd started (pid \([0-9]*\)).*/\1/p')
[ -n "$AGTD_PID" ] || bail "agt up did not say which agtd it started"
like "agtd runs with the cgroup asked for" "$(tr '\0' ' ' <"/proc/$AGTD_PID/cmdline")" "--cgroup=$CG"
like "and logs to the file asked for" "$(cat "$T/agtd.log")" "agtd"
run "$AGT" up
is "a second agt up succeeds" "$RC" 0
unlike "and starts nothing" "$ERR" "starting agtd"

MODEL=$(readlink -f "$(dirname "$AGTD")")/model-server
[ -x "$MODEL" ] || bail "no model server beside agtd at $MODEL (meson builds it)"
B=$(dirname "$(dirname "$AGTD")")
is "meson installs the model server with agtd, in libexecdir/agt/" \
  "$(meson introspect "$B" --installed | python3 -c 'import json, sys
print(sorted(v for k, v in json.load(sys.stdin).items() if k.endswith("/model-server")))')" \
  "['$(meson introspect "$B" --buildoptions | python3 -c 'import json, sys
o = {b["name"]: b["value"] for b in json.load(sys.stdin)}
print(o["prefix"] + "/" + o["libexecdir"])')/agt/model-server']"

run "$AGT" verify --format '{{.check'
is "a template that does not parse: refused before any jail starts" "$RC" 2
is "so nothing ran" "$OUT" ""
like "saying where" "$ERR" "^agt: verify: --format: column 1: unclosed action"

# --- the real run: 3 jails, every check passes
t0=$(date +%s)
run "$AGT" verify --jails 3
t1=$(date +%s)
is "agt verify --jails 3 exits 0" "$RC" 0
echo "# agt verify --jails 3 took $((t1 - t0)) s; its table:"
printf '%s\n' "$OUT" | sed 's/^/#   /'
like "the table has a header" "$OUT" "^CHECK +JAIL +RESULT +DETAIL$"
unlike "no row failed" "$OUT" "^[a-z-]+ +[^ ]+ +FAIL "
like "it says every check passed" "$OUT" "^verify: 3 jails, [0-9]+ checks, [0-9]+ passed, 0 failed"
like "it built the default rootfs, which was missing" "$OUT" "^rootfs +- +ok +'default' built from $SRCDIR/rootfs/default.yaml"
like "it started the model server installed beside agtd on the guest's loopback" "$OUT" "^model +- +ok +$MODEL on the guest's 127\.0\.0\.1:[0-9]+"
is "3 jails started" "$(printf '%s\n' "$OUT" | grep -cE '^start +verify-[0-9a-f]{4}-0[1-3] +ok ')" 3
for check in turn only-here files processes network limits cleanup; do
  is "3 '$check' rows, all ok" "$(printf '%s\n' "$OUT" | grep -cE "^$check +verify-[0-9a-f]{4}-0[1-3] +ok ")" 3
done
like "each turn wrote the jail's own name through the proxy" "$OUT" "^turn +(verify-[0-9a-f]{4}-01) +ok +opencode wrote out\.txt = \1 into its workspace in [0-9.]+ s \(exit 0\); [1-9][0-9]* model requests through the proxy"
like "the turns ran at once" "$OUT" "^concurrent +- +ok +all 3 turns ran at once for [0-9.]+ s"
like "the wall time of the run and of each turn" "$OUT" "^wall +- +ok +whole run [0-9.]+ s: .*3 turns [0-9.]+ s \(each [0-9.]+ to [0-9.]+ s\)"
like "the limits were set, read back and held" "$OUT" "^limits +verify-[0-9a-f]{4}-01 +ok +memory 1\.0 GiB \(peak [0-9.]+ [KMG]iB\) and pids 128 set, read back from agtd and its cgroup; forks stopped after [0-9]+ of 144 tries"
like "the jails saw nothing of each other or of the guest" "$OUT" "^processes +verify-[0-9a-f]{4}-02 +ok +it sees [0-9]+ processes, all its own"
is "no jail is left in agtd" "$("$AGT" jail ls --json 2>/dev/null | tr -d ' \n')" "[]"
is "no workspace is left" "$(ls "$T/state/workspaces" | wc -l)" 0
is "no marker directory or mount of verify is left" "$(ls -d /tmp/agt-verify-"$(names | head -1 | cut -d- -f2)" 2>/dev/null | wc -l)" 0
# (the brackets keep grep's own command line from matching; other tests' servers use 8080;
# only this tree's: another checkout's tests may run beside this one)
left=0
for f in /proc/[0-9]*/cmdline; do
  tr '\0' ' ' 2>/dev/null <"$f" | grep -qE "$MODEL --host 127[.]0[.]0[.]1 --port 0( |\$)" &&
    left=$((left + 1))
done
is "no model server of verify is left" "$left" 0

# --- --json: the rows and the sums as one JSON object
run "$AGT" verify --jails 1 --json
is "agt verify --json passes" "$RC" 0
is "its JSON: 1 jail, nothing failed, the turn row ok" \
  "$(printf '%s\n' "$OUT" | python3 -c 'import json,sys
o = json.load(sys.stdin)
print(o["jails"], o["failed"], o["passed"] == o["checks"], [r["result"] for r in o["rows"] if r["check"] == "turn"])')" \
  "1 0 True ['ok']"

# --- agtd installed elsewhere (prefix/sbin/agtd), without its model server: verify says so
P=$T/prefix
mkdir -p "$P/sbin" "$P/libexec/agt"
cp "$AGTD" "$P/sbin/agtd" || bail "cp $AGTD"
run "$AGT" down
is "agt down stops the build tree's agtd" "$RC" 0
run env AGT_AGTD="$P/sbin/agtd" "$AGT" up
is "agt up starts the copy in $P/sbin" "$RC" 0
like "the copy it is" "$ERR" "starting agtd: $P/sbin/agtd serve"
run "$AGT" verify --jails 1
is "verify with no model server installed with agtd: exit 1" "$RC" 1
like "saying where it looked" "$ERR" "no model server installed with agtd \($P/sbin/agtd, pid [0-9]+\): looked for model-server beside it and in \.\./libexec/agt/"

# --- ... and with a faulty model server in its libexec/agt/: verify catches each fault
printf '#!/bin/sh\nexec python3 %s --server %s --faults %s "$@"\n' \
  "$SRCDIR/tests/fakes/faulty_model_server.py" "$MODEL" "$T/faults" >"$P/libexec/agt/model-server"
chmod 755 "$P/libexec/agt/model-server"
FAULTY=$P/libexec/agt/model-server

: >"$T/faults"
run "$AGT" verify --jails 2
is "with no fault, the installed one passes" "$RC" 0
like "found in ../libexec/agt/ from agtd" "$OUT" "^model +- +ok +$FAULTY on the guest's 127\.0\.0\.1:[0-9]+"

echo "turn 2" >"$T/faults"
run "$AGT" verify --jails 2
is "a jail whose turn fails (its requests refused): exit 1" "$RC" 1
like "its turn fails: no file" "$OUT" "^turn +verify-[0-9a-f]{4}-02 +FAIL +no out\.txt in its workspace .*the agent could not complete its turn.*[1-9][0-9]* model requests allowed, 0 refused"
like "the other jail's turn passes" "$OUT" "^turn +verify-[0-9a-f]{4}-01 +ok "
like "the error names the check and the jail" "$ERR" "verify: 1 of [0-9]+ checks failed: turn verify-[0-9a-f]{4}-02: no out\.txt"

echo "leak 1 2" >"$T/faults"
run "$AGT" verify --jails 2
is "a jail's name written into another workspace (leak 1 2): exit 1" "$RC" 1
like "only-here fails, naming where it leaked" "$OUT" "^only-here +verify-[0-9a-f]{4}-01 +FAIL +its file leaked: its name is also in $T/state/workspaces/verify-[0-9a-f]{4}-02/leaked\.txt"
is "both turns pass" "$(printf '%s\n' "$OUT" | grep -cE '^turn +verify-[0-9a-f]{4}-0[12] +ok ')" 2
like "the error names the check and the jail" "$ERR" "verify: 1 of [0-9]+ checks failed: only-here verify-[0-9a-f]{4}-01: its file leaked"

echo "mount 1 $T/mnt" >"$T/faults"
run "$AGT" verify --jails 2 --format '{{.check}}|{{.jail}}|{{.result}}|{{.detail}}'
is "a mount named after a jail left behind (mount 1): exit 1" "$RC" 1
like "cleanup fails, naming the mount" "$OUT" "^cleanup\\|(verify-[0-9a-f]{4}-01)\\|FAIL\\|left behind after jail\.rm: mount $T/mnt/\1 \(tmpfs\)"
like "the other jail's cleanup passes" "$OUT" "^cleanup\\|verify-[0-9a-f]{4}-02\\|ok\\|"
like "the error names the check and the jail" "$ERR" "verify: 1 of [0-9]+ checks failed: cleanup verify-[0-9a-f]{4}-01: left behind after jail\.rm: mount"
for d in "$T"/mnt/*/; do umount "$d"; done
is "the test removed its mount afterwards" "$(grep -c agt-verify-fault /proc/self/mountinfo)" 0

is "no jail is left in agtd after the failed runs" "$("$AGT" jail ls --json 2>/dev/null | tr -d ' \n')" "[]"
# (w-*: agtd's prepared jails, kept ready for the next run)
is "no cgroup of the jails is left" "$(find /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG" -mindepth 1 -type d ! -name 'w-*' 2>/dev/null | wc -l)" 0
