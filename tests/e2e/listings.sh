#!/usr/bin/env bash
# Target local, the listings as docker and podman users read them: --format with Go-template
# fields on every listing that has --json (jail ls, jail inspect, rootfs ls, status,
# doctor), `table` and `json`, and a bad template refused saying what and where; the
# connections each jail's proxy refused, counted in jail ls; jail logs by time (--since,
# --until, -t), across a restart of agtd.
#
# Needs root and Linux (agtd).  A missing prerequisite is a failure ("Bail out!").
set -u

: "${PROBE:?PROBE must name the static probe binary (meson sets it)}"
LOCAL_TEST=listings
. "$(dirname "${BASH_SOURCE[0]}")/local-lib.sh"
[ -x "$PROBE" ] || bail "no probe at $PROBE"
exec </dev/null

local_config
agt() { "$AGT" "$@"; }

run agt -q up
[ "$RC" = 0 ] || bail "agt up: $ERR"
sed "s|@PROBE@|$PROBE|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$T/test-rootfs.yaml"
run agt rootfs build --no-download "$T/test-rootfs.yaml"
[ "$RC" = 0 ] || bail "the test rootfs did not build: $ERR"
cd "$T/projects/app" || bail "cd"
agt -q jail run -d --name up1 -- sleep 300 >/dev/null || bail "jail up1"
agt -q jail run --name ex3 -- /bin/sh -c 'exit 3' >/dev/null

# --- --format on jail ls
run agt jail ls --format '{{.Name}}:{{.State}}:{{.ExitCode}}'
is "agt jail ls --format: a line per jail, docker's field names finding agtd's keys" \
  "$(printf '%s\n' "$OUT" | sort)" "$(printf 'ex3:exited:3\nup1:running:')"
run agt jail ls --format 'table {{.name}}\t{{.state}}\t{{.exit_code}}'
like "table: a header from the fields" "$(printf '%s\n' "$OUT" | head -1)" '^NAME +STATE +EXIT CODE$'
like "and the columns aligned under it" "$OUT" '^up1 +running +$'
like "each row" "$OUT" '^ex3 +exited +3$'
run agt jail ls --format json
is "--format json: one JSON object a line" "$(printf '%s\n' "$OUT" | grep -c '^{"')" 2
run agt jail ls --format '{{if eq .state "running"}}{{.name}} up{{else}}{{.name}} ended {{.exit_code}}{{end}}'
is "if/else and eq" "$(printf '%s\n' "$OUT" | sort)" "$(printf 'ex3 ended 3\nup1 up')"
run agt jail ls --format '{{.name}} {{.nmae}}'
is "a field no jail has: a usage error" "$RC" 2
like "saying which, and where" "$ERR" "^agt: --format: column 13: no field .nmae here"
is "and nothing printed" "$OUT" ""
run agt jail ls --format '{{.name'
is "a template that does not parse: a usage error" "$RC" 2
like "saying what and where" "$ERR" "^agt: jail ls: --format: column 1: unclosed action: '}}' is missing"
like "with the template and a caret under the place" "$ERR" '^    \^$'
run agt jail ls --format '{{uper .name}}'
like "an unknown function: the nearest name" "$ERR" "column 3: unknown function 'uper': did you mean 'upper'\?"

# --- the table agt jail ls asks agtd for: the columns it shows, a row of values per jail
noage() { sed -E 's/^(([^ ]+ +){5})[^ ]+/\1AGE/' | sort; } # AGE: read a second apart
run agt jail ls
is "agt jail ls (agtd's rows of its columns) shows what the jails' short forms show" \
  "$(printf '%s\n' "$OUT" | noage)" "$("$AGTD" ctl -s "$T/agtd.sock" jail ls | noage)"
run agt jail ls -q
is "agt jail ls -q: the names (a table of one column)" "$(printf '%s\n' "$OUT" | sort | tr '\n' ' ')" "ex3 up1 "
rpc() { python3 "$SRCDIR/tests/guest/rpc.py" "$T/agtd.sock" "$@"; }
run rpc jail.ls '{"columns": ["name", "exit_code", "memory", "usage_age_ms", "refused"]}'
is "jail.ls with columns: the columns, and a row each, null where a jail has none" \
  "$(python3 -c 'import json, sys; r = json.load(sys.stdin); print(r["columns"], sorted(
  [x[0], x[1], type(x[2]).__name__, type(x[3]).__name__, x[4]] for x in r["rows"]))' <<<"$OUT")" \
  "['name', 'exit_code', 'memory', 'usage_age_ms', 'refused'] [['ex3', 3, 'NoneType', 'NoneType', 0], ['up1', None, 'int', 'int', 0]]"
