#!/usr/bin/env bash
# jail.tools through agt, target local: guest programs named in the config (a name found on
# the guest's PATH) or by --tool (an absolute path) are copied into the jail with their
# shared libraries, as a layer over a rootfs that has no libc at all, and run there; the
# same tools reuse that layer, other tools get another; a tool that is missing, not a
# regular file or not a name is refused naming the config's file:line:column or the flag; a
# repository's overlay may name tools but not paths.
#
# Needs root and Linux (agtd), jq and rg on this machine (./dev installs them).  A missing
# prerequisite is a failure ("Bail out!").
set -u

: "${PROBE:?PROBE must name the static probe binary (meson sets it)}"
LOCAL_TEST=tools
. "$(dirname "${BASH_SOURCE[0]}")/local-lib.sh"
[ -x "$PROBE" ] || bail "no probe at $PROBE"
exec </dev/null
for p in /usr/bin/jq /usr/bin/rg; do
  [ -x "$p" ] || bail "no $p on this machine (./dev deps installs it)"
done
ldd /usr/bin/jq | grep -q 'libjq\.so' || bail "/usr/bin/jq is not linked to libjq: the test wants a tool with a library of its own"

local_config
P=$T/projects
mkdir -p "$P/app/.git" "$P/app/.agt"
cat >>"$T/config.yaml" <<CFG
  tools:
    - jq
CFG
agt() { "$AGT" "$@"; }

run agt -q up
[ "$RC" = 0 ] || bail "agt up failed: $ERR"
sed "s|@PROBE@|$PROBE|" "$SRCDIR/tests/guest/test-rootfs.yaml" >"$T/test-rootfs.yaml"
run agt rootfs build --no-download "$T/test-rootfs.yaml"
[ "$RC" = 0 ] || bail "the test rootfs did not build: $ERR"
cd "$P/app" || bail "cd"

run agt jail run --rm -- /bin/sh -c 'ls /usr/local/bin /lib/x86_64-linux-gnu /lib/aarch64-linux-gnu 2>/dev/null | grep -c "^libc\.so" ; echo "{\"a\": [40, 2]}" | jq ".a | add"'
is "a tool of jail.tools runs in the jail (jq, with libjq and libonig, over a rootfs without libc)" \
  "$(printf '%s\n' "$OUT" | tail -1)" 42
like "agt says it builds the tools' layer once" "$ERR" \
  "building layer tools-[0-9a-f]{16} \\(jail.tools: jq; once, then shared"
run agt rootfs ls --json
is "one tools layer in the store" "$(printf '%s' "$OUT" | grep -Eo '"tools-[0-9a-f]{16}"' | sort -u | wc -l)" 1
layer=$(printf '%s' "$OUT" | grep -Eo '"tools-[0-9a-f]{16}"' | head -1 | tr -d '"')

run agt jail run --rm --name t2 -- /bin/sh -c 'command -v jq; ls /usr/local/bin'
is "the next run with the same tools" "$RC" 0
unlike "... builds nothing" "$ERR" "building layer"
is "... finds jq at /usr/local/bin" "$OUT" "/usr/local/bin/jq
jq"
run agt rootfs ls --json
is "... and the store still has that one layer" \
  "$(printf '%s' "$OUT" | grep -Eo '"tools-[0-9a-f]{16}"' | sort -u | tr -d '"\n')" "$layer"

run agt jail create --name t3 --tool /usr/bin/rg
is "--tool adds to jail.tools" "$RC" 0
run agt rootfs ls --json
is "... other tools, another layer" "$(printf '%s' "$OUT" | grep -Eo '"tools-[0-9a-f]{16}"' | sort -u | wc -l)" 2
run agt jail inspect --json t3
like "... which the jail stands on" "$(printf '%s' "$OUT" | tr -d ' \n')" '"layers":\["[0-9a-f]{64}"\]'
agt jail rm t3 >/dev/null
run agt jail run --rm --tool /usr/bin/rg -- /bin/sh -c 'printf "x\nneedle\n" > /tmp/f; rg -c needle /tmp/f; jq -n 1+1'
is "a tool named by its path runs, beside jail.tools' own" "$OUT" "1
2"

# --- errors ---------------------------------------------------------------------------
run agt jail run --rm --tool agt-no-such-tool -- true
is "a tool that is not on the guest is refused" "$RC" 1
like "naming the flag, the tool and every place looked in" "$ERR" \
  "jail.tools entry 'agt-no-such-tool' \\(flag --tool\\): no source found for '/usr/local/bin/agt-no-such-tool' \\(tried host /usr/local/sbin/agt-no-such-tool: No such file or directory;.*host /bin/agt-no-such-tool: No such file or directory\\)"
run agt jail run --rm --tool /etc -- true
like "a path that is not a regular file is refused" "$ERR" \
  "jail.tools entry '/etc' \\(flag --tool\\): no source found for '/usr/local/bin/etc' \\(tried host /etc: not a regular file\\)"
run agt jail run --rm --tool ../x -- true
is "a tool that is neither a name nor an absolute path is refused" "$RC" 2
like "... before anything runs" "$ERR" "--tool '../x': a name does not start with '.' or '-'"
run agt jail run --rm --tool /usr/bin/../bin/jq -- true
like "an unclean path too" "$ERR" "--tool '/usr/bin/../bin/jq': a path must be clean"

cp "$T/config.yaml" "$T/config.good"
printf '    - agt-missing-too\n' >>"$T/config.yaml"
run agt jail run --rm -- true
like "a missing tool of the config names its file:line:column" "$ERR" \
  "jail.tools entry 'agt-missing-too' \\($T/config.yaml:[0-9]+:7\\): no source found"
printf '    - "a b"\n' >>"$T/config.yaml"
run agt jail run --rm -- true
is "a bad name in the config is a config error" "$RC" 2
like "... naming its file:line:column" "$ERR" "$T/config.yaml:[0-9]+:7: 'jail.tools' entry 'a b': a name is made of"
cp "$T/config.good" "$T/config.yaml"

printf 'jail:\n  tools:\n    - /usr/bin/jq\n' >"$P/app/.agt/config.yaml"
run agt jail run --rm -- true
is "a repository's overlay may not name a path" "$RC" 2
like "... saying where and why" "$ERR" \
  "$P/app/.agt/config.yaml:3:7: 'jail.tools' entry '/usr/bin/jq': a repository's .agt/config.yaml may name tools on the guest's PATH only"
printf 'jail:\n  tools:\n    - rg\n' >"$P/app/.agt/config.yaml"
run agt jail run --rm -- /bin/sh -c 'rg --version | head -1'
like "... but it may name a tool" "$OUT" "^ripgrep "
run agt config show
like "agt config show lists jail.tools with their origins" "$OUT" \
  "^    - rg +# $P/app/.agt/config.yaml:3:7$"