run rpc jail.ls '{"columns": ["name", "nmae"]}'
like "an unknown column: an error naming it and the columns there are" "$OUT" \
  "columns\[1\]: 'nmae' is no column \(name, agent, state, "
run rpc jail.ls '{"columns": []}'
like "no columns: an error" "$OUT" "'columns' must be an array of 1 to 64 column names"

# --- the other listings
run agt jail inspect up1 --format '{{.name}} {{.agent}} {{len .argv}}'
is "agt jail inspect --format: the object once" "$OUT" "up1 shell 2"
run agt rootfs ls --format '{{.name}} {{len .id}}'
is "agt rootfs ls --format" "$OUT" "test 64"
run agt status --format '{{.target}} jails={{len .jails}} cgroup={{.agtd.cgroup_version}}'
like "agt status --format" "$OUT" '^local jails=2 cgroup=[12]$'
run agt doctor --format '{{.area}}/{{.check}}'
like "agt doctor --format: a line per row" "$OUT" '^local/agtd$'
run agt doctor --format 'table {{.check}}\t{{.result}}'
like "agt doctor --format table" "$(printf '%s\n' "$OUT" | head -1)" '^CHECK +RESULT$'
run agt doctor --format '{{.Nope}}'
is "agt doctor: a bad field is a usage error" "$RC" 2

# --- agt jail logs by time: --since, --until, --timestamps, from agtd's index of times
wait_log() { # NAME TEXT: until the jail's log holds TEXT (10 s at most)
  for _ in $(seq 1 100); do agt jail logs "$1" 2>/dev/null | grep -q "$2" && return 0; sleep 0.1; done
  return 1
}
agt -q jail run -d --name lg -- /bin/sh -c 'echo one; sleep 2; echo two; sleep 300' >/dev/null
wait_log lg two || bail "jail lg wrote no second line"
STAMP='20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\.[0-9]{9}Z'
run agt jail logs -t lg
like "agt jail logs -t: each line begins with when it was written (RFC 3339, UTC, ns)" "$OUT" "^$STAMP one$"
like "the second line its own time" "$OUT" "^$STAMP two$"
T1=$(printf '%s\n' "$OUT" | awk '$2 == "one" {print $1}')
T2=$(printf '%s\n' "$OUT" | awk '$2 == "two" {print $1}')
check "two seconds apart, as written" python3 -c "
import datetime, sys
p = lambda s: datetime.datetime.strptime(s[:26], '%Y-%m-%dT%H:%M:%S.%f')
sys.exit(0 if 1.9 <= (p('$T2') - p('$T1')).total_seconds() <= 10 else 1)"
run agt jail logs --since "$T2" lg
is "--since TIME: the lines written since then" "$OUT" "two"
run agt jail logs lg --until "$T1"
is "--until TIME: those written before (a line is as old as its start)" "$OUT" "one"
run agt jail logs --since 1h lg
is "--since a duration, as docker takes it" "$OUT" "$(printf 'one\ntwo')"
run agt jail logs --since "$(date -u -d "$(printf '%s' "$T2" | cut -c1-19)" +%s)" --until "$T2" lg
is "--since a Unix time, with --until" "$OUT" "two"
run agt jail logs --since 2099-01-01 lg
is "--since later than any output: nothing" "$OUT" ""
run agt jail logs --since yesterday lg
is "--since that is not a time: a usage error" "$RC" 2
like "saying which forms it takes" "$ERR" "^agt: jail logs: --since 'yesterday' is not a time: give RFC 3339"
run agt jail logs -f --until "$T2" lg
is "-f with --until: a usage error" "$RC" 2
run agt jail logs --offset 4 lg
is "--offset BYTES keeps the byte offset" "$OUT" "two"

# while agtd is down the jail's keeper writes its output and the times: nothing is lost
agt -q jail run -d --name lr -- /bin/sh -c 'echo before; sleep 3; echo during; sleep 300' >/dev/null
wait_log lr before || bail "jail lr wrote nothing"
run agt down
[ "$RC" = 0 ] || bail "agt down: $ERR"
DOWN=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
sleep 4
UP=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
run agt up
[ "$RC" = 0 ] || bail "agt up again: $ERR"
run agt jail logs --since "$DOWN" --until "$UP" -t lr
like "after agtd restarts, the line written while it was down is there, dated then" "$OUT" "^$STAMP during$"
is "and only that one" "$(printf '%s\n' "$OUT" | wc -l)" 1

agt -q jail run -d --name lf -- /bin/sh -c 'echo a; sleep 1; echo b' >/dev/null
run agt jail logs -f -t lf
like "agt jail logs -f -t: stamped lines until the jail exits" "$OUT" "^$STAMP b$"
is "all of them" "$(printf '%s\n' "$OUT" | wc -l)" 2
agt -q jail run --name lo -- /bin/sh -c 'echo x; sleep 1.2; echo y' >/dev/null
L2=$(agt jail logs -t lo | awk '$2 == "y" {print $1}')
run agt jail logs -f --since "$L2" lo
is "agt jail logs -f --since TIME" "$OUT" "y"
agt jail rm --force lg lr lf lo >/dev/null

# --- the refusals of each jail's network proxy: a column of jail ls, and a JSON field
GET='for p in 9 19 29; do wget -q -O - http://127.0.0.1:$p/ >/dev/null 2>&1; done; true'
agt -q jail run --name nr -- /bin/sh -c "$GET" >/dev/null 2>&1
run agt jail ls
like "agt jail ls has a REFUSED column" "$(printf '%s\n' "$OUT" | head -1)" ' REFUSED$'
like "counting what the jail's proxy refused" "$OUT" '^nr +shell +exited +0 .* 3$'
like "and 0 for a jail that tried nothing" "$OUT" '^up1 +shell +running .* 0$'
run agt jail ls --format '{{.name}}={{.refused}}'
is "JSON field refused" "$(printf '%s\n' "$OUT" | sort | tr '\n' ' ')" "ex3=0 nr=3 up1=0 "
is "the same count as agt jail net's blocked lines" "$(agt jail net nr | grep -c '^blocked')" 3
# a running jail: its proxy counts as it refuses; a new agtd counts the log once, then
# counts on in memory
GET2='for p in 9 19; do wget -q -O - http://127.0.0.1:$p/ >/dev/null 2>&1; done; true'
agt -q jail run -d --name nrr -- /bin/sh -c "$GET2; touch /tmp/done; sleep 300" >/dev/null 2>&1
for _ in $(seq 1 100); do agt jail exec nrr -- test -e /tmp/done 2>/dev/null && break; sleep 0.1; done
is "a running jail's refusals, counted as they happen" \
  "$(agt jail ls --format '{{.name}}={{.refused}}' | grep '^nrr=')" "nrr=2"
run agt down
run agt up
is "after agtd restarts, the count holds (counted once in the jail's network log)" \
  "$(agt jail ls --format '{{.name}}={{.refused}}' | sort | tr '\n' ' ')" "ex3=0 nr=3 nrr=2 up1=0 "
agt jail exec nrr -- /bin/sh -c 'wget -q -O - http://127.0.0.1:39/ >/dev/null 2>&1; true'
is "and a refusal of the adopted jail's new proxy adds to it" \
  "$(agt jail ls --format '{{.name}}={{.refused}}' | grep '^nrr=')" "nrr=3"
is "as agt jail net counts them" "$(agt jail net nrr | grep -c '^blocked')" 3
run agt jail stop nrr
run agt jail start nrr
for _ in $(seq 1 100); do [ "$(agt jail net nrr | grep -c '^blocked')" = 5 ] && break; sleep 0.1; done
is "a jail started again keeps its earlier runs' count (3, and 2 of this run)" \
  "$(agt jail ls --format '{{.name}}={{.refused}}' | grep '^nrr=')" "nrr=5"
run agt jail ls --format '{{.name}} {{.usage.age_ms}}'
like "a running jail's usage says how old its figures are (ms)" "$OUT" '^up1 [0-9]+$'

agt jail rm --force up1 ex3 nr nrr >/dev/null
run agt down
is "agt down at the end" "$RC" 0
